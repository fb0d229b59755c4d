"""How long an answer's URLs live: its size's allowance over the base, the ceiling, its token."""

from __future__ import annotations

from datetime import UTC, datetime

from share_store.signing.url_lifetimes import UrlLifetimes

NOW = 1_800_000_000.0
LIFETIMES = UrlLifetimes(base=3600, per_file_ms=50, longest=6 * 3600)


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(NOW + seconds, UTC)


def test_a_small_answer_gets_the_base_and_a_big_one_an_allowance_per_file() -> None:
    assert LIFETIMES.for_answer(10, None, NOW) == 3600
    assert LIFETIMES.for_answer(None, None, NOW) == 3600  # size not known up front
    assert LIFETIMES.for_answer(100_000, None, NOW) == 5000  # 100,000 files at 50 ms
    assert LIFETIMES.for_answer(72_001, None, NOW) == 3601  # rounded up, never down


def test_the_ceiling_holds_whatever_the_size_but_never_below_the_base() -> None:
    assert LIFETIMES.for_answer(10_000_000, None, NOW) == 6 * 3600
    assert UrlLifetimes(base=7200, longest=3600).for_answer(1, None, NOW) == 7200


def test_no_url_outlives_its_token() -> None:
    assert LIFETIMES.for_answer(100_000, at(600.9), NOW) == 600
    assert LIFETIMES.for_answer(10, at(10 * 3600), NOW) == 3600
    assert LIFETIMES.for_answer(10, at(0.2), NOW) == 1  # about to expire: the shortest a URL can be
    assert LIFETIMES.for_answer(10, at(-50), NOW) == 1

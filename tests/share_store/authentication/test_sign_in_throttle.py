"""Wrong admin tokens: limited per address and in all, for a window, never counting the right one."""

from __future__ import annotations

import pytest

from share_store.authentication.sign_in_throttle import SignInThrottle
from share_store.errors import RateLimited


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_is_refused_after_its_failures_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    throttle = SignInThrottle(per_address=3, overall=100, window=60, clock=clock)
    for _ in range(3):
        throttle.check("127.0.0.1")
        throttle.failed("127.0.0.1")
        clock.now += 10
    with pytest.raises(RateLimited) as refused:
        throttle.check("127.0.0.1")
    assert refused.value.retry_after == pytest.approx(30)  # the first failure, at 1000, leaves at 1060
    assert "from this address" in refused.value.message
    throttle.check("127.0.0.2")  # another address is not held back
    clock.now = 1060.5
    throttle.check("127.0.0.1")


def test_others_failures_never_lock_out_an_address_that_has_not_failed() -> None:
    clock = Clock()
    throttle = SignInThrottle(per_address=100, overall=5, window=60, clock=clock)
    for index in range(5):
        throttle.failed(f"127.0.1.{index}")  # an attacker failing from many addresses
    for _ in range(3):
        throttle.check("127.0.2.1")  # the provider's address: its token is looked at, however often


def test_at_the_overall_limit_only_addresses_that_failed_are_refused() -> None:
    clock = Clock()
    throttle = SignInThrottle(per_address=100, overall=3, window=60, clock=clock)
    throttle.failed("127.0.1.1")  # at 1000
    clock.now += 10
    throttle.failed("127.0.1.2")  # at 1010
    clock.now += 10
    throttle.failed("127.0.1.3")  # at 1020: three in the window, the overall limit
    clock.now += 10
    with pytest.raises(RateLimited, match="on this server") as refused:
        throttle.check("127.0.1.3")
    # Until the oldest failure of all leaves the window (1060), sooner than its own (1080).
    assert refused.value.retry_after == pytest.approx(30)
    # A new address is let try once; a wrong token from it is a failure, and it waits too.
    throttle.check("127.0.2.1")
    throttle.failed("127.0.2.1")
    with pytest.raises(RateLimited, match="on this server"):
        throttle.check("127.0.2.1")
    clock.now = 1060.5  # the failure at 1000 has left, the others have not: still at the limit
    with pytest.raises(RateLimited, match="on this server") as later:
        throttle.check("127.0.1.2")
    assert later.value.retry_after == pytest.approx(9.5)  # the failure at 1010 leaves at 1070
    clock.now = 1091  # every failure has left the window
    for address in ("127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.2.1"):
        throttle.check(address)


def test_below_the_overall_limit_an_address_that_failed_still_tries() -> None:
    clock = Clock()
    throttle = SignInThrottle(per_address=100, overall=3, window=60, clock=clock)
    throttle.failed("127.0.1.1")
    throttle.failed("127.0.1.2")
    throttle.check("127.0.1.1")


def test_addresses_remembered_are_bounded() -> None:
    from share_store.authentication import sign_in_throttle

    throttle = SignInThrottle(per_address=1, overall=10**9)
    for index in range(sign_in_throttle.MAX_ADDRESSES + 5):
        throttle.failed(f"a{index}")
    assert len(throttle._by_address) == sign_in_throttle.MAX_ADDRESSES
    throttle.check("a0")  # forgotten first
    with pytest.raises(RateLimited):
        throttle.check(f"a{sign_in_throttle.MAX_ADDRESSES + 4}")

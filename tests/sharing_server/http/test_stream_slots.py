"""Caps on streams at once, without HTTP; tests/end_to_end/test_hostile_streams.py tests them over HTTP."""

from __future__ import annotations

import pytest

from share_store.errors import RateLimited
from sharing_server.http.errors import ServerBusy
from sharing_server.http.stream_slots import StreamSlots


def test_a_token_beyond_its_cap_is_rate_limited_and_others_are_not() -> None:
    slots = StreamSlots(per_token=2, per_process=10)
    for _ in range(2):
        slots.stream().open("a")
    with pytest.raises(RateLimited) as refused:
        slots.stream().open("a")
    assert not isinstance(refused.value, ServerBusy)
    assert refused.value.status_code == 429 and refused.value.retry_after == 1
    slots.stream().open("b")
    assert slots.open_count == 3


def test_the_process_beyond_its_cap_is_busy_until_a_stream_closes() -> None:
    slots = StreamSlots(per_token=0, per_process=2)
    first, second = slots.stream(), slots.stream()
    first.open("a")
    second.open("a")  # no cap per token
    with pytest.raises(ServerBusy) as refused:
        slots.stream().open("b")
    assert refused.value.status_code == 503 and refused.value.error_code == "TEMPORARILY_UNAVAILABLE"
    assert refused.value.retry_after == 1
    first.close()
    first.close()  # closing twice frees one place, not two
    slots.stream().open("b")
    with pytest.raises(ServerBusy):
        slots.stream().open("c")


def test_a_token_over_its_cap_hears_so_even_when_the_server_is_full() -> None:
    slots = StreamSlots(per_token=1, per_process=1)
    slots.stream().open("a")
    with pytest.raises(RateLimited) as refused:
        slots.stream().open("a")
    assert not isinstance(refused.value, ServerBusy)


def test_a_refused_or_unopened_stream_takes_no_place() -> None:
    slots = StreamSlots(per_token=1, per_process=2)
    slots.stream().open("a")
    refused = slots.stream()
    with pytest.raises(RateLimited):
        refused.open("a")
    refused.close()
    slots.stream().close()
    assert slots.open_count == 1
    slots.stream().open("b")
    assert slots.open_count == 2

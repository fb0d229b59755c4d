"""The `X-Iceberg-Access-Delegation` header read off a request (`sharing_server.http.access_delegation`)."""

from __future__ import annotations

from starlette.datastructures import Headers

from sharing_server.http.access_delegation import asked_modes


def test_the_modes_are_listed_in_the_engines_order_lower_cased_without_blanks() -> None:
    headers = Headers({"x-iceberg-access-delegation": " Remote-Signing, ,vended-credentials "})
    assert asked_modes(headers) == ["remote-signing", "vended-credentials"]


def test_no_header_or_an_empty_one_asks_for_nothing() -> None:
    assert asked_modes(Headers({})) == []
    assert asked_modes(Headers({"X-Iceberg-Access-Delegation": ""})) == []

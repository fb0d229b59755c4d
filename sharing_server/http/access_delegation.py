"""The Iceberg REST spec's `X-Iceberg-Access-Delegation` header, read for both catalogs.

An engine lists in it the ways it can reach a table's files (`vended-credentials`,
`remote-signing`), in its order of preference. Which one it gets is decided below
(`share_store.signing.delegation`).
"""

from __future__ import annotations

from collections.abc import Mapping

HEADER = "X-Iceberg-Access-Delegation"


def asked_modes(headers: Mapping[str, str]) -> list[str]:
    """The modes a request's header lists, in its order, lower-cased; none when it has no header."""
    listed = headers.get(HEADER) or ""
    return [part.strip().lower() for part in listed.split(",") if part.strip()]

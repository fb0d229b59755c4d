"""A load's `ETag` and the 304 of a matching `If-None-Match`, for both Iceberg catalogs (the tags
are made and compared in `share_store.iceberg.etags`)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import Response

from share_store.iceberg.etags import none_match


def not_modified(request_headers: Mapping[str, str], tag: str | None) -> Response | None:
    """A 304 with the tag and no body when the request's `If-None-Match` matches `tag`; else None."""
    if not none_match(request_headers.get("if-none-match"), tag):
        return None
    assert tag is not None
    return Response(status_code=304, headers={"ETag": tag})


def with_tag(headers: dict[str, str] | None, tag: str | None) -> dict[str, str] | None:
    """`headers` with the `ETag`, when the answer has one."""
    if tag is None:
        return headers
    return {**(headers or {}), "ETag": tag}

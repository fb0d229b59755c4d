"""A scan plan request's body, refused past what the planner takes (`scan_plans.MAX_BODY`)."""

from __future__ import annotations

from starlette.requests import Request

from share_store.errors import InvalidParameter
from share_store.iceberg.scan_plans import MAX_BODY


async def plan_body(request: Request) -> bytes:
    """The body, or a 400 when its declared length passes `MAX_BODY` bytes (then it is never
    read) or the body read does. Read as `request.body()`, which the catalogs' authentication may
    have read already (a SigV4 signature covers it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise InvalidParameter(f"a plan request is at most {MAX_BODY} bytes")
    body = await request.body()
    if len(body) > MAX_BODY:
        raise InvalidParameter(f"a plan request is at most {MAX_BODY} bytes")
    return body

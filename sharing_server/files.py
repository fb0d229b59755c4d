"""Serving local-storage files at HMAC-signed URLs (GET, HEAD, Range → 206)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from share_store.errors import NotFound, ShareStoreError
from share_store.signing import EXPIRES_PARAM, SIGNATURE_PARAM
from share_store.storage.local import LocalStorage


class Forbidden(ShareStoreError):
    error_code = "PERMISSION_DENIED"
    status_code = 403


async def serve_file(request: Request) -> Response:
    storage = request.app.state.storage
    if not isinstance(storage, LocalStorage):
        raise Forbidden("files are served by the object store, not by this server")
    bucket = request.path_params["bucket"]
    key = request.path_params["key"]
    params = request.query_params
    if not storage.signer.verify(
        bucket, key, params.get(EXPIRES_PARAM), params.get(SIGNATURE_PARAM), time.time()
    ):
        raise Forbidden("The URL signature is invalid or has expired.")
    path = storage.resolve(bucket, key)
    if path is None:
        raise Forbidden("The URL signature is invalid or has expired.")
    if not path.is_file():
        raise NotFound("The requested object does not exist.")
    return FileResponse(
        path, media_type="application/octet-stream", headers={"Cache-Control": "private, no-store"}
    )

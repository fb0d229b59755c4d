"""HMAC-signed, expiring URLs for files the server serves itself (local storage).

The query carries `X-Amz-Signature` on purpose: delta-kernel-rs (the Python
client's delta path) fetches a URL over HTTP only if it recognises it as
presigned by such a parameter.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from urllib.parse import quote

EXPIRES_PARAM = "X-Sharing-Expires"
SIGNATURE_PARAM = "X-Amz-Signature"
HMAC_BLOCK = 64  # SHA-256's block size
# What quote(..., safe="/") leaves as is.
UNRESERVED_PATH = re.compile(r"[A-Za-z0-9_.~/-]*")


class UrlSigner:
    def __init__(self, key: bytes, base_url: str) -> None:
        if len(key) < 32:
            raise ValueError("the URL signing key needs at least 32 bytes")
        self.base_url = base_url.rstrip("/")
        # HMAC-SHA256 (RFC 2104) with the key's inner and outer pads hashed once:
        # each URL then costs two hash copies, a quarter of hmac.digest(), which
        # redoes the pads on every call; a large /query signs 100,000 URLs.
        if len(key) > HMAC_BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(HMAC_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def _signature(self, bucket: str, key: str, expires: int) -> str:
        inner = self._inner.copy()
        inner.update(f"GET\n{bucket}\n{key}\n{expires}".encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def sign(self, bucket: str, key: str, expires: int) -> str:
        """URL for `bucket/key`, valid until `expires` (epoch seconds)."""
        signature = self._signature(bucket, key, expires)
        path = f"{bucket}/{key}"
        if not UNRESERVED_PATH.fullmatch(path):  # most keys need no quoting: skip the slow path
            path = quote(path, safe="/")
        return f"{self.base_url}/{path}?{EXPIRES_PARAM}={expires}&{SIGNATURE_PARAM}={signature}"

    def verify(self, bucket: str, key: str, expires: str | None, signature: str | None, now: float) -> bool:
        # ASCII only: int() refuses some digits isdigit() accepts ("²"), and
        # compare_digest() raises on non-ASCII strings; both came from the URL.
        if not expires or not signature or not (expires + signature).isascii() or not expires.isdigit():
            return False
        expected = self._signature(bucket, key, int(expires))
        return hmac.compare_digest(expected, signature) and now < int(expires)

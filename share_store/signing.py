"""HMAC-signed, expiring URLs for files the server serves itself (local storage).

The query carries `X-Amz-Signature` on purpose: delta-kernel-rs (the Python
client's delta path) fetches a URL over HTTP only if it recognises it as
presigned by such a parameter.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

EXPIRES_PARAM = "X-Sharing-Expires"
SIGNATURE_PARAM = "X-Amz-Signature"


class UrlSigner:
    def __init__(self, key: bytes, base_url: str) -> None:
        if len(key) < 32:
            raise ValueError("the URL signing key needs at least 32 bytes")
        self._key = key
        self.base_url = base_url.rstrip("/")

    def _signature(self, bucket: str, key: str, expires: int) -> str:
        message = f"GET\n{bucket}\n{key}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, bucket: str, key: str, expires: int) -> str:
        """URL for `bucket/key`, valid until `expires` (epoch seconds)."""
        signature = self._signature(bucket, key, expires)
        path = quote(f"{bucket}/{key}", safe="/")
        return f"{self.base_url}/{path}?{EXPIRES_PARAM}={expires}&{SIGNATURE_PARAM}={signature}"

    def verify(self, bucket: str, key: str, expires: str | None, signature: str | None, now: float) -> bool:
        if not expires or not signature or not expires.isdigit():
            return False
        expected = self._signature(bucket, key, int(expires))
        return hmac.compare_digest(expected, signature) and now < int(expires)

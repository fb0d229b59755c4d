"""HMAC-signed, expiring URLs for files the server serves itself (local storage).

The query carries `X-Amz-Signature` on purpose: delta-kernel-rs (the Python
client's delta path) fetches a URL over HTTP only if it recognises it as
presigned by such a parameter.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from share_store.signing.hmac_pads import PaddedHmac
from share_store.signing.url_paths import UNRESERVED_PATH, quoted_paths

EXPIRES_PARAM = "X-Sharing-Expires"
SIGNATURE_PARAM = "X-Amz-Signature"


class UrlSigner:
    def __init__(self, key: bytes, base_url: str) -> None:
        if len(key) < 32:
            raise ValueError("the URL signing key needs at least 32 bytes")
        self.base_url = base_url.rstrip("/")
        self._hmac = PaddedHmac(key)

    def _signature(self, bucket: str, key: str, expires: int) -> str:
        return self._hmac.hexdigest(f"GET\n{bucket}\n{key}\n{expires}".encode())

    def sign(self, bucket: str, key: str, expires: int) -> str:
        """URL for `bucket/key`, valid until `expires` (epoch seconds)."""
        signature = self._signature(bucket, key, expires)
        path = f"{bucket}/{key}"
        if not UNRESERVED_PATH.fullmatch(path):  # most keys need no quoting: skip the slow path
            path = quote(path, safe="/")
        return f"{self.base_url}/{path}?{EXPIRES_PARAM}={expires}&{SIGNATURE_PARAM}={signature}"

    def signing_until(self, expires: int) -> Callable[[str, str], tuple[str, int]]:
        """`sign` with `expires` fixed, and the expiry in ms: what every URL shares is made once.

        A /query signs 100,000 URLs; the HMAC's two hashes are spelled out here
        (as in `PaddedHmac`) to save a call per URL.
        """
        inner, outer = self._hmac.pads
        tail = f"\n{expires}"
        base = self.base_url
        query = f"?{EXPIRES_PARAM}={expires}&{SIGNATURE_PARAM}="
        plain = UNRESERVED_PATH.fullmatch
        expiration = expires * 1000

        def sign(bucket: str, key: str) -> tuple[str, int]:
            digest = inner.copy()
            digest.update(f"GET\n{bucket}\n{key}{tail}".encode())
            signature = outer.copy()
            signature.update(digest.digest())
            path = f"{bucket}/{key}"
            if not plain(path):
                path = quote(path, safe="/")
            return f"{base}/{path}{query}{signature.hexdigest()}", expiration

        return sign

    def batch_signing_until(self, expires: int) -> Callable[[str, pa.Array], tuple[pa.Array, int]]:
        """`signing_until` for many keys of one bucket at once (a checkpoint's record batch).

        The same URLs, but only the HMAC is made key by key: the messages and
        URLs around it are put together by Arrow for the whole batch.
        """
        inner, outer = self._hmac.pads
        tail = f"\n{expires}"
        base = f"{self.base_url}/"
        query = f"?{EXPIRES_PARAM}={expires}&{SIGNATURE_PARAM}="
        expiration = expires * 1000

        def sign(bucket: str, keys: pa.Array) -> tuple[pa.Array, int]:
            messages = pc.binary_join_element_wise(f"GET\n{bucket}\n", keys, tail, "")
            signatures: list[str] = []
            append, copy_inner, copy_outer = signatures.append, inner.copy, outer.copy
            # NumPy makes the bytes objects an order of magnitude faster than `to_pylist()`.
            for message in messages.cast(pa.binary()).to_numpy(zero_copy_only=False).tolist():
                digest = copy_inner()
                digest.update(message)
                signature = copy_outer()
                signature.update(digest.digest())
                append(signature.hexdigest())
            paths = quoted_paths(pc.binary_join_element_wise(f"{bucket}/", keys, ""))
            urls = pc.binary_join_element_wise(base, paths, query, pa.array(signatures, pa.string()), "")
            return urls, expiration

        return sign

    def verify(self, bucket: str, key: str, expires: str | None, signature: str | None, now: float) -> bool:
        # ASCII only: int() refuses some digits isdigit() accepts ("²"), and
        # compare_digest() raises on non-ASCII strings; both came from the URL.
        if not expires or not signature or not (expires + signature).isascii() or not expires.isdigit():
            return False
        expected = self._signature(bucket, key, int(expires))
        return hmac.compare_digest(expected, signature) and now < int(expires)

"""Local file URLs: our HMAC is RFC 2104's, and quoting matches urllib's."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

import pytest

from share_store.signing import UrlSigner


@pytest.mark.parametrize("key", [b"k" * 32, bytes(range(64)), b"x" * 65, bytes(range(200))])
def test_signature_is_standard_hmac_sha256(key: bytes) -> None:
    signer = UrlSigner(key, "http://h/files")
    for bucket, name, expires in [("b", "t/part-0.parquet", 1), ("bucket", "a b/ü=1/x", 1795421378)]:
        expected = hmac.new(key, f"GET\n{bucket}\n{name}\n{expires}".encode(), hashlib.sha256).hexdigest()
        url = signer.sign(bucket, name, expires)
        assert url.endswith(f"X-Sharing-Expires={expires}&X-Amz-Signature={expected}")
        assert url.startswith(f"http://h/files/{quote(f'{bucket}/{name}', safe='/')}?")
        assert signer.verify(bucket, name, str(expires), expected, now=0)
        assert not signer.verify(bucket, name + "x", str(expires), expected, now=0)

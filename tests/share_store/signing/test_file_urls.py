"""Local file URLs: our HMAC is RFC 2104's, and quoting matches urllib's."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import time
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from tests.conftest import Deployment


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


def test_a_url_is_good_until_its_expiry_second_and_not_after() -> None:
    """Expiry against a clock the test sets, not one it sleeps on."""
    signer = UrlSigner(b"k" * 32, "http://h/files")
    expires = 1_800_000_000
    signature = signer.sign("b", "t/f.parquet", expires).rsplit("=", 1)[1]
    assert signer.verify("b", "t/f.parquet", str(expires), signature, now=expires - 0.001)
    assert not signer.verify("b", "t/f.parquet", str(expires), signature, now=expires)
    assert not signer.verify("b", "t/f.parquet", str(expires), signature, now=expires + 3600)
    # A later expiry is another signature: extending a URL needs the key.
    assert not signer.verify("b", "t/f.parquet", str(expires + 3600), signature, now=expires - 1)


def _raw_get(base: str, path: str) -> tuple[int, bytes]:
    """A GET of `path` exactly as written: HTTP clients would resolve `..` before sending it."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("bucket", "key"),
    [
        ("testdata", "../data-dir/server.key"),
        ("testdata", "simple_table/../../data-dir/store.db"),
        ("testdata", "/etc/passwd"),
        ("testdata", "escape/server.key"),  # a symlink out of the bucket, made below
        ("..", "data-dir/server.key"),
    ],
)
def test_a_validly_signed_url_still_cannot_leave_its_bucket(local: Deployment, bucket: str, key: str) -> None:
    """The signature check passes here, so only the containment check stands in the way."""
    storage = local.storage
    assert isinstance(storage, LocalStorage)
    link = storage.root / "testdata" / "escape"
    link.symlink_to(local.tmp / "data-dir", target_is_directory=True)
    try:
        url = storage.signer.sign(bucket, key, int(time.time()) + 600)
        assert storage.signer.verify(
            bucket, key, *(value for _, value in parse_qsl(urlsplit(url).query)), now=time.time()
        )
        path = urlsplit(url).path.replace("%2F", "/") + "?" + urlsplit(url).query
        status, body = _raw_get(url, path)
    finally:
        link.unlink()
    assert status == 403, (status, body[:200])
    assert b"PRIVATE" not in body and b"SQLite" not in body

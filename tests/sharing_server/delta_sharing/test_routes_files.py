"""Signed file URLs served by this server over real HTTP: GET, HEAD, ranges, tampering, expiry.

The share they come from is conftest.py's.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from tests.conftest import Deployment
from tests.sharing_server.delta_sharing.conftest import lines

# -- signed file URLs -------------------------------------------------------------------------


def _a_file_url(api: httpx.Client) -> str:
    return lines(api.post("/shares/proto/schemas/default/tables/t_part/query", json={}))[2]["file"]["url"]


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | changes
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_signed_url_get_head_and_range(api: httpx.Client) -> None:
    url = _a_file_url(api)
    full = httpx.get(url)
    assert full.status_code == 200 and full.content[:4] == b"PAR1"
    head = httpx.head(url)
    assert head.status_code == 200 and int(head.headers["content-length"]) == len(full.content)
    part = httpx.get(url, headers={"Range": "bytes=4-11"})
    assert part.status_code == 206 and part.content == full.content[4:12]
    assert part.headers["content-length"] == "8"
    tail = httpx.get(url, headers={"Range": f"bytes=4-{len(full.content) - 1}"})
    assert tail.status_code == 206 and tail.content == full.content[4:]


def test_signed_url_tampering_expiry_and_traversal(api: httpx.Client) -> None:
    url = _a_file_url(api)
    parts = urlsplit(url)
    assert httpx.get(url.replace(".parquet", ".orc")).status_code == 403
    signature = dict(parse_qsl(parts.query))["X-Amz-Signature"]
    assert httpx.get(_with_query(url, **{"X-Amz-Signature": "0" * len(signature)})).status_code == 403
    assert (
        httpx.get(_with_query(url, **{"X-Sharing-Expires": str(int(time.time()) + 99999)})).status_code == 403
    )
    assert httpx.get(_with_query(url, **{"X-Sharing-Expires": "1"})).status_code == 403
    assert httpx.get(urlunsplit(parts._replace(query=""))).status_code == 403
    bucket_root = parts.path.split("/files/")[0] + "/files/"
    for sneaky in [
        "testdata/../../data-dir/store.db",
        "testdata/%2e%2e/%2e%2e/data-dir/server.key",
        "..%2Fdata-dir%2Fserver.key",
    ]:
        response = httpx.get(urlunsplit(parts._replace(path=bucket_root + sneaky)))
        assert response.status_code in (403, 404)
        assert b"PAR1" not in response.content


def test_expired_local_url(local: Deployment) -> None:
    from share_store.storage.local import LocalStorage

    storage = local.storage
    assert isinstance(storage, LocalStorage)
    # Expiry is whole seconds (int(now) + lifetime): 2 s leaves at least 1 s to fetch it.
    url, _ = LocalStorage(storage.root, storage.signer, url_lifetime=2).presign(
        "testdata", "simple_table/_delta_log/00000000000000000000.json", time.time()
    )
    assert httpx.get(url).status_code == 200
    time.sleep(3.1)
    assert httpx.get(url).status_code == 403


def test_security_headers(api: httpx.Client) -> None:
    response = api.get("/shares")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"

"""S3 URLs signed a batch at a time (held snapshots on S3, `S3Presigner.batch_signing`), attacked
through the table's own log: a file path a hostile writer made to hold '?', '#', '%2F', spaces or
characters to be quoted signs for exactly its own key, adds no query parameter, and SeaweedFS
serves that object and no other; paths leaving the table ('..', an absolute URI into another
bucket) are refused with no URL signed. Live server on SeaweedFS, both response formats.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from testbed.seaweed import SeaweedS3
from tests.conftest import Deployment, deploy

BUCKET = "batchurls"
OTHER_BUCKET = "batchother"
TABLE = "tables/odd"
#: Log paths (relative, URL-encoded URIs) and the object key each names under the table.
HOSTILE_PATHS = {
    "q?X-Amz-Expires=999999&X-Amz-Signature=0.parquet": "q?X-Amz-Expires=999999&X-Amz-Signature=0.parquet",
    "h#frag.parquet": "h#frag.parquet",
    "c%2Fd.parquet": "c/d.parquet",
    "sp%20ace%2B.parquet": "sp ace+.parquet",
    "ünï/çødé.parquet": "ünï/çødé.parquet",
}
#: Enough plain files for several batches (64, then doubling), the hostile ones among them.
PLAIN = [f"part-{i:05d}.parquet" for i in range(300)]
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
QUERY_PARAMS = {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
                "X-Amz-Signature"}  # fmt: skip


def _commit(paths: list[str]) -> bytes:
    lines = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "odd",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 0,
            }
        },
        *(
            {
                "add": {
                    "path": path,
                    "partitionValues": {},
                    "size": 10,
                    "modificationTime": 0,
                    "dataChange": True,
                }
            }
            for path in paths
        ),
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _object(key: str) -> bytes:
    return f"object {key}".encode()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    client = seaweed.client()
    for bucket in (BUCKET, OTHER_BUCKET):
        client.create_bucket(Bucket=bucket)
    paths = PLAIN[:100] + list(HOSTILE_PATHS) + PLAIN[100:]
    keys = [HOSTILE_PATHS.get(path, path) for path in paths]
    for key in keys:
        client.put_object(Bucket=BUCKET, Key=f"{TABLE}/{key}", Body=_object(key))
    client.put_object(Bucket=BUCKET, Key=f"{TABLE}/_delta_log/{0:020d}.json", Body=_commit(paths))
    # Tables whose log reaches out of them: a sibling's file, and an object of another bucket.
    client.put_object(Bucket=BUCKET, Key="tables/secret.parquet", Body=b"secret")
    client.put_object(Bucket=OTHER_BUCKET, Key="secret.parquet", Body=b"secret")
    for name, path in (("up", "../secret.parquet"), ("away", f"s3://{OTHER_BUCKET}/secret.parquet")):
        commit = _commit([path, *PLAIN[:10]])
        client.put_object(Bucket=BUCKET, Key=f"tables/{name}/_delta_log/{0:020d}.json", Body=commit)
    result = deploy(tmp_path_factory.mktemp("batch-urls"), seaweed.storage_config(path_style="true"))
    result.share_tables("odd", {"odd": TABLE, "up": "tables/up", "away": "tables/away"}, BUCKET)
    yield result
    result.server.stop()
    result.store.close()


def _query(deployment: Deployment, table: str, response_format: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {deployment.token('odd')}",
               "delta-sharing-capabilities": f"responseformat={response_format}"}  # fmt: skip
    url = f"{deployment.endpoint}/shares/odd/schemas/default/tables/{table}/query"
    return httpx.post(url, json={}, headers=headers, timeout=60)


def _urls(body: str) -> list[str]:
    urls = []
    for line in body.splitlines():
        action = json.loads(line)
        if "file" in action:
            urls.append(action["file"].get("url") or action["file"]["deltaSingleAction"]["add"]["path"])
    return urls


@pytest.mark.parametrize("response_format", ["parquet", "delta"])
def test_each_url_signs_its_own_key_only(deployment: Deployment, response_format: str) -> None:
    for _ in range(2):  # the first query makes the held snapshot's lines, the second reuses them
        answer = _query(deployment, "odd", response_format)
        assert answer.status_code == 200, answer.text
        urls = _urls(answer.text)
        assert len(urls) == len(PLAIN) + len(HOSTILE_PATHS)
        keys = set()
        for url in urls:
            parts = urlsplit(url)
            assert parts.fragment == ""
            query = parse_qs(parts.query, keep_blank_values=True)
            assert set(query) == QUERY_PARAMS and all(len(values) == 1 for values in query.values())
            assert query["X-Amz-Expires"] != ["999999"]
            bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
            assert bucket == BUCKET and key.startswith(f"{TABLE}/")
            keys.add(key.removeprefix(f"{TABLE}/"))
            fetched = httpx.get(url, timeout=30)
            assert fetched.status_code == 200 and fetched.content == _object(key.removeprefix(f"{TABLE}/"))
        assert keys == set(PLAIN) | set(HOSTILE_PATHS.values())


@pytest.mark.parametrize("table", ["up", "away"])
@pytest.mark.parametrize("response_format", ["parquet", "delta"])
def test_a_path_out_of_the_table_is_refused_unsigned(
    deployment: Deployment, table: str, response_format: str
) -> None:
    answer = _query(deployment, table, response_format)
    assert 400 <= answer.status_code < 500, answer.text
    assert "secret.parquet" not in answer.text or "X-Amz-Signature" not in answer.text
    assert "cannot be shared" in answer.json()["message"], answer.text

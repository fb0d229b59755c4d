"""Freshness at `/_iceberg` (issue 52): a table load's `ETag`, `If-None-Match` → 304, and the tag of a
commit's answer, with raw httpx (pyiceberg 0.12 never sends `If-None-Match`) against the real server
on SeaweedFS. The recipients' side and answers with credentials are in
`test_iceberg_one_token.py` and `test_warehouse_delegation.py`.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from pyiceberg.catalog import Catalog

from share_store.catalog.users import CatalogUsers, IssuedUser
from tests.conftest import Deployment
from tests.end_to_end.test_warehouse_catalog import ROWS, WAREHOUSE, aistor_catalog, catalog_root, signed
from tests.sharing_server.catalog.served import SCHEMA
from tests.sharing_server.catalog.test_views import VERSION


@pytest.fixture(scope="module")
def writer(s3: Deployment) -> tuple[IssuedUser, Catalog]:
    user = CatalogUsers(s3.store.transactions, s3.secret).create(f"etag-{uuid.uuid4().hex[:6]}")
    made = signed(user, "POST", f"{catalog_root(s3)}/v1/warehouses", json.dumps({"name": WAREHOUSE}).encode())
    assert made.status_code in (200, 409), made.text
    return user, aistor_catalog(s3, user)


def table_url(deployment: Deployment, namespace: str, table: str) -> str:
    return f"{catalog_root(deployment)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}"


def new_table(deployment: Deployment, catalog: Catalog) -> tuple[str, str]:
    """A fresh namespace with a table `t` in it: the namespace and the table's URL."""
    namespace = f"etag_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    catalog.create_table(f"{namespace}.t", schema=ROWS)
    return namespace, table_url(deployment, namespace, "t")


def test_a_load_is_tagged_answers_304_while_unchanged_and_a_commit_answers_the_next_tag(
    s3: Deployment, writer: tuple[IssuedUser, Catalog]
) -> None:
    user, catalog = writer
    _, url = new_table(s3, catalog)

    first = signed(user, "GET", url)
    assert first.status_code == 200, first.text
    tag = first.headers["etag"]
    assert tag.startswith('"') and tag.endswith('"') and not tag.startswith("W/")
    again = signed(user, "GET", url)
    assert again.headers["etag"] == tag  # the same table, the same answer, the same tag

    for header in (tag, f"W/{tag}", '"nope", ' + tag, "*"):
        unchanged = signed(user, "GET", url, b"", **{"If-None-Match": header})
        assert unchanged.status_code == 304, (header, unchanged.text)
        assert unchanged.headers["etag"] == tag and unchanged.content == b""
    other = signed(user, "GET", url, b"", **{"If-None-Match": '"something-else"'})
    assert other.status_code == 200 and other.json()["metadata-location"] == first.json()["metadata-location"]
    # Another form of the same metadata (`snapshots=refs`) is another answer: another tag.
    refs = signed(user, "GET", url + "?snapshots=refs", b"", **{"If-None-Match": tag})
    assert refs.status_code == 200 and refs.headers["etag"] != tag
    # Asking for keys of a server that hands out none changes nothing in the answer, nor its tag.
    asked = signed(
        user, "GET", url, b"", **{"X-Iceberg-Access-Delegation": "vended-credentials", "If-None-Match": tag}
    )
    assert asked.status_code == 304

    body = {"updates": [{"action": "set-properties", "updates": {"owner": "etags"}}]}
    committed = signed(user, "POST", url, json.dumps(body).encode())
    assert committed.status_code == 200, committed.text
    new_tag = committed.headers["etag"]
    assert new_tag != tag
    after = signed(user, "GET", url, b"", **{"If-None-Match": tag})
    assert after.status_code == 200  # the old tag no longer matches: the new metadata is sent
    assert after.headers["etag"] == new_tag
    assert after.json()["metadata-location"] == committed.json()["metadata-location"]
    assert signed(user, "GET", url, b"", **{"If-None-Match": new_tag}).status_code == 304


def test_a_304_is_only_for_a_caller_allowed_to_load(
    s3: Deployment, writer: tuple[IssuedUser, Catalog]
) -> None:
    """The tag proves nothing: without valid credentials a matching `If-None-Match` is still refused."""
    user, catalog = writer
    namespace, url = new_table(s3, catalog)
    tag = signed(user, "GET", url).headers["etag"]
    anonymous = httpx.get(url, headers={"If-None-Match": tag})
    assert anonymous.status_code in (401, 403), anonymous.text
    assert anonymous.json()["error"]["code"] == anonymous.status_code
    missing = signed(user, "GET", table_url(s3, namespace, "nope"), b"", **{"If-None-Match": "*"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"


def test_a_views_load_is_tagged_and_answers_304_until_replaced(
    s3: Deployment, writer: tuple[IssuedUser, Catalog]
) -> None:
    user, catalog = writer
    namespace = f"etag_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    base = f"{catalog_root(s3)}/v1/{WAREHOUSE}/namespaces/{namespace}/views"
    create = {"name": "v", "schema": SCHEMA, "view-version": VERSION, "properties": {}}
    made = signed(user, "POST", base, json.dumps(create).encode())
    assert made.status_code == 200, made.text
    loaded = signed(user, "GET", f"{base}/v")
    tag = loaded.headers["etag"]
    assert signed(user, "GET", f"{base}/v", b"", **{"If-None-Match": tag}).status_code == 304
    replace = {"updates": [{"action": "set-properties", "updates": {"a": "b"}}], "requirements": []}
    replaced = signed(user, "POST", f"{base}/v", json.dumps(replace).encode())
    assert replaced.status_code == 200, replaced.text
    assert replaced.headers["etag"] != tag
    fresh = signed(user, "GET", f"{base}/v", b"", **{"If-None-Match": tag})
    assert fresh.status_code == 200 and fresh.headers["etag"] == replaced.headers["etag"]


def test_a_create_answers_the_tag_of_its_first_load_and_a_staged_create_none(
    s3: Deployment, writer: tuple[IssuedUser, Catalog]
) -> None:
    user, catalog = writer
    namespace = f"etag_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    tables = f"{catalog_root(s3)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables"
    made = signed(user, "POST", tables, json.dumps({"name": "c", "schema": SCHEMA}).encode())
    assert made.status_code == 200, made.text
    tag = made.headers["etag"]
    assert (
        signed(user, "GET", table_url(s3, namespace, "c"), b"", **{"If-None-Match": tag}).status_code == 304
    )
    staged = {"name": "s", "schema": SCHEMA, "stage-create": True}
    answer = signed(user, "POST", tables, json.dumps(staged).encode())
    assert answer.status_code == 200, answer.text
    assert "etag" not in answer.headers and "metadata-location" not in answer.json()

"""`Idempotency-Key` on the writers' catalog `/_iceberg` (Iceberg REST 1.11), end to end on SeaweedFS.

The case the key is for is the uncertain commit: the server committed, the answer never reached
the client (its connection was cut), and the client retries. Without a key the retry is a 409 for
a change that is already in, and the engine believes its write failed; with the key it gets the
original answer and the table holds the change once. Here that is done by a raw client cutting a
socket, and by pyiceberg with a key added to each mutation and its first answer thrown away.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.catalog import Catalog
from requests.adapters import BaseAdapter

from share_store.catalog.idempotency import LIFETIME
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.persistence.mappers import utc_now
from share_store.persistence.sql_schema import idempotency_keys_table
from tests.conftest import Deployment
from tests.end_to_end.test_warehouse_catalog import (
    ROWS,
    WAREHOUSE,
    aistor_catalog,
    catalog_root,
    commit_url,
    owner,  # noqa: F401  (a fixture)
    signed,
)

pytestmark = pytest.mark.usefixtures("s3")


def uuid7() -> str:
    """A UUIDv7 as the spec asks of clients (Python 3.11 has no `uuid.uuid7`)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    return str(uuid.UUID(bytes=bytes(raw)))


@pytest.fixture(scope="module")
def catalog(s3: Deployment, owner: IssuedUser) -> Catalog:  # noqa: F811
    return aistor_catalog(s3, owner)


@pytest.fixture
def namespace(catalog: Catalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def keyed(user: IssuedUser, method: str, url: str, body: bytes, key: str) -> httpx.Response:
    return signed(user, method, url, body, **{"Idempotency-Key": key})


def tables_url(deployment: Deployment, namespace: str) -> str:
    return f"{catalog_root(deployment)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables"


def new_table_body(name: str) -> bytes:
    schema = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True}]}  # fmt: skip
    return json.dumps({"name": name, "schema": schema, "properties": {"format-version": "2"}}).encode()


def set_properties(**updates: str) -> bytes:
    return json.dumps(
        {"requirements": [], "updates": [{"action": "set-properties", "updates": updates}]}
    ).encode()


class Captured(Exception):
    """Raised by `Capture` in place of sending a table commit."""


class Capture(BaseAdapter):
    """In front of pyiceberg's own adapter: a table commit's body is kept and not sent."""

    def __init__(self, inner: BaseAdapter) -> None:
        super().__init__()
        self.inner = inner
        self.bodies: list[bytes] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        if request.method == "POST" and "/tables/" in str(request.url):
            self.bodies.append(
                request.body if isinstance(request.body, bytes) else str(request.body).encode()
            )
            raise Captured()
        return self.inner.send(request, **kwargs)

    def close(self) -> None:
        self.inner.close()


def append_body(catalog: Catalog, name: str, ids: list[int]) -> bytes:
    """The commit body pyiceberg makes for appending `ids` (its data and manifest files written),
    never sent: for a client of our own to send."""
    uri = catalog.properties["uri"]
    session = catalog._session  # type: ignore[attr-defined]
    capture = Capture(session.get_adapter(uri))
    session.mount(uri, capture)
    try:
        with pytest.raises(Captured):
            catalog.load_table(name).append(pa.table({"id": ids, "name": [str(i) for i in ids]}, schema=ROWS))
    finally:
        session.mount(uri, capture.inner)
    return capture.bodies[0]


def signed_headers(user: IssuedUser, method: str, url: str, body: bytes, **headers: str) -> dict[str, str]:
    request = AWSRequest(
        method=method, url=url, data=body, headers={"Content-Type": "application/json", **headers}
    )
    SigV4Auth(Credentials(user.access_key, user.secret_key), "s3tables", "local").add_auth(request)
    return dict(request.headers)


def send_and_hang_up(url: str, body: bytes, headers: Mapping[str, str]) -> None:
    """A raw HTTP/1.1 request whose answer is never read: the connection is closed once it is sent."""
    parts = urlsplit(url)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        # Closed at once, the request sent whole (FIN, so that the server reads it all): the
        # server hears the client gone while it works on the commit, and its answer finds no one.


def wait_for(check: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_config_advertises_the_lifetime_in_hours_and_minutes(s3: Deployment, owner: IssuedUser) -> None:  # noqa: F811
    config = signed(owner, "GET", f"{catalog_root(s3)}/v1/config?warehouse={WAREHOUSE}").json()
    assert config["idempotency-key-lifetime"] == "PT30M"
    assert timedelta(minutes=30) == LIFETIME


def test_a_create_table_replayed_answers_the_stored_answer_and_creates_once(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    url = tables_url(s3, namespace)
    key, body = uuid7(), new_table_body("made")
    first = keyed(owner, "POST", url, body, key)
    assert first.status_code == 200, first.text
    again = keyed(owner, "POST", url, body, key)
    assert (again.status_code, again.content) == (200, first.content)
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["idempotent-replayed"] == "true"
    # Without the key the same request is a new one: the table is there already.
    assert signed(owner, "POST", url, body).status_code == 409
    assert catalog.list_tables(namespace) == [(namespace, "made")]


def test_a_commit_replayed_answers_the_original_and_changes_the_table_once(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    catalog.create_table(f"{namespace}.t", schema=ROWS, properties={"format-version": "2"})
    body, key = append_body(catalog, f"{namespace}.t", [1, 2]), uuid7()
    url = commit_url(s3, namespace, "t")
    first = keyed(owner, "POST", url, body, key)
    assert first.status_code == 200, first.text
    again = keyed(owner, "POST", url, body, key)
    assert (again.status_code, again.content) == (200, first.content)
    table = catalog.load_table(f"{namespace}.t")
    assert len(table.metadata.snapshots) == 1
    assert table.metadata_location == first.json()["metadata-location"]
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    # A deterministic 4xx is kept too: the body under a new key is a stale commit, a 409, and that
    # key's retry is the same 409 (not a commit of a table that moved on meanwhile).
    other_key = uuid7()
    stale = keyed(owner, "POST", url, body, other_key)
    assert stale.status_code == 409 and stale.json()["error"]["type"] == "CommitFailedException"
    assert keyed(owner, "POST", url, body, other_key).content == stale.content


def test_the_uncertain_commit_cut_after_the_server_committed_is_retried_to_its_success(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    name = f"{namespace}.cut"
    catalog.create_table(name, schema=ROWS, properties={"format-version": "2"})
    body, key = append_body(catalog, name, [7]), uuid7()
    url = commit_url(s3, namespace, "cut")
    send_and_hang_up(url, body, signed_headers(owner, "POST", url, body, **{"Idempotency-Key": key}))
    wait_for(lambda: catalog.load_table(name).current_snapshot() is not None)
    committed = catalog.load_table(name).metadata_location
    # The retry without its key is what an engine got before: a 409 for its own commit.
    assert signed(owner, "POST", url, body).status_code == 409
    retried = keyed(owner, "POST", url, body, key)
    assert retried.status_code == 200, retried.text
    assert retried.json()["metadata-location"] == committed
    table = catalog.load_table(name)
    assert len(table.metadata.snapshots) == 1 and table.metadata_location == committed
    assert table.scan().to_arrow()["id"].to_pylist() == [7]


class KeyedRetries(BaseAdapter):
    """What Iceberg 1.11's Java client does, for pyiceberg: a UUIDv7 key on each mutation, and
    one retry with the same key when the answer is lost. `lose` answers are thrown away after the
    server gave them (the uncertain commit)."""

    def __init__(self, inner: BaseAdapter, lose: int) -> None:
        super().__init__()
        self.inner = inner
        self.lose = lose
        self.sent: list[tuple[str, str, int]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        if request.method not in ("POST", "PUT", "DELETE"):
            return self.inner.send(request, **kwargs)
        request.headers["Idempotency-Key"] = key = uuid7()
        retry = request.copy()
        answer = self.inner.send(request, **kwargs)
        self.sent.append((key, str(request.url), answer.status_code))
        if self.lose and "/tables/" in str(request.url):
            self.lose -= 1
            answer.close()  # lost on the way back
            answer = self.inner.send(retry, **kwargs)
            self.sent.append((key, str(retry.url), answer.status_code))
        return answer

    def close(self) -> None:
        self.inner.close()


def test_pyiceberg_with_keys_commits_once_when_its_first_answer_is_lost(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    namespace: str,
) -> None:
    catalog = aistor_catalog(s3, owner)
    catalog.create_table(f"{namespace}.p", schema=ROWS, properties={"format-version": "2"})
    uri = catalog.properties["uri"]
    session = catalog._session  # type: ignore[attr-defined]
    retries = KeyedRetries(session.get_adapter(uri), lose=1)
    session.mount(uri, retries)
    table = catalog.load_table(f"{namespace}.p")
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=ROWS))
    (key, _, first), (again, _, second) = retries.sent
    assert key == again and (first, second) == (200, 200)
    fresh = aistor_catalog(s3, owner).load_table(f"{namespace}.p")
    assert len(fresh.metadata.snapshots) == 1
    assert sorted(fresh.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_a_key_reused_for_another_request_is_422_and_runs_nothing(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    catalog.create_table(f"{namespace}.a", schema=ROWS)
    catalog.create_table(f"{namespace}.b", schema=ROWS)
    key = uuid7()
    assert keyed(owner, "POST", commit_url(s3, namespace, "a"), set_properties(k="1"), key).status_code == 200
    for url, body in [
        (commit_url(s3, namespace, "a"), set_properties(k="2")),  # another body
        (commit_url(s3, namespace, "b"), set_properties(k="1")),  # another table
    ]:
        refused = keyed(owner, "POST", url, body, key)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["type"] == "UnprocessableEntityException"
    assert catalog.load_table(f"{namespace}.a").properties["k"] == "1"
    assert "k" not in catalog.load_table(f"{namespace}.b").properties
    bad = keyed(owner, "POST", commit_url(s3, namespace, "a"), set_properties(k="3"), "not-a-uuid")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequestException"


def test_a_key_is_its_callers_own(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    other = CatalogUsers(s3.store.transactions, s3.secret).create(f"other-{uuid.uuid4().hex[:6]}")
    catalog.create_table(f"{namespace}.t", schema=ROWS)
    url, key = commit_url(s3, namespace, "t"), uuid7()
    first = keyed(owner, "POST", url, set_properties(k="1"), key)
    assert first.status_code == 200
    # The other caller's request with the same key is its own: it runs (a new metadata file).
    theirs = keyed(other, "POST", url, set_properties(k="1"), key)
    assert (
        theirs.status_code == 200 and theirs.json()["metadata-location"] != first.json()["metadata-location"]
    )
    # A refused caller never reaches the key: 401/403 answers are not the key's.
    forged = IssuedUser("x", other.access_key, "wrong-secret", None)  # type: ignore[arg-type]
    assert keyed(forged, "POST", url, set_properties(k="9"), key).status_code == 403
    assert keyed(owner, "POST", url, set_properties(k="1"), key).content == first.content


def test_concurrent_requests_with_one_key_commit_once(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    catalog.create_table(f"{namespace}.c", schema=ROWS, properties={"format-version": "2"})
    body, key = append_body(catalog, f"{namespace}.c", [5]), uuid7()
    url = commit_url(s3, namespace, "c")
    answers: list[httpx.Response] = []
    start = threading.Barrier(4)

    def send() -> None:
        start.wait()
        answers.append(keyed(owner, "POST", url, body, key))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [answer.status_code for answer in answers] == [200] * 4, [a.text for a in answers]
    assert len({answer.content for answer in answers}) == 1
    assert len(catalog.load_table(f"{namespace}.c").metadata.snapshots) == 1


def test_an_expired_key_is_swept_and_then_runs_anew(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    catalog: Catalog,
    namespace: str,
) -> None:
    url = tables_url(s3, namespace)
    key, body = uuid7(), new_table_body("swept")
    assert keyed(owner, "POST", url, body, key).status_code == 200
    # A minute past the lifetime of an answer kept now (it is kept as it goes, a moment after).
    past = LIFETIME + timedelta(minutes=1)
    later = IdempotencyKeys(s3.store.transactions, s3.secret, clock=lambda: utc_now() + past)
    assert later.sweep() >= 1
    t = idempotency_keys_table
    with s3.store.transactions.read() as conn:
        assert conn.execute(t.select().where(t.c.key == key)).first() is None
    # Gone, the key answers nothing stored: the request runs again (the table is there: 409).
    assert keyed(owner, "POST", url, body, key).status_code == 409

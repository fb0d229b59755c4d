"""No secret in any log: what the server hands out appears in none of the lines it writes.

A real `sharing-server serve` on SeaweedFS with both writers' delegation modes on, its stdout and
stderr in a file: once with the audit log in a file, once with the audit log off (Hypercorn's
access log is then on). Through it run a writer's signing session (pyiceberg creates, appends and
reads through the remote signer), a vending session (keys with the load, fresh ones from
`/credentials`), a catalog user's OAuth token and the admin's token, and a recipient's sessions:
a one-time activation link, a Delta Sharing request with its token, a signed read at `/iceberg`.
Then every line the server wrote (and its /metrics) is searched for every secret handed out: the
grants, the catalog user's secret key, the vended keys, the bearer tokens, the activation code,
the signatures both signers returned, the storage's secret key and the server's; and for their
shapes. The error answers of the sessions (a signer's URL fetched with GET echoes its path) are
searched too.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.rest import RestCatalog

from share_store.authentication.tokens import hash_secret
from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.model import TableSpec
from share_store.persistence import ShareStore
from sharing_server.config import load_config
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3, free_port
from tests.end_to_end.test_warehouse_catalog import signed
from tests.served import served

NAMESPACE = "ns"
VENDED = "vended-credentials"
SIGNED = "remote-signing"
ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
#: What a redacted path segment becomes.
REDACTED = "…"


@dataclass
class Server:
    url: str
    output: Path
    audit: Path | None
    store: ShareStore
    secret: bytes
    admin_token: str
    seaweed: SeaweedS3
    #: Ends the process, so that every line it would write is written.
    stop: Callable[[], None]
    #: The writers' warehouse (a bucket of the SeaweedFS the test session shares).
    warehouse: str
    #: Every secret the server handed out (or was sent) in the sessions, to be found in no line.
    handed_out: set[str] = field(default_factory=set)
    #: The error answers of the sessions, searched like the lines: none may echo a secret either.
    refusals: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        text = self.output.read_text(errors="replace")
        if self.audit is not None and self.audit.exists():
            text += "\n" + self.audit.read_text()
        # The audit log is JSON, which spells the redaction mark as an escape.
        return [line.replace("\\u2026", REDACTED) for line in text.splitlines()]


def _config(tmp: Path, port: int, seaweed: SeaweedS3, audit: Path | None, admin_token: str) -> Path:
    storage = seaweed.storage_config(path_style="true")
    lines = [
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        f'public_url = "http://127.0.0.1:{port}"',
        f'data_dir = "{tmp / "data"}"',
        f'secret_key = "{secrets.token_hex(32)}"',
        f'audit_log = "{audit if audit is not None else "off"}"',
        "[storage]",
        *(f"{key} = {json.dumps(value)}" for key, value in storage.items()),
        "[warehouses]",
        f'access_delegation = ["{VENDED}", "{SIGNED}"]',
        "[iceberg]",
        f'credential_role_arn = "{WRITER_ROLE_ARN}"',
        "[admin]",
        f'token_hash = "{hash_secret(admin_token)}"',
        "[maintenance]",
        "background = false",
    ]
    path = tmp / "sharing.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(params=["audit-file", "access-log"])
def serve_process(request: pytest.FixtureRequest, tmp_path: Path, seaweed: SeaweedS3) -> Iterator[Server]:
    """A `serve` process (its stdout and stderr in `serve.log`), with the audit log in a file, or off."""
    audit = tmp_path / "audit.log" if request.param == "audit-file" else None
    admin_token = secrets.token_urlsafe(32)
    port = free_port()
    config_path = _config(tmp_path, port, seaweed, audit, admin_token)
    config = load_config(config_path)
    with ExitStack() as running:
        running.enter_context(served(config_path, port, tmp_path / "serve.log"))
        store = ShareStore(config.resolved_store_url())
        running.callback(store.close)
        yield Server(
            f"http://127.0.0.1:{port}",
            tmp_path / "serve.log",
            audit,
            store,
            (config.secret_key or "").encode(),
            admin_token,
            seaweed,
            running.close,
            f"secretlogs{uuid.uuid4().hex[:8]}",
            {admin_token, seaweed.secret_key, config.secret_key or ""},  # and the server key
        )


def writer(server: Server, user: IssuedUser, mode: str) -> Catalog:
    """pyiceberg as AIStor documents it, with only the catalog user's keys."""
    return load_catalog(
        f"{mode}-{uuid.uuid4().hex[:6]}",
        **{
            "uri": f"{server.url}/_iceberg",
            "warehouse": server.warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "local",
            "client.region": "local",
            "client.access-key-id": user.access_key,
            "client.secret-access-key": user.secret_key,
            "header.X-Iceberg-Access-Delegation": mode,
        },
    )


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": n} for i, n in pairs], ROWS)


def ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def grant_of(config: dict[str, str]) -> str:
    return config["s3.signer.endpoint"].rpartition("/s3-sign/")[2]


def signatures(headers: dict[str, list[str]]) -> set[str]:
    """The secret parts of a signer's answer: each Authorization value, its signature, any token."""
    found: set[str] = set()
    for name, values in headers.items():
        for value in values:
            if name.lower() == "authorization":
                found.add(value)
                found |= set(re.findall(r"Signature=([0-9a-f]+)", value))
            elif name.lower() == "x-amz-security-token":
                found.add(value)
    return found


def object_of(location: str) -> tuple[str, str]:
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return bucket, key


def table_url(server: Server, table: str) -> str:
    return f"{server.url}/_iceberg/v1/{server.warehouse}/namespaces/{NAMESPACE}/tables/{table}"


def signing_session(server: Server, user: IssuedUser) -> None:
    """A writer's engine on the remote signer: create, append, read; then the signer called as pyiceberg
    calls it, and called wrongly (another method, a grant altered), whose answers echo no grant."""
    catalog = writer(server, user, SIGNED)
    catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.orders", schema=ROWS)
    table.append(rows((1, "a"), (2, "b")))
    loaded = catalog.load_table(f"{NAMESPACE}.orders")
    assert ids(loaded) == [1, 2]
    server.handed_out |= {grant_of(table.io.properties), grant_of(loaded.io.properties)}

    answer = signed(user, "GET", table_url(server, "orders"), **{"X-Iceberg-Access-Delegation": SIGNED})
    assert answer.status_code == 200, answer.text
    config = answer.json()["config"]
    grant = grant_of(config)
    server.handed_out.add(grant)
    signer = f"{config['s3.signer.uri'].rstrip('/')}/{config['s3.signer.endpoint']}"
    bucket, key = object_of(answer.json()["metadata-location"])
    body = {
        "method": "GET",
        "region": "us-east-1",
        "uri": f"{config['s3.endpoint']}/{bucket}/{key}",
        "headers": {},
    }
    signature = httpx.post(signer, json=body)
    assert signature.status_code == 200, signature.text
    server.handed_out |= signatures(signature.json()["headers"])

    wrong_method = httpx.get(signer)
    assert wrong_method.status_code in (404, 405), wrong_method.text
    server.refusals.append(wrong_method.text)
    altered = signer[:-4] + ("AAAA" if not signer.endswith("AAAA") else "BBBB")
    refused = httpx.post(altered, json=body)
    assert refused.status_code == 403, refused.text
    server.refusals.append(refused.text)
    server.handed_out.add(altered.rpartition("/s3-sign/")[2][:-4])  # the grant's untouched part


def vending_session(server: Server, user: IssuedUser) -> None:
    """A writer's engine with vended keys: load, append, read; then the keys refreshed."""
    catalog = writer(server, user, VENDED)
    table = catalog.load_table(f"{NAMESPACE}.orders")
    properties = table.io.properties
    server.handed_out |= {properties["s3.secret-access-key"], properties["s3.session-token"]}
    table.append(rows((3, "c")))
    assert ids(catalog.load_table(f"{NAMESPACE}.orders")) == [1, 2, 3]
    refreshed = signed(
        user,
        "GET",
        table_url(server, "orders") + "/credentials",
        **{"X-Iceberg-Access-Delegation": VENDED},
    )
    assert refreshed.status_code == 200, refreshed.text
    for credential in refreshed.json()["storage-credentials"]:
        keys = credential["config"]
        server.handed_out |= {keys["s3.secret-access-key"], keys["s3.session-token"]}


def bearer_session(server: Server, user: IssuedUser) -> None:
    """The catalog user's keys traded for a bearer token, which is used; the admin's token; a token
    no one holds, refused."""
    form = {
        "grant_type": "client_credentials",
        "client_id": user.access_key,
        "client_secret": user.secret_key,
    }
    issued = httpx.post(f"{server.url}/_iceberg/v1/oauth/tokens", data=form)
    assert issued.status_code == 200, issued.text
    token = issued.json()["access_token"]
    server.handed_out.add(token)
    config = f"{server.url}/_iceberg/v1/config"
    used = httpx.get(
        config, params={"warehouse": server.warehouse}, headers={"Authorization": f"Bearer {token}"}
    )
    assert used.status_code == 200, used.text
    listed = httpx.get(f"{server.url}/_iceberg/v1/warehouses", headers=admin(server))
    assert listed.status_code == 200, listed.text
    unknown = f"made-up-{secrets.token_hex(16)}"
    server.handed_out.add(unknown)
    refused = httpx.get(config, headers={"Authorization": f"Bearer {unknown}"})
    assert refused.status_code == 401, refused.text
    server.refusals.append(refused.text)


def admin(server: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.admin_token}"}


def recipient_session(server: Server) -> None:
    """The writer's table shared: a recipient token by its one-time link (the code in the path),
    used at Delta Sharing; a share token reading the table at /iceberg through the signer."""
    server.store.create_share(
        "secretlogs", [TableSpec.parse(f"db:orders:uniform:{server.warehouse}:{NAMESPACE}:orders")]
    )
    api = f"{server.url}/admin/v1"
    assert httpx.post(f"{api}/recipients", json={"name": "reader"}, headers=admin(server)).status_code < 300
    granted = httpx.post(
        f"{api}/recipients/reader/shares", json={"share": "secretlogs"}, headers=admin(server)
    )
    assert granted.status_code < 300, granted.text
    link = httpx.post(f"{api}/recipients/reader/tokens", json={"activation": True}, headers=admin(server))
    assert link.status_code < 300, link.text
    activation = link.json()["activationLink"]
    server.handed_out.add(activation.rpartition("/")[2])
    profile = httpx.get(activation)
    assert profile.status_code == 200, profile.text
    bearer = profile.json()["bearerToken"]
    server.handed_out.add(bearer)
    shares = httpx.get(f"{server.url}/delta-sharing/shares", headers={"Authorization": f"Bearer {bearer}"})
    assert shares.status_code == 200 and shares.json()["items"], shares.text

    _, token = server.store.create_token("secretlogs", timedelta(hours=1), "logs")
    server.handed_out.add(token)
    catalog = RestCatalog(
        "recipient",
        uri=f"{server.url}/iceberg",
        token=token,
        **{"header.X-Iceberg-Access-Delegation": SIGNED},
    )
    table = catalog.load_table("db.orders")
    assert ids(table) == [1, 2, 3]
    data_file = next(iter(table.scan().plan_files())).file.file_path
    bucket, key = object_of(data_file)
    endpoint = server.seaweed.endpoint
    body = {"method": "GET", "region": "us-east-1", "uri": f"{endpoint}/{bucket}/{key}", "headers": {}}
    signature = httpx.post(
        f"{server.url}/iceberg/v1/aws/s3/sign", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert signature.status_code == 200, signature.text
    server.handed_out |= signatures(signature.json()["headers"])


def test_no_secret_handed_out_is_in_any_line_the_server_writes(serve_process: Server) -> None:
    user = CatalogUsers(serve_process.store.transactions, serve_process.secret).create("owner")
    serve_process.handed_out.add(user.secret_key)
    made = signed(
        user,
        "POST",
        f"{serve_process.url}/_iceberg/v1/warehouses",
        json.dumps({"name": serve_process.warehouse}).encode(),
    )
    assert made.status_code == 200, made.text
    signing_session(serve_process, user)
    vending_session(serve_process, user)
    bearer_session(serve_process, user)
    recipient_session(serve_process)
    metrics = httpx.get(f"{serve_process.url}/metrics").text
    grants = [secret for secret in serve_process.handed_out if "." in secret and len(secret) > 100]
    assert grants, "no grant was handed out"
    serve_process.stop()
    lines = [*serve_process.lines(), *metrics.splitlines(), *serve_process.refusals]

    leaks = {
        secret[:12] + "…": [line[:200] for line in lines if secret in line]
        for secret in serve_process.handed_out
        if len(secret) >= 8
    }
    assert {secret: found for secret, found in leaks.items() if found} == {}
    shapes = {
        "a grant": re.compile(r"/s3-sign/(?!" + REDACTED + r")"),
        "an activation code": re.compile(r"/activation/(?!" + REDACTED + r")[A-Za-z0-9_-]"),
        "a SigV4 signature": re.compile(r"Signature=[0-9a-f]{16}"),
        "a bearer token": re.compile(r"Bearer [A-Za-z0-9_.-]{8}"),
    }
    for what, shape in shapes.items():
        assert [line[:200] for line in lines if shape.search(line)] == [], what
    # Not a test of nothing: the signer's and the link's requests are in the lines, redacted.
    assert any(f"/s3-sign/{REDACTED}" in line for line in lines)
    assert any(f"/activation/{REDACTED}" in line for line in lines)

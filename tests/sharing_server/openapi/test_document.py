"""The OpenAPI description at /openapi.json: valid, complete, and true of a live server under fuzzing.

The fuzzing run is schemathesis over every documented operation, a bounded and
derandomized number of examples each, against a real server holding real Delta
tables. Generated names are swapped, most of the time, for names that exist
(the share, its tables, a token, a client, a file with a valid signature), so
that requests get past the lookups to the code that reads tables and issues
credentials.
"""

from __future__ import annotations

import base64
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from schemathesis import DataGenerationMethod
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from share_store.authentication.tokens import hash_secret
from share_store.signing.file_urls import SIGNATURE_PARAM
from sharing_server.app import create_app, health
from sharing_server.openapi import SpecMismatch, openapi_document
from sharing_server.paths import ADMIN_PREFIX
from tests.conftest import TESTDATA_BUCKET, Deployment, deploy

PREFIX = "/delta-sharing"
ADMIN_TOKEN = "dsa_openapi-fuzzing-admin-token-0123456789abcdef"
SHARE = "fuzz"  # the recipients' share; admin operations never get its name
SCRATCH = "scratch"  # the admin operations' share, set up afresh before each of them
TABLES = {"cdf": "cdf-table", "partitioned": "delta-0.8.0-partitioned", "dv": "table-with-dv-small"}
# Stand-ins drawn during generation for what only exists once the server runs.
TOKEN_ID, CLIENT_ID, FILE_KEY, SIGNED = "@token-id", "@client-id", "@file-key", "@signed"
CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
)


def _document(prefix: str) -> dict:
    return openapi_document(prefix, _app(prefix).routes)


def test_document_is_valid_openapi():
    for prefix in (PREFIX, "/custom/sharing"):
        validate(_document(prefix))


def _app(prefix: str):
    # Routing only: no request reaches a store; the writable catalog's parts only keep its engine.
    return create_app(SimpleNamespace(engine=None, transactions=None), None, b"k" * 32, prefix)


def _served(app) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()

    def walk(routes, prefix: str) -> None:
        for route in routes:
            if isinstance(route, Mount) and prefix + route.path == "/console":
                continue  # the console's HTML pages are no API
            if isinstance(route, Mount):
                walk(route.routes, prefix + route.path)
            else:
                # `{key:path}` is OpenAPI's `{key}`.
                path = re.sub(r"\{(\w+):\w+\}", r"{\1}", prefix + route.path)
                found.update((path, method) for method in route.methods)

    walk(app.routes, "")
    return found


def _documented(document: dict) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path, item in document["paths"].items():
        for method in item:
            found.add((path, method.upper()))
            if method == "get":
                found.add((path, "HEAD"))  # Starlette answers HEAD wherever it answers GET
    return found


@pytest.mark.parametrize("prefix", [PREFIX, "/custom/sharing"])
def test_every_route_is_documented_and_every_operation_served(prefix):
    served, documented = _served(_app(prefix)), _documented(_document(prefix))
    assert served - documented == set(), "routes missing from the document"
    assert documented - served == set(), "documented operations nothing serves"


def test_a_route_without_a_spec_or_a_spec_without_a_route_stops_the_build():
    routes = _app(PREFIX).routes
    with pytest.raises(SpecMismatch, match=r"without an operation spec.*GET /undocumented"):
        openapi_document(PREFIX, [*routes, Route("/undocumented", health, name="undocumented")])
    served = [route for route in routes if getattr(route, "name", None) != "health"]
    with pytest.raises(SpecMismatch, match=r"no route serves: \[\('health', 'GET'\)\]"):
        openapi_document(PREFIX, served)


def test_document_is_served_once_built():
    app = _app("/custom/sharing")
    with TestClient(app) as client:
        first = client.get("/openapi.json")
        second = client.get("/openapi.json")
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/json"
    assert first.json() == second.json() == _document("/custom/sharing")
    served = next(r for r in app.routes if getattr(r, "path", None) == "/openapi.json")
    assert served.endpoint.__self__.document is not None  # built once, kept by its endpoint


# -- fuzzing a live server ------------------------------------------------------------


@dataclass
class Target:
    deployment: Deployment
    bearer: str
    client_id: str
    client_secret: str
    file_key: str
    scratch_ids: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.deployment.server.url

    def reset_scratch(self) -> None:
        """The scratch share with a fresh token and client: earlier examples may have removed them."""
        store = self.deployment.store
        if SCRATCH not in {share.name for share in store.list_shares()}:
            self.deployment.share_tables(SCRATCH, {"t": TABLES["partitioned"]})
        token, _ = store.create_token(SCRATCH, None, "fuzz")
        client, _ = store.create_oauth_client(SCRATCH, None, "fuzz")
        self.scratch_ids = {TOKEN_ID: token.id, CLIENT_ID: client.id}

    def prepare(self, case: schemathesis.Case) -> dict[str, str]:
        """Put the live ids into `case`; the credentials its operation takes."""
        path = case.operation.path
        if path.startswith(ADMIN_PREFIX):
            self.reset_scratch()
            params = case.path_parameters or {}
            for name, value in params.items():
                params[name] = self.scratch_ids.get(value, value)
            return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        if path.endswith("/oauth/token"):
            basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        if "/files/" in path:
            params = case.path_parameters or {}
            if params.get("key") == FILE_KEY:
                params["key"] = self.file_key
            self._sign(case)
            return {}
        if path.startswith(PREFIX):
            return {"Authorization": f"Bearer {self.bearer}"}
        return {}

    def _sign(self, case: schemathesis.Case) -> None:
        query = case.query if isinstance(case.query, dict) else None
        params = case.path_parameters or {}
        if query is None or query.get(SIGNATURE_PARAM) != SIGNED:
            return
        bucket, key = (unquote(str(params.get(name, ""))) for name in ("bucket", "key"))
        signed = self.deployment.storage.signer.sign(bucket, key, int(time.time()) + 600)
        for pair in signed.partition("?")[2].split("&"):
            name, _, value = pair.partition("=")
            query[name] = value


def _real_path_values(path: str) -> dict[str, list[str]]:
    if path.startswith(ADMIN_PREFIX):
        return {"share": [SCRATCH], "token_id": [TOKEN_ID], "client_id": [CLIENT_ID]}
    return {
        "share": [SHARE],
        "schema": ["default"],
        "table": list(TABLES),
        "bucket": [TESTDATA_BUCKET],
        "key": [FILE_KEY],
    }


# Admin bodies naming real tables, so that shares do get created and changed.
REAL_ADMIN_BODY_VALUES = {
    "name": ["created"],
    "tables": [["default", f"t1:delta:{TESTDATA_BUCKET}:{TABLES['cdf']}"]],
    "add": [[f"default:t2:delta:{TESTDATA_BUCKET}:{TABLES['dv']}"]],
    "remove": [["default/t"]],
}


def _mostly(real: list, generated: object) -> st.SearchStrategy:
    """One of `real` most of the time (and what Hypothesis shrinks towards), else what was generated."""
    if not real:
        return st.just(generated)
    return st.integers(0, 14).flatmap(lambda i: st.just(generated) if i == 14 else st.sampled_from(real))


def _swap_values(generated: object, real: dict[str, list]) -> st.SearchStrategy:
    if not isinstance(generated, dict):
        return st.just(generated)
    return st.fixed_dictionaries(
        {name: _mostly(real.get(name, []), value) for name, value in generated.items()}
    )


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("openapi")
    root = tmp / "buckets"
    for table in TABLES.values():
        shutil.copytree(testdata / table, root / TESTDATA_BUCKET / table)
    deployment = deploy(
        tmp,
        {"type": "local", "root": str(root)},
        env={
            "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
            "SHARING_LIMITS_PER_TOKEN_RPS": "0",
            "SHARING_LIMITS_GLOBAL_RPS": "0",
        },
    )
    deployment.share_tables(SHARE, TABLES)
    client, secret = deployment.store.create_oauth_client(SHARE, None, "fuzz")
    data_file = next((root / TESTDATA_BUCKET / TABLES["partitioned"]).rglob("*.parquet"))
    file_key = data_file.relative_to(root / TESTDATA_BUCKET).as_posix()
    served = httpx.get(f"{deployment.server.url}/openapi.json").json()
    assert served == _document(PREFIX), "the fuzzed document is the one the server serves"
    yield Target(deployment, deployment.token(SHARE), client.id, secret, file_key)
    deployment.server.stop()
    deployment.store.close()


schema = schemathesis.from_dict(
    _document(PREFIX),
    data_generation_methods=[DataGenerationMethod.positive, DataGenerationMethod.negative],
)


@schema.hook("before_generate_path_parameters")
def _real_names(context, strategy: st.SearchStrategy) -> st.SearchStrategy:
    real = _real_path_values(context.operation.path)
    return strategy.flatmap(lambda generated: _swap_values(generated, real))


@schema.hook("before_generate_query")
def _real_queries(context, strategy: st.SearchStrategy) -> st.SearchStrategy:
    if "/files/" in context.operation.path:
        return strategy.flatmap(lambda generated: _swap_values(generated, {SIGNATURE_PARAM: [SIGNED]}))
    if context.operation.path.endswith("/changes"):
        return strategy.flatmap(_with_real_range)
    return strategy


# Version ranges of the CDF table: generated parameters rarely name exactly one start.
CHANGE_RANGES = [
    {"startingVersion": "0"},
    {"startingVersion": "1", "endingVersion": "2"},
    {"startingTimestamp": "2000-01-01T00:00:00Z"},
]
RANGE_PARAMETERS = {"startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp", "pageToken"}


def _with_real_range(generated: object) -> st.SearchStrategy:
    if not isinstance(generated, dict):
        return st.just(generated)
    rest = {name: value for name, value in generated.items() if name not in RANGE_PARAMETERS}
    return _mostly([{**rest, **real} for real in CHANGE_RANGES], generated)


# What HTTP/1.1 header values cannot carry (RFC 9110 §5.5): Hypercorn refuses such
# requests with a bare 400 before the app sees them, so they test nothing of ours.
NOT_FIELD_VALUE = re.compile(r"[^\t\x20-\x7e\x80-\xff]")


@schema.hook("filter_headers")
def _sendable_headers(context, headers: dict | None) -> bool:
    return not any(
        isinstance(value, str) and NOT_FIELD_VALUE.search(value) for value in (headers or {}).values()
    )


@schema.hook("before_generate_body")
def _real_specs(context, strategy: st.SearchStrategy) -> st.SearchStrategy:
    if not context.operation.path.startswith(ADMIN_PREFIX):
        return strategy
    return strategy.flatmap(lambda generated: _swap_values(generated, REAL_ADMIN_BODY_VALUES))


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_fuzzing_finds_no_server_error(case: schemathesis.Case, target: Target):
    headers = target.prepare(case)
    case.call_and_validate(base_url=target.url, headers=headers, checks=CHECKS, timeout=30)

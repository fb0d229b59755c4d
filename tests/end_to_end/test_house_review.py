"""A hostile user at the seams issue 49 rebuilt: each mount's authentication, its error model, and the
writable catalog's location check, through the front door (HTTP against a live server).

Every test here is an attack refused today; it pins the boundary. Wrong tokens at `/admin/v1` and
`/_iceberg` count toward the admin token's per-address throttle, so few are sent."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from share_store.catalog.users import CatalogUsers
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3
from tests.catalog_attacks import (
    ATT,
    Caller,
    assert_refused,
    attacker_policy,
    create_body,
    error_of,
    rand,
    uri,
)
from tests.conftest import ADMIN_TOKEN, Deployment, copy_testdata, deploy
from tests.end_to_end.test_signer_review import Env, Own, own_table
from tests.end_to_end.test_warehouse_catalog import signed
from tests.end_to_end.test_warehouse_delegation import SIGNED, one_namespace_policy, root, sign_at, writer

SECURITY_HEADERS = ("x-request-id", "x-content-type-options", "x-frame-options", "content-security-policy")
UNAUTHORIZED = "NotAuthorizedException"


@dataclass(frozen=True)
class Seams:
    deployment: Deployment
    share_token: str
    attacker: Caller
    catalog_token: str
    warehouse: str

    @property
    def url(self) -> str:
        return self.deployment.server.url


@pytest.fixture(scope="module")
def seams(server: Deployment) -> Iterator[Seams]:
    copy_testdata(server, "simple_table")
    server.share_tables("review", {"t": "simple_table"})
    users = CatalogUsers(server.store.transactions, server.secret)
    warehouse = f"review-{rand()}"
    admin = Caller(server, users.create(f"admin-{rand()}"))
    assert admin.call("POST", "/warehouses", {"name": warehouse}).status_code == 200
    attacker = Caller(server, users.create(f"att-{rand()}", attacker_policy(warehouse)))
    assert attacker.call("POST", f"/{warehouse}/namespaces", {"namespace": [ATT]}).status_code == 200
    form = {
        "grant_type": "client_credentials",
        "client_id": attacker.user.access_key,
        "client_secret": attacker.user.secret_key,
    }
    issued = httpx.post(f"{server.server.url}/_iceberg/v1/oauth/tokens", data=form)
    assert issued.status_code == 200, issued.text
    yield Seams(server, server.token("review"), attacker, issued.json()["access_token"], warehouse)


def assert_iceberg_refusal(answer: httpx.Response, status: int, *types: str) -> None:
    assert_refused(answer, status, *types)
    missing = [name for name in SECURITY_HEADERS if name not in answer.headers]
    assert not missing, f"refusal without {missing}"


# -- /iceberg: every route behind ShareTokenAuthentication, whatever the path's spelling -----------

ICEBERG_ROUTES = [
    ("GET", "/iceberg/v1/config"),
    ("GET", "/iceberg/v1/namespaces"),
    ("GET", "/iceberg/v1/namespaces/default"),
    ("GET", "/iceberg/v1/namespaces/default/tables"),
    ("GET", "/iceberg/v1/namespaces/default/tables/t"),
    ("GET", "/iceberg/v1/namespaces/default/tables/t/credentials"),
    ("POST", "/iceberg/v1/namespaces"),
    ("DELETE", "/iceberg/v1/namespaces/default"),
    ("PATCH", "/iceberg/v1/config"),
    ("GET", "/iceberg/v1/nothing"),
    ("GET", "/iceberg/"),
    # spellings that reach a handler or the catch-all by another way
    ("GET", "/iceberg//v1/config"),
    ("GET", "/iceberg/v1//config"),
    ("GET", "/iceberg/v1/config/"),
    ("GET", "/iceberg/V1/config"),
    ("GET", "/iceberg/v1%2Fconfig"),
    ("GET", "/iceberg/v1/namespaces/default%2Ftables"),
    ("GET", "/iceberg/v1/namespaces/default/tables/t%2Fcredentials"),
    ("POST", "/iceberg/v1/aws/s3/sign/"),
    ("POST", "/iceberg/v1/oauth/tokens/"),
]


@pytest.mark.parametrize(("method", "path"), ICEBERG_ROUTES)
@pytest.mark.parametrize("bearer", ["none", "admin", "catalog", "unknown"])
def test_iceberg_takes_no_token_but_a_share_token(seams: Seams, method: str, path: str, bearer: str) -> None:
    secret = {
        "none": None,
        "admin": ADMIN_TOKEN,
        "catalog": seams.catalog_token,
        "unknown": "dss_" + "x" * 40,
    }
    headers = {} if secret[bearer] is None else {"Authorization": f"Bearer {secret[bearer]}"}
    answer = httpx.request(
        method, seams.url + path, headers=headers, content=b"{}" if method != "GET" else None
    )
    assert_iceberg_refusal(answer, 401, UNAUTHORIZED)


@pytest.mark.parametrize("path", ["/iceberg/v1/config", "/iceberg/v1/namespaces/default/tables/t"])
def test_iceberg_head_is_authenticated_as_get_is(seams: Seams, path: str) -> None:
    answer = httpx.head(seams.url + path, headers={"Authorization": "Bearer dss_" + "y" * 40})
    assert answer.status_code == 401 and "x-request-id" in answer.headers


def test_iceberg_a_revoked_share_token_is_refused(seams: Seams) -> None:
    store = seams.deployment.store
    made, revoked = store.create_token("review", None, "to revoke")
    store.revoke_token("review", made.id)
    answer = httpx.get(f"{seams.url}/iceberg/v1/namespaces", headers={"Authorization": f"Bearer {revoked}"})
    assert_iceberg_refusal(answer, 401, UNAUTHORIZED)


@pytest.mark.parametrize("method", ["OPTIONS"])
def test_iceberg_an_unknown_method_is_a_405_in_the_model(seams: Seams, method: str) -> None:
    answer = httpx.request(method, f"{seams.url}/iceberg/v1/config")
    assert_iceberg_refusal(answer, 405)


def test_iceberg_signer_refuses_a_request_without_a_token(seams: Seams) -> None:
    body = {"method": "GET", "uri": "s3://testdata/simple_table/x", "headers": {}}
    answer = httpx.post(f"{seams.url}/iceberg/v1/aws/s3/sign", json=body)
    assert_iceberg_refusal(answer, 403, "ForbiddenException")


# -- /admin/v1 and /_iceberg: another surface's token is no token of theirs -------------------------


@pytest.mark.parametrize("bearer", ["share", "catalog"])
def test_admin_takes_neither_a_share_nor_a_catalog_token(seams: Seams, bearer: str) -> None:
    secret = seams.share_token if bearer == "share" else seams.catalog_token
    answer = httpx.get(f"{seams.url}/admin/v1/shares", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 401, answer.text
    assert answer.json()["errorCode"] == "UNAUTHENTICATED"


def test_catalog_takes_no_share_token(seams: Seams) -> None:
    headers = {"Authorization": f"Bearer {seams.share_token}"}
    answer = httpx.get(f"{seams.url}/_iceberg/v1/{seams.warehouse}/namespaces", headers=headers)
    assert_iceberg_refusal(answer, 401, UNAUTHORIZED)


@pytest.mark.parametrize("path", ["/_iceberg/v1/config", "/_iceberg/v1%2Fconfig"])
def test_catalog_a_route_wants_a_caller_however_spelt(seams: Seams, path: str) -> None:
    assert_iceberg_refusal(httpx.get(seams.url + path), 401, UNAUTHORIZED)


@pytest.mark.parametrize("path", ["/_iceberg//v1/config", "/_iceberg/v1/config/", "/_iceberg/v1/nothing"])
def test_catalog_a_path_of_no_route_is_a_404_that_runs_no_handler(seams: Seams, path: str) -> None:
    """Unlike `/iceberg`, the catch-all asks no caller: it names no data, so anyone may learn it is absent."""
    assert_iceberg_refusal(httpx.get(seams.url + path), 404, "NoSuchEndpointException")


# -- error handling: odd bodies are 4xx in the model -------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[" * 100_000 + b"]" * 100_000, b'"x"', b'{"name":"t","schema":[]}'],
    ids=["malformed", "deep", "not-object", "bad-schema"],
)
def test_catalog_odd_create_bodies_are_400s(seams: Seams, body: bytes) -> None:
    caller = seams.attacker
    path = f"/{seams.warehouse}/namespaces/{ATT}/tables"
    url = f"{caller.root}{path}"
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(caller.user.access_key, caller.user.secret_key), "s3tables", "local").add_auth(
        request
    )
    answer = httpx.post(url, content=body, headers=dict(request.headers), timeout=60)
    assert_iceberg_refusal(answer, 400, "BadRequestException")


def test_iceberg_a_huge_signing_request_is_a_413(seams: Seams) -> None:
    body = b'{"a":"' + b"x" * (2 * 1024 * 1024) + b'"}'
    headers = {"Authorization": f"Bearer {seams.share_token}"}
    answer = httpx.post(f"{seams.url}/iceberg/v1/aws/s3/sign", content=body, headers=headers)
    assert_iceberg_refusal(answer, 413)


def test_iceberg_a_lone_surrogate_in_a_signing_request_is_a_400(seams: Seams) -> None:
    body = b'{"method":"GET","uri":"\\ud800","headers":{}}'
    headers = {"Authorization": f"Bearer {seams.share_token}"}
    answer = httpx.post(f"{seams.url}/iceberg/v1/aws/s3/sign", content=body, headers=headers)
    assert_iceberg_refusal(answer, 400, "BadRequestException")


# -- the location check -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "att/base/sub",  # inside another table's folder
        "att/base/metadata",
        "att/base",  # the same folder
        "att/base/",
        "att//base",
        "att/./base",
        "att/nest",  # a folder holding another table's
        "att",  # the namespace's own folder
        "attx/t",  # a sibling prefix of the namespace
        "ATT/t",
        "att/base/../x",
        "att/../other/x",
        "att/%2e%2e/x",
        "att/base%2fsub",
        "att/.t",
        "",
    ],
)
def test_a_location_overlapping_another_tables_or_outside_the_namespace_is_refused(
    seams: Seams, key: str
) -> None:
    d, warehouse = seams.deployment, seams.warehouse
    for name, own in (("base", "att/base"), ("nested", "att/nest/inner")):
        made = seams.attacker.call(
            "POST", f"/{warehouse}/namespaces/{ATT}/tables", create_body(name, uri(d, warehouse, own))
        )
        assert made.status_code in (200, 409), made.text
    answer = seams.attacker.call(
        "POST", f"/{warehouse}/namespaces/{ATT}/tables", create_body(f"t_{rand()}", uri(d, warehouse, key))
    )
    assert_iceberg_refusal(answer, 400, "BadRequestException")


def test_a_dropped_tables_folder_once_taken_cannot_be_undropped_into_a_shared_folder(seams: Seams) -> None:
    """Taking a dropped table's folder (allowed: the caller may take that table) forgets the dropped
    table, so no undrop can leave two tables in one folder, where one's purge deletes the other's files."""
    d, warehouse, caller = seams.deployment, seams.warehouse, seams.attacker
    tables = f"/{warehouse}/namespaces/{ATT}/tables"
    for old, new, folder in (("d1", "n1", "att/dropped"), ("d2", "n2", "att/held/inner")):
        assert caller.call("POST", tables, create_body(old, uri(d, warehouse, folder))).status_code == 200
        assert caller.call("DELETE", f"{tables}/{old}").status_code == 204
        taking = folder if old == "d1" else "att/held"  # the same folder, or one holding it whole
        assert caller.call("POST", tables, create_body(new, uri(d, warehouse, taking))).status_code == 200
        undrop = {"identifiers": [{"namespace": [ATT], "name": old}]}
        assert_iceberg_refusal(caller.call("POST", f"/{warehouse}/tables/undrop", undrop), 404)


# -- the writers' signer: objects just outside the table's folder (SeaweedFS, remote signing only) ------


@pytest.fixture(scope="module")
def signing(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3
) -> Iterator[tuple[Deployment, str, Own]]:
    deployment = deploy(
        tmp_path_factory.mktemp("house-signing"),
        seaweed.storage_config(path_style="true"),
        env={
            "SHARING_WAREHOUSES_ACCESS_DELEGATION": SIGNED,
            "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
        },
    )
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    mine = f"house-{rand()}"
    users = CatalogUsers(deployment.store.transactions, deployment.secret)
    owner = users.create("owner")
    made = signed(owner, "POST", f"{root(deployment)}/v1/warehouses", json.dumps({"name": mine}).encode())
    assert made.status_code == 200, made.text
    writer(deployment, owner, SIGNED, mine).create_namespace(ATT)
    attacker = users.create("attacker", json.dumps(one_namespace_policy(mine)))
    env = Env(deployment, mine, mine, owner, attacker)
    own = own_table(env)
    try:
        yield deployment, mine, own
    finally:
        deployment.server.stop()
        deployment.store.close()


OUTSIDE = {
    "sibling prefix": "{folder}x/data/a.parquet",
    "sibling prefix with dash": "{folder}-2/data/a.parquet",
    "the namespace folder": "att/a.parquet",
    "dot-dot": "{folder}/../other/a.parquet",
    "encoded dot-dot": "{folder}/%2e%2e/other/a.parquet",
    "encoded slash dot-dot": "{folder}%2F..%2Fother%2Fa.parquet",
    "empty segment": "{folder}//a.parquet",
    "dot segment": "{folder}/./a.parquet",
    "the folder itself": "{folder}",
    "the folder with its slash": "{folder}/",
    "the warehouse root": "",
}


@pytest.mark.parametrize("case", sorted(OUTSIDE))
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_the_writers_signer_signs_nothing_just_outside_the_tables_folder(
    signing: tuple[Deployment, str, Own], case: str, method: str
) -> None:
    _, mine, own = signing
    key = OUTSIDE[case].format(folder=own.folder)
    answer = sign_at(own.signer, method, f"{own.endpoint}/{mine}/{key}")
    assert answer.status_code in (400, 403), f"{case}: {answer.status_code} {answer.text[:300]}"
    error_of(answer)


@pytest.mark.parametrize(
    "uri",
    [
        "{endpoint}/{mine}?list-type=2&prefix=att/",
        "{endpoint}/{mine}?list-type=2&prefix={folder}",
        "{endpoint}/{upper}/{folder}/data/a.parquet",
        "http://elsewhere.test:1/{mine}/{folder}/data/a.parquet",
    ],
)
def test_the_writers_signer_signs_no_listing_nor_another_bucket_or_host(
    signing: tuple[Deployment, str, Own], uri: str
) -> None:
    _, mine, own = signing
    target = uri.format(endpoint=own.endpoint, mine=mine, upper=mine.upper(), folder=own.folder)
    answer = sign_at(own.signer, "GET", target)
    assert answer.status_code in (400, 403), f"{target}: {answer.status_code} {answer.text[:300]}"
    error_of(answer)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_the_writers_signer_signs_inside_the_folder(
    signing: tuple[Deployment, str, Own], method: str
) -> None:
    """The control of the two above: the same signer, a key inside, signed."""
    _, mine, own = signing
    answer = sign_at(own.signer, method, f"{own.endpoint}/{mine}/{own.folder}/data/a.parquet")
    assert answer.status_code == 200, answer.text


# -- lone surrogates in /_iceberg bodies: a 400, and nothing stored -----------------------------------


@pytest.fixture(scope="module")
def full(seams: Seams) -> Caller:
    """A catalog user of no policy: every right in every warehouse (the review's "admin user")."""
    users = CatalogUsers(seams.deployment.store.transactions, seams.deployment.secret)
    return Caller(seams.deployment, users.create(f"full-{rand()}"))


def raw_call(caller: Caller, method: str, path: str, body: bytes) -> httpx.Response:
    """A catalog call signed as `caller` whose body is sent as these bytes (the JSON escapes as written)."""
    url = f"{caller.root}{path}"
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(caller.user.access_key, caller.user.secret_key), "s3tables", "local").add_auth(
        request
    )
    return httpx.request(method, url, content=body, headers=dict(request.headers), timeout=60)


LONE = re.compile("[\ud800-\udfff]")
SCHEMA = '"schema":{"type":"struct","fields":[{"id":1,"name":"id","type":"long","required":false}]}'


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/{w}/namespaces/att/properties", '{"updates":{"a":"\\ud800"}}'),
        ("/{w}/namespaces/att/properties", '{"updates":{"\\udc00":"v"}}'),
        ("/{w}/namespaces/att/properties", '{"removals":["\\ud800"]}'),
        ("/{w}/namespaces", '{"namespace":["lone_ns"],"properties":{"a":"\\ud800"}}'),
        ("/{w}/namespaces", '{"namespace":["\\ud800"]}'),
        ("/{w}/namespaces/att/tables", '{"name":"ok\\ud800",' + SCHEMA + "}"),
        ("/{w}/namespaces/att/tables", '{"name":"lone","properties":{"k":"\\ud800"},' + SCHEMA + "}"),
        ("/{w}/namespaces/att/tables", '{"name":"lone","schema":{"type":"struct","fields":[{"id":1,'
         '"name":"\\udc00","type":"long","required":false}]}}'),
        ("/{w}/namespaces/att/register", '{"name":"\\ud800","metadata-location":"x"}'),
        ("/{w}/tables/rename", '{"source":{"namespace":["att"],"name":"\\ud800"},'
         '"destination":{"namespace":["att"],"name":"y"}}'),
        ("/{w}/transactions/commit", '{"table-changes":[{"identifier":{"namespace":["att"],'
         '"name":"\\ud800"},"requirements":[],"updates":[]}]}'),
    ],
    ids=["property-value", "property-key", "removal", "namespace-properties", "namespace-name",
         "table-name", "table-property", "schema-field", "register-name", "rename", "transaction"],
)  # fmt: skip
def test_a_lone_surrogate_in_a_catalog_body_is_a_400_and_stores_nothing(
    seams: Seams, full: Caller, path: str, body: str
) -> None:
    """Found by the review: the namespace's property was stored and its GET was a 500 for everyone
    since, and names and metadata with one were 500s. JSON can only carry one as an escape."""
    caller, warehouse = full, seams.warehouse
    answer = raw_call(caller, "POST", path.format(w=warehouse), body.encode())
    assert_iceberg_refusal(answer, 400, "BadRequestException")
    assert "surrogate" in answer.json()["error"]["message"]
    namespace = caller.call("GET", f"/{warehouse}/namespaces/{ATT}")
    assert namespace.status_code == 200, namespace.text
    assert not [key for key, value in namespace.json()["properties"].items() if LONE.search(key + value)]
    listed = caller.call("GET", f"/{warehouse}/namespaces/{ATT}/tables")
    assert "lone" not in {t["name"] for t in listed.json()["identifiers"]}


def test_a_lone_surrogate_in_a_commit_to_ones_own_table_is_a_400(seams: Seams) -> None:
    caller, warehouse = seams.attacker, seams.warehouse
    made = raw_call(
        caller, "POST", f"/{warehouse}/namespaces/{ATT}/tables", ('{"name":"own",' + SCHEMA + "}").encode()
    )
    assert made.status_code == 200, made.text
    body = '{"requirements":[],"updates":[{"action":"set-properties","updates":{"k":"\\ud800"}}]}'
    answer = raw_call(caller, "POST", f"/{warehouse}/namespaces/{ATT}/tables/own", body.encode())
    assert_iceberg_refusal(answer, 400, "BadRequestException")
    loaded = caller.call("GET", f"/{warehouse}/namespaces/{ATT}/tables/own")
    assert loaded.status_code == 200 and "k" not in loaded.json()["metadata"].get("properties", {})


def test_a_valid_surrogate_pair_is_a_character_like_any_other(seams: Seams, full: Caller) -> None:
    """An escaped pair (an emoji) is well-formed JSON text: refused only where names refuse non-ASCII."""
    caller, warehouse = full, seams.warehouse
    answer = raw_call(
        caller, "POST", f"/{warehouse}/namespaces/{ATT}/properties", b'{"updates":{"mood":"\\ud83d\\ude00"}}'
    )
    assert answer.status_code == 200, answer.text
    got = caller.call("GET", f"/{warehouse}/namespaces/{ATT}").json()["properties"]
    assert got["mood"] == "\U0001f600"

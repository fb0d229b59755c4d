"""A hostile review of both remote signers (bfeee19, b6d6361, 20d8c27), on SeaweedFS.

(a) a catalog user allowed one namespace `att` of one warehouse, holding writers' grants at
`/_iceberg/v1/{prefix}/s3-sign/{grant}`, on a server with both delegation modes (the signer signs
with STS keys scoped to the table) and on one with remote signing only (the server's own keys: the
parser is the only bound); (b) a recipient with a share token at `/iceberg/v1/aws/s3/sign`.

Each test makes one attack and asserts it is refused (by the signer, or by the store where the
signer's part is only defence in depth). The review found eight that worked, each fixed since:
500s on a malformed IPv6 URI, a 5000-digit part number and lone surrogates; one broken table of a
share failing its neighbours' signatures; header names unchecked; upload ids with dot segments;
a copy source with a comma or several values.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.model import TableSpec
from share_store.signing.request_signing import SigningRefused, parse_object_request
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3
from tests.conftest import Deployment, deploy
from tests.end_to_end.test_iceberg_s3 import CUSTOMER, customers
from tests.end_to_end.test_warehouse_catalog import signed
from tests.end_to_end.test_warehouse_delegation import (
    ROWS,
    SIGNED,
    VENDED,
    one_namespace_policy,
    root,
    rows,
    sign_at,
    writer,
)

ATT = "att"
REST_BUCKET = "rv-recipients"
FORBIDDEN = "ForbiddenException"


# -- the parser alone: an endpoint with a base path ---------------------------------------------


def test_an_endpoint_base_path_is_matched_whole_and_kept_in_the_uri_built() -> None:
    endpoint = "http://store.test:9000/s3"
    built = parse_object_request("GET", "HTTP://Store.Test:9000/s3/b/k%2Bx", {}, endpoint)
    assert built.uri == "http://store.test:9000/s3/b/k%2Bx" and built.key == "k+x"
    for uri in (
        "http://store.test:9000/s3x/b/k",  # a longer first segment
        "http://store.test:9000//s3/b/k",  # an empty segment before the base path
        "http://store.test:9000/%73%33/b/k",  # the base path encoded
        "http://store.test:9000/b/k",  # without the base path
        "http://u@store.test:9000/s3/b/k",  # userinfo
        "http://store.test:09000/s3/b/k",  # the same port spelt otherwise
        "http://store.test/s3/b/k",  # the default port
        "https://store.test:9000/s3/b/k",  # another scheme
        "http://store.test:9000/s3/b%2Fc/k",  # a bucket holding a slash
    ):
        with pytest.raises(SigningRefused):
            parse_object_request("GET", uri, {}, endpoint)


# -- (a) the writers' signer, on two servers -------------------------------------------------------


@dataclass
class Env:
    server: Deployment
    mine: str  # the attacker's warehouse (namespace `att` allowed)
    other: str  # another warehouse: the attacker may touch nothing in it
    owner: IssuedUser
    attacker: IssuedUser

    @property
    def s3(self) -> Any:
        return self.server.seaweed.client()  # type: ignore[attr-defined]


@pytest.fixture(scope="module", params=["both", "signonly"])
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3
) -> Iterator[Env]:
    modes = f"{VENDED},{SIGNED}" if request.param == "both" else SIGNED
    settings = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": modes,
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    deployment = deploy(
        tmp_path_factory.mktemp("review"), seaweed.storage_config(path_style="true"), env=settings
    )
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    mine, other = f"rv-{request.param}-a", f"rv-{request.param}-b"
    users = CatalogUsers(deployment.store.transactions, deployment.secret)
    owner = users.create("owner")
    for name in (mine, other):
        made = signed(owner, "POST", f"{root(deployment)}/v1/warehouses", json.dumps({"name": name}).encode())
        assert made.status_code == 200, made.text
    policy = one_namespace_policy(mine)
    writer(deployment, owner, SIGNED, mine).create_namespace(ATT)
    attacker = users.create("attacker", json.dumps(policy))
    yield Env(deployment, mine, other, owner, attacker)
    deployment.server.stop()
    deployment.store.close()


def victim(env: Env, warehouse: str | None = None) -> tuple[str, str]:
    """A data file of the owner's table in namespace `victims` (by default of the other warehouse)."""
    catalog = writer(env.server, env.owner, SIGNED, warehouse or env.other)
    catalog.create_namespace_if_not_exists("victims")
    name = f"victims.t{uuid.uuid4().hex[:6]}"
    table = catalog.create_table(name, schema=ROWS)
    table.append(rows((1, "secret")))
    path = next(f.file.file_path for f in catalog.load_table(name).scan().plan_files())
    bucket, _, key = path.removeprefix("s3://").partition("/")
    return bucket, key


@dataclass
class Own:
    signer: str
    endpoint: str
    folder: str  # the table's location's key

    def uri(self, env: Env, rest: str) -> str:
        return f"{self.endpoint}/{env.mine}/{self.folder}/{rest}"


def own_table(env: Env) -> Own:
    """A table of the attacker's in `att`, and the signer of a remote-signing load of it."""
    name = f"c_{uuid.uuid4().hex[:6]}"
    table = writer(env.server, env.attacker, SIGNED, env.mine).create_table(f"{ATT}.{name}", schema=ROWS)
    url = f"{root(env.server)}/v1/{env.mine}/namespaces/{ATT}/tables/{name}"
    config = signed(env.attacker, "GET", url, b"", **{"X-Iceberg-Access-Delegation": SIGNED}).json()["config"]
    signer = f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}"
    return Own(signer, config["s3.endpoint"], table.location().removeprefix(f"s3://{env.mine}/"))


def send(
    answer: httpx.Response, method: str, own: dict[str, str] | None = None, body: bytes | None = None
) -> httpx.Response:
    assert answer.status_code == 200, answer.text
    signed_answer = answer.json()
    headers = {name: ", ".join(values) for name, values in signed_answer["headers"].items()}
    return httpx.request(method, signed_answer["uri"], headers={**(own or {}), **headers}, content=body)


def codes(answer: httpx.Response) -> list[str]:
    return re.findall("<Code>(.*?)</Code>", answer.text)


def exists(env: Env, bucket: str, key: str) -> bool:
    try:
        env.s3.head_object(Bucket=bucket, Key=key)
    except Exception:
        return False
    return True


def refused_by_signer(answer: httpx.Response) -> bool:
    return answer.status_code == 403 and answer.json()["error"]["type"] == FORBIDDEN


def test_x_amz_headers_left_out_of_the_signing_request_are_refused_by_the_store(env: Env) -> None:
    """The allow-list binds only what the caller shows the signer: a caller can have a bare PUT of its
    own key signed and add `x-amz-copy-source` (another warehouse's file), `x-amz-acl` or metadata
    when it sends it. SeaweedFS refuses any x-amz header outside SignedHeaders (as AWS does)."""
    vb, vk = victim(env)
    own = own_table(env)
    target = own.uri(env, "data/stolen.parquet")
    assert send(sign_at(own.signer, "PUT", target), "PUT", body=b"mine").status_code == 200
    for extra in ({"x-amz-copy-source": f"/{vb}/{vk}"}, {"x-amz-acl": "public-read"}, {"X-Amz-Meta-a": "1"}):
        answer = send(sign_at(own.signer, "PUT", target), "PUT", extra, body=b"")
        assert answer.status_code == 403 and codes(answer) == ["SignatureDoesNotMatch"], (extra, answer.text)
    got = env.s3.get_object(Bucket=env.mine, Key=f"{own.folder}/data/stolen.parquet")["Body"].read()
    assert got == b"mine"


def test_odd_requests_are_refused_by_the_writers_signer(env: Env) -> None:
    own = own_table(env)
    base = own.uri(env, "data/x.parquet")
    host = own.endpoint.partition("://")[2]
    inside = f"/{env.mine}/{own.folder}/data/y"
    cases: dict[str, tuple[str, str, dict[str, list[str]]]] = {
        "empty query names": ("PUT", base + "?&&", {}),
        "uploads twice": ("POST", base + "?uploads&uploads", {}),
        "uploads with a value": ("POST", base + "?uploads=1", {}),
        "an upload id with & once decoded": ("DELETE", base + "?uploadId=a%26b", {}),
        "an empty upload id": ("DELETE", base + "?uploadId=", {}),
        "part number 0": ("PUT", base + "?partNumber=0&uploadId=abc", {}),
        "part number 10001": ("PUT", base + "?partNumber=10001&uploadId=abc", {}),
        "a part number in other digits": ("PUT", base + "?partNumber=%D9%A1&uploadId=abc", {}),
        "a part without its upload": ("PUT", base + "?partNumber=1", {}),
        "versionId": ("GET", base + "?versionId=1", {}),
        "acl": ("PUT", base + "?acl", {}),
        "batch delete of the table's folder": ("POST", f"{own.endpoint}/{env.mine}/{own.folder}?delete", {}),
        "batch delete of the bucket": ("POST", f"{own.endpoint}/{env.mine}?delete", {}),
        "an upload begun outside the table": ("POST", f"{own.endpoint}/{env.mine}/victims/x?uploads", {}),
        "an upload aborted outside the table": (
            "DELETE",
            f"{own.endpoint}/{env.mine}/victims/x?uploadId=abc",
            {},
        ),
        "userinfo": ("GET", base.replace("://", "://u:p@"), {}),
        "port 80": ("GET", base.replace(host, host.split(":")[0] + ":80"), {}),
        "a NUL": ("GET", base + "%00", {}),
        "a trailing slash": ("GET", base + "/", {}),
        "a dot segment encoded": ("GET", own.uri(env, "%2E%2E/%2E%2E/victims/x"), {}),
        "PATCH": ("PATCH", base, {}),
        "a relative uri": ("GET", f"/{env.mine}/{own.folder}/x", {}),
        "a header value with CRLF": ("GET", base, {"Range": ["bytes=0-1\r\nx-amz-acl: public-read"]}),
        "x-amz-acl twice in two cases": (
            "PUT",
            base,
            {"X-Amz-Acl": ["private"], "x-amz-acl": ["public-read"]},
        ),
        "x-amz-acl with whitespace": ("PUT", base, {" x-amz-acl\t": ["public-read"]}),
        "a copy range without a copy": ("PUT", base, {"x-amz-copy-source-range": ["bytes=0-1"]}),
        "a copy condition without a copy": ("PUT", base, {"X-Amz-Copy-Source-If-Match": ["e"]}),
        "a copy of a version": ("PUT", base, {"x-amz-copy-source": [inside + "?versionId=1"]}),
        "a copy through dot segments": (
            "PUT",
            base,
            {"x-amz-copy-source": [f"/{env.mine}/{own.folder}/%2E%2E/y"]},
        ),
        "a copy from a bucket with %2F": (
            "PUT",
            base,
            {"x-amz-copy-source": [f"/{env.mine}%2F{own.folder}/y"]},
        ),
        "a copy from a doubled slash": ("PUT", base, {"x-amz-copy-source": [f"//{env.mine}/{own.folder}/y"]}),
        "a copy onto a GET": ("GET", base, {"x-amz-copy-source": [inside]}),
        "a copy onto an upload's start": ("POST", base + "?uploads", {"x-amz-copy-source": [inside]}),
        "a copy from outside in another case": (
            "PUT",
            base,
            {"x-amz-copy-source": [inside], "X-AMZ-COPY-SOURCE": ["/o/k"]},
        ),
    }
    for what, (method, uri, headers) in cases.items():
        answer = sign_at(own.signer, method, uri, headers)
        assert refused_by_signer(answer), (what, answer.status_code, answer.text)


def test_what_is_signed_is_the_canonical_request_built(env: Env) -> None:
    """Spellings the parser takes are signed as the one request they name, never as written."""
    own = own_table(env)
    canonical = own.uri(env, "data/x.parquet")
    encoded_bucket = "/" + "".join(f"%{ord(c):02X}" for c in env.mine) + "/"
    for spelling in (
        canonical.replace("http://", "HTTP://"),
        canonical.replace(f"/{env.mine}/", encoded_bucket),
        canonical + "?",
    ):
        answer = sign_at(own.signer, "GET", spelling)
        assert answer.status_code == 200 and answer.json()["uri"] == canonical, (spelling, answer.text)
    odd = sign_at(own.signer, "GET", canonical + ";x%252F+y")
    assert odd.json()["uri"] == canonical + "%3Bx%252F%2By"
    lower = sign_at(own.signer, "put", canonical)
    assert lower.status_code == 200 and "UNSIGNED-PAYLOAD" in json.dumps(lower.json())
    # What the caller says of the payload, or keys and tokens of its own, is not what is signed.
    for header in ("x-amz-content-sha256", "x-amz-security-token", "Authorization", "Host"):
        answer = sign_at(own.signer, "PUT", canonical, {header: ["STREAMING-AWS4-HMAC-SHA256-PAYLOAD"]})
        assert answer.status_code == 200
        assert "STREAMING" not in json.dumps(answer.json()), header
    part = sign_at(own.signer, "PUT", canonical + "?uploadId=abc&partNumber=0001")
    assert part.json()["uri"] == canonical + "?partNumber=0001&uploadId=abc"


def test_a_copy_source_decodes_at_seaweedfs_as_the_signer_checked_it(env: Env) -> None:
    """`+` is a plus, `%3F` a question mark in the key (no version), `%252F` no slash: SeaweedFS copies
    the object the signer checked, or none."""
    own = own_table(env)
    env.s3.put_object(Bucket=env.mine, Key=f"{own.folder}/data/a b", Body=b"SPACE")
    env.s3.put_object(Bucket=env.mine, Key=f"{own.folder}/data/plain", Body=b"PLAIN")
    target = own.uri(env, "data/dest")
    for source, copied in (
        (f"/{env.mine}/{own.folder}/data/a+b", None),
        (f"/{env.mine}/{own.folder}/data/plain%3FversionId%3Dnull", None),
        (f"/{env.mine}/{own.folder}/data/plain%252F", None),
        (f"{env.mine}/{own.folder}/data/a%20b", b"SPACE"),
    ):
        answer = send(sign_at(own.signer, "PUT", target, {"x-amz-copy-source": [source]}), "PUT",
                      {"x-amz-copy-source": source})  # fmt: skip
        assert answer.status_code == (200 if copied else 404), (source, answer.text)
        if copied:
            assert env.s3.get_object(Bucket=env.mine, Key=f"{own.folder}/data/dest")["Body"].read() == copied
            env.s3.delete_object(Bucket=env.mine, Key=f"{own.folder}/data/dest")


def test_a_copy_source_signed_as_one_value_with_a_comma_is_refused(env: Env) -> None:
    """A copy source signed as one value `inside,/victim` would match a request sending it as two
    header lines (the canonical form joins them with a comma): refused before it is signed."""
    vb, vk = victim(env, env.mine)
    own = own_table(env)
    inside = f"/{env.mine}/{own.folder}/data/x"
    answer = sign_at(
        own.signer, "PUT", own.uri(env, "data/dest"), {"x-amz-copy-source": [f"{inside},/{vb}/{vk}"]}
    )
    assert refused_by_signer(answer), answer.text


def test_a_copy_source_with_a_comma_or_several_values_is_refused(env: Env) -> None:
    own = own_table(env)
    inside = f"/{env.mine}/{own.folder}/data/x"
    outside = f"/{env.other}/victims/t/data/f.parquet"
    for values in ([f"{inside},{outside}"], [inside, outside]):
        answer = sign_at(own.signer, "PUT", own.uri(env, "data/dest"), {"x-amz-copy-source": values})
        assert refused_by_signer(answer), (values, answer.text[:200])


def _traversing_upload_ids(env: Env, upload: str, victim_key: str) -> list[str]:
    folder = victim_key.rsplit("/", 2)[0]
    return [f"{upload}/../../{folder}", f"../{folder}", f"../../{env.mine}/{folder}"]


def test_upload_ids_with_dot_segments_reach_nothing_at_seaweedfs(env: Env) -> None:
    """An upload id the store uses as a folder name, with `..` in it, on an abort, a part and a
    completion of the caller's own key: SeaweedFS refuses each, the victim's folder stays."""
    vb, vk = victim(env, env.mine)  # the same bucket: a store's path join would reach it
    own = own_table(env)
    target = own.uri(env, "data/up.parquet")
    begun = send(sign_at(own.signer, "POST", f"{target}?uploads"), "POST")
    upload = begun.text.split("<UploadId>")[1].split("</UploadId>")[0]
    for upload_id in _traversing_upload_ids(env, upload, vk):
        encoded = quote(upload_id, safe="")
        for method, query in (("DELETE", f"uploadId={encoded}"), ("PUT", f"partNumber=1&uploadId={encoded}"),
                              ("POST", f"uploadId={encoded}")):  # fmt: skip
            answer = sign_at(own.signer, method, f"{target}?{query}")
            if answer.status_code == 200:
                made = send(answer, method, body=b"<CompleteMultipartUpload/>" if method == "POST" else b"x")
                assert made.status_code >= 400, (method, upload_id, made.text)
            assert exists(env, vb, vk), (method, upload_id)
    assert send(sign_at(own.signer, "DELETE", f"{target}?uploadId={upload}"), "DELETE").status_code == 204


def test_the_signer_refuses_upload_ids_with_dot_segments(env: Env) -> None:
    own = own_table(env)
    target = own.uri(env, "data/up.parquet")
    for upload_id in ("abc/../../victims/t", "../victims", "a/./b", "a//b", "/abc"):
        answer = sign_at(own.signer, "DELETE", f"{target}?uploadId={quote(upload_id, safe='')}")
        assert refused_by_signer(answer), (upload_id, answer.text)


def test_an_upload_of_another_tables_key_cannot_be_aborted_or_completed_from_ones_own_key(env: Env) -> None:
    """The upload id of the owner's upload on a key in another namespace, sent with a key of the
    attacker's table (the only key the signer signs): SeaweedFS ties an upload to its key."""
    owner_keys = env.s3
    victim_key = f"victims/u{uuid.uuid4().hex[:6]}/data/big.parquet"
    upload = owner_keys.create_multipart_upload(Bucket=env.mine, Key=victim_key)["UploadId"]
    own = own_table(env)
    target = own.uri(env, "data/up.parquet")
    for method in ("DELETE", "POST"):
        answer = sign_at(own.signer, method, f"{target}?uploadId={quote(upload, safe='')}")
        assert answer.status_code == 200, answer.text  # the signer cannot tell whose upload it is
        made = send(answer, method, body=b"<CompleteMultipartUpload/>" if method == "POST" else None)
        assert made.status_code >= 400, (method, made.text)
    listed = owner_keys.list_multipart_uploads(Bucket=env.mine, Prefix="victims/")
    assert any(u["UploadId"] == upload for u in listed.get("Uploads", []))
    owner_keys.abort_multipart_upload(Bucket=env.mine, Key=victim_key, UploadId=upload)


def test_grants_follow_their_table_through_drop_register_and_a_staged_create_committed_elsewhere(
    env: Env,
) -> None:
    owners = writer(env.server, env.owner, SIGNED, env.mine)
    name = f"rp_{uuid.uuid4().hex[:6]}"
    table = owners.create_table(f"{ATT}.{name}", schema=ROWS)
    table.append(rows((1, "a")))
    table = owners.load_table(f"{ATT}.{name}")
    data = next(f.file.file_path for f in table.scan().plan_files()).removeprefix(f"s3://{env.mine}/")
    url = f"{root(env.server)}/v1/{env.mine}/namespaces/{ATT}/tables/{name}"
    config = signed(env.attacker, "GET", url, b"", **{"X-Iceberg-Access-Delegation": SIGNED}).json()["config"]
    signer = f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}"
    uri = f"{config['s3.endpoint']}/{env.mine}/{data}"
    assert sign_at(signer, "GET", uri).status_code == 200
    owners.drop_table(f"{ATT}.{name}")
    assert refused_by_signer(sign_at(signer, "GET", uri))
    # The same metadata registered again under the same name: the same table (uuid, location) in a
    # namespace the caller's policy allows, which it could load again anyway: the grant signs.
    owners.register_table(f"{ATT}.{name}", table.metadata_location)
    assert sign_at(signer, "GET", uri).status_code == 200
    # Registered in another namespace: refused (its location is att's), so the grant cannot follow it.
    owners.create_namespace_if_not_exists("payroll")
    owners.drop_table(f"{ATT}.{name}")
    with pytest.raises(Exception, match="not inside its namespace"):
        owners.register_table(f"payroll.{name}", table.metadata_location)
    assert refused_by_signer(sign_at(signer, "GET", uri))
    # A staged create's grant, once the caller committed that create under another name: refused.
    staged_name = f"st_{uuid.uuid4().hex[:6]}"
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    body = {"name": staged_name, "schema": json.loads(schema.model_dump_json()), "stage-create": True}
    tables = f"{root(env.server)}/v1/{env.mine}/namespaces/{ATT}/tables"
    staged = signed(
        env.attacker, "POST", tables, json.dumps(body).encode(), **{"X-Iceberg-Access-Delegation": SIGNED}
    )
    staged_config, meta = staged.json()["config"], staged.json()["metadata"]
    staged_signer = f"{staged_config['s3.signer.uri']}/{staged_config['s3.signer.endpoint']}"
    location = meta["location"]
    inside = f"{staged_config['s3.endpoint']}/{env.mine}/{location.removeprefix(f's3://{env.mine}/')}/data/x.parquet"
    assert sign_at(staged_signer, "PUT", inside).status_code == 200
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": meta["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": meta["format-version"]},
            {"action": "add-schema", "schema": meta["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": meta["partition-specs"][0]},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": meta["sort-orders"][0]},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": location},
        ],
    }
    made = signed(env.attacker, "POST", f"{tables}/{staged_name}_b", json.dumps(commit).encode())
    assert made.status_code == 200, made.text
    answer = sign_at(staged_signer, "PUT", inside)
    assert refused_by_signer(answer) and "load the table again" in answer.text


# -- 500s at the writers' signer: each is a bug ------------------------------------------------


def _raw(signer: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \udXXX, which JSON allows and Python decodes back.
    return httpx.post(signer, content=json.dumps(body).encode())


def test_a_malformed_ipv6_uri_is_refused_by_the_writers_signer_not_a_500(env: Env) -> None:
    own = own_table(env)
    answer = sign_at(own.signer, "GET", f"http://[::1/{env.mine}/{own.folder}/x")
    assert answer.status_code in (400, 403), answer.text


def test_a_huge_part_number_is_refused_not_a_500(env: Env) -> None:
    own = own_table(env)
    answer = sign_at(own.signer, "PUT", own.uri(env, "x?partNumber=" + "9" * 5000 + "&uploadId=abc"))
    assert answer.status_code == 403, answer.text


def test_lone_surrogates_are_refused_by_the_writers_signer_not_a_500(env: Env) -> None:
    own = own_table(env)
    base = own.uri(env, "data/x.parquet")
    for body in (
        {"method": "GET", "uri": base + "\ud800", "headers": {}},
        {"method": "GET", "uri": base, "headers": {"Range": ["\ud800"]}},
        {"method": "GET", "uri": base, "headers": {"x-amz-meta-\ud800": ["1"]}},
        {"method": "G\ud800", "uri": base, "headers": {}},
    ):
        answer = _raw(own.signer, body)
        assert answer.status_code in (400, 403), (body, answer.text)


def test_header_names_with_separators_or_control_characters_are_refused(env: Env) -> None:
    own = own_table(env)
    base = own.uri(env, "data/x.parquet")
    for name in ("x-amz-meta-a\r\nx-amz-acl", "x-amz-meta-a:b", "x-amz-meta-a;x-amz-acl", "x-amz-meta-a b"):
        answer = sign_at(own.signer, "PUT", base, {name: ["v"]})
        assert refused_by_signer(answer), (name, answer.text[:300])


# -- (b) the recipients' signer -------------------------------------------------------------------


@pytest.fixture(scope="module")
def recipients(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    """An external SQL catalog on SeaweedFS: `customer` shared (history and latest), `customerx` (a
    location extending customer's) and `private` not; `aaa_broken` shared beside customer."""
    seaweed.client().create_bucket(Bucket=REST_BUCKET)
    tmp = tmp_path_factory.mktemp("rv-rest")
    catalogs = {
        "wh": {
            "type": "sql",
            "uri": f"sqlite:///{tmp / 'catalog.db'}",
            "warehouse": f"s3://{REST_BUCKET}/wh",
            "s3.endpoint": seaweed.endpoint,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
            "s3.region": seaweed.region,
        }
    }
    deployment = deploy(tmp, seaweed.storage_config(), catalogs)
    catalog = deployment.catalogs.catalog("wh")
    catalog.create_namespace("tpch")
    for name in ("customer", "customerx", "private", "aaa_broken"):
        table = catalog.create_table(f"tpch.{name}", CUSTOMER, location=f"s3://{REST_BUCKET}/wh/tpch/{name}")
        table.append(customers(1, 5).cast(table.schema().as_arrow()))
    spec = TableSpec.parse
    store = deployment.store
    store.create_share("ice", [spec("tpch:customer:uniform:wh:tpch:customer")])
    store.create_share("latest", [spec("tpch:customer:uniform:wh:tpch:customer")], history_shared=False)
    both = [spec("a:aaa_broken:uniform:wh:tpch:aaa_broken"), spec("b:customer:uniform:wh:tpch:customer")]
    store.create_share("mixed", both)
    store.create_share("mixedlatest", both, history_shared=False)
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def rsign(
    deployment: Deployment, token: str, method: str, uri: str, headers: dict[str, list[str]] | None = None
) -> httpx.Response:
    url = deployment.endpoint.removesuffix("/delta-sharing") + "/iceberg/v1/aws/s3/sign"
    body = {"method": method, "region": "us-east-1", "uri": uri, "headers": headers or {}}
    headers_sent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return httpx.post(url, content=json.dumps(body).encode(), headers=headers_sent)


def data_url(deployment: Deployment, name: str) -> str:
    table = deployment.catalogs.catalog("wh").load_table(f"tpch.{name}")
    path = next(iter(table.scan().plan_files())).file.file_path
    return f"{deployment.config.storage['endpoint']}/{path.removeprefix('s3://')}"


def test_odd_requests_are_refused_by_the_recipients_signer(recipients: Deployment) -> None:
    endpoint = recipients.config.storage["endpoint"]
    token = recipients.token("ice")
    ok = data_url(recipients, "customer")
    assert rsign(recipients, token, "GET", ok).status_code == 200
    scheme, _, host = endpoint.partition("://")
    private = data_url(recipients, "private").removeprefix(endpoint + "/")
    for what, (method, uri, headers) in {
        "a table whose location extends the shared one's": ("GET", data_url(recipients, "customerx"), {}),
        "another table": ("GET", f"{endpoint}/{private}", {}),
        "dot segments encoded": ("GET", f"{endpoint}/{REST_BUCKET}/wh/tpch/customer/%2E%2E/private/x", {}),
        "a version": ("GET", ok + "?versionId=1", {}),
        "a huge part number": ("GET", ok + "?partNumber=" + "9" * 5000, {}),
        "a write": ("PUT", ok, {}),
        "a copy source": ("GET", ok, {"x-amz-copy-source": [f"/{private}"]}),
        "the host form": ("GET", f"{scheme}://{REST_BUCKET}.{host}/{private}", {}),
        "an unsigned x-amz header": ("GET", ok, {"x-amz-request-payer": ["requester"]}),
    }.items():
        answer = rsign(recipients, token, method, uri, headers)
        assert answer.status_code == 403 and answer.json()["error"]["type"] == FORBIDDEN, (what, answer.text)


def test_malformed_uris_and_surrogates_are_refused_by_the_recipients_signer_not_a_500(
    recipients: Deployment,
) -> None:
    token = recipients.token("ice")
    ok = data_url(recipients, "customer")
    for method, uri, headers in (
        ("GET", "http://[::1/x/y", {}),
        ("GET", ok + "\ud800", {}),
        ("GET", ok, {"Range": ["\ud800"]}),
        ("G\ud800", ok, {}),
    ):
        answer = rsign(recipients, token, method, uri, headers)
        assert answer.status_code in (400, 403), (method, uri, answer.text)


def test_a_broken_table_in_a_share_does_not_stop_its_neighbours_signatures(recipients: Deployment) -> None:
    catalog = recipients.catalogs.catalog("wh")
    manifest_list = catalog.load_table("tpch.aaa_broken").metadata.current_snapshot().manifest_list
    recipients.seaweed.client().delete_object(  # type: ignore[attr-defined]
        Bucket=REST_BUCKET, Key=manifest_list.removeprefix(f"s3://{REST_BUCKET}/")
    )
    ok = data_url(recipients, "customer")
    for share in ("mixed", "mixedlatest"):
        answer = rsign(recipients, recipients.token(share), "GET", ok)
        assert answer.status_code == 200, (share, answer.text)


def test_the_recipients_signer_refuses_bad_revoked_and_named_recipients_tokens_with_a_403(
    recipients: Deployment,
) -> None:
    """The token is checked in the same worker trip as the signature: a wrong secret, a revoked
    token and a named recipient's token at the URL naming no share are each a 403 in the Iceberg
    error model, with nothing signed, and counted as refused."""
    ok = data_url(recipients, "customer")
    store = recipients.store
    revoked, secret = store.create_token("ice", None, "revoked")
    store.revoke_token("ice", revoked.id)
    store.create_recipient("acme-signer")
    store.grant_share("acme-signer", "ice")
    _, named = store.create_recipient_token("acme-signer", None)
    metrics_url = recipients.endpoint.removesuffix("/delta-sharing") + "/metrics"

    def refused() -> float:
        lines = httpx.get(metrics_url).text.splitlines()
        return sum(
            float(line.split()[-1])
            for line in lines
            if "iceberg_signatures_total{" in line and "refused" in line
        )

    before = refused()
    for token in ("no-such-secret", secret, named):
        answer = rsign(recipients, token, "GET", ok)
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["type"] == FORBIDDEN and "uri" not in answer.json()
    assert refused() - before == 3

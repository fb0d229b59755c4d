"""A user whose policy allows one namespace attacks this session's REST 1.11 surfaces on the
writers' catalog: scan plans (their ids and tasks) of tables it may not read, and replays of
another caller's Idempotency-Key. Each must be refused in the Iceberg error model and leak nothing
(no file names, no stored answer)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog

from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.iceberg.plan_runs import PENDING, WORKERS
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3
from tests.catalog_attacks import ATT, ROWS, assert_refused, attacker_policy
from tests.conftest import Deployment, deploy
from tests.end_to_end import test_iceberg_one_token as one_token
from tests.end_to_end.test_iceberg_one_token import provider  # noqa: F401  (a fixture)
from tests.end_to_end.test_scan_planning import Gate, plan_runs_of
from tests.end_to_end.test_warehouse_catalog import (
    WAREHOUSE,
    aistor_catalog,
    catalog_root,
    owner,  # noqa: F401  (a fixture)
    signed,
)


def url(deployment: Deployment, namespace: str, table: str, tail: str = "") -> str:
    base = f"{catalog_root(deployment)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}"
    return f"{base}/{tail}" if tail else base


@pytest.fixture(scope="module")
def writer(s3: Deployment, owner: IssuedUser) -> Catalog:  # noqa: F811
    catalog = aistor_catalog(s3, owner)
    catalog.create_namespace_if_not_exists(ATT)
    return catalog


@pytest.fixture(scope="module")
def attacker(s3: Deployment, writer: Catalog) -> IssuedUser:
    return CatalogUsers(s3.store.transactions, s3.secret).create(
        f"att-{uuid.uuid4().hex[:6]}", attacker_policy(WAREHOUSE)
    )


@pytest.fixture(scope="module")
def theirs(writer: Catalog) -> tuple[str, str, list[str]]:
    """A table of another namespace with one data file: (namespace, table, its file paths)."""
    namespace, name = f"ns_{uuid.uuid4().hex[:8]}", "secret"
    writer.create_namespace(namespace)
    table = writer.create_table(f"{namespace}.{name}", schema=ROWS)
    table.append(pa.table({"id": [1], "name": ["s"]}, schema=ROWS))
    files = [task.file.file_path for task in table.scan().plan_files()]
    return namespace, name, files


def leaks(text: str, files: list[str]) -> bool:
    return any(path in text or path.rsplit("/", 1)[-1] in text for path in files)


def test_plans_ids_and_tasks_of_another_namespaces_table_are_refused_and_name_no_file(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    attacker: IssuedUser,
    theirs: tuple[str, str, list[str]],
) -> None:
    namespace, name, files = theirs
    planned = signed(attacker, "POST", url(s3, namespace, name, "plan"), b"{}")
    assert_refused(planned, {403, 404}, what="plan of another namespace's table")
    assert not leaks(planned.text, files)
    # The owner's own plan id (and a plan task) handed to the attacker: refused, nothing named.
    mine = signed(owner, "POST", url(s3, namespace, name, "plan"), b"{}")
    assert mine.status_code == 200, mine.text
    plan_id = mine.json()["plan-id"]
    for method in ("GET", "DELETE"):
        answer = signed(attacker, method, url(s3, namespace, name, f"plan/{plan_id}"))
        assert_refused(answer, {403, 404}, what=f"{method} of the owner's plan id")
        assert not leaks(answer.text, files)
    # The plan id used on the attacker's own table: not that table's plan.
    own = f"t{uuid.uuid4().hex[:6]}"
    aistor_catalog(s3, attacker).create_table(f"{ATT}.{own}", schema=ROWS)
    answer = signed(attacker, "GET", url(s3, ATT, own, f"plan/{plan_id}"))
    assert_refused(answer, 404, "NoSuchPlanIdException")
    tasks = signed(
        attacker, "POST", url(s3, namespace, name, "tasks"), json.dumps({"plan-task": plan_id}).encode()
    )
    assert_refused(tasks, {403, 404}, what="tasks of another namespace's table")
    assert not leaks(tasks.text, files)
    # The owner's plan is still there (the attacker's DELETE cancelled nothing).
    kept = signed(owner, "GET", url(s3, namespace, name, f"plan/{plan_id}"))
    assert kept.status_code == 200 and kept.json()["status"] == "completed", kept.text


def test_a_plan_id_outlives_nothing_its_table_dropped_and_its_name_taken_again(
    s3: Deployment, attacker: IssuedUser
) -> None:
    """The attacker's own plan id after its table is dropped and another table made with its name
    (files of its own it did not plan): unknown, the new table's files never answered by it."""
    catalog = aistor_catalog(s3, attacker)
    name = f"t{uuid.uuid4().hex[:6]}"
    catalog.create_table(f"{ATT}.{name}", schema=ROWS).append(
        pa.table({"id": [1], "name": ["old"]}, schema=ROWS)
    )
    plan = signed(attacker, "POST", url(s3, ATT, name, "plan"), b"{}")
    assert plan.status_code == 200, plan.text
    plan_id = plan.json()["plan-id"]
    # Renamed away: the old name has no plan; the new name's answer names none but its own files.
    moved = f"{name}_moved"
    catalog.rename_table(f"{ATT}.{name}", f"{ATT}.{moved}")
    assert_refused(signed(attacker, "GET", url(s3, ATT, name, f"plan/{plan_id}")), 404)
    catalog.create_table(f"{ATT}.{name}", schema=ROWS).append(
        pa.table({"id": [3], "name": ["squatter"]}, schema=ROWS)
    )
    squatter = signed(attacker, "GET", url(s3, ATT, name, f"plan/{plan_id}"))
    assert_refused(squatter, 404, "NoSuchPlanIdException", what="a plan id at a name taken again")
    catalog.drop_table(f"{ATT}.{name}")
    catalog.rename_table(f"{ATT}.{moved}", f"{ATT}.{name}")
    catalog.drop_table(f"{ATT}.{name}")
    gone = signed(attacker, "GET", url(s3, ATT, name, f"plan/{plan_id}"))
    assert_refused(gone, 404)
    again = catalog.create_table(f"{ATT}.{name}", schema=ROWS)
    again.append(pa.table({"id": [2], "name": ["new"]}, schema=ROWS))
    new_files = [task.file.file_path for task in again.scan().plan_files()]
    answer = signed(attacker, "GET", url(s3, ATT, name, f"plan/{plan_id}"))
    assert_refused(answer, 404, "NoSuchPlanIdException", what="a plan id of the dropped table")
    assert not leaks(answer.text, new_files)
    tasks = signed(attacker, "POST", url(s3, ATT, name, "tasks"), json.dumps({"plan-task": plan_id}).encode())
    assert_refused(tasks, 404)


def test_a_plan_whose_filter_is_huge_or_deep_is_a_400(s3: Deployment, attacker: IssuedUser) -> None:
    name = f"t{uuid.uuid4().hex[:6]}"
    aistor_catalog(s3, attacker).create_table(f"{ATT}.{name}", schema=ROWS)
    # Written out by hand: json.dumps itself recurses too deep for this filter.
    levels = 5000
    leaf = '{"type": "eq", "term": "id", "value": 1}'
    deep = '{"filter": ' + '{"type": "not", "child": ' * levels + leaf + "}" * levels + "}"
    wide = json.dumps({"filter": {"type": "in", "term": "id", "values": list(range(2_000_000))}})
    for body in (deep, wide):
        answer = signed(attacker, "POST", url(s3, ATT, name, "plan"), body.encode())
        assert answer.status_code in (400, 413), answer.text[:300]
        assert answer.json()["error"]["code"] == answer.status_code


def test_another_callers_idempotency_key_replays_nothing_to_the_attacker(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
    attacker: IssuedUser,
    theirs: tuple[str, str, list[str]],
) -> None:
    namespace, name, _ = theirs
    key = str(uuid.uuid4())
    body = json.dumps({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "1"}}]}).encode()  # fmt: skip
    first = signed(owner, "POST", url(s3, namespace, name), body, **{"Idempotency-Key": key})
    assert first.status_code == 200, first.text
    replay = signed(attacker, "POST", url(s3, namespace, name), body, **{"Idempotency-Key": key})
    assert_refused(replay, 403, "ForbiddenException", what="the owner's key replayed by the attacker")
    assert "metadata-location" not in replay.text
    # The attacker's own key, used once in its namespace and again on another warehouse's path: 422
    # (or refused as not its to touch), never the first answer.
    own = f"t{uuid.uuid4().hex[:6]}"
    aistor_catalog(s3, attacker).create_table(f"{ATT}.{own}", schema=ROWS)
    mine = str(uuid.uuid4())
    done = signed(attacker, "POST", url(s3, ATT, own), body, **{"Idempotency-Key": mine})
    assert done.status_code == 200, done.text
    elsewhere = url(s3, ATT, own).replace(f"/v1/{WAREHOUSE}/", "/v1/other-warehouse-x/")
    moved = signed(attacker, "POST", elsewhere, body, **{"Idempotency-Key": mine})
    assert moved.status_code in (403, 404, 422), moved.text
    assert moved.content != done.content
    for bad in ("x" * 10_000, "not-a-uuid", "../" + mine):
        refused = signed(attacker, "POST", url(s3, ATT, own), body, **{"Idempotency-Key": bad})
        assert_refused(refused, 400, "BadRequestException", what=f"key {bad[:20]!r}")


SIGNED = "remote-signing"
JAVA_1_11 = {"X-Client-Version": "Apache Iceberg 1.11.0 (commit x)"}


def test_many_plans_past_their_budget_at_once_are_429_beyond_the_bound_not_more_threads(
    s3: Deployment, attacker: IssuedUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that says it polls floods `POST …/plan` with distinct scans while planning is slow:
    past WORKERS+PENDING runs the server answers 429 (Iceberg error model), and never runs more
    planning threads than its pool."""
    name = f"t{uuid.uuid4().hex[:6]}"
    aistor_catalog(s3, attacker).create_table(f"{ATT}.{name}", schema=ROWS).append(
        pa.table({"id": [1], "name": ["x"]}, schema=ROWS)
    )
    runs = plan_runs_of(s3)
    monkeypatch.setattr(runs, "budget", 0.1)
    gate = Gate(monkeypatch)
    answers = []
    try:
        for n in range(WORKERS + PENDING + 6):
            body = json.dumps({"filter": {"type": "eq", "term": "id", "value": 1000 + n}}).encode()
            answers.append(signed(attacker, "POST", url(s3, ATT, name, "plan"), body, **JAVA_1_11))
        threads = [t for t in threading.enumerate() if t.name.startswith("scan-plan")]
    finally:
        gate.open.set()
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) <= WORKERS + PENDING, statuses
    limited = [a for a in answers if a.status_code == 429]
    assert limited, statuses
    assert set(statuses) <= {200, 429}, statuses
    for answer in limited:
        assert_refused(answer, 429)
    assert len(threads) <= WORKERS, [t.name for t in threads]


# -- the writers' spec signer (`POST …/tables/{t}/sign`) as the one-namespace user ----------------------


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    """A server that signs writers' requests (the session's `s3` server does not)."""
    env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": SIGNED,
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    deployment = deploy(
        tmp_path_factory.mktemp("hostile-sign"), seaweed.storage_config(path_style="true"), env=env
    )
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def signing_writer(deployment: Deployment, user: IssuedUser, warehouse: str) -> Catalog:
    return load_catalog(
        f"sign-{uuid.uuid4().hex[:6]}",
        **{
            "uri": catalog_root(deployment),
            "warehouse": warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "local",
            "client.region": "local",
            "client.access-key-id": user.access_key,
            "client.secret-access-key": user.secret_key,
            "header.X-Iceberg-Access-Delegation": SIGNED,
        },
    )


def test_the_spec_signer_signs_nothing_outside_the_one_namespace_users_table(signing: Deployment) -> None:
    """The path names the attacker's own table; every URI or header reaching past it is refused in
    the Iceberg error model, and the victims' files are still there afterwards."""
    users = CatalogUsers(signing.store.transactions, signing.secret)
    boss = users.create(f"boss-{uuid.uuid4().hex[:6]}")
    mine_wh, other_wh = f"hs-{uuid.uuid4().hex[:6]}", f"hs-{uuid.uuid4().hex[:6]}"
    for name in (mine_wh, other_wh):
        made = signed(
            boss, "POST", f"{catalog_root(signing)}/v1/warehouses", json.dumps({"name": name}).encode()
        )
        assert made.status_code == 200, made.text
    victims: list[tuple[str, str]] = []
    for warehouse in (mine_wh, other_wh):
        catalog = signing_writer(signing, boss, warehouse)
        catalog.create_namespace("victims")
        table = catalog.create_table("victims.kept", schema=ROWS)
        table.append(pa.table({"id": [1], "name": ["secret"]}, schema=ROWS))
        path = next(t.file.file_path for t in catalog.load_table("victims.kept").scan().plan_files())
        bucket, _, key = path.removeprefix("s3://").partition("/")
        victims.append((bucket, key))
    signing_writer(signing, boss, mine_wh).create_namespace(ATT)
    attacker = users.create(f"att-{uuid.uuid4().hex[:6]}", attacker_policy(mine_wh))
    own = signing_writer(signing, attacker, mine_wh).create_table(f"{ATT}.mine", schema=ROWS)
    folder = own.location().removeprefix(f"s3://{mine_wh}/")
    loaded = signed(
        attacker, "GET", url_in(signing, mine_wh, ATT, "mine"), b"", **{"X-Iceberg-Access-Delegation": SIGNED}
    )
    assert loaded.status_code == 200, loaded.text
    endpoint = loaded.json()["config"]["s3.endpoint"]
    host = endpoint.partition("://")[2]
    (vb, vk), (ob, ok) = victims
    inside = f"{endpoint}/{mine_wh}/{folder}/data/x.parquet"

    def sign(
        method: str, uri: str, headers: dict[str, list[str]] | None = None, **more: str
    ) -> httpx.Response:
        body = {"method": method, "region": "us-east-1", "uri": uri, "headers": headers or {}, **more}
        return signed(
            attacker, "POST", url_in(signing, mine_wh, ATT, "mine", "sign"), json.dumps(body).encode()
        )

    assert sign("GET", inside).status_code == 200  # the control: its own table is signed
    delete = f"<Delete><Object><Key>{vk}</Key></Object></Delete>"
    cases: dict[str, tuple[str, str, dict[str, list[str]], dict[str, str]]] = {
        "another namespace's table": ("GET", f"{endpoint}/{vb}/{vk}", {}, {}),
        "another warehouse's bucket": ("GET", f"{endpoint}/{ob}/{ok}", {}, {}),
        "a fragment": ("GET", f"{inside}#/../../../victims/kept", {}, {}),
        "a fragment before the victim": ("GET", f"{endpoint}/{vb}/{vk}#{folder}/data/x", {}, {}),
        "a query naming the victim": ("GET", f"{endpoint}/{vb}?prefix={folder}/{vk}", {}, {}),
        "dot segments": ("GET", f"{endpoint}/{mine_wh}/{folder}/../../{vk}", {}, {}),
        "encoded dot segments": ("GET", f"{endpoint}/{mine_wh}/{folder}/%2E%2E/%2E%2E/{vk}", {}, {}),
        "an encoded slash after the bucket": ("GET", f"{endpoint}/{mine_wh}%2F{vk}", {}, {}),
        "an encoded slash into the table": ("GET", f"{endpoint}/{mine_wh}/{ATT}%2F..%2F{vk}", {}, {}),
        "a virtual host": ("GET", f"http://{vb}.{host}/{vk}", {}, {}),
        "a virtual host of its own bucket, the victim's key": (
            "GET",
            f"http://{mine_wh}.{host}/{vk}",
            {},
            {},
        ),
        "a copy of another table's object": ("PUT", inside, {"x-amz-copy-source": [f"/{vb}/{vk}"]}, {}),
        "a copy of another warehouse's object": ("PUT", inside, {"x-amz-copy-source": [f"/{ob}/{ok}"]}, {}),
        "an upload begun on the victim": ("POST", f"{endpoint}/{vb}/{vk}?uploads", {}, {}),
        "the victim's acl": ("PUT", f"{endpoint}/{vb}/{vk}?acl", {}, {}),
        "its own acl": ("GET", f"{inside}?acl", {}, {}),
        "a batch delete of the victim": ("POST", f"{endpoint}/{vb}?delete", {}, {"body": delete}),
        "a delete of the victim": ("DELETE", f"{endpoint}/{vb}/{vk}", {}, {}),
    }
    for what, (method, uri, headers, more) in cases.items():
        answer = sign(method, uri, headers, **more)
        assert_refused(answer, {400, 403}, what=what)
    store = signing.seaweed.client()  # type: ignore[attr-defined]
    for bucket, key in victims:
        assert store.get_object(Bucket=bucket, Key=key)["Body"].read()[:4] == b"PAR1"


def url_in(deployment: Deployment, warehouse: str, namespace: str, table: str, tail: str = "") -> str:
    base = f"{catalog_root(deployment)}/v1/{warehouse}/namespaces/{namespace}/tables/{table}"
    return f"{base}/{tail}" if tail else base


# -- the recipients' spec signer (`/iceberg/v1/…/tables/{t}/sign`): a recipient of a restricted share ---


def test_the_recipients_spec_signer_signs_none_of_another_recipients_or_tables_files(
    provider: dict[str, Any],  # noqa: F811
) -> None:
    """acme, naming north's customers (restricted to its nation), asks for zeta's derived files or
    south's orders spelled past the signer's checks: refused; its own file is signed."""
    tokens, endpoint = provider["tokens"], provider["seaweed"].endpoint
    acme, zeta = tokens["acme"], tokens["zeta"]
    mine = one_token.data_files(
        one_token.catalog(provider, acme, "north", **one_token.SIGNED).load_table("sales.customers")
    )
    theirs = one_token.data_files(
        one_token.catalog(provider, zeta, "north", **one_token.SIGNED).load_table("sales.customers")
    )
    orders = one_token.data_files(
        one_token.catalog(provider, acme, "south", **one_token.SIGNED).load_table("ops.orders")
    )

    def uri(location: str) -> str:
        return f"{endpoint}/{location.removeprefix('s3://')}"

    def sign(method: str, target: str, headers: dict[str, list[str]] | None = None) -> httpx.Response:
        more = {"headers": headers} if headers else None
        return one_token.spec_sign(provider, acme, "/shares/north", "sales/customers", method, target, more)

    assert sign("GET", uri(mine[0])).status_code == 200
    host = endpoint.partition("://")[2]
    own_folder = uri(mine[0]).rsplit("/", 1)[0]
    bucket, _, their_key = theirs[0].removeprefix("s3://").partition("/")
    cases: dict[str, tuple[str, str, dict[str, list[str]]]] = {
        "a fragment hiding the other's file": ("GET", f"{uri(theirs[0])}#{mine[0]}", {}),
        "a fragment after its own": ("GET", f"{uri(mine[0])}#/../{their_key}", {}),
        "a query after the other's file": ("GET", f"{uri(theirs[0])}?x={mine[0]}", {}),
        "dot segments": ("GET", f"{own_folder}/../../{their_key}", {}),
        "encoded dot segments": ("GET", f"{own_folder}/%2E%2E/%2E%2E/{their_key}", {}),
        "an encoded slash": ("GET", f"{endpoint}/{bucket}%2F{their_key}", {}),
        "a virtual host": ("GET", f"http://{bucket}.{host}/{their_key}", {}),
        "another table's file": ("GET", uri(orders[0]), {}),
        "a copy of the other's file": (
            "PUT",
            uri(mine[0]),
            {"x-amz-copy-source": [f"/{bucket}/{their_key}"]},
        ),
        "an upload": ("POST", f"{uri(mine[0])}?uploads", {}),
        "its acl": ("GET", f"{uri(mine[0])}?acl", {}),
    }
    for what, (method, target, headers) in cases.items():
        assert_refused(sign(method, target, headers), {400, 403}, what=what)


def test_a_key_reused_on_another_warehouses_path_is_422_and_changes_nothing_there(
    s3: Deployment,
    owner: IssuedUser,  # noqa: F811
) -> None:
    """The same caller, the same key and body, sent to the same-named table of another warehouse:
    not the first answer replayed for it, a 422, and that table untouched."""
    second = f"wh-{uuid.uuid4().hex[:6]}"
    made = signed(owner, "POST", f"{catalog_root(s3)}/v1/warehouses", json.dumps({"name": second}).encode())
    assert made.status_code == 200, made.text
    namespace, name = f"ns_{uuid.uuid4().hex[:6]}", "t"
    for warehouse in (WAREHOUSE, second):
        catalog = aistor_catalog(s3, owner, warehouse)
        catalog.create_namespace(namespace)
        catalog.create_table(f"{namespace}.{name}", schema=ROWS)
    body = json.dumps({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "1"}}]}).encode()  # fmt: skip
    key = str(uuid.uuid4())
    first = signed(owner, "POST", url(s3, namespace, name), body, **{"Idempotency-Key": key})
    assert first.status_code == 200, first.text
    there = url(s3, namespace, name).replace(f"/v1/{WAREHOUSE}/", f"/v1/{second}/")
    reused = signed(owner, "POST", there, body, **{"Idempotency-Key": key})
    assert_refused(reused, 422, "UnprocessableEntityException", what="a key on another warehouse's path")
    assert "k" not in aistor_catalog(s3, owner, second).load_table(f"{namespace}.{name}").properties


def test_forged_plan_tasks_and_plan_ids_are_4xx_in_the_error_model(
    s3: Deployment, attacker: IssuedUser
) -> None:
    """Plan tasks and ids the server never made (huge, of the wrong type, encoded dot segments,
    a NUL): a 400 or 404, never a 500 nor anything planned."""
    name = f"t{uuid.uuid4().hex[:6]}"
    aistor_catalog(s3, attacker).create_table(f"{ATT}.{name}", schema=ROWS)
    tasks = url(s3, ATT, name, "tasks")
    bodies: list[Any] = [
        {"plan-task": "x" * 200_000},
        {"plan-task": 7},
        {"plan-task": None},
        {},
        [],
        {"plan-task": "."},
    ]
    for body in bodies:
        answer = signed(attacker, "POST", tasks, json.dumps(body).encode())
        assert_refused(answer, {400, 404}, what=f"plan task {str(body)[:40]}")
    # (A bare ".." is resolved by httpx itself into the table's own URL: not the server's to refuse.)
    for plan_id in ("%2E%2E", "a" * 10_000, "%00"):
        for method in ("GET", "DELETE"):
            answer = signed(attacker, method, url(s3, ATT, name, f"plan/{plan_id}"))
            assert answer.status_code in (400, 404, 414), (
                plan_id[:20],
                answer.status_code,
                answer.text[:200],
            )
            if answer.status_code != 414:
                assert_refused(answer, {400, 404}, what=f"{method} plan {plan_id[:20]}")

"""Server-side scan planning end to end: pyiceberg 0.12 with `scan-planning-mode=server` against
`/_iceberg` (a writer's own warehouse) and `/iceberg` (a recipient's share), on SeaweedFS, reading
what a client-planned read of the same table reads; plan tasks fetched through `/tasks`; tokens of
another table, forged or unknown refused in the spec's error model."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from bench.scan_planning import files as bench_files
from share_store.catalog.users import IssuedUser
from share_store.iceberg import scan_plans
from share_store.iceberg.plan_runs import PlanRuns
from tests.conftest import Deployment
from tests.end_to_end.test_iceberg_deletes import rows_of as delete_rows_of
from tests.end_to_end.test_iceberg_rest import (
    DELETE_TABLES,
    DELTA_TABLES,
    as_rows,
    catalog_uri,
    delta_shares,
    recipient,
    scanned,
    seaweed_server,
    source_rows,
    spark_rows_of,
    spark_tables,
)
from tests.end_to_end.test_replicas import ADMIN_TOKEN as REPLICA_ADMIN_TOKEN
from tests.end_to_end.test_replicas import replicas, root
from tests.end_to_end.test_restricted_iceberg import (
    DELTA_BUCKET,
    DELTA_COLUMNS,
    DELTA_WHERE,
    OWN_COLUMNS,
    SIGNED,
    assert_raw_file_allowed,
    assert_same_rows,
    delta_allowed,
    delta_table,
    deployment,
    named_files,
    own_allowed,
    own_table,
    restricted_share,
    through_signer,
)
from tests.end_to_end.test_restricted_iceberg import catalog_uri as restricted_catalog_uri
from tests.end_to_end.test_restricted_iceberg import cli as restricted_cli
from tests.end_to_end.test_restricted_iceberg import recipient as restricted_recipient
from tests.end_to_end.test_warehouse_catalog import aistor_catalog, catalog_root, owner, signed

__all__ = [
    "delta_shares",
    "delta_table",
    "deployment",
    "own_table",
    "owner",
    "root",
    "seaweed_server",
    "spark_tables",
]  # fixtures of other modules, used here

WAREHOUSE = "analytics"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))


def rows(table: Any, **scan: Any) -> list[tuple[Any, ...]]:
    frame = table.scan(**scan).to_arrow().to_pylist()
    return sorted(tuple(row.values()) for row in frame)


def server_planned(deployment: Deployment, user: IssuedUser) -> Catalog:
    """The writers' pyiceberg catalog, planning on the server."""
    catalog = aistor_catalog(deployment, user)
    catalog.properties["scan-planning-mode"] = "server"
    assert catalog.supports_server_side_planning()
    return catalog


def plan_url(deployment: Deployment, namespace: str, table: str, tail: str = "plan") -> str:
    return f"{catalog_root(deployment)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}/{tail}"


@pytest.fixture(scope="module")
def writer(s3: Deployment, owner: IssuedUser) -> Catalog:
    return aistor_catalog(s3, owner)


@pytest.fixture(scope="module")
def regions(s3: Deployment, writer: Catalog) -> tuple[str, str]:
    """A partitioned table of three appends and a delete (pyiceberg writes it copy-on-write)."""
    namespace, name = f"ns_{uuid.uuid4().hex[:8]}", "regions"
    writer.create_namespace(namespace)
    table = writer.create_table(f"{namespace}.{name}", SCHEMA, partition_spec=SPEC)
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    for start, region in ((0, "eu"), (100, "us"), (200, "eu")):
        table.append(pa.Table.from_pylist([{"id": start + i, "region": region} for i in range(5)], arrow))
    table.delete("id = 3")
    return namespace, name


def test_the_writers_catalog_lists_the_planning_endpoints(s3: Deployment, owner: IssuedUser) -> None:
    config = signed(owner, "GET", f"{catalog_root(s3)}/v1/config?warehouse={WAREHOUSE}").json()
    for endpoint in (
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    ):
        assert endpoint in config["endpoints"]


def test_pyiceberg_planning_on_the_writers_server_reads_what_client_planning_reads(
    s3: Deployment, owner: IssuedUser, writer: Catalog, regions: tuple[str, str]
) -> None:
    namespace, name = regions
    local = writer.load_table(f"{namespace}.{name}")
    remote = server_planned(s3, owner).load_table(f"{namespace}.{name}")
    assert rows(remote) == rows(local) and len(rows(local)) == 14
    for row_filter in ("region = 'eu'", "id >= 102"):
        assert rows(remote, row_filter=row_filter) == rows(local, row_filter=row_filter)
        planned = {task.file.file_path for task in remote.scan(row_filter=row_filter).plan_files()}
        assert planned == {task.file.file_path for task in local.scan(row_filter=row_filter).plan_files()}
    # A partition filter prunes on the server: only the eu files are planned.
    eu = list(remote.scan(row_filter="region = 'eu'").plan_files())
    assert eu and all(task.file.partition[0] == "eu" for task in eu)
    assert rows(remote, selected_fields=("id",)) == rows(local, selected_fields=("id",))
    first = local.metadata.snapshots[0].snapshot_id
    assert rows(remote, snapshot_id=first) == rows(local, snapshot_id=first)


def test_a_plan_answer_is_spec_shaped_and_bad_requests_are_400(
    s3: Deployment, owner: IssuedUser, regions: tuple[str, str]
) -> None:
    namespace, name = regions
    url = plan_url(s3, namespace, name)
    answer = signed(
        owner, "POST", url, json.dumps({"filter": {"type": "eq", "term": "region", "value": "us"}}).encode()
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "completed" and body["plan-id"]
    files = [task["data-file"] for task in body["file-scan-tasks"]]
    assert files and all(f["content"] == "data" and f["file-format"] == "parquet" for f in files)
    assert all(f["partition"] == ["us"] and f["record-count"] > 0 for f in files)
    for bad in (
        {"filter": {"type": "eq", "term": "no_such_column", "value": 1}},
        {"filter": {"type": "frobnicate"}},
        {"select": ["no_such_column"]},
        {"snapshot-id": 12345},
        {"start-snapshot-id": 1, "end-snapshot-id": 2},
        {"filter": _deep(200)},
    ):
        refused = signed(owner, "POST", url, json.dumps(bad).encode())
        assert refused.status_code == 400, (bad, refused.text)
        assert refused.json()["error"]["code"] == 400
    assert signed(owner, "POST", url, b"[not json").status_code == 400


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "eq", "term": "id", "value": 1}
    for _ in range(levels):
        node = {"type": "not", "child": node}
    return node


def test_plan_ids_and_tasks_of_another_table_or_forged_are_refused(
    s3: Deployment, owner: IssuedUser, writer: Catalog, regions: tuple[str, str]
) -> None:
    namespace, name = regions
    other = writer.create_table(f"{namespace}.other_{uuid.uuid4().hex[:6]}", SCHEMA)
    other_name = other.name()[-1]
    plan_id = signed(owner, "POST", plan_url(s3, namespace, name), b"{}").json()["plan-id"]
    fetched = signed(owner, "GET", plan_url(s3, namespace, name, f"plan/{plan_id}"))
    assert fetched.status_code == 200 and fetched.json()["file-scan-tasks"]
    assert signed(owner, "DELETE", plan_url(s3, namespace, name, f"plan/{plan_id}")).status_code == 204
    for table, pid in ((other_name, plan_id), (name, "nope"), (name, plan_id[:-2] + "AA")):
        for method in ("GET", "DELETE"):
            missing = signed(owner, method, plan_url(s3, namespace, table, f"plan/{pid}"))
            assert missing.status_code == 404, missing.text
            assert missing.json()["error"]["type"] == "NoSuchPlanIdException"
    # A plan id is no plan task, and a plan task made for one table is refused for another.
    tasks = signed(
        owner, "POST", plan_url(s3, namespace, name, "tasks"), json.dumps({"plan-task": plan_id}).encode()
    )
    assert tasks.status_code == 404 and tasks.json()["error"]["type"] == "NoSuchPlanTaskException"


def test_a_large_plan_is_answered_in_plan_tasks_fetched_through_tasks(
    s3: Deployment, owner: IssuedUser, writer: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With at most 2 tasks an answer (the server runs in this process), a table of one manifest
    of 7 files and 3 more manifests is planned in plan tasks and pages of them; pyiceberg follows
    them all and reads what it reads planning itself."""
    namespace, name = f"ns_{uuid.uuid4().hex[:8]}", "wide"
    writer.create_namespace(namespace)
    table = writer.create_table(f"{namespace}.{name}", SCHEMA, partition_spec=SPEC)
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    table.append(pa.Table.from_pylist([{"id": i, "region": f"r{i}"} for i in range(7)], arrow))
    for i in range(3):
        table.append(pa.Table.from_pylist([{"id": 100 + i, "region": "late"}], arrow))
    monkeypatch.setattr(scan_plans, "TASKS_PER_ANSWER", 2)
    body = signed(owner, "POST", plan_url(s3, namespace, name), b"{}").json()
    assert body["status"] == "completed" and "file-scan-tasks" not in body and len(body["plan-tasks"]) >= 2
    remote = server_planned(s3, owner).load_table(f"{namespace}.{name}")
    local = writer.load_table(f"{namespace}.{name}")
    planned = [task.file.file_path for task in remote.scan().plan_files()]
    assert len(planned) == len(set(planned)) == 10
    assert set(planned) == {task.file.file_path for task in local.scan().plan_files()}
    assert rows(remote) == rows(local)
    # Each page's follow-up is a plan task of this table only: refused for another, forged refused.
    first = body["plan-tasks"][0]
    page = signed(
        owner, "POST", plan_url(s3, namespace, name, "tasks"), json.dumps({"plan-task": first}).encode()
    )
    assert page.status_code == 200 and len(page.json()["file-scan-tasks"]) == 2
    other = writer.create_table(f"{namespace}.other", SCHEMA).name()[-1]
    for table_name, task in ((other, first), (name, first[:-3] + "abc"), (name, "x.y")):
        url = plan_url(s3, namespace, table_name, "tasks")
        refused = signed(owner, "POST", url, json.dumps({"plan-task": task}).encode())
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["type"] == "NoSuchPlanTaskException"
    assert signed(owner, "POST", plan_url(s3, namespace, name, "tasks"), b"{}").status_code == 400


JAVA_1_11 = {"X-Client-Version": "Apache Iceberg 1.11.0 (commit 0123abc)"}


def plan_runs_of(deployment: Deployment) -> PlanRuns:
    """The running server's plans past their budget (it runs in this process)."""
    app: Any = deployment.server.app
    return cast(PlanRuns, app.state.services.plan_runs)


class Gate:
    """Holds every plan the server makes until opened: a plan "longer than the budget", at will."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        made = scan_plans.plan

        def held(*args: Any, **kwargs: Any) -> Any:
            assert self.open.wait(60), "the test never let the plan finish"
            return made(*args, **kwargs)

        monkeypatch.setattr(scan_plans, "plan", held)


def test_a_plan_past_its_budget_is_submitted_to_a_client_that_polls_and_fetched_by_its_id(
    s3: Deployment, owner: IssuedUser, writer: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java's client (1.11) polls a submitted plan: past the budget it is told `submitted`, and
    `GET …/plan/{plan-id}` answers the plan once made, of the snapshot current when it was asked
    for, whatever is committed meanwhile. pyiceberg 0.12, which cannot poll, is always answered."""
    namespace, name = f"ns_{uuid.uuid4().hex[:8]}", "slow"
    writer.create_namespace(namespace)
    table = writer.create_table(f"{namespace}.{name}", SCHEMA, partition_spec=SPEC)
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    table.append(pa.Table.from_pylist([{"id": i, "region": "eu"} for i in range(3)], arrow))
    before = {task.file.file_path for task in writer.load_table(f"{namespace}.{name}").scan().plan_files()}
    runs = plan_runs_of(s3)
    monkeypatch.setattr(runs, "budget", 0.2)
    gate = Gate(monkeypatch)
    url = plan_url(s3, namespace, name)
    submitted = signed(owner, "POST", url, b"{}", **JAVA_1_11)
    assert submitted.status_code == 200, submitted.text
    body = submitted.json()
    assert body["status"] == "submitted" and body["plan-id"], body
    by_id = f"{url}/{body['plan-id']}"
    assert signed(owner, "GET", by_id, b"", **JAVA_1_11).json() == {
        "status": "submitted",
        "plan-id": body["plan-id"],
    }
    table.append(pa.Table.from_pylist([{"id": 9, "region": "us"}], arrow))  # after the plan was asked for
    gate.open.set()
    for _ in range(50):
        polled = signed(owner, "GET", by_id, b"", **JAVA_1_11).json()
        if polled["status"] != "submitted":
            break
        time.sleep(0.1)
    assert polled["status"] == "completed", polled
    assert {t["data-file"]["file-path"] for t in polled["file-scan-tasks"]} == before
    # pyiceberg 0.12 is never told `submitted`: it raises on it. Held past the budget, it still reads.
    gate.open.clear()
    threading.Timer(0.5, gate.open.set).start()
    remote = server_planned(s3, owner).load_table(f"{namespace}.{name}")
    assert rows(remote) == rows(writer.load_table(f"{namespace}.{name}"))
    # A cancelled plan says so; an id of another table is unknown, as ever.
    gate.open.clear()
    other = signed(owner, "POST", url, b"{}", **JAVA_1_11).json()
    assert other["status"] == "submitted"
    assert signed(owner, "DELETE", f"{url}/{other['plan-id']}", b"", **JAVA_1_11).status_code == 204
    assert signed(owner, "GET", f"{url}/{other['plan-id']}", b"", **JAVA_1_11).json() == {
        "status": "cancelled"
    }
    gate.open.set()
    stranger = signed(
        owner, "GET", plan_url(s3, namespace, "nope") + f"/{other['plan-id']}", b"", **JAVA_1_11
    )
    assert stranger.status_code == 404


def test_a_shared_table_plan_past_its_budget_is_submitted_and_polled(
    seaweed_server: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = plan_runs_of(seaweed_server)
    monkeypatch.setattr(runs, "budget", 0.2)
    gate = Gate(monkeypatch)
    url = f"{catalog_uri(seaweed_server)}/v1/namespaces/tpch/tables/customer/plan"
    headers = {"Authorization": f"Bearer {seaweed_server.token('ice')}", **JAVA_1_11}
    body = httpx.post(url, json={}, headers=headers).json()
    assert body["status"] == "submitted", body
    gate.open.set()
    for _ in range(50):
        polled = httpx.get(f"{url}/{body['plan-id']}", headers=headers).json()
        if polled["status"] != "submitted":
            break
        time.sleep(0.1)
    local = recipient(seaweed_server, "ice").load_table("tpch.customer")
    assert polled["status"] == "completed", polled
    planned = {t["data-file"]["file-path"] for t in polled["file-scan-tasks"]}
    assert planned == {task.file.file_path for task in local.scan().plan_files()}
    # The plan id is the token's: another token of the share does not fetch it.
    other = {"Authorization": f"Bearer {seaweed_server.token('ice')}", **JAVA_1_11}
    assert httpx.get(f"{url}/{body['plan-id']}", headers=other).status_code == 404


# -- the recipients' share catalog (`/iceberg`) -----------------------------------------------


def server_recipient(server: Deployment, share: str) -> RestCatalog:
    catalog = recipient(server, share, **{"scan-planning-mode": "server"})
    assert catalog.supports_server_side_planning()
    return catalog


def test_a_shared_iceberg_table_planned_on_the_server_reads_what_client_planning_reads(
    seaweed_server: Deployment,
) -> None:
    for share in ("ice", "latest"):
        local = recipient(seaweed_server, share).load_table("tpch.customer")
        remote = server_recipient(seaweed_server, share).load_table("tpch.customer")
        assert scanned(remote) == scanned(local) == source_rows(seaweed_server)
        planned = {task.file.file_path for task in remote.scan().plan_files()}
        assert planned == {task.file.file_path for task in local.scan().plan_files()}
        assert remote.scan(row_filter="custkey >= 6").to_arrow().num_rows == 3
    # With history shared, an older snapshot is planned; without, only the current one is visible.
    older = recipient(seaweed_server, "ice").load_table("tpch.customer").metadata.snapshots[0].snapshot_id
    remote = server_recipient(seaweed_server, "ice").load_table("tpch.customer")
    assert scanned(remote, older) == source_rows(seaweed_server, snapshot_id=older)
    url = f"{catalog_uri(seaweed_server)}/v1/namespaces/tpch/tables/customer/plan"
    headers = {"Authorization": f"Bearer {seaweed_server.token('latest')}"}
    hidden = httpx.post(url, json={"snapshot-id": older}, headers=headers)
    assert hidden.status_code == 400, hidden.text
    # A table the token's share does not hold is not planned.
    other = httpx.post(url.replace("tpch/tables/customer", "sales/tables/private"), json={}, headers=headers)
    assert other.status_code == 404


def test_a_shared_iceberg_plan_task_is_bound_to_its_table_and_token(
    seaweed_server: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan_plans, "TASKS_PER_ANSWER", 1)
    root = f"{catalog_uri(seaweed_server)}/v1/namespaces/tpch/tables"
    token = seaweed_server.token("ice")
    headers = {"Authorization": f"Bearer {token}"}
    body = httpx.post(f"{root}/customer/plan", json={}, headers=headers).json()
    assert len(body["plan-tasks"]) == 2  # two appends: two manifests of one file each
    remote = server_recipient(seaweed_server, "ice").load_table("tpch.customer")
    assert scanned(remote) == source_rows(seaweed_server)
    task = {"plan-task": body["plan-tasks"][0]}
    assert httpx.post(f"{root}/customer/tasks", json=task, headers=headers).status_code == 200
    refused = [
        httpx.post(f"{root}/external/tasks", json=task, headers=headers),  # another table
        # Another token of the same share.
        httpx.post(
            f"{root}/customer/tasks",
            json=task,
            headers={"Authorization": f"Bearer {seaweed_server.token('ice')}"},
        ),
    ]
    for answer in refused:
        assert answer.status_code == 404 and answer.json()["error"]["type"] == "NoSuchPlanTaskException"
    unknown = httpx.delete(f"{root}/customer/plan/nope", headers=headers)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "NoSuchPlanIdException"
    assert httpx.delete(f"{root}/customer/plan/{body['plan-id']}", headers=headers).status_code == 204


@pytest.mark.parametrize("name", DELTA_TABLES)
def test_a_shared_delta_table_planned_on_the_server_reads_what_client_planning_reads(
    seaweed_server: Deployment, delta_shares: str, name: str
) -> None:
    for share in ("deltas", "deltalatest"):
        local = recipient(seaweed_server, share).load_table(f"db.{name}")
        remote = server_recipient(seaweed_server, share).load_table(f"db.{name}")
        expected = as_rows(local.scan().to_arrow().to_pandas())
        assert as_rows(remote.scan().to_arrow().to_pandas()).equals(expected)
        planned = {task.file.file_path for task in remote.scan().plan_files()}
        assert planned == {task.file.file_path for task in local.scan().plan_files()}


def test_the_share_catalog_lists_the_planning_endpoints(seaweed_server: Deployment) -> None:
    headers = {"Authorization": f"Bearer {seaweed_server.token('ice')}"}
    config = httpx.get(f"{catalog_uri(seaweed_server)}/v1/config", headers=headers).json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan" in config["endpoints"]
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks" in config["endpoints"]


# -- restricted shared tables (issue 50): only their allowed and derived files ----------------


@pytest.mark.parametrize(("fixture", "name", "key"), [("delta_table", "sales.customers", "custkey"),
                                                     ("own_table", "shop.orders", "id")])  # fmt: skip
def test_a_restricted_table_is_planned_over_its_allowed_and_derived_files_only(
    deployment: Deployment, request: pytest.FixtureRequest, fixture: str, name: str, key: str
) -> None:
    shared = request.getfixturevalue(fixture)
    token = shared["token"]
    local = restricted_recipient(deployment, token, **SIGNED).load_table(name)
    remote = restricted_recipient(deployment, token, **SIGNED, **{"scan-planning-mode": "server"}).load_table(
        name
    )
    assert remote.catalog.supports_server_side_planning()
    assert_same_rows(remote.scan().to_arrow().to_pandas(), shared["expected"], key)
    planned = {task.file.file_path for task in remote.scan().plan_files()}
    assert planned == {task.file.file_path for task in local.scan().plan_files()}
    # Every planned file is one the restricted manifests name: no original of a derived file.
    named = {location for location, info in named_files(local).items() if info["kind"] == "data"}
    assert planned <= named
    originals = {f"s3://{DELTA_BUCKET}/{original}" for original in shared.get("originals", [])}
    assert not planned & originals


@pytest.mark.parametrize(("fixture", "name", "columns", "allowed"), [
    ("delta_table", "sales.customers", DELTA_COLUMNS, delta_allowed),
    ("own_table", "shop.orders", OWN_COLUMNS, own_allowed),
])  # fmt: skip
def test_every_file_a_restricted_plan_names_read_raw_holds_only_allowed_rows_and_columns(
    deployment: Deployment,
    request: pytest.FixtureRequest,
    fixture: str,
    name: str,
    columns: list[str],
    allowed: Callable[[Any], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan's own JSON, as a hostile client reads it: every data file named inline and through
    plan tasks (pages of one task), fetched through the signer and read as it is, deletes ignored:
    no row outside the filter, no column outside the list."""
    monkeypatch.setattr(scan_plans, "TASKS_PER_ANSWER", 1)  # plan tasks and pages too
    token = request.getfixturevalue(fixture)["token"]
    namespace, table = name.split(".")
    url = f"{restricted_catalog_uri(deployment)}/v1/namespaces/{namespace}/tables/{table}"
    headers = {"Authorization": f"Bearer {token}"}
    answers = [settled(lambda: httpx.post(f"{url}/plan", json={}, headers=headers, timeout=120)).json()]
    pending = list(answers[0].get("plan-tasks", []))
    while pending:
        page = httpx.post(f"{url}/tasks", json={"plan-task": pending.pop()}, headers=headers, timeout=120)
        assert page.status_code == 200, page.text
        answers.append(page.json())
        pending += page.json().get("plan-tasks", [])
    data = {task["data-file"]["file-path"] for a in answers for task in a.get("file-scan-tasks", [])}
    deletes = {file["file-path"] for a in answers for file in a.get("delete-files", [])}
    assert data
    partitions = named_files(restricted_recipient(deployment, token, **SIGNED).load_table(name))
    for location in data:
        assert_raw_file_allowed(
            through_signer(deployment, token, location), partitions[location], columns, allowed
        )
    for location in deletes:  # a delete file names data files and positions, never a cut column's values
        assert through_signer(deployment, token, location)[:4] in (b"PAR1", b"PFA1")


def test_a_completed_plan_carries_vended_keys_when_asked_for(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    url = f"{restricted_catalog_uri(deployment)}/v1/namespaces/sales/tables/customers/plan"
    headers = {"Authorization": f"Bearer {delta_table['token']}"}
    signed_plan = httpx.post(
        url, json={}, headers=headers | {"X-Iceberg-Access-Delegation": "remote-signing"}
    )
    assert signed_plan.status_code == 200 and "storage-credentials" not in signed_plan.json()
    vended = httpx.post(url, json={}, headers=headers | {"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert vended.status_code == 200, vended.text
    credentials = vended.json()["storage-credentials"]
    assert credentials and all(c["prefix"].startswith("s3://") for c in credentials)
    assert all("s3.access-key-id" in c["config"] for c in credentials)
    assert vended.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("name", DELETE_TABLES)
def test_a_shared_table_with_delete_files_planned_on_the_server_reads_as_spark_reads_it(
    seaweed_server: Deployment, spark_tables: dict[str, Any], name: str
) -> None:
    """Spark's position and equality deletes: each task carries its delete files (by index into
    the answer's `delete-files`), and the rows are Spark's."""
    remote = server_recipient(seaweed_server, "deletes").load_table(f"db.{name}")
    local = recipient(seaweed_server, "deletes").load_table(f"db.{name}")
    tasks = list(remote.scan().plan_files())
    assert any(task.delete_files for task in tasks)
    as_planned = {t.file.file_path: sorted(d.file_path for d in t.delete_files) for t in tasks}
    locally = {
        t.file.file_path: sorted(d.file_path for d in t.delete_files) for t in local.scan().plan_files()
    }
    assert as_planned == locally
    for snapshot in (spark_tables[name]["snapshots"][-1], spark_tables[name]["snapshots"][2]):
        got = remote.scan(snapshot_id=snapshot["snapshot_id"]).to_arrow().to_pylist()
        assert delete_rows_of(got, name) == spark_rows_of(snapshot)


def test_a_changed_restriction_makes_the_plans_made_under_the_old_one_unknown(
    deployment: Deployment, delta_table: dict[str, Any], tmp_path: Path
) -> None:
    """A plan id (and so its plan tasks, bound alike) names the restriction's metadata."""
    share = f"replanned_{uuid.uuid4().hex[:6]}"
    spec = f"customers:delta:{DELTA_BUCKET}:customers"
    token = restricted_share(deployment, tmp_path, share, "sales", spec, DELTA_WHERE, DELTA_COLUMNS)
    table = f"{restricted_catalog_uri(deployment)}/v1/namespaces/sales/tables/customers"
    headers = {"Authorization": f"Bearer {token}"}
    body = settled(lambda: httpx.post(f"{table}/plan", json={}, headers=headers, timeout=120)).json()
    plan = f"{table}/plan/{body['plan-id']}"
    assert settled(lambda: httpx.get(plan, headers=headers, timeout=120)).status_code == 200
    narrower = ["--where", "acctbal > 150 AND region = 'emea'"]
    assert restricted_cli(deployment, "share", "restrict", share, "sales/customers", *narrower) == 0
    stale = settled(lambda: httpx.get(plan, headers=headers, timeout=120))
    assert stale.status_code == 404 and stale.json()["error"]["type"] == "NoSuchPlanIdException"
    # Planned again, the scan is the new restriction's.
    local = restricted_recipient(deployment, token, **SIGNED).load_table("sales.customers")
    remote = restricted_recipient(deployment, token, **SIGNED, **{"scan-planning-mode": "server"})
    frame = remote.load_table("sales.customers").scan().to_arrow().to_pandas()
    assert len(frame) == len(local.scan().to_arrow()) and (frame.acctbal > 150).all()
    assert 0 < len(frame) < len(delta_table["expected"])


def settled(call: Callable[[], httpx.Response], seconds: float = 120.0) -> httpx.Response:
    """`call()` again while a restricted table's derived files are being written (503)."""
    deadline = time.monotonic() + seconds
    answer = call()
    while answer.status_code == 503 and time.monotonic() < deadline:
        time.sleep(float(answer.headers.get("retry-after", "1")))
        answer = call()
    return answer


def test_a_restriction_that_keeps_no_rows_is_an_empty_table_planned_to_nothing(
    deployment: Deployment, delta_table: dict[str, Any], tmp_path: Path
) -> None:
    """No file of the table holds a row the restriction keeps: the generated version lists no
    manifest (pyiceberg writes no empty one), so the load answers and both plans are empty."""
    share = f"nothing_{uuid.uuid4().hex[:6]}"
    spec = f"customers:delta:{DELTA_BUCKET}:customers"
    where = "acctbal > 100000 AND region = 'emea'"
    token = restricted_share(deployment, tmp_path, share, "sales", spec, where, DELTA_COLUMNS)
    table = f"{restricted_catalog_uri(deployment)}/v1/namespaces/sales/tables/customers"
    headers = {"Authorization": f"Bearer {token}"}
    assert settled(lambda: httpx.get(table, headers=headers, timeout=120)).status_code == 200
    body = settled(lambda: httpx.post(f"{table}/plan", json={}, headers=headers, timeout=120)).json()
    assert body["status"] == "completed" and not body.get("file-scan-tasks") and not body.get("plan-tasks")
    for properties in ({}, {"scan-planning-mode": "server"}):
        loaded = restricted_recipient(deployment, token, **SIGNED, **properties).load_table("sales.customers")
        assert loaded.scan().to_arrow().num_rows == 0


# -- replicas: the plan's tokens are the server's key's, not a process's ------------------------


def test_a_plan_made_on_one_replica_is_fetched_from_the_other(
    tmp_path: Path, postgres_url: str, root: Path
) -> None:
    """Two server processes on one PostgreSQL store and one key: a plan of 1,100 files made on one
    answers plan tasks that the other answers in full, as pyiceberg planning there reads."""
    with replicas(tmp_path, postgres_url, root) as (a, b):
        bearer = {"Authorization": f"Bearer {REPLICA_ADMIN_TOKEN}"}
        made = httpx.post(f"{a.url}/_iceberg/v1/warehouses", json={"name": "planned"}, headers=bearer)
        assert made.status_code == 200, made.text
        writer = load_catalog("a", uri=f"{a.url}/_iceberg", warehouse="planned", token=REPLICA_ADMIN_TOKEN)
        writer.create_namespace("ns")
        table = writer.create_table("ns.wide", SCHEMA)
        for start, count in ((0, 1000), (1000, 100)):
            with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
                for data_file in bench_files(start, count, table.location()):
                    append.append_data_file(data_file)
        url = "/_iceberg/v1/planned/namespaces/ns/tables/wide"
        body = httpx.post(f"{a.url}{url}/plan", json={}, headers=bearer).json()
        assert "file-scan-tasks" not in body and len(body["plan-tasks"]) == 2
        paths = []
        for task in body["plan-tasks"]:
            page = httpx.post(f"{b.url}{url}/tasks", json={"plan-task": task}, headers=bearer)
            assert page.status_code == 200, page.text
            paths += [t["data-file"]["file-path"] for t in page.json()["file-scan-tasks"]]
        assert len(paths) == len(set(paths)) == 1100
        assert httpx.get(f"{b.url}{url}/plan/{body['plan-id']}", headers=bearer).status_code == 200
        reader = load_catalog(
            "b", uri=f"{b.url}/_iceberg", warehouse="planned", token=REPLICA_ADMIN_TOKEN,
            **{"scan-planning-mode": "server"},
        )  # fmt: skip
        planned = {task.file.file_path for task in reader.load_table("ns.wide").scan().plan_files()}
        assert planned == set(paths)

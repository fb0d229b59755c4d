"""The scan planner's own rules (`share_store.iceberg.scan_plans`), on real pyiceberg tables of a
SQLite catalog over local files: what a plan request may be, the tokens' binding, paging of large
plans and the spec's JSON of a file. The HTTP side is tests/end_to_end/test_scan_planning.py."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField

from share_store.errors import InvalidParameter
from share_store.iceberg import scan_plans
from share_store.iceberg.scan_plans import NoSuchPlanId, NoSuchPlanTask, PlanTokens, ScanAsked
from share_store.signing.token_codec import TokenCodec

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "day", DateType()))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("day", pa.date32())])


@pytest.fixture
def table(tmp_path: Path) -> Any:
    """Four appends of one file each, partitioned by day; then one append of three days."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "day"))
    made = catalog.create_table("n.t", SCHEMA, partition_spec=spec)
    for i in range(4):
        made.append(pa.Table.from_pylist([{"id": i, "day": datetime.date(2024, 1, 1 + i)}], ARROW))
    days = [{"id": 10 + i, "day": datetime.date(2024, 2, 1 + i)} for i in range(3)]
    made.append(pa.Table.from_pylist(days, ARROW))
    return catalog.load_table("n.t")


def tokens() -> PlanTokens:
    return PlanTokens(TokenCodec(b"k" * 32, "scan-plan"))


def asked(**body: Any) -> ScanAsked:
    return scan_plans.parse_plan_request(json.dumps(body).encode())


def all_paths(table: Any, scan: ScanAsked, made: PlanTokens, bound: str) -> list[str]:
    """Every data file a plan names, following its plan tasks as a client does."""
    plan, _ = scan_plans.plan(table, scan, made, bound)
    paths = [task["data-file"]["file-path"] for task in plan.file_scan_tasks]
    pending = list(plan.plan_tasks)
    while pending:
        page = scan_plans.fetch_tasks(table, pending.pop(0), made, bound)
        paths += [task["data-file"]["file-path"] for task in page.file_scan_tasks]
        pending += page.plan_tasks
    return paths


@pytest.mark.parametrize(
    "body",
    [
        b"[1]",
        b"{not json",
        b'{"snapshot-id": "1"}',
        b'{"snapshot-id": true}',
        b'{"select": "id"}',
        b'{"case-sensitive": "yes"}',
        b'{"start-snapshot-id": 1, "end-snapshot-id": 2}',
        b'{"filter": {"type": "frobnicate"}}',
        b'{"filter": 7}',
        json.dumps({"filter": {"type": "in", "term": "id", "values": list(range(5000))}}).encode(),
        b'{"filter": ' + b'{"type": "not", "child": ' * 100 + b"true" + b"}" * 101,
        b"[" * 100_000 + b"]" * 100_000,  # nesting no parser should recurse into
        b'{"select": []}' + b" " * scan_plans.MAX_BODY,
    ],
)
def test_a_plan_request_outside_the_rules_is_invalid(body: bytes) -> None:
    with pytest.raises(InvalidParameter):
        scan_plans.parse_plan_request(body)


def test_a_scan_names_what_the_table_has(table: Any) -> None:
    made, bound = tokens(), "b"
    for bad in (asked(select=["nope"]), asked(filter={"type": "eq", "term": "nope", "value": 1}),
                asked(**{"snapshot-id": 42})):  # fmt: skip
        with pytest.raises(InvalidParameter):
            scan_plans.plan(table, bad, made, bound)
    # Case-insensitive names bind when asked to.
    upper = asked(filter={"type": "eq", "term": "ID", "value": 1}, **{"case-sensitive": False})
    assert len(scan_plans.plan(table, upper, made, bound)[0].file_scan_tasks) == 1


def test_a_large_plan_is_pages_of_plan_tasks_that_reach_every_file_once(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = sorted(task.file.file_path for task in table.scan().plan_files())
    monkeypatch.setattr(scan_plans, "TASKS_PER_ANSWER", 2)
    made = tokens()
    plan, _ = scan_plans.plan(table, asked(), made, "b")
    assert not plan.file_scan_tasks and len(plan.plan_tasks) == 3  # manifests of 1+1, 1+1, 3 files
    assert sorted(all_paths(table, asked(), made, "b")) == expected
    # A filter prunes on the server: the February partition only.
    feb = asked(filter={"type": "gt-eq", "term": "day", "value": "2024-02-01"})
    assert len(all_paths(table, feb, made, "b")) == 3


def test_plan_tokens_are_bound_signed_and_expire(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_plans, "TASKS_PER_ANSWER", 2)
    made = tokens()
    plan, plan_id = scan_plans.plan(table, asked(), made, "mine")
    task = plan.plan_tasks[0]
    assert made.read("plan", plan_id, "mine")["k"] == "plan"
    for kind, token, bound, error in (
        ("task", task, "another table", NoSuchPlanTask),
        ("task", plan_id, "mine", NoSuchPlanTask),  # a plan id is no plan task
        ("plan", task, "mine", NoSuchPlanId),
        ("task", task[:-2] + ("AA" if not task.endswith("AA") else "BB"), "mine", NoSuchPlanTask),
        ("task", "x", "mine", NoSuchPlanTask),
    ):
        with pytest.raises(error):
            made.read(kind, token, bound)
    # Another server key's tokens are not ours.
    with pytest.raises(NoSuchPlanTask):
        PlanTokens(TokenCodec(b"o" * 32, "scan-plan")).read("task", task, "mine")
    monkeypatch.setattr(scan_plans, "TOKEN_SECONDS", -1)
    _, expired = scan_plans.plan(table, asked(), made, "mine")
    with pytest.raises(NoSuchPlanId, match="expired"):
        made.read("plan", expired, "mine")


def test_a_file_is_the_specs_content_file(table: Any) -> None:
    plan, _ = scan_plans.plan(table, asked(filter={"type": "eq", "term": "id", "value": 2}), tokens(), "b")
    (task,) = plan.file_scan_tasks
    data = task["data-file"]
    assert data["content"] == "data" and data["file-format"] == "parquet" and data["spec-id"] == 0
    assert data["partition"] == ["2024-01-03"]  # the spec's single-value JSON of a date
    assert data["record-count"] == 1 and data["file-size-in-bytes"] > 0
    assert "delete-file-references" not in task and "delete-files" not in plan.to_json()
    # Column statistics only of the columns `stats-fields` names (none unless asked for).
    assert not [name for name in data if name.endswith("-counts") or name == "column-sizes"]
    stats = asked(filter={"type": "eq", "term": "id", "value": 2}, **{"stats-fields": ["id"]})
    (task,) = scan_plans.plan(table, stats, tokens(), "b")[0].file_scan_tasks
    assert task["data-file"]["value-counts"] == {"keys": [1], "values": [1]}
    with pytest.raises(InvalidParameter):
        scan_plans.plan(table, asked(**{"stats-fields": ["nope"]}), tokens(), "b")

"""Server-side scan planning (Iceberg REST 1.7+, as 1.11 words it): the plan of a scan of one
table, made with pyiceberg's own planner over the metadata the caller may see, and written as the
spec's `FileScanTask`s.

Both catalogs plan through here: the writers' (`/_iceberg`, a table of an own warehouse) and the
recipients' (`/iceberg`, the metadata a share's grant shows, a restricted table's generated
metadata, whose manifests name only its allowed and derived files). What the caller sees is the
`Table` handed in; nothing here widens it.

Plans keep no state on the server. A small plan is answered at once (`completed`, its tasks
inline). A larger one is answered `completed` with `plan-tasks`: each a token, HMAC'd by the
server (`TokenCodec`), naming the table it was made for (`binding`), the snapshot, the scan asked
for and a run of the snapshot's data manifests; `/tasks` plans only that run. So any replica
answers any token, a token made for one table is refused for another, and no plan outlives a
restart or needs cancelling. The `plan-id` names the scan the same way (`GET .../plan/{id}` plans
it again; `DELETE` has nothing to free).

Bounds, whatever a caller sends: the body is read up to `MAX_BODY` bytes; a filter is at most
`MAX_FILTER_NODES` expressions deep `MAX_FILTER_DEPTH`; one answer carries at most
`TASKS_PER_ANSWER` tasks, and a plan reads only the manifest list until the tasks are fetched;
at most `PLANS_AT_ONCE` plans read manifests at once in a process (the others wait their turn,
then 429).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from share_store.errors import InvalidParameter, NotFound, RateLimited, StorageUnavailable
from share_store.iceberg.scan_task_json import scan_tasks_json
from share_store.signing.token_codec import TokenCodec

#: The most bytes of a plan request read, and the size of a filter in expressions and depth.
MAX_BODY = 256 * 1024
MAX_FILTER_NODES = 2_000
MAX_FILTER_DEPTH = 64
#: The most file scan tasks in one answer (`/plan` inline, or one `/tasks` page).
TASKS_PER_ANSWER = 1_000
#: How long a plan's tokens (plan tasks, plan id) are honoured.
TOKEN_SECONDS = 3600
#: Manifest reads planned at once in a process, and how long a plan waits for its turn: each reads
#: and holds up to a run of manifests, so many callers at once queue rather than share the memory.
PLANS_AT_ONCE = 4
TURN_SECONDS = 30.0
_TURNS = threading.BoundedSemaphore(PLANS_AT_ONCE)


class NoSuchPlanId(NotFound):
    iceberg_type = "NoSuchPlanIdException"


class NoSuchPlanTask(NotFound):
    iceberg_type = "NoSuchPlanTaskException"


@dataclass(frozen=True)
class ScanAsked:
    """A scan as a plan request asks for it (and as its tokens carry it)."""

    snapshot_id: int | None
    select: tuple[str, ...] | None
    filter: Any  # the filter's JSON as sent (None: every row), parsed again when planned
    case_sensitive: bool
    use_snapshot_schema: bool
    #: The columns whose statistics each data file carries (`stats-fields`); None: no statistics,
    #: which the spec leaves out unless asked for (most of a task's bytes, and read by no reader).
    stats_fields: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "s": self.snapshot_id,
            "c": list(self.select) if self.select is not None else None,
            "f": self.filter,
            "i": self.case_sensitive,
            "u": self.use_snapshot_schema,
            "t": list(self.stats_fields) if self.stats_fields is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScanAsked:
        select, stats = data.get("c"), data.get("t")
        return cls(data.get("s"), tuple(select) if select is not None else None, data.get("f"),
                   bool(data.get("i", True)), bool(data.get("u", False)),
                   tuple(stats) if stats is not None else None)  # fmt: skip


def _filter_size(node: Any) -> None:
    """Refuses a filter of more than `MAX_FILTER_NODES` values or deeper than `MAX_FILTER_DEPTH`,
    walked without recursion (a hostile nesting must not reach pydantic's recursive parser)."""
    pending: list[tuple[Any, int]] = [(node, 1)]
    seen = 0
    while pending:
        value, depth = pending.pop()
        seen += 1
        if seen > MAX_FILTER_NODES or depth > MAX_FILTER_DEPTH:
            raise InvalidParameter(
                f"the filter is too large: at most {MAX_FILTER_NODES} values, {MAX_FILTER_DEPTH} levels deep"
            )
        if isinstance(value, dict):
            pending.extend((child, depth + 1) for child in value.values())
        elif isinstance(value, list):
            pending.extend((child, depth + 1) for child in value)


def parse_plan_request(body: bytes) -> ScanAsked:
    """The scan a `PlanTableScanRequest` asks for; `InvalidParameter` (400) for anything else,
    `incremental` scans (start/end snapshot ids) included: not served."""
    if len(body) > MAX_BODY:
        raise InvalidParameter(f"a plan request is at most {MAX_BODY} bytes")
    try:
        raw = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise InvalidParameter("the plan request is not JSON") from None
    if not isinstance(raw, dict):
        raise InvalidParameter("the plan request is not a JSON object")
    if raw.get("start-snapshot-id") is not None or raw.get("end-snapshot-id") is not None:
        raise InvalidParameter(
            "incremental scan planning (start-snapshot-id, end-snapshot-id) is not supported"
        )
    _filter_size(raw.get("filter"))
    asked = _scan_asked(raw)
    bound_expression(asked.filter)  # a filter that does not parse is refused now, not in /tasks
    return asked


def _scan_asked(raw: dict[str, Any]) -> ScanAsked:
    snapshot, select, case, schema = (
        raw.get("snapshot-id"), raw.get("select"), raw.get("case-sensitive", True),
        raw.get("use-snapshot-schema", False),
    )  # fmt: skip
    if snapshot is not None and (not isinstance(snapshot, int) or isinstance(snapshot, bool)):
        raise InvalidParameter("snapshot-id is a long")
    stats = raw.get("stats-fields")
    for name, names in (("select", select), ("stats-fields", stats)):
        if names is not None and (
            not isinstance(names, list) or not all(isinstance(c, str) for c in names) or len(names) > 10_000
        ):
            raise InvalidParameter(f"{name} is a list of column names")
    if not isinstance(case, bool) or not isinstance(schema, bool):
        raise InvalidParameter("case-sensitive and use-snapshot-schema are booleans")
    return ScanAsked(snapshot, tuple(select) if select is not None else None, raw.get("filter"), case, schema,
                     tuple(stats) if stats is not None else None)  # fmt: skip


def bound_expression(filter_json: Any) -> Any:
    """pyiceberg's expression of a filter's JSON (ALWAYS_TRUE for none); 400 if it is none."""
    from pydantic import TypeAdapter, ValidationError
    from pyiceberg.expressions import AlwaysTrue, BooleanExpression

    if filter_json is None:
        return AlwaysTrue()
    try:
        return TypeAdapter(BooleanExpression).validate_python(filter_json)
    except (ValidationError, ValueError, TypeError, RecursionError) as error:
        raise InvalidParameter(f"the filter is not an Iceberg expression: {_first_line(error)}") from None


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:300] if str(error) else type(error).__name__


# -- tokens ---------------------------------------------------------------------------------


def binding(*parts: str) -> str:
    """What a plan's tokens are bound to: a digest of who may use them for which table (the
    catalog, the table and its visible metadata, the caller)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


class PlanTokens:
    """The plan ids and plan tasks of the server's plans: signed, bound, expiring."""

    def __init__(self, codec: TokenCodec) -> None:
        self.codec = codec

    def make(self, kind: str, bound: str, scan: ScanAsked, snapshot: int, extra: dict[str, Any]) -> str:
        payload = {
            "k": kind,
            "b": bound,
            "q": scan.to_json(),
            "n": snapshot,
            "e": int(time.time()) + TOKEN_SECONDS,
        }
        return self.codec.encode({**payload, **extra})

    def read(self, kind: str, token: str, bound: str) -> dict[str, Any]:
        """A token's payload if it is ours, of `kind`, for `bound`, unexpired; else the spec's 404."""
        missing = NoSuchPlanId if kind == "plan" else NoSuchPlanTask
        what = "plan id" if kind == "plan" else "plan task"
        if not isinstance(token, str) or len(token) > MAX_BODY:
            raise missing(f"no such {what}")
        try:
            payload = self.codec.decode(token)
        except ValueError:
            raise missing(f"no such {what}") from None
        if payload.get("k") != kind or payload.get("b") != bound:
            raise missing(f"no such {what} for this table")
        if not isinstance(payload.get("e"), int) or payload["e"] < time.time():
            raise missing(f"the {what} has expired: plan the scan again")
        return payload


# -- planning -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A plan's answer: its tasks (in the spec's JSON), delete files, plan tasks."""

    file_scan_tasks: list[dict[str, Any]]
    delete_files: list[dict[str, Any]]
    plan_tasks: list[str]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.plan_tasks:
            body["plan-tasks"] = self.plan_tasks
        if self.file_scan_tasks:
            body["file-scan-tasks"] = self.file_scan_tasks
            if self.delete_files:
                body["delete-files"] = self.delete_files
        return body


@contextmanager
def _reading() -> Iterator[None]:
    """Reads of the table's manifest list and manifests: storage that fails them is a 503."""
    try:
        yield
    except OSError as error:
        raise StorageUnavailable(
            f"the table's manifests cannot be read right now: {type(error).__name__}"
        ) from None


def scan_of(table: Any, scan: ScanAsked) -> Any:
    """pyiceberg's `DataScan` of `table` as asked; 400 for a snapshot, column or filter it lacks."""
    from pyiceberg.exceptions import ResolveError

    kwargs: dict[str, Any] = {
        "row_filter": bound_expression(scan.filter),
        "case_sensitive": scan.case_sensitive,
    }
    if scan.select is not None:
        kwargs["selected_fields"] = scan.select or ("*",)
    if scan.snapshot_id is not None:
        if table.metadata.snapshot_by_id(scan.snapshot_id) is None:
            raise InvalidParameter(f"the table has no snapshot {scan.snapshot_id} to plan")
        kwargs["snapshot_id"] = scan.snapshot_id
    data_scan = table.scan(**kwargs)
    try:
        data_scan.projection()
        # The filter bound to the schema now: a column it names that the table lacks is a 400.
        from pyiceberg.expressions.visitors import bind

        bind(table.metadata.schema(), data_scan.row_filter, scan.case_sensitive)
    except (ValueError, ResolveError, TypeError) as error:
        raise InvalidParameter(f"cannot plan this scan: {_first_line(error)}") from None
    return data_scan


def _stats_ids(table: Any, scan: ScanAsked) -> frozenset[int]:
    """The field ids of the columns `stats-fields` names; 400 for one the table lacks."""
    if not scan.stats_fields:
        return frozenset()
    schema = table.metadata.schema()
    try:
        return frozenset(schema.find_field(n, scan.case_sensitive).field_id for n in scan.stats_fields)
    except ValueError as error:
        raise InvalidParameter(f"stats-fields: {_first_line(error)}") from None


def _files_in(manifest: Any) -> int:
    """How many live files a manifest says it has (many when it does not say)."""
    counts = (manifest.added_files_count, manifest.existing_files_count)
    if any(count is None for count in counts):
        return TASKS_PER_ANSWER
    return int(counts[0]) + int(counts[1])


def manifest_runs(manifests: Sequence[Any]) -> list[tuple[int, int]]:
    """The data manifests (by index in the manifest list) in runs of about `TASKS_PER_ANSWER`
    files each, as [first, last) ranges; delete manifests go with every run."""
    runs: list[tuple[int, int]] = []
    start, files = None, 0
    for index, manifest in enumerate(manifests):
        if manifest.content != 0:  # ManifestContent.DATA
            continue
        count = _files_in(manifest)
        if start is not None and files + count > TASKS_PER_ANSWER:
            runs.append((start, index))
            start, files = None, 0
        if start is None:
            start = index
        files += count
    if start is not None:
        runs.append((start, len(manifests)))
    return runs


def plan(table: Any, scan: ScanAsked, tokens: PlanTokens, bound: str) -> tuple[Plan, str]:
    """The answer to `POST .../plan`, and its plan id: the tasks inline when the snapshot's data
    manifests have at most `TASKS_PER_ANSWER` files, else one plan task per run of them (nothing
    but the manifest list is read until they are fetched)."""
    data_scan = scan_of(table, scan)
    snapshot = data_scan.snapshot()
    if snapshot is None:  # an empty table: nothing to read
        return Plan([], [], []), tokens.make("plan", bound, scan, -1, {})
    plan_id = tokens.make("plan", bound, scan, snapshot.snapshot_id, {})
    with _reading():
        manifests = snapshot.manifests(table.io)
    runs = manifest_runs(manifests)
    if len(runs) <= 1:
        return _planned(
            table, data_scan, manifests, scan, tokens, bound, snapshot.snapshot_id, (0, len(manifests)), 0
        ), plan_id
    tasks = [tokens.make("task", bound, scan, snapshot.snapshot_id, {"r": list(run), "o": 0}) for run in runs]
    return Plan([], [], tasks), plan_id


def fetch_tasks(table: Any, token: str, tokens: PlanTokens, bound: str) -> Plan:
    """The answer to `POST .../tasks` for one plan task made by `plan` for this table."""
    payload = tokens.read("task", token, bound)
    scan = ScanAsked.from_json(payload["q"])
    snapshot_id = payload["n"]
    if table.metadata.snapshot_by_id(snapshot_id) is None:
        raise NoSuchPlanTask("the plan task's snapshot is no longer visible: plan the scan again")
    data_scan = scan_of(table, dataclasses.replace(scan, snapshot_id=snapshot_id))
    with _reading():
        manifests = data_scan.snapshot().manifests(table.io)
    first, last = payload["r"]
    if not (0 <= first < last <= len(manifests)):
        raise NoSuchPlanTask("the plan task names manifests the snapshot lacks")
    return _planned(
        table, data_scan, manifests, scan, tokens, bound, snapshot_id, (first, last), int(payload["o"])
    )


def _planned(
    table: Any,
    data_scan: Any,
    manifests: Sequence[Any],
    scan: ScanAsked,
    tokens: PlanTokens,
    bound: str,
    snapshot_id: int,
    run: tuple[int, int],
    offset: int,
) -> Plan:
    """The tasks of the data manifests `run` names (with every delete manifest), from `offset`:
    at most `TASKS_PER_ANSWER`, and a plan task for the rest of the run if there is more."""
    first, last = run
    chosen = [m for i, m in enumerate(manifests) if (first <= i < last) or m.content != 0]
    if not _TURNS.acquire(timeout=TURN_SECONDS):
        raise RateLimited("too many scans are being planned at once; try again shortly", TURN_SECONDS)
    try:
        with _reading():
            tasks = list(data_scan._manifest_planner.plan_files(chosen))
    except ValueError as error:  # pyiceberg's own refusals: equality deletes
        raise InvalidParameter(f"cannot plan this scan: {_first_line(error)}") from None
    finally:
        _TURNS.release()
    page = tasks[offset : offset + TASKS_PER_ANSWER]
    more = []
    if offset + TASKS_PER_ANSWER < len(tasks):
        more = [
            tokens.make(
                "task", bound, scan, snapshot_id, {"r": [first, last], "o": offset + TASKS_PER_ANSWER}
            )
        ]
    scan_tasks, deletes = scan_tasks_json(table.metadata, page, _stats_ids(table, scan))
    return Plan(scan_tasks, deletes, more)


def plan_task_of(body: bytes) -> str:
    """The `plan-task` of a `FetchScanTasksRequest`; 400 when there is none."""
    try:
        raw = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise InvalidParameter("the request is not JSON") from None
    task = raw.get("plan-task") if isinstance(raw, dict) else None
    if not isinstance(task, str) or not task:
        raise InvalidParameter("a FetchScanTasksRequest names its plan-task")
    return task

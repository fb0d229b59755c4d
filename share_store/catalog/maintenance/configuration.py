"""What maintenance does to a table, in the words and with the defaults of AWS S3 Tables.

Three kinds, each enabled or disabled with its settings:

- `icebergCompaction`: small data files (and the delete files that apply to them)
  rewritten into files near `targetFileSizeMB` (64 to 512, default 512).
- `icebergSnapshotManagement`: snapshots expired beyond `minSnapshotsToKeep`
  (default 1) and older than `maxSnapshotAgeHours` (default 120); a branch's or
  tag's own retention and the table's `history.expire.*` properties win.
- `icebergUnreferencedFileRemoval`: files under a table's location that no live
  snapshot or metadata reaches, marked noncurrent once unreferenced and older
  than `unreferencedDays` (default 3), deleted `nonCurrentDays` (default 10) later.

The first two are set per table, the third per warehouse (S3 Tables' table and
table-bucket maintenance configurations); a warehouse may also set defaults for
the first two, which a table's own setting overrides. All are on by default.
Pure values and parsing: what is stored is the JSON a caller sent, checked here.

`Limits` are the provider's, not a caller's (`[maintenance]` in the server's
configuration): what one run may cost the server whatever the table's files and
properties say, and how many runs it takes at once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from share_store.errors import InvalidParameter

COMPACTION = "icebergCompaction"
SNAPSHOT_MANAGEMENT = "icebergSnapshotManagement"
UNREFERENCED_FILE_REMOVAL = "icebergUnreferencedFileRemoval"
KINDS = (COMPACTION, SNAPSHOT_MANAGEMENT, UNREFERENCED_FILE_REMOVAL)
#: What a table may set (S3 Tables' PutTableMaintenanceConfiguration); a warehouse may set all three.
TABLE_KINDS = (COMPACTION, SNAPSHOT_MANAGEMENT)
STRATEGIES = ("auto", "binpack", "sort")


@dataclass(frozen=True)
class Compaction:
    enabled: bool = True
    target_file_size_mb: int = 512
    #: `auto` sorts where the table has a sort order, else packs; `sort` needs a sort order.
    strategy: str = "auto"

    @property
    def target_bytes(self) -> int:
        return self.target_file_size_mb * 1024 * 1024


@dataclass(frozen=True)
class SnapshotManagement:
    enabled: bool = True
    min_snapshots_to_keep: int = 1
    max_snapshot_age_hours: int = 120


@dataclass(frozen=True)
class UnreferencedFileRemoval:
    enabled: bool = True
    unreferenced_days: int = 3
    non_current_days: int = 10


@dataclass(frozen=True)
class Limits:
    """What maintenance may cost the server, set by the provider (`[maintenance]`), never a table.

    A caller writes its table's files and properties: a 100 KB file can decode to a gigabyte, a
    table's `write.parquet.*` can ask for a row group per row, and a caller can ask for any number
    of runs. These bound what the server spends on them.
    """

    #: A data or delete file with a row group that decodes past this (MiB) is left as it is, unread
    #: (and, for a delete file, the data files it applies to): a row group is what a read holds.
    row_group_decoded_mb: int = 256
    #: A file decoding past this (MiB) in all is left as it is too: its rewrite's CPU, not memory.
    file_decoded_mb: int = 4096
    #: CPU seconds (of the thread running it) and wall-clock seconds one compaction may take; past
    #: either it stops between two batches, committing only the groups it finished.
    run_cpu_seconds: float = 300.0
    run_seconds: float = 900.0
    #: Runs at once in one server process, asked for or background (which takes one at most, and
    #: only while no asked-for run waits). One by default: runs are mostly Python (pyiceberg's
    #: manifests) and share one GIL, so a second one at once adds little but the wait of requests.
    runs_at_once: int = 1
    #: Runs one caller may have running or waiting at once (one per table, always).
    runs_per_caller: int = 2
    #: Asked-for runs that may wait for a turn, all callers together; beyond, 429.
    runs_waiting: int = 16
    #: How long an asked-for run waits for its turn before it is answered 429 (come back later).
    wait_seconds: float = 60.0

    def __post_init__(self) -> None:
        whole = {
            "row_group_decoded_mb": (self.row_group_decoded_mb, 1),
            "file_decoded_mb": (self.file_decoded_mb, 1),
            "runs_at_once": (self.runs_at_once, 1),
            "runs_per_caller": (self.runs_per_caller, 1),
            "runs_waiting": (self.runs_waiting, 0),
        }
        for name, (value, least) in whole.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"[maintenance] {name} must be a whole number of at least {least}")
        for name, seconds in (("run_cpu_seconds", self.run_cpu_seconds), ("run_seconds", self.run_seconds),
                              ("wait_seconds", self.wait_seconds)):  # fmt: skip
            if not seconds > 0:  # NaN too
                raise ValueError(f"[maintenance] {name} must be above 0 seconds")

    @property
    def row_group_bytes(self) -> int:
        return self.row_group_decoded_mb * 1024 * 1024

    @property
    def file_bytes(self) -> int:
        return self.file_decoded_mb * 1024 * 1024


@dataclass(frozen=True)
class Maintenance:
    """A table's effective maintenance: its own settings over its warehouse's over the defaults."""

    compaction: Compaction = field(default_factory=Compaction)
    snapshot_management: SnapshotManagement = field(default_factory=SnapshotManagement)
    unreferenced_file_removal: UnreferencedFileRemoval = field(default_factory=UnreferencedFileRemoval)


#: Each kind's settings: (JSON name, attribute, bounds) as S3 Tables names and bounds them.
_FIELDS: dict[str, list[tuple[str, str, int, int]]] = {
    COMPACTION: [("targetFileSizeMB", "target_file_size_mb", 64, 512)],
    SNAPSHOT_MANAGEMENT: [
        ("minSnapshotsToKeep", "min_snapshots_to_keep", 1, 1_000_000),
        ("maxSnapshotAgeHours", "max_snapshot_age_hours", 1, 1_000_000),
    ],
    UNREFERENCED_FILE_REMOVAL: [
        ("unreferencedDays", "unreferenced_days", 1, 36_500),
        ("nonCurrentDays", "non_current_days", 1, 36_500),
    ],
}
_ATTRIBUTE = {
    COMPACTION: "compaction",
    SNAPSHOT_MANAGEMENT: "snapshot_management",
    UNREFERENCED_FILE_REMOVAL: "unreferenced_file_removal",
}


def enabled(maintenance: Maintenance, kind: str) -> bool:
    return bool(getattr(maintenance, _ATTRIBUTE[kind]).enabled)


def check_value(kind: str, value: Any) -> dict[str, Any]:
    """A configuration's `value` as S3 Tables writes it, checked: `{"status": "enabled"|"disabled",
    "settings": {kind: {...}}}`; settings left out keep their defaults. Returns it normalised."""
    if kind not in KINDS:
        raise InvalidParameter(f"unknown maintenance type {kind!r}: one of {', '.join(KINDS)}")
    if not isinstance(value, dict):
        raise InvalidParameter("a maintenance configuration's value is an object with a status")
    unknown = set(value) - {"status", "settings"}
    if unknown:
        raise InvalidParameter(f"unknown keys in the maintenance configuration: {', '.join(sorted(unknown))}")
    status = value.get("status")
    if status not in ("enabled", "disabled"):
        raise InvalidParameter("a maintenance configuration's status is 'enabled' or 'disabled'")
    settings = value.get("settings") or {}
    if not isinstance(settings, dict) or set(settings) - {kind}:
        raise InvalidParameter(f"a {kind} configuration's settings are {{{kind!r}: {{...}}}}")
    given = settings.get(kind) or {}
    if not isinstance(given, dict):
        raise InvalidParameter(f"the {kind} settings are an object")
    known = {name: (low, high) for name, _, low, high in _FIELDS[kind]}
    if kind == COMPACTION:
        known["strategy"] = (0, 0)
    unknown = set(given) - set(known)
    if unknown:
        raise InvalidParameter(f"unknown {kind} settings: {', '.join(sorted(unknown))}")
    checked: dict[str, Any] = {}
    for name, value_given in given.items():
        if name == "strategy":
            if value_given not in STRATEGIES:
                raise InvalidParameter(f"the compaction strategy is one of {', '.join(STRATEGIES)}")
            checked[name] = value_given
            continue
        low, high = known[name]
        whole = isinstance(value_given, int) and not isinstance(value_given, bool)
        if not whole or not low <= value_given <= high:
            raise InvalidParameter(f"{kind} {name} is a whole number from {low} to {high}")
        checked[name] = value_given
    return {"status": status, "settings": {kind: checked}}


def applied(maintenance: Maintenance, kind: str, value: dict[str, Any]) -> Maintenance:
    """`maintenance` with a checked configuration `value` of `kind` laid over it."""
    attribute = _ATTRIBUTE[kind]
    current = getattr(maintenance, attribute)
    changes: dict[str, Any] = {"enabled": value["status"] == "enabled"}
    names = {name: attr for name, attr, _, _ in _FIELDS[kind]} | {"strategy": "strategy"}
    for name, setting in value["settings"].get(kind, {}).items():
        changes[names[name]] = setting
    return replace(maintenance, **{attribute: replace(current, **changes)})


def effective(warehouse: dict[str, dict[str, Any]], table: dict[str, dict[str, Any]]) -> Maintenance:
    """A table's maintenance: the defaults, then its warehouse's configurations, then its own."""
    maintenance = Maintenance()
    for configured in (warehouse, table):
        for kind in KINDS:
            if kind in configured:
                maintenance = applied(maintenance, kind, configured[kind])
    return maintenance


def described(maintenance: Maintenance, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """The effective configuration as S3 Tables' GetTableMaintenanceConfiguration writes it."""
    out: dict[str, Any] = {}
    for kind in kinds:
        current = asdict(getattr(maintenance, _ATTRIBUTE[kind]))
        settings = {name: current[attr] for name, attr, _, _ in _FIELDS[kind]}
        if kind == COMPACTION:
            settings["strategy"] = current["strategy"]
        out[kind] = {"status": "enabled" if current["enabled"] else "disabled", "settings": {kind: settings}}
    return out


def parse_stored(text: str) -> dict[str, Any]:
    return dict(json.loads(text))

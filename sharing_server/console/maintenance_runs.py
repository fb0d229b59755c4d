"""How the console words a table's maintenance: each kind's configuration and last run, and the
outcome of a run asked for (pure, from `Maintainer`'s S3 Tables shapes, so the page says what the
catalog's maintenance API answers, in words)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from share_store.catalog.maintenance.configuration import (
    COMPACTION,
    KINDS,
    SNAPSHOT_MANAGEMENT,
    UNREFERENCED_FILE_REMOVAL,
)
from share_store.catalog.maintenance.rows import Run
from sharing_server.console.formatting import number, size

LABELS = {
    COMPACTION: "Compaction",
    SNAPSHOT_MANAGEMENT: "Snapshot expiry",
    UNREFERENCED_FILE_REMOVAL: "Unreferenced file removal",
}
#: A run's details as the page words them, in this order; a key not here is shown by its name.
DETAILS = {
    "files_rewritten": "data file(s) rewritten",
    "files_written": "data file(s) written",
    "bytes_rewritten": "rewritten",
    "bytes_written": "written",
    "snapshot_id": "new snapshot",
    "files_skipped": "file(s) left as they are, past the server's bounds",
    "snapshots_expired": "snapshot(s) expired",
    "refs_removed": "branch(es) and tag(s) removed",
    "marked": "file(s) marked unreferenced",
    "unmarked": "file(s) referenced again",
    "deleted": "file(s) deleted",
    "bytes_deleted": "deleted",
    "seconds": "took",
}
#: S3 Tables' status words the page says otherwise; the others (Successful, Failed...) as they are.
STATUS_WORDS = {"Not_Yet_Run": "Not yet run"}
#: The console's badge for a status (its `.state` classes: green, red).
BADGES = {"Successful": "active", "Failed": "revoked"}


@dataclass(frozen=True)
class KindView:
    """One maintenance kind as the table page shows it."""

    kind: str
    label: str
    enabled: bool
    settings: str
    status: str
    badge: str
    #: When its last run started (ISO 8601), None before its first.
    started: str | None
    #: Why a run failed, or why a successful one did nothing (compaction's "nothing to compact").
    message: str | None
    details: list[str]


def settings_words(kind: str, value: dict[str, Any]) -> str:
    """A kind's effective settings (as `described` gives them) in a few words."""
    given: dict[str, Any] = (value.get("settings") or {}).get(kind) or {}
    if kind == COMPACTION:
        return f"files near {given.get('targetFileSizeMB')} MB, strategy {given.get('strategy')}"
    if kind == SNAPSHOT_MANAGEMENT:
        return (
            f"keeps at least {given.get('minSnapshotsToKeep')} snapshot(s), "
            f"expires those older than {given.get('maxSnapshotAgeHours')} h"
        )
    return (
        f"marks files unreferenced for {given.get('unreferencedDays')} d, "
        f"deletes them {given.get('nonCurrentDays')} d later"
    )


def _detail(key: str, value: Any) -> str | None:
    label = DETAILS.get(key, key.replace("_", " "))
    if value is None:
        return None
    if key == "seconds" and isinstance(value, (int, float)):
        return f"took {value:g} s"
    if key.startswith("bytes_") and isinstance(value, (int, float)):
        return f"{size(value)} {label}"
    if key == "snapshot_id":
        return f"{label} {value}"
    if key == "files_skipped" and isinstance(value, list):
        # Each file is named, with why, in the run's message.
        return f"{number(len(value))} {label}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{number(value)} {label}"
    return f"{label}: {value}"


def detail_words(details: dict[str, Any]) -> list[str]:
    """A run's details, the known ones first in the page's order, then any other it recorded."""
    keys = [key for key in DETAILS if key in details] + sorted(key for key in details if key not in DETAILS)
    return [line for key in keys if (line := _detail(key, details[key])) is not None]


def kind_views(configuration: dict[str, Any], status: dict[str, Any]) -> list[KindView]:
    """Each kind, in the order a run does them: its configuration and its last run, or none yet."""
    views = []
    for kind in KINDS:
        value = configuration.get(kind) or {}
        last = status.get(kind) or {}
        state = str(last.get("status", "Not_Yet_Run"))
        views.append(
            KindView(
                kind=kind,
                label=LABELS[kind],
                enabled=value.get("status") == "enabled",
                settings=settings_words(kind, value),
                status=STATUS_WORDS.get(state, state),
                badge=BADGES.get(state, ""),
                started=last.get("lastRunTimestamp"),
                message=last.get("failureMessage") or last.get("message"),
                details=detail_words(last.get("details") or {}),
            )
        )
    return views


def outcome(table: str, runs: dict[str, Run]) -> tuple[str, str]:
    """The flash after "Run maintenance now": each kind's status, an error if one failed.

    A successful run's note is short ("nothing to compact") and said here; why a run failed can
    be long and is often the same for every kind, so it is left to each kind's row of the page.
    """
    if not runs:
        return "info", f"Nothing ran on {table}: every maintenance kind of it is disabled."
    said = []
    for kind, run in runs.items():
        words = f"{LABELS.get(kind, kind).lower()} {run.status.lower()}"
        noted = run.message and run.status != "Failed"
        said.append(f"{words} ({run.message})" if noted else words)
    text = f"Maintenance ran on {table}: {'; '.join(said)}."
    if any(run.status == "Failed" for run in runs.values()):
        return "error", f"{text} Why is in the Maintenance table."
    return "ok", text

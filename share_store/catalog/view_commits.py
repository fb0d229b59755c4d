"""View metadata transitions of the writable catalog: a new view, and a commit applied to one.

pyiceberg 0.12 has the view's models (`ViewMetadata`, `ViewVersion`) but no
view requirements or updates, so they are applied here, as Iceberg's Java
`ViewMetadata.Builder` applies them: an added schema or version identical to
one the view has reuses its id, otherwise it gets the next; `-1` names the
schema or version the same commit last added; the version log grows when the
current version changes; `version.history.num-entries` (10 by default) versions
are kept. The only requirement is `assert-view-uuid`.

Pure functions on metadata values: no storage, no store.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from share_store.catalog.commits import changed_properties, parse_model, string_properties
from share_store.catalog.errors import CommitConflict
from share_store.errors import InvalidParameter

VIEW_FORMAT_VERSION = 1
HISTORY_SIZE = "version.history.num-entries"
DEFAULT_HISTORY_SIZE = 10
VIEW_REQUIREMENTS = ("assert-view-uuid",)
VIEW_UPDATES = (
    "assign-uuid",
    "upgrade-format-version",
    "add-schema",
    "set-location",
    "set-properties",
    "remove-properties",
    "add-view-version",
    "set-current-view-version",
)


@dataclass(frozen=True)
class ViewCommit:
    """A commit to a view: its requirements and updates, each a JSON object of the spec's."""

    requirements: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, raw: dict[str, Any]) -> ViewCommit:
        requirements, updates = raw.get("requirements", []), raw.get("updates", [])
        requirements = [] if requirements is None else requirements
        if not isinstance(requirements, list) or not all(isinstance(r, dict) for r in requirements):
            raise InvalidParameter("requirements must be a list of objects")
        if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
            raise InvalidParameter("updates must be a list of objects")
        for requirement in requirements:
            if requirement.get("type") not in VIEW_REQUIREMENTS:
                raise InvalidParameter(f"unknown view requirement: {requirement.get('type')!r}")
        for update in updates:
            if update.get("action") not in VIEW_UPDATES:
                raise InvalidParameter(f"unknown view update: {update.get('action')!r}")
        return cls(requirements, updates)

    def set_locations(self) -> list[str]:
        """The locations the commit's `set-location` updates ask for."""
        return [str(u.get("location")) for u in self.updates if u.get("action") == "set-location"]


def created_view(
    schema: Schema, version: ViewVersion, location: str, properties: dict[str, Any]
) -> ViewMetadata:
    """A new view's first metadata: its schema as schema 0, its version as version 1, current."""
    _check_dialects(version)
    schema = schema.model_copy(update={"schema_id": 0})
    first = version.model_copy(update={"version_id": 1, "schema_id": 0})
    return ViewMetadata.model_validate(
        {
            "view-uuid": str(uuid.uuid4()),
            "format-version": VIEW_FORMAT_VERSION,
            "location": location,
            "schemas": [schema],
            "current-version-id": 1,
            "versions": [first],
            "version-log": [_log_entry(first)],
            "properties": string_properties(dict(properties)),
        }
    )


def _log_entry(version: ViewVersion) -> ViewHistoryEntry:
    return ViewHistoryEntry.model_validate(
        {"timestamp-ms": version.timestamp_ms, "version-id": version.version_id}
    )


def committed_view(base: ViewMetadata, commit: ViewCommit) -> ViewMetadata:
    """`base` with the commit's updates applied, after its requirements held."""
    check_view_requirements(base, commit)
    return updated_view(base, commit)


def updated_view(base: ViewMetadata, commit: ViewCommit) -> ViewMetadata:
    """`base` with the commit's updates applied; its requirements are the caller's to have checked."""
    state = _Building(base)
    for update in commit.updates:
        state.apply(update)
    return state.finished()


def check_view_requirements(base: ViewMetadata, commit: ViewCommit) -> None:
    """Every requirement of the commit holds on `base`, or the commit conflicts: checked before
    anything else about the commit, as for tables (`commits.check_requirements`)."""
    for requirement in commit.requirements:
        if requirement.get("uuid") != base.view_uuid:
            raise CommitConflict(
                f"Requirement failed: view uuid changed: expected {requirement.get('uuid')}, "
                f"found {base.view_uuid}"
            )


class _Building:
    """A view's metadata while a commit's updates are applied, with what they last added."""

    def __init__(self, base: ViewMetadata) -> None:
        self.metadata = base
        self.last_schema: int | None = None
        self.last_version: int | None = None

    def apply(self, update: dict[str, Any]) -> None:
        action = update["action"]
        m = self.metadata
        if action == "assign-uuid":
            if update.get("uuid") != m.view_uuid:
                raise InvalidParameter(f"cannot reassign a view's uuid: it is {m.view_uuid}")
        elif action == "upgrade-format-version":
            if update.get("format-version") != VIEW_FORMAT_VERSION:
                raise InvalidParameter(f"a view's format version is {VIEW_FORMAT_VERSION}, the only one")
        elif action == "set-location":
            self._set(location=str(update.get("location")))
        elif action == "set-properties":
            updates = update.get("updates")
            self._set(properties=changed_properties(m.properties, [], updates or {})[0])
        elif action == "remove-properties":
            removals = update.get("removals")
            if not isinstance(removals, list) or not all(isinstance(key, str) for key in removals):
                raise InvalidParameter("remove-properties: removals must be a list of property names")
            self._set(properties={k: v for k, v in m.properties.items() if k not in removals})
        elif action == "add-schema":
            self._add_schema(parse_model(Schema, update.get("schema") or {}, "add-schema"))
        elif action == "add-view-version":
            raw = update.get("view-version")
            self._add_version(parse_model(ViewVersion, raw if isinstance(raw, dict) else {}, "view version"))
        else:  # set-current-view-version
            self._set_current(update.get("view-version-id"))

    def _set(self, **fields: Any) -> None:
        self.metadata = self.metadata.model_copy(update=fields)

    def _add_schema(self, schema: Schema) -> None:
        same = next((s for s in self.metadata.schemas if s == schema), None)
        if same is not None:
            self.last_schema = same.schema_id
            return
        new_id = max((s.schema_id for s in self.metadata.schemas), default=-1) + 1
        self._set(schemas=[*self.metadata.schemas, schema.model_copy(update={"schema_id": new_id})])
        self.last_schema = new_id

    def _add_version(self, version: ViewVersion) -> None:
        _check_dialects(version)
        schema_id = version.schema_id
        if schema_id == -1:
            if self.last_schema is None:
                raise InvalidParameter("add-view-version: schema-id -1, but the commit added no schema")
            schema_id = self.last_schema
        if all(s.schema_id != schema_id for s in self.metadata.schemas):
            raise InvalidParameter(f"add-view-version: the view has no schema {schema_id}")
        version = version.model_copy(update={"schema_id": schema_id})
        same = next((v for v in self.metadata.versions if _same_version(v, version)), None)
        if same is not None:
            self.last_version = same.version_id
            return
        new_id = max((v.version_id for v in self.metadata.versions), default=0) + 1
        self._set(versions=[*self.metadata.versions, version.model_copy(update={"version_id": new_id})])
        self.last_version = new_id

    def _set_current(self, version_id: Any) -> None:
        if not isinstance(version_id, int) or isinstance(version_id, bool):
            raise InvalidParameter("set-current-view-version: view-version-id must be an integer")
        if version_id == -1:
            if self.last_version is None:
                raise InvalidParameter("set-current-view-version: -1, but the commit added no version")
            version_id = self.last_version
        version = next((v for v in self.metadata.versions if v.version_id == version_id), None)
        if version is None:
            raise InvalidParameter(f"set-current-view-version: the view has no version {version_id}")
        if version_id == self.metadata.current_version_id:
            return
        self._set(
            current_version_id=version_id, version_log=[*self.metadata.version_log, _log_entry(version)]
        )

    def finished(self) -> ViewMetadata:
        """The metadata with only the versions its history keeps (the current one always)."""
        m = self.metadata
        raw = m.properties.get(HISTORY_SIZE, str(DEFAULT_HISTORY_SIZE))
        try:
            keep = int(raw)
        except ValueError:
            raise InvalidParameter(f"{HISTORY_SIZE} must be an integer, not {raw!r}") from None
        if keep < 1:
            raise InvalidParameter(f"{HISTORY_SIZE} must be at least 1")
        versions = m.versions
        if len(versions) > keep:
            kept = {v.version_id for v in versions[-keep:]} | {m.current_version_id}
            versions = [v for v in versions if v.version_id in kept]
        ids = {v.version_id for v in versions}
        log = [entry for entry in m.version_log if entry.version_id in ids]
        return m.model_copy(update={"versions": versions, "version_log": log})


def _same_version(one: ViewVersion, other: ViewVersion) -> bool:
    """Java's test: the same SQL, schema and defaults, whatever the id, time and summary."""
    return (
        one.representations == other.representations
        and one.schema_id == other.schema_id
        and one.default_catalog == other.default_catalog
        and tuple(one.default_namespace) == tuple(other.default_namespace)
    )


def _check_dialects(version: ViewVersion) -> None:
    dialects = [r.root.dialect.lower() for r in version.representations]
    if len(set(dialects)) != len(dialects):
        raise InvalidParameter("invalid view version: more than one representation of one SQL dialect")
    if not dialects:
        raise InvalidParameter("invalid view version: it has no representation")

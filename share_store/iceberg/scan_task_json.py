"""The spec's JSON of a scan plan's tasks (`FileScanTask`, `ContentFile`: data and delete files),
as server-side planning (`scan_plans`) answers them: pure over pyiceberg's tasks and files."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: `ContentFile.content` by pyiceberg's `DataFileContent` value.
CONTENT = {0: "data", 1: "position-deletes", 2: "equality-deletes"}


def scan_tasks_json(
    metadata: Any, tasks: Iterable[Any], stats: frozenset[int] = frozenset()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`file-scan-tasks` and the `delete-files` they reference by index (each delete file once);
    the data files' column statistics of the field ids `stats` only."""
    types = PartitionTypes(metadata)
    deletes: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for task in tasks:
        refs = []
        for delete in sorted(task.delete_files, key=lambda d: d.file_path):
            if delete.file_path not in index:
                index[delete.file_path] = len(deletes)
                deletes.append(content_file_json(metadata, delete, types=types))
            refs.append(index[delete.file_path])
        entry: dict[str, Any] = {"data-file": content_file_json(metadata, task.file, stats, types)}
        if refs:
            entry["delete-file-references"] = refs
        out.append(entry)
    return out, deletes


def _count_map(values: dict[int, int] | None, stats: frozenset[int]) -> dict[str, list[int]] | None:
    if not values:
        return None
    keys = sorted(k for k in values if k in stats)
    if not keys:
        return None
    return {"keys": keys, "values": [int(values[k]) for k in keys]}


class PartitionTypes:
    """The types of each partition spec's fields, worked out once per spec for a page of files."""

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self._by_spec: dict[int, list[Any]] = {}

    def of(self, spec_id: int) -> list[Any]:
        if spec_id not in self._by_spec:
            try:
                spec = self.metadata.specs()[spec_id]
                self._by_spec[spec_id] = list(spec.partition_type(self.metadata.schema()).fields)
            except (KeyError, ValueError):
                self._by_spec[spec_id] = []
        return self._by_spec[spec_id]


def partition_json(
    metadata: Any, spec_id: int, partition: Any, types: PartitionTypes | None = None
) -> list[Any]:
    """A file's partition as the spec's list of values (JSON single-value serialization)."""
    from pyiceberg.conversions import to_json

    values = list(partition) if partition is not None else []
    fields = (types or PartitionTypes(metadata)).of(spec_id)
    out: list[Any] = []
    for i, value in enumerate(values):
        if value is None or i >= len(fields):
            out.append(_plain(value))
            continue
        try:
            out.append(to_json(fields[i].field_type, value))
        except (TypeError, ValueError):
            out.append(_plain(value))
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def content_file_json(
    metadata: Any, file: Any, stats: frozenset[int] = frozenset(), types: PartitionTypes | None = None
) -> dict[str, Any]:
    """One `DataFile` or `DeleteFile` as the spec's `ContentFile` (a data file's column counts of
    the field ids `stats` only)."""
    content = CONTENT[int(file.content)]
    spec_id = int(file.spec_id) if getattr(file, "spec_id", None) is not None else 0
    body: dict[str, Any] = {
        "content": content,
        "file-path": file.file_path,
        "file-format": str(file.file_format.value).lower(),
        "spec-id": spec_id,
        "partition": partition_json(metadata, spec_id, file.partition, types),
        "file-size-in-bytes": int(file.file_size_in_bytes),
        "record-count": int(file.record_count),
    }
    if file.key_metadata:
        body["key-metadata"] = bytes(file.key_metadata).hex()
    if file.split_offsets:
        body["split-offsets"] = [int(o) for o in file.split_offsets]
    if file.sort_order_id is not None:
        body["sort-order-id"] = int(file.sort_order_id)
    if content == "data":
        for name, values in () if not stats else (
            ("column-sizes", file.column_sizes), ("value-counts", file.value_counts),
            ("null-value-counts", file.null_value_counts), ("nan-value-counts", file.nan_value_counts),
        ):  # fmt: skip
            counted = _count_map(values, stats)
            if counted is not None:
                body[name] = counted
        first_row = getattr(file, "first_row_id", None)
        if first_row is not None:
            body["first-row-id"] = int(first_row)
    elif content == "position-deletes":
        for name, attribute in (
            ("referenced-data-file", "referenced_data_file"), ("content-offset", "content_offset"),
            ("content-size-in-bytes", "content_size_in_bytes"),
        ):  # fmt: skip
            value = getattr(file, attribute, None)
            if value is not None:
                body[name] = value
    else:
        if file.equality_ids:
            body["equality-ids"] = [int(i) for i in file.equality_ids]
    return body

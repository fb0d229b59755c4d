"""A table's metadata file as JSON, made from the previous file's bytes where the two agree.

Every commit writes the table's whole metadata and answers it whole (the spec's
`CommitTableResponse`), and most of it is three arrays that grow with the table's history: its
snapshots, its snapshot log and its metadata log. A commit leaves their entries as they were:
pyiceberg's updates build the new metadata around the very entry objects of its base (an append
adds one to each; the metadata log, once full, also drops its oldest). Serialising them again cost
a commit 7 ms at 1,000 snapshots (pydantic, and pyiceberg's summary serializer in Python, per
snapshot). So the catalog keeps, with each file's JSON, where each entry's bytes are in it; the
next file's JSON is the rest of the metadata serialised as pyiceberg serialises it, and in each
array the entries still in a row as they were copied as one run of the previous file's bytes, any
other entry serialised. What a commit then costs that grows with the history is copying bytes
the file and the answer hold anyway.

The bytes are those of `metadata_json` exactly (tests compare them on every commit kind and format
version); format-version 1 tables, whose snapshots pyiceberg rewrites as it serialises them, are
serialised whole.

Pure functions on metadata values: no storage, no store.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import is_
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from share_store.catalog.commits import metadata_json

#: The arrays whose entries are copied, by their key in the file and their field in the metadata.
_ARRAYS = (("snapshots", "snapshots"), ("snapshot-log", "snapshot_log"), ("metadata-log", "metadata_log"))


@dataclass(frozen=True)
class Entries:
    """One of those arrays in a file's JSON: the entry objects serialised into it, in order, and
    where each one's bytes are."""

    #: The objects themselves: an entry is copied only for the very object it was made from, never
    #: for an equal one or one at a reused `id()`.
    items: list[Any]
    #: Each entry's start and end, in pairs, counted from `at`: a run copied from the start of an
    #: array keeps them as they are.
    bounds: array[int]
    #: Where the array's first entry starts in the file's bytes.
    at: int

    def span(self, index: int) -> tuple[int, int]:
        """Where the `index`th entry's bytes are in the file."""
        return self.at + self.bounds[2 * index], self.at + self.bounds[2 * index + 1]


@dataclass(frozen=True)
class MetadataText:
    """A metadata file's JSON (`data`, the bytes `metadata_json` makes), and where its entries are."""

    data: bytes
    #: By the array's key in the file; none for a file serialised whole.
    arrays: dict[str, Entries] = field(default_factory=dict, repr=False)


def _serialised(entry: Any) -> bytes:
    """`entry` as `IcebergBaseModel.model_dump_json` writes it (no entry has private fields for it
    to leave out), by pydantic's serializer directly: a file's first JSON, all entries serialised,
    then takes 4.7 ms at 1,000 snapshots (7.4 ms through `model_dump_json`)."""
    return entry.__pydantic_serializer__.to_json(entry, by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


def metadata_text(metadata: TableMetadata, previous: MetadataText | None = None) -> MetadataText:
    """`metadata_json(metadata)`, with the entries `previous` holds copied from it."""
    if metadata.format_version == 1:
        return MetadataText(metadata_json(metadata))
    rest = metadata_json(metadata.model_copy(update={name: [] for _, name in _ARRAYS}))
    closes: list[tuple[int, str, str]] = []  # where each emptied array's `]` is in `rest`
    for key, name in _ARRAYS:
        # Only the metadata's own key can look like this (pydantic writes no spaces): a quote
        # inside any string value is escaped. Never seen otherwise; the plain way, to be sure.
        empty = f'"{key}":[]'.encode()
        at = rest.find(empty)
        if at < 0 or rest.find(empty, at + 1) >= 0:
            return MetadataText(metadata_json(metadata))
        closes.append((at + len(empty) - 1, key, name))
    closes.sort()
    data = bytearray()
    arrays: dict[str, Entries] = {}
    source = memoryview(previous.data if previous is not None else b"")
    done = 0
    for close, key, name in closes:
        data += rest[done:close]
        was = previous.arrays.get(key) if previous is not None else None
        arrays[key] = _entries(data, getattr(metadata, name), was, source)
        done = close
    data += rest[done:]
    return MetadataText(bytes(data), arrays)


def _entries(data: bytearray, items: list[Any], was: Entries | None, source: memoryview) -> Entries:
    """Append `items` to `data` as a JSON array's entries, copying from `source` (the file `was`
    is in) the run of them that it held in a row, and where a later one is the very object it
    held; serialise the others."""
    at = len(data)
    bounds: array[int] = array("q")
    first = 0  # the first entry not yet in `data`
    old = was.items if was is not None else []
    outside_run = len(old)  # how many of `was`'s entries the run did not copy
    if was is not None and items and old:
        # Where this array's first entry was (the start, or after the entries a log dropped), and
        # how many after it are still the same objects in a row: compared in C, not per entry.
        start = 0 if old[0] is items[0] else _position(items[0], old)
        if start >= 0:
            kept = list(map(is_, items, old[start:]))
            run = kept.index(False) if False in kept else len(kept)
            begin, end = was.bounds[2 * start], was.bounds[2 * (start + run) - 1]
            data += source[was.at + begin : was.at + end]
            run_bounds = was.bounds[2 * start : 2 * (start + run)]
            bounds = run_bounds if begin == 0 else array("q", (b - begin for b in run_bounds))
            first, outside_run = run, len(old) - run
    index: dict[int, int] | None = None
    for item in items[first:]:
        if len(data) > at:
            data += b","
        start_at = len(data)
        found = None
        if outside_run and was is not None:  # one kept out of the run (rare: an expiry, a log rewritten)
            if index is None:
                index = {id(entry): position for position, entry in enumerate(was.items)}
            position = index.get(id(item))
            if position is not None and was.items[position] is item:
                found = was.span(position)
        data += source[found[0] : found[1]] if found is not None else _serialised(item)
        bounds.append(start_at - at)
        bounds.append(len(data) - at)
    return Entries(list(items), bounds, at)


def _position(entry: Any, entries: list[Any]) -> int:
    """Where the very object `entry` is in `entries`, or -1: compared in C, not per entry."""
    same = list(map(is_, repeat(entry), entries))
    return same.index(True) if True in same else -1

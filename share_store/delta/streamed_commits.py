"""The active files of a version with no checkpoint, listed as its commits' lines are parsed.

A table loaded in one go has one big commit and no checkpoint until its tenth
version: 100,000 files are a 28 MB commit, whose actions take 0.25 s to parse
into dictionaries and 0.7 s more to hold as a snapshot, and its first reader
waited for all of it. Here the commits are scanned once by pyarrow's JSON reader
(C++, both cores, only the columns named in `SCAN_SCHEMA`: 70 ms for those
28 MB) for what the head lines need before any file: the protocol, the metadata,
and which files stay active, so their count and bytes. The file lines are then
parsed one at a time as they are listed, while the held snapshot is built behind
the answer (`DeltaTableReader.snapshot`).

The files come in the order a held replay keeps them, a dictionary by identity
filled commit after commit: a page read from this set and the next from the
held snapshot must agree. Most files are added once and never removed, and sit
where they were added. The few that are not (removed later, or added again) are
the "suspects": found with vectorized set lookups, they are replayed apart, and
each is listed where the dictionary would hold it, with its last add.

Anything the scan cannot read as the log's actions (a line that is not one
object, a field of an unexpected type, deletion vectors without their fields)
makes `scan` answer None, and the version is replayed the usual way, which
reports what is wrong as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from share_store.errors import TableLogDamaged
from share_store.tables.active_files import Identity, UnheldFileSet

Action = dict[str, Any]

_DELETION_VECTOR = pa.struct(
    [("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int64())]
)
_FILE = [("path", pa.string()), ("deletionVector", _DELETION_VECTOR)]
#: What the scan reads of each action; every other field is skipped unparsed into columns.
SCAN_SCHEMA = pa.schema(
    [
        ("add", pa.struct([*_FILE, ("size", pa.int64())])),
        ("remove", pa.struct(_FILE)),
        ("metaData", pa.struct([])),
        ("protocol", pa.struct([])),
    ]
)
_SCAN_OPTIONS = pa_json.ParseOptions(explicit_schema=SCAN_SCHEMA, unexpected_field_behavior="ignore")
# Blocks of 4 MB scan a 28 MB commit in 50 ms, the default 1 MB in 75 ms.
_READ_OPTIONS = pa_json.ReadOptions(block_size=4 << 20)
_NEWLINE, _OPEN = ord("\n"), ord("{")
_line_finder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit-lines")


class Lines:
    """A log's non-blank lines, as offsets into its bytes: what `bytes.splitlines` and a strip
    of each would give, in a tenth of the time and without an object per line.

    Split at newlines alone: a carriage return ends a line for `splitlines` too, but a
    line that holds two objects is refused by `scan` for not having one row per line.
    """

    def __init__(self, data: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self._view = memoryview(data)
        self._starts = starts
        self._ends = ends

    @classmethod
    def of(cls, data: bytes) -> Lines:
        buffer = np.frombuffer(data, np.uint8)
        # A megabyte at a time: the comparison's array stays in cache, twice as fast as whole.
        step = 1 << 20
        found = [
            np.flatnonzero(buffer[at : at + step] == _NEWLINE) + at for at in range(0, len(buffer), step)
        ]
        breaks = np.concatenate(found) if found else np.zeros(0, np.int64)
        starts = np.concatenate(([0], breaks + 1))
        ends = np.concatenate((breaks, [len(data)]))
        # Lines that open an object are not blank; the few others are looked at one by one.
        opening = np.zeros(len(starts), bool)
        inside = starts < len(data)
        opening[inside] = buffer[starts[inside]] == _OPEN
        kept = opening.copy()
        for index in np.flatnonzero(~opening).tolist():
            kept[index] = bool(data[starts[index] : ends[index]].strip())
        return cls(data, starts[kept], ends[kept])

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, row: int) -> memoryview:
        return self._view[int(self._starts[row]) : int(self._ends[row])]


@dataclass(frozen=True)
class ScannedCommits:
    """A version's newest protocol and metadata actions and its active files, from its commits alone."""

    protocol: Action | None
    metadata: Action | None
    files: StreamedCommits


def scan(
    commits: list[bytes], loads: Callable[[Any], Action], identity: Callable[[Action], Identity]
) -> ScannedCommits | None:
    """The state after `commits` (oldest first, from version 0); None if the scan cannot tell it."""
    data = commits[0] if len(commits) == 1 else b"\n".join(commits)
    # The lines are found while pyarrow parses (both let go of the interpreter): 10 ms of 65.
    found = _line_finder.submit(Lines.of, data)
    try:
        table = pa_json.read_json(
            pa.BufferReader(data), read_options=_READ_OPTIONS, parse_options=_SCAN_OPTIONS
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    finally:
        lines = found.result()
    if table.num_rows != len(lines):  # two objects on one line, which a replay refuses
        return None
    table = table.combine_chunks()
    add, remove = table.column("add").chunk(0), table.column("remove").chunk(0)
    is_add = add.is_valid()
    # One action per line, taken as a replay applies it: an add first, then a remove, ...
    is_remove = pc.and_(pc.invert(is_add), remove.is_valid())
    others = pc.invert(pc.or_(is_add, is_remove))
    is_metadata = pc.and_(others, table.column("metaData").chunk(0).is_valid())
    is_protocol = pc.and_(
        pc.and_(others, pc.invert(is_metadata)), table.column("protocol").chunk(0).is_valid()
    )
    keys = _keys(add, remove, is_add, is_remove)
    if keys is None:
        return None
    add_rows = pc.indices_nonzero(is_add)
    add_keys = keys.take(add_rows)
    remove_keys = keys.filter(is_remove)
    suspect_keys = pc.unique(pa.concat_arrays([remove_keys, _repeated(add_keys)]))
    placed: dict[int, Action] = {}
    suspect_rows: set[int] = set()
    sizes = add.field("size").take(add_rows)
    vectors = add.field("deletionVector").take(add_rows)
    if len(suspect_keys):
        suspect_adds = pc.is_in(add_keys, value_set=suspect_keys)
        suspect_rows = set(add_rows.filter(suspect_adds).to_pylist())
        suspects = pc.and_(pc.or_(is_add, is_remove), pc.is_in(keys, value_set=suspect_keys))
        placed = _replay_apart(pc.indices_nonzero(suspects).to_pylist(), lines, loads, identity)
        plain = pc.invert(suspect_adds)
        sizes, vectors = sizes.filter(plain), vectors.filter(plain)
    count = len(sizes) + len(placed)
    size = (pc.sum(sizes).as_py() or 0) + sum(int(action.get("size") or 0) for action in placed.values())
    # `_keys` refused vectors without their fields, so a valid one is a non-empty descriptor.
    vectors_present = vectors.null_count < len(vectors) or any(
        a.get("deletionVector") for a in placed.values()
    )
    # Through NumPy: `to_pylist()` takes 23 ms for 100,000 rows, this 2.
    rows_of_adds = add_rows.to_numpy().tolist()
    files = StreamedCommits(lines, rows_of_adds, suspect_rows, placed, loads, (count, size, vectors_present))
    return ScannedCommits(
        _last(lines, is_protocol, "protocol", loads), _last(lines, is_metadata, "metaData", loads), files
    )


def _repeated(keys: pa.Array) -> pa.Array:
    """The keys found more than once (none, as a rule: a file is added once, then its distinct
    keys are as many as its rows, which `unique` tells in 7 ms where `value_counts` takes 12)."""
    if len(pc.unique(keys)) == len(keys):
        return keys.slice(0, 0)
    counted = pc.value_counts(keys)
    return counted.field("values").filter(pc.greater(counted.field("counts"), 1))


def _keys(
    add: pa.StructArray, remove: pa.StructArray, is_add: pa.Array, is_remove: pa.Array
) -> pa.Array | None:
    """Per line, a string equal for lines of the same file identity (path and deletion vector).

    Different identities may share a key (the separator may be in a path): they are then
    suspects, and replayed apart by their exact identity. None where a replay would fail.
    """
    path = pc.if_else(is_add, add.field("path"), remove.field("path"))
    vector = pc.if_else(is_add, add.field("deletionVector"), remove.field("deletionVector"))
    acting = pc.or_(is_add, is_remove)
    if pc.any(pc.and_(acting, path.is_null())).as_py():
        return None
    if vector.null_count == len(vector):
        return path
    storage, where = vector.field("storageType"), vector.field("pathOrInlineDv")
    incomplete = pc.and_(vector.is_valid(), pc.or_(storage.is_null(), where.is_null()))
    if pc.any(pc.and_(acting, incomplete)).as_py():
        return None
    offset = pc.binary_join_element_wise("@", pc.cast(vector.field("offset"), pa.string()), "")
    vector_id = pc.binary_join_element_wise(
        storage, where, pc.fill_null(offset, ""), "", null_handling="replace", null_replacement=""
    )
    return pc.binary_join_element_wise(path, pc.fill_null(vector_id, ""), "\x00")


def _replay_apart(
    rows: list[int],
    lines: Lines,
    loads: Callable[[Any], Action],
    identity: Callable[[Action], Identity],
) -> dict[int, Action]:
    """The suspects' lines replayed as a held replay does: row of each survivor's place → its last add."""
    active: dict[Identity, tuple[int, Action]] = {}
    for row in rows:
        action = _parsed(lines, row, loads)
        if (add := action.get("add")) is not None:
            key = identity(add)
            place = active[key][0] if key in active else row
            active[key] = (place, add)
        else:
            active.pop(identity(action["remove"]), None)
    return {place: add for place, add in active.values()}


def _last(lines: Lines, kind: pa.Array, name: str, loads: Callable[[Any], Action]) -> Action | None:
    rows = pc.indices_nonzero(kind)
    if not len(rows):
        return None
    value: Action = _parsed(lines, rows[-1].as_py(), loads)[name]
    return value


def _parsed(lines: Lines, row: int, loads: Callable[[Any], Action]) -> Action:
    try:
        return loads(lines[row])
    except ValueError as error:  # pyarrow read the line, orjson and json do not
        raise TableLogDamaged("the log is unreadable: a commit line is not JSON") from error


class StreamedCommits(UnheldFileSet):
    """A version's active files as its commits' lines, parsed each time they are listed.

    Holds the lines (the commits' bytes, a tenth of the dictionaries they make),
    the line of each add, and the suspects' places (see the module's note).
    """

    def __init__(
        self,
        lines: Lines,
        add_rows: list[int],
        suspect_rows: set[int],
        placed: dict[int, Action],
        loads: Callable[[Any], Action],
        totals: tuple[int, int, bool],
    ) -> None:
        super().__init__()
        self._lines = lines
        self._add_rows = add_rows
        self._suspect_rows = suspect_rows
        self._placed = placed
        self._loads = loads
        self.count, self.total_size, self.has_deletion_vectors = totals

    @property
    def resident_files(self) -> int:
        # The cache counts held files; a line held as bytes takes about an eighth of the
        # memory of the dictionaries a held file is (280 bytes against some 2 KB).
        return self.count // 8 + len(self._placed)

    def __iter__(self) -> Iterator[Action]:
        lines, loads, suspects, placed = self._lines, self._loads, self._suspect_rows, self._placed
        try:
            for row in self._add_rows:
                if row in suspects:
                    if row in placed:
                        yield placed[row]
                    continue
                try:
                    action = loads(lines[row])
                except ValueError as error:
                    raise TableLogDamaged("the log is unreadable: a commit line is not JSON") from error
                yield action["add"]
        finally:
            self.listed.set()

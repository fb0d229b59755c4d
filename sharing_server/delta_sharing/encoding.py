"""Turning raw Delta actions into signed protocol lines, in the chosen response format."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any, Protocol, cast, runtime_checkable

import pyarrow as pa

from share_store.storage.base import BatchSigning, UrlSigning
from share_store.tables import actions
from share_store.tables.actions import FileEntry
from share_store.tables.active_files import StreamedFileSet
from share_store.tables.changes import Change, FileChange, MetadataChange
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing import line_templates
from sharing_server.delta_sharing.line_templates import BUCKET, DV_BUCKET, DV_KEY, KEY, LineTemplate
from sharing_server.delta_sharing.streamed_lines import BatchEncoder, Unencodable, present_fields

PARQUET_KINDS = {"add": "add", "remove": "remove", "cdc": "cdf"}
#: Files of a held snapshot whose URLs are signed at once: few in the first batch, doubling up to
#: `SIGNED_BATCH`, since the answer's first chunk (64 KB, a hundred lines or so) waits for the
#: batches it holds; then enough that Arrow's work per batch is small beside its files'.
FIRST_SIGNED_BATCH = 64
SIGNED_BATCH = 4096
_UNMADE: Any = object()  # a file whose template is not made yet (None: cannot be made)


class FileSigner(Protocol):
    """What a table reader offers for signing its files (Delta and Iceberg alike)."""

    def locate(self, path: str) -> tuple[str, str]: ...

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None: ...

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning: ...


@runtime_checkable
class BatchFileSigner(FileSigner, Protocol):
    """A reader that also locates and signs a record batch of files at once (Delta's, whose
    snapshots alone may be streamed from a checkpoint)."""

    def locate_many(self, paths: pa.Array) -> tuple[str, pa.Array] | None: ...

    def batch_signer(self, now: float, lifetime: int | None = None) -> BatchSigning | None: ...

    @property
    def batch_signs_faster(self) -> bool:
        """Whether a held snapshot's files are signed a batch at a time too (`ObjectStorage`)."""
        ...


class LineEncoder:
    """Builds the lines of one response; remembers the earliest URL expiry it handed out."""

    def __init__(
        self,
        response_format: str,
        signer: FileSigner,
        now: float,
        hash_kind: str | None = None,
        history_shared: bool = True,
    ) -> None:
        self.format = response_format
        self.signer = signer
        self.now = now
        self.hash_kind = hash_kind or response_format
        self.history_shared = history_shared
        self.min_expiration: int | None = None
        #: Seconds the response's URLs stay valid (`UrlLifetimes.for_answer`); None: the storage's.
        self.url_lifetime: int | None = None
        #: Bytes of the data files handed out so far (for the audit record).
        self.file_bytes = 0
        self._url_signer: UrlSigning | None = None

    def served_bytes(self) -> int:
        return self.file_bytes

    def _signing(self) -> UrlSigning:
        """One signer for the whole response: its per-response work (keys, stamps) is done once."""
        if self._url_signer is None:
            self._url_signer = self.signer.url_signer(self.now, self.url_lifetime)
        return self._url_signer

    def _sign(self, location: tuple[str, str]) -> tuple[str, int]:
        url, expiration = self._signing()(*location)
        if self.min_expiration is None or expiration < self.min_expiration:
            self.min_expiration = expiration
        return url, expiration

    def protocol(self, snapshot: TableSnapshot) -> dict[str, Any]:
        if self.format == "delta":
            return actions.delta_protocol(snapshot)
        return actions.parquet_protocol()

    def metadata(self, snapshot: TableSnapshot, version: int | None = None) -> dict[str, Any]:
        if self.format == "delta":
            return actions.delta_metadata(snapshot, version)
        return actions.parquet_metadata(snapshot, self.history_shared, version)

    def file(
        self,
        kind: str,
        action: dict[str, Any],
        partition_columns: tuple[str, ...] = (),
        version: int | None = None,
        timestamp: int | None = None,
    ) -> dict[str, Any]:
        """One data file: `kind` is `add` (snapshot or change), `remove` or `cdc`.

        A snapshot file is an `add` without a timestamp; in the parquet format it
        is written as a `file` line.
        """
        return self.entry_file(kind, FileEntry(action, partition_columns), version, timestamp)

    def change(self, change: Change) -> dict[str, Any]:
        """One line of a streaming or change data feed read."""
        if isinstance(change, FileChange):
            return self.file(
                change.kind, change.action, change.partition_columns, change.version, change.timestamp
            )
        if isinstance(change, MetadataChange):
            return self.metadata(change.snapshot, version=change.version)
        return {"protocol": actions.delta_protocol(change.snapshot)["protocol"] | {"version": change.version}}

    def entry_file(
        self, kind: str, entry: FileEntry, version: int | None = None, timestamp: int | None = None
    ) -> dict[str, Any]:
        """`file` for an action already wrapped, as a snapshot's files are."""
        action = entry.action
        url, expiration = self._sign(self.signer.locate(action["path"]))
        self.file_bytes += action.get("size") or 0
        if self.format == "delta":
            dv_url = None
            descriptor = action.get("deletionVector")
            location = self.signer.locate_dv(descriptor) if descriptor else None
            if location is not None:
                dv_url, _ = self._sign(location)
            return actions.delta_file(
                kind, action, url, expiration, self.hash_kind, dv_url, version, timestamp
            )
        line_kind = "file" if kind == "add" and timestamp is None else PARQUET_KINDS[kind]
        return actions.parquet_file(entry, url, expiration, self.hash_kind, version, timestamp, line_kind)

    def snapshot_files(
        self, snapshot: TableSnapshot, entries: Iterable[FileEntry] | None = None, version: int | None = None
    ) -> Iterator[dict[str, Any] | bytes]:
        """The `add` lines of `entries`, files of `snapshot` (all of them when None): encoded, ready to send.

        A snapshot that holds its files keeps each line's template (see
        `line_templates`), made by the first response that sends it; later
        responses in the same format only sign and splice. A streamed snapshot
        makes its actions anew on every pass, and its lines are encoded whole.
        """
        if snapshot.streamed:
            if entries is None and isinstance(snapshot.adds, StreamedFileSet):
                yield from self._streamed_files(snapshot.adds, tuple(snapshot.partition_columns), version)
                return
            for entry in entries if entries is not None else actions.entries(snapshot):
                yield self.entry_file("add", entry, version=version)
            return
        # Entries are the snapshot's actions with its partition columns: the actions suffice.
        files = snapshot.adds if entries is None else (entry.action for entry in entries)
        templates = self._templates(snapshot, version)
        signer = self.signer
        if isinstance(signer, BatchFileSigner) and signer.batch_signs_faster:
            sign_many = signer.batch_signer(self.now, self.url_lifetime)
            if sign_many is not None:
                yield from self._signed_in_batches(snapshot, files, templates, version, sign_many)
                return
        columns = tuple(snapshot.partition_columns)
        sign = self._signing()
        fill = line_templates.fill
        last_expiration, expiry = -1, b""
        for action in files:
            template = templates.get(id(action), _UNMADE)
            if template is _UNMADE:
                template = templates[id(action)] = self._template(FileEntry(action, columns), version)
            if template is None:
                yield self.entry_file("add", FileEntry(action, columns), version=version)
                continue
            url, expiration = sign(template[BUCKET], template[KEY])
            self.file_bytes += action.get("size") or 0
            if expiration != last_expiration:  # once per response, as a rule
                last_expiration, expiry = expiration, str(expiration).encode()
                if self.min_expiration is None or expiration < self.min_expiration:
                    self.min_expiration = expiration
            dv_url = None if template[DV_KEY] is None else self._dv_url(template)
            yield fill(template, url, expiry, dv_url)

    def _signed_in_batches(
        self,
        snapshot: TableSnapshot,
        files: Iterable[dict[str, Any]],
        templates: dict[int, LineTemplate | None],
        version: int | None,
        sign_many: BatchSigning,
    ) -> Iterator[dict[str, Any] | bytes]:
        """`snapshot_files`' loop for a storage that signs a batch of URLs faster than one by one:
        the lines, in the same order, their URLs signed `SIGNED_BATCH` at a time."""
        columns = tuple(snapshot.partition_columns)
        pending: list[tuple[dict[str, Any], LineTemplate]] = []
        size = FIRST_SIGNED_BATCH
        for action in files:
            template = templates.get(id(action), _UNMADE)
            if template is _UNMADE:
                template = templates[id(action)] = self._template(FileEntry(action, columns), version)
            if template is None:
                yield from self._filled(pending, sign_many)  # the lines before it go first
                pending = []
                yield self.entry_file("add", FileEntry(action, columns), version=version)
                continue
            pending.append((action, template))
            if len(pending) >= size:
                yield from self._filled(pending, sign_many)
                pending, size = [], min(2 * size, SIGNED_BATCH)
        yield from self._filled(pending, sign_many)

    def _filled(
        self, pending: list[tuple[dict[str, Any], LineTemplate]], sign_many: BatchSigning
    ) -> Iterator[bytes]:
        """The lines of files whose templates are made, their URLs signed at once per bucket."""
        if not pending:
            return
        bucket = pending[0][1][BUCKET]
        if all(template[BUCKET] == bucket for _, template in pending):
            urls, expiration = sign_many(
                bucket, pa.array([template[KEY] for _, template in pending], pa.string())
            )
            signed: Iterable[tuple[str, int]] = zip(
                urls.to_numpy(zero_copy_only=False).tolist(), repeat(expiration)
            )
        else:  # files in several buckets (a table's files are in its own, as a rule): one by one
            signed = (self._sign((template[BUCKET], template[KEY])) for _, template in pending)
        fill = line_templates.fill
        last_expiration, expiry = -1, b""
        for (action, template), (url, expiration) in zip(pending, signed, strict=True):
            self.file_bytes += action.get("size") or 0
            if expiration != last_expiration:  # once per batch, as a rule
                last_expiration, expiry = expiration, str(expiration).encode()
                if self.min_expiration is None or expiration < self.min_expiration:
                    self.min_expiration = expiration
            dv_url = None if template[DV_KEY] is None else self._dv_url(template)
            yield fill(template, url, expiry, dv_url)

    def _dv_url(self, template: LineTemplate) -> str:
        """The URL of a file's deletion vector on disk (few tables have them)."""
        return self._sign((template[DV_BUCKET], template[DV_KEY]))[0]

    def prepare(self, snapshot: TableSnapshot) -> int:
        """Make the templates `snapshot_files` would make for every file of `snapshot`; how many were new.

        The snapshot warmer calls it, so that a recipient's first query finds the
        lines ready. A streamed snapshot keeps no templates: nothing is made.
        """
        if snapshot.streamed:
            return 0
        columns = tuple(snapshot.partition_columns)
        templates = self._templates(snapshot, None)
        made = 0
        for action in snapshot.adds:
            if id(action) not in templates:
                templates[id(action)] = self._template(FileEntry(action, columns), None)
                made += 1
        return made

    def _templates(self, snapshot: TableSnapshot, version: int | None) -> dict[int, LineTemplate | None]:
        """`snapshot`'s line templates in this response's format, kept in its memo.

        Keyed by the actions' ids: the snapshot holds every action, so ids stay theirs.
        """
        templates: dict[int, LineTemplate | None] = snapshot.memo.setdefault(
            ("lines", self.format, self.hash_kind, version), {}
        )
        return templates

    def _streamed_files(
        self, files: StreamedFileSet, columns: tuple[str, ...], version: int | None
    ) -> Iterator[dict[str, Any] | bytes]:
        """A streamed snapshot's lines, a checkpoint record batch at a time (see `streamed_lines`)."""
        signer = self.signer
        batches = None
        if isinstance(signer, BatchFileSigner):
            batches = BatchEncoder(
                self.format,
                self.hash_kind,
                self._signing(),
                signer.batch_signer(self.now, self.url_lifetime),
                signer.locate_many,
                columns,
                version,
            )
        for adds, suspects in files.batches():
            made = None
            kept = files.kept(adds, suspects) if batches is not None else None
            if batches is not None and kept is not None:
                try:
                    made = batches.encode(kept, present_fields(adds))
                except Unencodable:
                    pass
            if made is None:
                for add in files.rows(adds, suspects):
                    yield self.entry_file("add", FileEntry(add, columns), version=version)
                continue
            self.file_bytes += made.file_bytes
            if made.min_expiration is not None and (
                self.min_expiration is None or made.min_expiration < self.min_expiration
            ):
                self.min_expiration = made.min_expiration
            if made.lines:
                yield made.lines
        for add in files.tail:
            yield self.entry_file("add", FileEntry(add, columns), version=version)

    def _template(self, entry: FileEntry, version: int | None) -> LineTemplate | None:
        """The line of one snapshot file with holes for its URLs and expiry."""
        action = entry.action
        location = self.signer.locate(action["path"])
        url, expiry = line_templates.URL, cast(int, line_templates.EXPIRY)
        if self.format == "delta":
            descriptor = action.get("deletionVector")
            dv_location = self.signer.locate_dv(descriptor) if descriptor else None
            dv_url = line_templates.DV_URL if dv_location is not None else None
            line = actions.delta_file("add", action, url, expiry, self.hash_kind, dv_url, version)
            return line_templates.make_template(line, location, dv_location)
        line = actions.parquet_file(entry, url, expiry, self.hash_kind, version)
        return line_templates.make_template(line, location)

"""A read-only Iceberg Hadoop catalog: tables found by walking a warehouse directory, `HadoopCatalog`.

Another engine (Spark, Flink, Trino with `type=hadoop`) keeps each table in a folder of the
warehouse, its namespaces the folders on the way:

    <warehouse>/<ns 1>/<ns 2>/<table>/metadata/v1.metadata.json     (or v1.gz.metadata.json)
                                              /metadata/v2.metadata.json
                                              /metadata/version-hint.text   ("2")

A folder is a table when its `metadata/` folder holds a version hint or a `vN.metadata.json`;
every other folder is a namespace. A table's current metadata is the version the hint names,
followed past it while the next version's file exists (the hint is written after the commit,
as Iceberg's own `HadoopTableOperations` reads it), or the highest version when the hint is
missing or names a file that is not there. It is looked up on every `load_table`, so a shared
table follows the commits of the engine that writes it.

The warehouse is a local path, a `file://` URI or `s3://bucket/prefix`, listed with pyarrow's
filesystem of pyiceberg's `PyArrowFileIO` (so `s3.*` properties configure S3 as they do for
pyiceberg). No name of an identifier may leave the warehouse (`..`, `/`). Every write is
`NoopCatalog`'s refusal.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NoReturn

from pyarrow.fs import FileInfo, FileSelector, FileSystem, FileType
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier, Properties

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

METADATA = "metadata"
VERSION_HINT = "version-hint.text"
#: `v12.metadata.json` and its gzipped form `v12.gz.metadata.json` (Iceberg's Hadoop naming).
METADATA_FILE = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json$")
#: Characters no name of a namespace or table may hold: they would leave or escape its folder.
FORBIDDEN = re.compile(r"[/\\\x00]")


def valid_name(part: str) -> bool:
    """Whether `part` names one folder inside its parent: not empty, `.`, `..`, nor holding a slash."""
    return bool(part) and part not in (".", "..") and not FORBIDDEN.search(part)


def metadata_version(name: str) -> int | None:
    """N for a file `vN.metadata.json` or `vN.gz.metadata.json`, else None."""
    match = METADATA_FILE.match(name)
    return int(match.group(1)) if match else None


class HadoopCatalog(NoopCatalog):
    """The tables of a Hadoop-layout warehouse (`properties["warehouse"]`), read-only."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        warehouse = properties.get("warehouse", "")
        if not warehouse:
            raise ValueError(f"the Hadoop catalog '{name}' needs a warehouse location")
        scheme, netloc, path = PyArrowFileIO.parse_location(warehouse, properties)
        self._scheme = scheme
        self._netloc = netloc
        # As pyarrow's filesystems take them: `bucket/key` on S3, an absolute path on a local disk.
        self._root = path.rstrip("/") or "/"
        # Locations keep the warehouse's own form: a bare path stays a path (made absolute).
        self._location = warehouse.rstrip("/") if "://" in warehouse else self._root
        self._fs: FileSystem | None = None

    # -- paths --------------------------------------------------------------------

    @property
    def fs(self) -> FileSystem:
        """The pyarrow filesystem of the warehouse, made on first use."""
        if self._fs is None:
            self._fs = PyArrowFileIO(self.properties).fs_by_scheme(self._scheme, self._netloc)
        return self._fs

    def _path(self, parts: tuple[str, ...]) -> str:
        """The filesystem path of `parts` under the warehouse."""
        return "/".join((self._root.rstrip("/"), *parts)) if parts else self._root

    def _uri(self, parts: tuple[str, ...]) -> str:
        """The location of `parts` under the warehouse, in the warehouse's own form (path or URI)."""
        return "/".join((self._location, *parts))

    def _info(self, path: str) -> FileInfo:
        return self.fs.get_file_info(path)

    def _is_dir(self, path: str) -> bool:
        return self._info(path).type == FileType.Directory

    def _children(self, path: str) -> list[FileInfo]:
        """The entries directly in the folder `path` (none when it is missing)."""
        try:
            return self.fs.get_file_info(FileSelector(path, allow_not_found=True, recursive=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _is_table_dir(self, path: str) -> bool:
        """Whether the folder `path` is a table: `metadata/` with a version hint or a `vN.metadata.json`."""
        metadata = f"{path}/{METADATA}"
        # The hint first: one look-up, where listing `metadata/` may list every manifest too.
        if self._info(f"{metadata}/{VERSION_HINT}").type == FileType.File:
            return True
        if not self._is_dir(metadata):
            return False
        return any(
            entry.type == FileType.File and metadata_version(entry.base_name) is not None
            for entry in self._children(metadata)
        )

    def _is_namespace_dir(self, parts: tuple[str, ...]) -> bool:
        path = self._path(parts)
        return self._is_dir(path) and (not parts or not self._is_table_dir(path))

    # -- identifiers --------------------------------------------------------------

    @staticmethod
    def _namespace(namespace: str | Identifier) -> tuple[str, ...]:
        parts = Catalog.identifier_to_tuple(namespace) if namespace else ()
        if parts == ("",):
            return ()
        if not all(valid_name(part) for part in parts):
            raise NoSuchNamespaceError(f"not a valid namespace: {parts!r}")
        return tuple(parts)

    @staticmethod
    def _table(identifier: str | Identifier) -> tuple[str, ...]:
        parts = Catalog.identifier_to_tuple(identifier)
        if not parts or not all(valid_name(part) for part in parts):
            raise NoSuchTableError(f"not a valid table identifier: {parts!r}")
        return tuple(parts)

    def _existing_namespace(self, namespace: str | Identifier) -> tuple[str, ...]:
        parts = self._namespace(namespace)
        if not self._is_namespace_dir(parts):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(parts)}")
        return parts

    # -- versions -----------------------------------------------------------------

    def _metadata_file(self, table_path: str, version: int) -> str | None:
        """The name of version `version`'s metadata file in the table's `metadata/`, if there is one."""
        names = (f"v{version}.metadata.json", f"v{version}.gz.metadata.json")
        infos = self.fs.get_file_info([f"{table_path}/{METADATA}/{name}" for name in names])
        for name, info in zip(names, infos, strict=True):
            if info.type == FileType.File:
                return name
        return None

    def _hint(self, table_path: str) -> int | None:
        """The version `version-hint.text` names, or None when it is missing or unreadable."""
        try:
            with self.fs.open_input_stream(f"{table_path}/{METADATA}/{VERSION_HINT}") as stream:
                text = stream.read(64).decode("utf-8", errors="replace").strip()
        except (FileNotFoundError, OSError):
            return None
        return int(text) if text.isdigit() else None

    def current_metadata(self, identifier: str | Identifier) -> str:
        """The location of the table's current metadata file; NoSuchTableError when it has none."""
        parts = self._table(identifier)
        table_path = self._path(parts)
        hint = self._hint(table_path)
        hinted = self._metadata_file(table_path, hint) if hint is not None else None
        if hint is not None and hinted is not None:
            version, found = hint, hinted
            while (following := self._metadata_file(table_path, version + 1)) is not None:
                version, found = version + 1, following
        else:
            versions = {
                number: entry.base_name
                for entry in self._children(f"{table_path}/{METADATA}")
                if entry.type == FileType.File and (number := metadata_version(entry.base_name)) is not None
            }
            if not versions:
                self._missing_table(parts)
            found = versions[max(versions)]
        return self._uri((*parts, METADATA, found))

    def _missing_table(self, parts: tuple[str, ...]) -> NoReturn:
        name = ".".join(parts)
        if len(parts) > 1 and not self._is_namespace_dir(parts[:-1]):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(parts[:-1])}")
        raise NoSuchTableError(f"Table does not exist: {name}")

    # -- reads --------------------------------------------------------------------

    def load_table(self, identifier: str | Identifier) -> Table:
        """The table as its current metadata file has it now."""
        parts = self._table(identifier)
        location = self.current_metadata(parts)
        io = load_file_io(self.properties, location)
        metadata: TableMetadata = FromInputFile.table_metadata(io.new_input(location))
        return Table(
            identifier=parts,
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(metadata.properties, location),
            catalog=self,
        )

    def table_exists(self, identifier: str | Identifier) -> bool:
        try:
            parts = self._table(identifier)
        except NoSuchTableError:
            return False
        return self._is_table_dir(self._path(parts))

    def namespace_exists(self, namespace: str | Identifier) -> bool:
        try:
            parts = self._namespace(namespace)
        except NoSuchNamespaceError:
            return False
        return bool(parts) and self._is_namespace_dir(parts)

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        """The namespaces directly in `namespace` (the warehouse's top level by default), in full."""
        parts = self._existing_namespace(namespace) if namespace else ()
        return sorted(
            (*parts, entry.base_name)
            for entry in self._children(self._path(parts))
            if entry.type == FileType.Directory
            and valid_name(entry.base_name)
            and not entry.base_name.startswith(".")
            and not self._is_table_dir(entry.path)
        )

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        """The tables directly in `namespace`, as full identifiers."""
        parts = self._existing_namespace(namespace)
        return sorted(
            (*parts, entry.base_name)
            for entry in self._children(self._path(parts))
            if entry.type == FileType.Directory
            and valid_name(entry.base_name)
            and self._is_table_dir(entry.path)
        )

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        """A namespace's only property, as Iceberg's Hadoop catalog has it: its `location`."""
        parts = self._existing_namespace(namespace)
        return {"location": self._uri(parts)}

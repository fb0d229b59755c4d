"""Whether a table exists where an admin's spec says, checked when the spec is given.

Without it, `share create` of a bucket that does not exist succeeds and the
mistake shows up only when a recipient reads. `--no-check` skips it for tables
created later.
"""

from __future__ import annotations

from share_store.errors import AdminError, ShareStoreError
from share_store.iceberg.catalogs import CatalogRegistry
from share_store.model import TableSpec
from share_store.storage.base import ObjectStorage

NO_CHECK_HINT = "(add --no-check to share it before it is written)"


class TableCheck:
    """Checks specs against the storage (Delta: a `_delta_log/`) and the catalogs (Iceberg)."""

    def __init__(self, storage: ObjectStorage, catalogs: CatalogRegistry) -> None:
        self.storage = storage
        self.catalogs = catalogs

    def __call__(self, spec: TableSpec) -> None:
        if spec.format == "uniform":
            self._iceberg(spec)
        else:
            self._delta(spec)

    def _delta(self, spec: TableSpec) -> None:
        try:
            found = next(iter(self.storage.list(spec.bucket, f"{spec.path}/_delta_log/")), None)
        except (OSError, ShareStoreError) as error:
            raise AdminError(f"cannot look for table {spec.bucket}/{spec.path}: {error}") from error
        if found is None:
            raise AdminError(
                f"no Delta table at {spec.bucket}/{spec.path}: it has no _delta_log/ {NO_CHECK_HINT}"
            )

    def _iceberg(self, spec: TableSpec) -> None:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        warehouse = spec.bucket
        namespace_text, _, table = spec.path.rpartition("/")
        namespace = tuple(namespace_text.split("."))
        name = ".".join((*namespace, table))
        try:
            self.catalogs.catalog(warehouse).load_table((*namespace, table))
        except (NoSuchTableError, NoSuchNamespaceError) as error:
            raise AdminError(f"no Iceberg table {name} in warehouse '{warehouse}' {NO_CHECK_HINT}") from error
        except ShareStoreError as error:
            raise AdminError(f"cannot look for Iceberg table {name}: {error.message}") from error

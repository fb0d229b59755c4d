"""A shared table as server-side scan planning sees it: the metadata its grant shows the recipient
(a restricted table's generated metadata, whose manifests name only its allowed and derived
files), read with the server's keys for the table's store; and what the plan's tokens are bound to.
"""

from __future__ import annotations

from typing import Any

from share_store.iceberg.scan_plans import binding
from share_store.iceberg_shares.grants import TableGrant
from share_store.model import SharedTable


def visible_table(grant: TableGrant, table: SharedTable) -> Any:
    """pyiceberg's `Table` of what `grant` shows of `table`: the same metadata a load answers."""
    from pyiceberg.catalog.noop import NoopCatalog
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadataUtil

    from share_store.catalog.file_io import settings_io_properties

    metadata = TableMetadataUtil.parse_obj(grant.shared_metadata(table.history_shared))
    return Table(
        identifier=(table.schema, table.name),
        metadata=metadata,
        metadata_location=grant.metadata_location,
        io=PyArrowFileIO(settings_io_properties(grant.store)),
        catalog=NoopCatalog("scan-planning"),
    )


def share_binding(share: str, table: SharedTable, grant: TableGrant, caller: str) -> str:
    """What a shared table's plan tokens are bound to: the share, the table, the caller (the token
    that planned: another token's fetch is refused), and for
    a restricted table the metadata generated for its restriction (a restriction changed since the
    plan makes its tokens unknown, so no page planned under the old one is answered)."""
    restricted = grant.metadata_location if grant.restricted else ""
    return binding("iceberg", share, table.id, table.schema, table.name, caller, restricted)

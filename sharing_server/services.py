"""`Services`: what the server's handlers work with, made once per app by `create_app`.

Each package's routes are given the services their handlers use when the app is
made (`app_routes`): `ProtocolEndpoints` the store, queries and stream slots,
`ShareCatalog` the store and the tables' grants, the own warehouses' endpoints
the catalog and its callers, the admin API the admin commands and token, the
console its `Console`. No handler looks a service up on `app.state`, so what a
handler depends on is in its constructor's signature.
"""

from __future__ import annotations

from dataclasses import dataclass

from share_store.authentication.sign_in_throttle import AdminToken
from share_store.catalog.callers import CatalogCallers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess
from share_store.catalog.maintenance.background import BackgroundMaintenance
from share_store.iceberg_shares.grants import IcebergGrants
from share_store.persistence import ShareStore
from share_store.readers.table_readers import TableReaders
from share_store.signing.token_codec import TokenCodec
from share_store.storage.base import ObjectStorage
from sharing_server.admin.commands import Admin
from sharing_server.console.web import Console
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.warming import SnapshotWarmer
from sharing_server.http.stream_slots import StreamSlots
from sharing_server.observability.activity import ActivityRecorder
from sharing_server.observability.metrics import Metrics
from sharing_server.service_options import ServiceOptions


@dataclass(frozen=True)
class Services:
    prefix: str
    options: ServiceOptions
    store: ShareStore
    storage: ObjectStorage
    #: The server key: seals activation links' profiles, signs page and catalog tokens.
    secret: bytes
    metrics: Metrics
    activity: ActivityRecorder
    readers: TableReaders
    iceberg_grants: IcebergGrants
    warehouses: WarehouseCatalog
    callers: CatalogCallers
    data: DataAccess
    admin_token: AdminToken
    warmer: SnapshotWarmer
    #: The own warehouses' tables kept in the background (`[maintenance]`).
    maintenance: BackgroundMaintenance
    queries: TableQueries
    streams: StreamSlots
    list_tokens: TokenCodec
    admin: Admin
    #: None when the console is off (no admin token configured).
    console: Console | None

"""Who may do what in the own warehouses: every operation checked against its caller's policy first.

`CatalogAccess` is the catalog as one `Principal` may use it. Each method
decides, from the policy alone, whether the principal may take the
operation's `s3tables:` actions on its resource, and only then asks the
`WarehouseCatalog`, which applies the commit and location rules. Every entry
point goes through it: the HTTP API with the authenticated caller, the CLI and
the server itself as `PROVIDER`, whose rights are all of them. Lakekeeper and
Polaris decide authorization at this layer too, under their APIs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyiceberg.table import CommitTableRequest

from share_store.catalog import policies as actions
from share_store.catalog.catalog import LoadedTable, NewTable, WarehouseCatalog
from share_store.catalog.commits import creates
from share_store.catalog.dropped_tables import DroppedTable
from share_store.catalog.errors import NoSuchTable
from share_store.catalog.locations import MayTake
from share_store.catalog.names import TableName
from share_store.catalog.policies import Policy, table_arn, warehouse_arn
from share_store.catalog.table_pointers import TABLE, VIEW
from share_store.catalog.view_commits import ViewCommit
from share_store.catalog.views import LoadedView, NewView
from share_store.errors import Forbidden


@dataclass(frozen=True)
class Principal:
    """A catalog user with a policy, or the provider (no policy: everything)."""

    name: str
    policy: Policy | None
    #: A catalog user's access key (None for the provider): what a signing grant names it by.
    key: str | None = None

    def allows(self, action: str, resource: str) -> bool:
        return self.policy is None or self.policy.allows(action, resource)

    def require(self, action: str, resource: str) -> None:
        if not self.allows(action, resource):
            raise Forbidden(f"{self.name} is not allowed to {action} on {resource}")

    def require_any(self, names: Sequence[str], resource: str) -> None:
        """One of `names` allowed, and none denied: names for the same right (IAM's Deny wins)."""
        if self.policy is None:
            return
        effects = [self.policy.effect(action, resource) for action in names]
        if "Deny" in effects or "Allow" not in effects:
            raise Forbidden(f"{self.name} is not allowed to {' or '.join(names)} on {resource}")


#: The provider: the admin token, the CLI on the store, the server's own work.
PROVIDER = Principal("provider", None)


def _arn(table: TableName) -> str:
    return table_arn(table.warehouse, table.namespace, table.name)


class CatalogAccess:
    def __init__(self, catalog: WarehouseCatalog, who: Principal) -> None:
        self.catalog = catalog
        self.who = who

    def _may_take(self, action: str) -> MayTake:
        """Whether the caller may take over a dropped table's folder (`table_locations`): as if the
        dropped table were live, the operation's own action on the dropped table's own name."""
        return lambda dropped: self.who.allows(action, _arn(dropped))

    # -- warehouses ---------------------------------------------------------------------

    def list_warehouses(self) -> list[str]:
        names = self.catalog.list_warehouses()
        return [n for n in names if self.who.allows(actions.LIST_TABLE_BUCKETS, warehouse_arn(n))]

    def create_warehouse(self, name: str, adopt: bool = False) -> None:
        self.who.require(actions.CREATE_TABLE_BUCKET, warehouse_arn(name))
        if adopt and self.who.policy is not None:
            # Taking a bucket as it is makes its objects a warehouse's: the provider decides that.
            raise Forbidden("only the provider (the admin token) may adopt an existing bucket")
        self.catalog.create_warehouse(name, adopt)

    def has_warehouse(self, name: str) -> bool:
        self.who.require(actions.GET_TABLE_BUCKET, warehouse_arn(name))
        return self.catalog.has_warehouse(name)

    def warehouse_properties(self, name: str) -> dict[str, str]:
        self.who.require(actions.GET_TABLE_BUCKET, warehouse_arn(name))
        return self.catalog.warehouse_properties(name)

    def update_warehouse_properties(
        self, name: str, removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """The warehouse's table defaults: the provider's to set, as they apply to every user's tables."""
        if self.who.policy is not None:
            raise Forbidden("only the provider (the admin token) may change a warehouse's table defaults")
        return self.catalog.update_warehouse_properties(name, removals, updates)

    def drop_warehouse(self, name: str) -> None:
        self.who.require(actions.DELETE_TABLE_BUCKET, warehouse_arn(name))
        self.catalog.drop_warehouse(name)

    # -- namespaces (their actions are on the warehouse's ARN) -------------------------------

    def create_namespace(
        self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]
    ) -> dict[str, str]:
        """The new namespace's properties as stored (the create's own answer, with no `GetNamespace`)."""
        self.who.require(actions.CREATE_NAMESPACE, warehouse_arn(warehouse))
        self.catalog.create_namespace(warehouse, levels, properties)
        return self.catalog.load_namespace(warehouse, levels)

    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        self.who.require(actions.LIST_NAMESPACES, warehouse_arn(warehouse))
        return self.catalog.list_namespaces(warehouse, parent)

    def load_namespace(self, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
        self.who.require(actions.GET_NAMESPACE, warehouse_arn(warehouse))
        return self.catalog.load_namespace(warehouse, levels)

    def update_namespace_properties(
        self, warehouse: str, levels: tuple[str, ...], removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        self.who.require(actions.UPDATE_NAMESPACE_PROPERTIES, warehouse_arn(warehouse))
        return self.catalog.update_namespace_properties(warehouse, levels, removals, updates)

    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None:
        self.who.require(actions.DELETE_NAMESPACE, warehouse_arn(warehouse))
        self.catalog.drop_namespace(warehouse, levels)

    # -- tables -------------------------------------------------------------------------

    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        self.who.require(actions.LIST_TABLES, warehouse_arn(warehouse))
        return self.catalog.list_tables(warehouse, levels)

    def create_table(self, table: TableName, new: NewTable) -> LoadedTable:
        self.who.require(actions.CREATE_TABLE, _arn(table))
        return self.catalog.create_table(table, new, self._may_take(actions.CREATE_TABLE))

    def load_table(self, table: TableName) -> LoadedTable:
        # S3 Tables' name for reading a table's metadata location is as good as GetTable.
        self.who.require_any((actions.GET_TABLE, actions.GET_TABLE_METADATA_LOCATION), _arn(table))
        return self.catalog.load_table(table)

    def table_exists(self, table: TableName) -> bool:
        self.who.require_any((actions.GET_TABLE, actions.GET_TABLE_METADATA_LOCATION), _arn(table))
        return self.catalog.table_exists(table)

    def commit(
        self, table: TableName, request: CommitTableRequest, later: list[Callable[[], None]] | None = None
    ) -> LoadedTable:
        return self.commit_transaction([(table, request)], later)[0]

    def commit_transaction(
        self,
        changes: list[tuple[TableName, CommitTableRequest]],
        later: list[Callable[[], None]] | None = None,
    ) -> list[LoadedTable]:
        """`later`: what the catalog leaves to do once the answer is sent (`WarehouseCatalog.
        commit_transaction`)."""
        for table, request in changes:
            self.who.require(actions.UPDATE_TABLE_METADATA_LOCATION, _arn(table))
            if creates(request):  # a staged create's commit makes the table
                self.who.require(actions.CREATE_TABLE, _arn(table))
        may_take = self._may_take(actions.CREATE_TABLE)
        return self.catalog.commit_transaction(changes, later=later, may_take=may_take)

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        self.who.require(actions.DELETE_TABLE, _arn(table))
        self.catalog.drop_table(table, purge)

    def list_dropped(self, warehouse: str, levels: tuple[str, ...], kind: str = TABLE) -> list[DroppedTable]:
        """A namespace's dropped tables (or views): for whoever may list its live ones."""
        self.who.require(actions.LIST_TABLES, warehouse_arn(warehouse))
        return self.catalog.list_dropped(warehouse, levels, kind)

    def undrop(self, targets: list[tuple[TableName, str | None]], kind: str = TABLE) -> None:
        """Lakekeeper's undrop: `s3tables:UndropTable` on each table's (or view's) own ARN."""
        for name, _ in targets:
            self.who.require(actions.UNDROP_TABLE, _arn(name))
        self.catalog.undrop(targets, kind)

    def rename_table(self, source: TableName, target: TableName) -> None:
        self.who.require(actions.RENAME_TABLE, _arn(source))
        self.who.require(actions.CREATE_TABLE, _arn(target))
        self.catalog.rename_table(source, target)

    def register_table(
        self, table: TableName, metadata_location: str, overwrite: bool = False
    ) -> LoadedTable:
        self.who.require(actions.REGISTER_TABLE, _arn(table))
        if overwrite:
            self.who.require(actions.UPDATE_TABLE_METADATA_LOCATION, _arn(table))
        may_take = self._may_take(actions.REGISTER_TABLE)
        return self.catalog.register_table(table, metadata_location, overwrite, may_take)

    def report_metrics(self, table: TableName) -> None:
        """A scan's or commit's metrics report: accepted from whoever may read the table, kept nowhere
        (the audit line records the request). A table that does not exist is a 404, as the spec has it."""
        self.who.require(actions.GET_TABLE, _arn(table))
        if not self.catalog.table_exists(table):
            raise NoSuchTable(f"Table does not exist: {table}")

    # -- views: the table actions, on the view's ARN (a view is named as a table is) ---------

    def list_views(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        self.who.require(actions.LIST_TABLES, warehouse_arn(warehouse))
        return self.catalog.list_views(warehouse, levels)

    def create_view(self, view: TableName, new: NewView) -> LoadedView:
        self.who.require(actions.CREATE_TABLE, _arn(view))
        return self.catalog.create_view(view, new, self._may_take(actions.CREATE_TABLE))

    def load_view(self, view: TableName) -> LoadedView:
        self.who.require_any((actions.GET_TABLE, actions.GET_TABLE_METADATA_LOCATION), _arn(view))
        return self.catalog.load_view(view)

    def view_exists(self, view: TableName) -> bool:
        self.who.require_any((actions.GET_TABLE, actions.GET_TABLE_METADATA_LOCATION), _arn(view))
        return self.catalog.view_exists(view)

    def replace_view(self, view: TableName, commit: ViewCommit) -> LoadedView:
        self.who.require(actions.UPDATE_TABLE_METADATA_LOCATION, _arn(view))
        return self.catalog.replace_view(view, commit)

    def drop_view(self, view: TableName) -> None:
        self.who.require(actions.DELETE_TABLE, _arn(view))
        self.catalog.drop_view(view)

    def rename_view(self, source: TableName, target: TableName) -> None:
        self.who.require(actions.RENAME_TABLE, _arn(source))
        self.who.require(actions.CREATE_TABLE, _arn(target))
        self.catalog.rename_view(source, target)

    def register_view(self, view: TableName, metadata_location: str) -> LoadedView:
        self.who.require(actions.REGISTER_TABLE, _arn(view))
        return self.catalog.register_view(view, metadata_location, self._may_take(actions.REGISTER_TABLE))

    def list_dropped_views(self, warehouse: str, levels: tuple[str, ...]) -> list[DroppedTable]:
        return self.list_dropped(warehouse, levels, VIEW)

    def undrop_views(self, targets: list[tuple[TableName, str | None]]) -> None:
        self.undrop(targets, VIEW)

"""The Tables page: the provider's own warehouses (AIStor Tables), their namespaces and tables.

Each warehouse shows the format version its new tables get (settable here: its
`table-default.format-version`). Each table is shown from its current metadata file (format version,
snapshots, the current snapshot's time and `total-records`, location) with a
"Share…" link: a page that lists the shares and opens a share's "Add a table"
form with the table's spec filled in (`SCHEMA:NAME:uniform:WAREHOUSE:NAMESPACE:TABLE`).
A table whose names a spec cannot carry (a `.`, `:` or other characters outside
the share names' letters, digits, `_` and `-`) is listed without the link.
Each table's name links to its own page (`own_table`): its files, size and maintenance, read
there for that one table only, so this page reads no more than each table's metadata file.
Each warehouse also lists its tables and views dropped without purge (kept, with their files, for
its retention), each with an "Undrop" button, as `sharing-server table undrop` brings one back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import quote, urlencode

from pyiceberg.table.snapshots import Summary

from share_store.catalog.access import PROVIDER, CatalogAccess
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.commits import DEFAULT_FORMAT_VERSION, FORMAT_VERSIONS, TABLE_DEFAULT
from share_store.catalog.dropped_tables import DroppedTable
from share_store.catalog.names import TableName
from share_store.catalog.table_pointers import TABLE, VIEW
from share_store.catalog.warehouses import dropped_retention, duration_text
from share_store.errors import AdminError, InvalidParameter, ShareStoreError
from share_store.model import NAME_PATTERN, TableSpec
from sharing_server.console.shares import share_url
from sharing_server.console.web import Call, Page, Redirect

# A page, not a crawler: namespaces walked and table metadata files read at most in one request.
MAX_NAMESPACES = 1000
MAX_TABLES = 500
TABLES_URL = "/console/tables"
SHARE_TABLE_URL = TABLES_URL + "/share"


@dataclass(frozen=True)
class TableEntry:
    """One table as the page shows it; `problem` says why its metadata could not be read."""

    name: str
    format_version: int | None = None
    snapshots: int | None = None
    snapshot_time: int | None = None  # epoch milliseconds
    rows: int | None = None
    location: str = ""
    spec: str | None = None
    problem: str = ""
    #: Its own page (files, size, maintenance), None for names the catalog would refuse today.
    link: str | None = None

    @property
    def share_link(self) -> str | None:
        return f"{SHARE_TABLE_URL}?{urlencode({'spec': self.spec})}" if self.spec else None


@dataclass
class NamespaceEntry:
    levels: tuple[str, ...]
    tables: list[TableEntry] = field(default_factory=list)
    #: Its views' names (a view is a query, shared through no share: listed, not read).
    views: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def dotted(self) -> str:
        return ".".join(self.levels)


@dataclass
class WarehouseEntry:
    name: str
    namespaces: list[NamespaceEntry] = field(default_factory=list)
    problem: str = ""
    #: Its table defaults (`table-default.*`, shown without the prefix).
    defaults: dict[str, str] = field(default_factory=dict)
    #: Its tables and views dropped without purge, and how long it keeps them.
    dropped: list[DroppedTable] = field(default_factory=list)
    retention: timedelta = field(default_factory=timedelta)

    @property
    def retention_text(self) -> str:
        return duration_text(self.retention)

    @property
    def format_version(self) -> str:
        """The format version its new tables get unless a namespace or the create says otherwise."""
        return self.defaults.get("format-version", str(DEFAULT_FORMAT_VERSION))

    @property
    def table_count(self) -> int:
        return sum(len(namespace.tables) for namespace in self.namespaces)


@dataclass
class Budget:
    """What is left of one request's walk; `cut` once anything was left out."""

    namespaces: int = MAX_NAMESPACES
    tables: int = MAX_TABLES
    cut: bool = False


def table_spec(warehouse: str, levels: tuple[str, ...], name: str) -> str | None:
    """The spec sharing this table (schema from the innermost level), or None if a spec cannot name it.

    A spec joins namespace levels with `.` and its parts with `:`, and the share model takes only
    letters, digits, `_` and `-` in them: a level or table name with anything else has no spec.
    """
    if not all(NAME_PATTERN.fullmatch(part) for part in (*levels, name)):
        return None
    where = f"{warehouse}:{'.'.join(levels)}:{name}"
    spec = f"{levels[-1]}:{name}:uniform:{where}"  # the names are already share names
    try:
        TableSpec.parse(spec)
    except AdminError:
        return None
    return spec


def table_url(warehouse: str, levels: tuple[str, ...], name: str) -> str | None:
    """The table's own page, or None for a name the catalog refuses now (a row older than the checks).

    Checked names hold no `.` and nothing a URL treats specially, so the levels joined with `.` are
    one path segment that splits back into them.
    """
    try:
        TableName.of(warehouse, levels, name)
    except InvalidParameter:
        return None
    return f"{TABLES_URL}/{quote(warehouse)}/{quote('.'.join(levels))}/{quote(name)}"


def problem_of(error: Exception) -> str:
    """A short reason for the page; storage errors by kind only (their messages may hold credentials)."""
    if isinstance(error, ShareStoreError):
        return error.message
    return f"metadata unreadable ({type(error).__name__})"


def summary_number(summary: Summary | None, key: str) -> int | None:
    """A count of a snapshot's summary (`total-records`, `total-data-files`...), if it has a whole
    number there: the summary is free text any writer fills, and some leave totals out."""
    value = summary.get(key) if summary is not None else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def table_entry(catalog: WarehouseCatalog, warehouse: str, levels: tuple[str, ...], name: str) -> TableEntry:
    spec, link = table_spec(warehouse, levels, name), table_url(warehouse, levels, name)
    try:
        metadata = catalog.load_table(TableName(warehouse, levels, name)).metadata
    except Exception as error:  # noqa: BLE001 - one unreadable table must not hide the others
        return TableEntry(name, spec=spec, problem=problem_of(error), link=link)
    current = metadata.current_snapshot()
    return TableEntry(
        name,
        format_version=metadata.format_version,
        snapshots=len(metadata.snapshots),
        snapshot_time=current.timestamp_ms if current else None,
        rows=summary_number(current.summary, "total-records") if current else None,
        location=metadata.location,
        spec=spec,
        link=link,
    )


def _walk(catalog: WarehouseCatalog, entry: WarehouseEntry, parent: tuple[str, ...], budget: Budget) -> None:
    """Add the namespaces under `parent`, each followed by its own nested ones (depth first)."""
    try:
        children = sorted(catalog.list_namespaces(entry.name, parent))
    except ShareStoreError as error:  # dropped while we walked
        if not parent:
            entry.problem = error.message
        return
    for levels in children:
        if budget.namespaces <= 0:
            budget.cut = True
            return
        budget.namespaces -= 1
        namespace = NamespaceEntry(levels)
        entry.namespaces.append(namespace)
        try:
            names = catalog.list_tables(entry.name, levels)
            namespace.views = sorted(catalog.list_views(entry.name, levels))
        except ShareStoreError as error:
            namespace.problem = error.message
            names = []
        for name in names:
            if budget.tables <= 0:
                budget.cut = True
                break
            budget.tables -= 1
            namespace.tables.append(table_entry(catalog, entry.name, levels, name))
        _walk(catalog, entry, levels, budget)


def warehouse_entries(catalog: WarehouseCatalog) -> tuple[list[WarehouseEntry], bool]:
    """Every warehouse with its namespaces and tables, and whether the walk was cut short."""
    budget = Budget()
    entries = []
    for name in sorted(catalog.list_warehouses()):
        entry = WarehouseEntry(name)
        entries.append(entry)
        try:
            properties = catalog.warehouse_properties(name)
        except ShareStoreError as error:
            entry.problem = problem_of(error)
            continue
        entry.defaults = {key.removeprefix(TABLE_DEFAULT): value for key, value in properties.items()
                          if key.startswith(TABLE_DEFAULT)}  # fmt: skip
        entry.retention = dropped_retention(properties)
        try:
            entry.dropped = catalog.list_dropped(name, None, None)
        except ShareStoreError as error:  # dropped while we looked
            entry.problem = problem_of(error)
            continue
        _walk(catalog, entry, (), budget)
    return entries, budget.cut


def tables_page(call: Call) -> Page:
    catalog = call.console.warehouses
    entries, cut = warehouse_entries(catalog)
    context = {
        "warehouses": entries,
        "cut": cut,
        "max_namespaces": MAX_NAMESPACES,
        "max_tables": MAX_TABLES,
        "active": "tables",
    }
    return Page("warehouses.html", context)


def set_format_version(call: Call) -> Redirect:
    """The format version a warehouse's new tables get by default (its `table-default.format-version`),
    as `table warehouse defaults W --set format-version=N` sets it; "" goes back to the server's."""
    warehouse, version = call.form.get("warehouse", ""), call.form.get("format_version", "")
    key = TABLE_DEFAULT + "format-version"
    access = CatalogAccess(call.console.warehouses, PROVIDER)
    if version == "":
        access.update_warehouse_properties(warehouse, [key], {})
        said = f"the server's default ({DEFAULT_FORMAT_VERSION})"
    elif version.isdigit() and int(version) in FORMAT_VERSIONS:
        access.update_warehouse_properties(warehouse, [], {key: version})
        said = f"version {version}"
    else:
        raise AdminError(f"format version must be one of {', '.join(map(str, FORMAT_VERSIONS))}")
    return Redirect(TABLES_URL, flash=("ok", f"New tables of warehouse {warehouse} get format {said}."))


def undrop_table(call: Call) -> Redirect:
    """A table or view dropped without purge brought back under its name (the one of the form's id),
    as `sharing-server table undrop` does; refused (an error on the page) while one holds the name."""
    form = call.form
    kind = form.get("kind", TABLE)
    if kind not in (TABLE, VIEW):
        raise InvalidParameter("kind must be table or view")
    # The namespace's levels joined with "." (checked names hold none), as the console's paths do.
    levels = tuple(form.get("namespace", "").split("."))
    name = TableName.of(form.get("warehouse", ""), levels, form.get("name", ""))
    CatalogAccess(call.console.warehouses, PROVIDER).undrop([(name, form.get("id") or None)], kind)
    return Redirect(TABLES_URL, flash=("ok", f"Undropped {kind} {name} in warehouse {name.warehouse}."))


def share_table_page(call: Call) -> Page:
    """Pick the share to add a table to: links to each share's "Add a table" form with the spec."""
    spec = call.request.query_params.get("spec", "").strip()
    if not spec:
        raise AdminError("no table spec given: pick a table on the Tables page")
    parsed = TableSpec.parse(spec)  # AdminError (shown as a 400 page) for a spec the form would refuse
    namespace, _, table = parsed.path.rpartition("/")
    shares = [
        (share["name"], f"{share_url(share['name'])}?spec={quote(spec)}#add-table")
        for share in call.admin.list_shares()
    ]
    # `share create` takes a schema line, then the spec without its schema.
    lines = f"{parsed.schema}\n{spec.split(':', 1)[1]}"
    context = {
        "spec": spec,
        "label": f"{namespace}.{table}" if parsed.format == "uniform" else parsed.path,
        "warehouse": parsed.bucket,
        "shares": shares,
        "new_share": f"/console/shares?{urlencode({'tables': lines})}#create-share",
        "active": "tables",
    }
    return Page("share_table.html", context)

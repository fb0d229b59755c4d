"""The table picker: Delta tables found in a bucket, tables of an Iceberg catalog, as specs to add."""

from __future__ import annotations

from itertools import islice
from urllib.parse import quote

from share_store.readers import TableReaders
from sharing_server.console.shares import share_url
from sharing_server.console.web import Call, Page

# Objects listed at most in one bucket: a picker, not a crawler.
MAX_KEYS = 10_000
MAX_TABLES = 200
LOG = "/_delta_log/"


def delta_paths(keys: list[str]) -> list[str]:
    """Table paths: the folders that hold a `_delta_log/` (a table at the bucket's root is '')."""
    found: dict[str, None] = {}
    for key in keys:
        marker = ("/" + key).find(LOG)
        if marker >= 0:
            found.setdefault(key[: max(marker - 1, 0)] if marker else "", None)
    return [path for path in found if path]


def _name(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in text)
    return cleaned[:128] or "table"


def pick_page(call: Call) -> Page:
    share = call.param("share")
    call.admin.share_info(share)  # 404 for an unknown share
    readers: TableReaders = call.request.app.state.readers
    bucket = call.request.query_params.get("bucket", "").strip()
    warehouse = call.request.query_params.get("warehouse", "").strip()
    prefix = call.request.query_params.get("prefix", "").strip()
    candidates: list[tuple[str, str]] = []
    if bucket:
        keys = [item.key for item in islice(readers.storage.list(bucket, prefix), MAX_KEYS)]
        for path in delta_paths(keys)[:MAX_TABLES]:
            name = _name(path.rsplit("/", 1)[-1])
            candidates.append((path, f"default:{name}:delta:{bucket}:{path}"))
    elif warehouse:
        catalog = readers.catalogs.catalog(warehouse)
        for namespace in catalog.list_namespaces():
            for identifier in catalog.list_tables(namespace):
                *space, name = identifier
                label = ".".join([*space, name])
                candidates.append(
                    (label, f"{_name(space[-1])}:{name}:uniform:{warehouse}:{'.'.join(space)}:{name}")
                )
                if len(candidates) >= MAX_TABLES:
                    break
    links = [(label, spec, f"{share_url(share)}?spec={quote(spec)}#add-table") for label, spec in candidates]
    context = {
        "share": share,
        "bucket": bucket,
        "warehouse": warehouse,
        "prefix": prefix,
        "warehouses": sorted(readers.catalogs.configs),
        "links": links,
        "searched": bool(bucket or warehouse),
        "active": "shares",
    }
    return Page("pick.html", context)

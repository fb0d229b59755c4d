"""The table picker: Delta tables found in a bucket, tables of an Iceberg catalog, as specs to add."""

from __future__ import annotations

from collections import deque
from urllib.parse import quote

from share_store.readers import TableReaders
from share_store.storage.base import ObjectStorage
from sharing_server.console.shares import share_url
from sharing_server.console.web import Call, Page

# Folders listed at most in one search, and how deep below the prefix: a picker, not a crawler.
MAX_FOLDERS = 500
MAX_DEPTH = 6
MAX_TABLES = 200
LOG = "_delta_log/"


def delta_tables(storage: ObjectStorage, bucket: str, prefix: str = "") -> list[str]:
    """Paths of the Delta tables under `prefix`: folders holding a `_delta_log/`, not searched further."""
    start = prefix.strip("/")
    queue = deque([(f"{start}/" if start else "", 0)])
    found: list[str] = []
    listed = 0
    while queue and listed < MAX_FOLDERS and len(found) < MAX_TABLES:
        folder, depth = queue.popleft()
        children = storage.folders(bucket, folder)
        listed += 1
        if folder + LOG in children:
            if folder:  # a table at the bucket's root has no path to share it by
                found.append(folder.rstrip("/"))
            continue
        if depth < MAX_DEPTH:
            queue.extend((child, depth + 1) for child in children)
    return found


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
        for path in delta_tables(readers.storage, bucket, prefix):
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

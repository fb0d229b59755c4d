"""The table picker: Delta tables found in a bucket, tables of an Iceberg catalog, as specs to add."""

from __future__ import annotations

import re
from collections import deque
from itertools import islice
from urllib.parse import quote

from share_store.model import SharedTable
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


def suggested_name(text: str) -> str:
    """A share name (`NAME_PATTERN`) made from a folder or namespace name, to offer in a spec."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", text)
    if cleaned.startswith("-"):
        cleaned = "_" + cleaned
    return cleaned[:128] or "table"


def shared_where(tables: list[SharedTable]) -> dict[tuple[str, str], list[str]]:
    """The shares that already hold each table, by (bucket, path) for Delta tables and
    (warehouse, "namespace/table") for Iceberg tables, as specs name them."""
    found: dict[tuple[str, str], list[str]] = {}
    for table in tables:
        found.setdefault((table.bucket, table.path.strip("/")), []).append(table.share)
    return {key: sorted(set(shares)) for key, shares in found.items()}


def pick_page(call: Call) -> Page:
    share = call.param("share")
    call.admin.share_info(share)  # 404 for an unknown share
    readers = call.console.readers
    bucket = call.request.query_params.get("bucket", "").strip()
    warehouse = call.request.query_params.get("warehouse", "").strip()
    prefix = call.request.query_params.get("prefix", "").strip()
    candidates: list[tuple[str, str, tuple[str, str]]] = []
    if bucket:
        for path in delta_tables(readers.storage, bucket, prefix):
            name = suggested_name(path.rsplit("/", 1)[-1])
            candidates.append((path, f"default:{name}:delta:{bucket}:{path}", (bucket, path)))
    elif warehouse:
        catalog = readers.catalogs.catalog(warehouse)
        identifiers = (found for space in catalog.list_namespaces() for found in catalog.list_tables(space))
        for *space, name in islice(identifiers, MAX_TABLES):
            label = ".".join([*space, name])
            spec = f"{suggested_name(space[-1])}:{name}:uniform:{warehouse}:{'.'.join(space)}:{name}"
            candidates.append((label, spec, (warehouse, f"{'.'.join(space)}/{name}")))
    where = shared_where(call.admin.store.all_tables()) if candidates else {}
    # Each found table says which shares already hold it, this one first.
    links = [
        (label, spec, f"{share_url(share)}?spec={quote(spec)}#add-table", where.get(key, []))
        for label, spec, key in candidates
    ]
    context = {
        "share": share,
        "bucket": bucket,
        "warehouse": warehouse,
        "prefix": prefix,
        "warehouses": readers.catalogs.names(),
        "links": links,
        "searched": bool(bucket or warehouse),
        "active": "shares",
    }
    return Page("pick.html", context)

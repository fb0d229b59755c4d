"""Where a shared Delta table's data files are: object keys from the log's relative paths.

A log's paths are relative, URL-encoded URIs. A path that is absolute, or that
leaves the table by a "." or ".." segment, names an object the provider never
shared, and the table cannot be shared: a key is never made for it.
"""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from share_store.arrow_text import string_data
from share_store.errors import UnsupportedOperation


def file_key(table_path: str, log_path: str) -> str:
    """Object key of a data file; paths in the log are relative, URL-encoded URIs."""
    if "://" in log_path or log_path.startswith("/"):
        # Absolute paths point outside the shared table: sharing them would hand
        # out URLs to objects the provider never shared.
        raise UnsupportedOperation("tables with absolute file paths cannot be shared")
    key = unquote(log_path) if "%" in log_path else log_path
    wrapped = f"/{key}/"  # a "." or ".." segment, first and last ones included
    if "/./" in wrapped or "/../" in wrapped:
        raise UnsupportedOperation("tables with file paths leaving the table cannot be shared")
    return f"{table_path}/{key}"


# Log paths `file_key` decodes (%) or refuses (absolute, or with a "." or ".." segment).
UNUSUAL_PATH = r"%|://|^/|(^|/)\.\.?(/|$)"


def file_keys(table_path: str, paths: pa.Array) -> pa.Array | None:
    """`file_key` for many log paths at once (a checkpoint's record batch).

    None when a path is unusual (see `UNUSUAL_PATH`): `file_key` decodes or refuses each.
    """
    # Checked first on all the paths' bytes at once, which is far faster and finds
    # every unusual path (and a few usual ones, which the exact check then clears).
    text = string_data(paths)
    maybe = b"%" in text or b":" in text or b"/." in text
    maybe = maybe or pc.any(pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "."))).as_py()
    if maybe and pc.any(pc.match_substring_regex(paths, UNUSUAL_PATH)).as_py():
        return None
    return pc.binary_join_element_wise(f"{table_path}/", paths, "")

"""Object paths as URLs carry them: most need no quoting, and a batch's are checked at once.

Local URLs (`file_urls`) and SigV4 ones (`sigv4`) quote alike: what `quote(path, safe="/")`
leaves as is needs no call at all, and a record batch of keys is quoted only if some byte of it
is outside that set.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pyarrow as pa

from share_store.arrow_text import string_data

#: What quote(..., safe="/") leaves as is ("~" included, since Python 3.7).
UNRESERVED_PATH = re.compile(r"[A-Za-z0-9_.~/-]*")
_UNRESERVED_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.~/-"


def quoted_paths(paths: pa.Array) -> pa.Array:
    """`paths` URI-encoded as `quote(path, safe="/")` gives each: the array itself when none needs
    it (the rule), found from all their bytes at once (`translate` is fast)."""
    if not string_data(paths).translate(None, _UNRESERVED_BYTES):
        return paths
    plain = UNRESERVED_PATH.fullmatch
    return pa.array(
        [path if plain(path) else quote(path, safe="/") for path in paths.to_pylist()], pa.string()
    )

"""What `json.loads` accepts in a request body that the server cannot carry further.

JSON may spell half of a UTF-16 surrogate pair on its own (`"\\ud800"`), and
Python keeps it as a lone surrogate: a string that cannot be encoded to
UTF-8, so it fails wherever it is hashed, stored or echoed in a message. Such
bodies are refused up front, as malformed.
"""

from __future__ import annotations

import re
from typing import Any

# `json.loads` joins well-formed pairs into one character: any surrogate left is alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a parsed JSON value, object keys included, holds a lone surrogate."""
    # A loop rather than recursion: the value may be nested as deeply as the parser allowed.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False

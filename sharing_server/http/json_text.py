"""A request body read strictly as one JSON object, and what `json.loads` accepts that the server
cannot carry further.

JSON may spell half of a UTF-16 surrogate pair on its own (`"\\ud800"`), and
Python keeps it as a lone surrogate: a string that cannot be encoded to
UTF-8, so it fails wherever it is hashed, stored or echoed in a message. Such
bodies are refused up front, as malformed.

`json_object` is the one strict read of the surfaces whose bodies are JSON objects (the admin
API, the catalog at `/_iceberg`, both remote signers): it raises `NotAJsonObject`, which names no
surface; each turns it into its own refusal, in its own words where its clients expect them.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

#: Why a body is not one: not JSON text (bad syntax, not UTF-8/16/32, too deep, NaN), JSON but not
#: an object, or an object holding a lone surrogate.
Problem = Literal["not json", "not an object", "lone surrogate"]


class NotAJsonObject(ValueError):
    """A body `json_object` refuses: `problem` says which check, the message says it in words."""

    def __init__(self, problem: Problem, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.problem: Problem = problem
        self.message = message
        #: The parser's own words (where and what), for surfaces whose clients expect them.
        self.detail = detail or message


def json_object(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object: JSON text (RFC 8259, so no NaN or Infinity), an object, no lone
    surrogate in it; `NotAJsonObject` otherwise."""
    try:
        parsed = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise NotAJsonObject("not json", "the request body is not valid JSON", "nested too deeply") from None
    except ValueError as error:  # UnicodeDecodeError is a ValueError
        raise NotAJsonObject("not json", "the request body is not valid JSON", str(error)) from None
    if not isinstance(parsed, dict):
        raise NotAJsonObject("not an object", "the request body must be a JSON object")
    # UTF-8 cannot carry a lone surrogate, so only a `\uD8xx`-style escape can: where none is
    # written (nearly every body) the walk is skipped. A UTF-16 or UTF-32 body (which `json.loads`
    # also reads) spells its escapes in other bytes, so it is always walked.
    if _may_escape_a_surrogate(body) and has_lone_surrogate(parsed):
        raise NotAJsonObject(
            "lone surrogate",
            "the request body holds an unpaired UTF-16 surrogate",
            "an unpaired UTF-16 surrogate",
        )
    return parsed


#: A JSON escape of a surrogate code point (D800-DFFF), paired or not, in UTF-8 text.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _may_escape_a_surrogate(body: bytes) -> bool:
    return json.detect_encoding(body) != "utf-8" or _SURROGATE_ESCAPE.search(body) is not None


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON (RFC 8259), though Python's parser takes them.
    raise ValueError(f"{name} is not JSON")


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

"""File lines encoded once per snapshot, with holes for what each response signs anew.

A warm `/query` of a large table used to build a dictionary per file and
encode it to JSON, every time. All of a file's line but its URLs and their
expiry is the same for every response in one format, so it is encoded once:
the line is made with placeholders where those go, encoded, and cut at the
placeholders. A response then only signs and splices bytes.
"""

from __future__ import annotations

from typing import Any

import orjson

#: Placeholders, as strings: orjson writes them as `"\u0000U\u0000"` and so on.
URL = "\x00U\x00"
DV_URL = "\x00D\x00"
EXPIRY = "\x00E\x00"
# The placeholders as encoded, quotes included: a hole takes the quotes' place too.
_ENCODED = {name: orjson.dumps(value) for name, value in (("U", URL), ("D", DV_URL), ("E", EXPIRY))}
_URL, _EXPIRY = _ENCODED["U"], _ENCODED["E"]
_LENGTH = len(_URL)


#: One file line cut at its holes, as a flat tuple:
#: `(holes, bucket, key, dv_bucket, dv_key, part, part, …)`. The line is the first
#: part, then each hole filled followed by the next part; `holes` names them in order:
#: `U` the file's URL, `D` its deletion vector's, `E` the expiry (a number). The file's
#: (and vector's) storage location is kept: finding it again costs as much as signing.
#: A plain tuple of strings and bytes, because the collector stops tracking such tuples,
#: and a table's templates are many: a class of its own would be walked by every full
#: collection, as would a tuple holding another tuple.
LineTemplate = tuple[Any, ...]
HOLES, BUCKET, KEY, DV_BUCKET, DV_KEY, PARTS = range(6)


def make_template(
    line: dict[str, Any], location: tuple[str, str], dv_location: tuple[str, str] | None = None
) -> LineTemplate | None:
    """`line`, made with the placeholders above, as a template; None when it cannot be one.

    It cannot when orjson refuses it (integers beyond 64 bits), or when a
    placeholder's text also occurs in the file's own values: the holes would
    then be ambiguous, and such a line is encoded whole every time instead.
    """
    try:
        encoded = orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return None
    # Each placeholder holds two NULs; any other NUL (a placeholder's text in the file's
    # own values, or a NUL of its own) makes the count differ, and the line is not cut.
    holes = "UDE" if dv_location is not None else "UE"
    if encoded.count(b"\\u0000") != 2 * len(holes):
        return None
    bucket, key = location
    if dv_location is None:  # the common case, spelled out: one is made per file
        url, expiry = encoded.find(_URL), encoded.find(_EXPIRY)
        if url < 0 or expiry < 0:
            return None
        first, second = (url, expiry) if url < expiry else (expiry, url)
        order = "UE" if url < expiry else "EU"
        return (
            order, bucket, key, None, None,
            encoded[:first], encoded[first + _LENGTH : second], encoded[second + _LENGTH :],
        )  # fmt: skip
    found = sorted((encoded.find(_ENCODED[name]), name) for name in holes)
    if found[0][0] < 0:
        return None
    pieces, start = [], 0
    for at, _ in found:
        pieces.append(encoded[start:at])
        start = at + _LENGTH
    pieces.append(encoded[start:])
    order = "".join(name for _, name in found)
    return (order, bucket, key, *dv_location, *pieces)


def fill(template: LineTemplate, url: str, expiry: bytes, dv_url: str | None = None) -> bytes:
    """The line with its holes filled: URLs as JSON strings, `expiry` as the digits of a number."""
    holes = template[HOLES]
    if holes == "UE":  # every file of a table without deletion vectors, parquet or delta
        return b"".join((template[5], orjson.dumps(url), template[6], expiry, template[7]))
    if holes == "EU":
        return b"".join((template[5], expiry, template[6], orjson.dumps(url), template[7]))
    values = {"U": orjson.dumps(url), "E": expiry, "D": orjson.dumps(dv_url)}
    pieces = [template[PARTS]]
    for hole, part in zip(holes, template[PARTS + 1 :], strict=True):
        pieces += (values[hole], part)
    return b"".join(pieces)

"""The file lines of a streamed snapshot, made a record batch at a time.

A streamed snapshot (a checkpoint too large to hold, see `active_files`)
makes every response's lines anew. Made a file at a time (an action
dictionary, a line dictionary, then JSON) a million files took some ten
seconds. Here each record batch of the checkpoint's `add` rows becomes lines
with Arrow compute: each column's JSON text for all rows at once, then the
pieces joined row by row. Only what Arrow cannot do stays in Python, a few
calls per file: signing its URL and hashing its id.

The lines are byte for byte those `LineEncoder.entry_file` makes (orjson's
spelling). A batch this module cannot spell so (deletion vectors, control
characters in strings, stats kept only as a struct, unusual paths) raises
`Unencodable`, and its files go through `entry_file` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from share_store.arrow_text import string_buffer, string_data
from share_store.storage.base import BatchSigning, UrlSigning
from share_store.tables.active_files import map_values, values_of
from sharing_server.http.ndjson import LineBlock

#: What a batch's paths become: the bucket and each file's key (None: not by Arrow).
LocateMany = Callable[[pa.Array], "tuple[str, pa.Array] | None"]

# Characters orjson writes escaped in a string: control characters spelled out
# (\n, \u0001, ...), quotes and backslashes with a backslash before them.
_CONTROL = r"[\x00-\x1f]"


class Unencodable(Exception):
    """This batch's lines cannot be made here byte-identical to the per-file encoding."""


def json_strings(values: pa.Array) -> pa.Array:
    """JSON string literals of `values` as orjson writes them; nulls stay null."""
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise Unencodable(f"not a string column: {values.type}")
    # Printable ASCII (the rule) is checked much faster than a regex for control characters.
    if (
        not pc.all(pc.ascii_is_printable(values)).as_py()
        and pc.any(pc.match_substring_regex(values, _CONTROL)).as_py()
    ):
        raise Unencodable("control characters")  # rare: orjson's \u00XX spellings are not worth copying
    # Found in all the values' bytes at once: several times faster than any Arrow kernel.
    text = string_data(values)
    if b"\\" in text:
        values = pc.replace_substring(values, "\\", "\\\\")
    if b'"' in text:
        values = pc.replace_substring(values, '"', '\\"')
    return _join('"', values, '"')


def present_fields(adds: pa.StructArray) -> dict[str, bool]:
    """Per field of a record batch's `add` column, whether any row has a value in it."""
    return {
        field.name: column.null_count < len(column)
        for field, column in zip(adds.type, adds.flatten(), strict=True)
    }


def python_bytes(texts: pa.Array) -> list[bytes]:
    """A string array without nulls as bytes objects: through NumPy, ten times faster than `to_pylist()`."""
    return texts.cast(pa.binary()).to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]


def _join(*pieces: Any) -> pa.Array:
    return pc.binary_join_element_wise(*pieces, "")


def _optional(prefix: str, values: pa.Array) -> pa.Array:
    """`prefix` and the value where there is one, else nothing: a key left out when null."""
    return pc.fill_null(_join(prefix, values), "")


def _python_json(values: pa.Array) -> pa.Array:
    """Each value as orjson writes it, one by one: for columns Arrow cannot spell."""
    try:
        texts = [None if value is None else orjson.dumps(value).decode() for value in values_of(values)]
    except orjson.JSONEncodeError as error:  # the per-file encoding has its own fallback for these
        raise Unencodable(str(error)) from error
    return pa.array(texts, pa.string())


def _json_values(values: pa.Array) -> pa.Array:
    """Any column's values as JSON text, nulls null: by Arrow where it spells them as orjson does."""
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return json_strings(values)
    if pa.types.is_integer(kind):
        return pc.cast(values, pa.string())
    if pa.types.is_boolean(kind):
        return pc.if_else(values, "true", "false")
    if pa.types.is_map(kind) and _all_empty(values):
        return pc.if_else(values.is_valid(), "{}", pa.scalar(None, pa.string()))
    return _python_json(values)


def _string_map(kind: pa.DataType) -> bool:
    return pa.types.is_map(kind) and pa.types.is_string(kind.key_type) and pa.types.is_string(kind.item_type)


def _all_empty(maps: pa.Array) -> bool:
    if len(maps) == 0:
        return True
    offsets = maps.offsets  # the rows' own (a filtered or sliced array's too)
    lengths = pc.subtract(offsets[1:], offsets[:-1])
    return not pc.any(pc.and_(pc.greater(lengths, 0), maps.is_valid())).as_py()


@dataclass
class BatchLines:
    """One batch's lines, with what the response keeps count of."""

    lines: LineBlock
    file_bytes: int
    min_expiration: int | None


class BatchEncoder:
    """Makes the `add` lines of checkpoint record batches, in one response's format."""

    def __init__(
        self,
        response_format: str,
        hash_kind: str,
        sign: UrlSigning,
        sign_many: BatchSigning | None,
        locate_many: LocateMany,
        partition_columns: Sequence[str],
        version: int | None,
    ) -> None:
        self.format = response_format
        self.sign = sign
        self.sign_many = sign_many
        self.locate_many = locate_many
        self.partition_columns = tuple(partition_columns)
        self.digest = hashlib.md5 if hash_kind == "parquet" else hashlib.sha256
        self.version = "" if version is None else f',"version":{version}'

    def encode(self, batch: pa.StructArray, present: dict[str, bool]) -> BatchLines:
        """The lines of `batch`, active rows of `add` only; `present` tells which of its fields
        the whole record batch they came from has some value in (the per-file encoding
        leaves the others out of the batch's every action)."""
        fields = {field.name: column for field, column in zip(batch.type, batch.flatten(), strict=True)}
        if present.get("deletionVector"):
            raise Unencodable("deletion vectors")
        paths = fields.get("path")
        if paths is None or paths.null_count:
            raise Unencodable("files without a path")
        stats, parsed = fields.get("stats"), fields.get("stats_parsed")
        if parsed is not None and present.get("stats_parsed"):
            # The per-file encoding writes such stats from the struct, as json.dumps does.
            without = parsed.is_valid() if stats is None else pc.and_(parsed.is_valid(), stats.is_null())
            if pc.any(without).as_py():
                raise Unencodable("stats only as a struct")
        located = self.locate_many(paths)
        if located is None:
            raise Unencodable("paths that need decoding or checking one by one")
        urls, expiry, earliest = self._signed(*located)
        digest = self.digest
        ids = pa.array([digest(path).hexdigest() for path in python_bytes(paths)], pa.string())
        sizes = fields.get("size")
        file_bytes = 0 if sizes is None else (pc.sum(sizes).as_py() or 0)
        if self.format == "delta":
            lines = self._delta(fields, present, urls, ids, expiry)
        else:
            lines = self._parquet(fields, urls, ids, expiry)
        return BatchLines(LineBlock(string_buffer(lines), len(lines)), file_bytes, earliest)

    def _signed(self, bucket: str, keys: pa.Array) -> tuple[pa.Array, Any, int | None]:
        """The files' URLs as JSON, their expiry (one for all, as a rule) and the earliest."""
        if self.sign_many is not None:
            urls, expiration = self.sign_many(bucket, keys)
            return json_strings(urls), str(expiration), expiration if len(keys) else None
        sign = self.sign
        signed = [sign(bucket, key) for key in keys.to_numpy(zero_copy_only=False).tolist()]
        expirations = [expiration for _, expiration in signed]
        earliest = min(expirations, default=None)
        if earliest == max(expirations, default=None):
            expiry: Any = str(earliest)
        else:
            expiry = pc.cast(pa.array(expirations, pa.int64()), pa.string())
        return json_strings(pa.array([url for url, _ in signed], pa.string())), expiry, earliest

    def _parquet(self, fields: dict[str, pa.Array], urls: pa.Array, ids: pa.Array, expiry: Any) -> pa.Array:
        """`{"file":{"url","id","partitionValues","size","stats","version","expirationTimestamp"}}`."""
        sizes = fields.get("size")
        size = "0" if sizes is None else pc.cast(pc.fill_null(sizes, 0), pa.string())
        stats = fields.get("stats")
        stats_piece: Any = "" if stats is None else _optional(',"stats":', json_strings(stats))
        return _join(
            '{"file":{"url":', urls, ',"id":"', ids, '","partitionValues":',
            self._partition_values(fields.get("partitionValues"), len(urls)),
            ',"size":', size, stats_piece, self.version, ',"expirationTimestamp":', expiry, "}}\n",
        )  # fmt: skip

    def _partition_values(self, maps: pa.Array | None, rows: int) -> Any:
        """The parquet format's partition values: the table's partition columns, in order."""
        if maps is not None and not _string_map(maps.type):
            raise Unencodable(f"partition values of type {maps.type}")
        if not self.partition_columns:
            if maps is None or _all_empty(maps):
                return "{}"
            texts = [orjson.dumps(values or {}).decode() for values in map_values(maps)]
            return pa.array(texts, pa.string())
        pieces: list[Any] = []
        for index, column in enumerate(self.partition_columns):
            pieces.append(("{" if index == 0 else ",") + orjson.dumps(column).decode() + ":")
            if maps is None:
                pieces.append("null")
            else:
                values = pc.map_lookup(maps, pa.scalar(column, pa.string()), "last")
                pieces.append(pc.fill_null(json_strings(values), "null"))
        pieces.append("}")
        return _join(*pieces) if any(isinstance(piece, pa.Array) for piece in pieces) else "".join(pieces)

    def _delta(
        self,
        fields: dict[str, pa.Array],
        present: dict[str, bool],
        urls: pa.Array,
        ids: pa.Array,
        expiry: Any,
    ) -> pa.Array:
        """`{"file":{"id","version","expirationTimestamp","deltaSingleAction":{"add":{…}}}}`.

        The action is the checkpoint row's fields in order, nulls left out,
        tags dropped and the path a signed URL.
        """
        # Pieces joined once: keys as scalars, values as arrays; a key that is absent
        # from some rows goes with its value, as one array empty where it is null.
        pieces: list[Any] = []
        first = True
        for name, values in fields.items():
            if name in ("tags", "stats_parsed") or not present.get(name):
                continue
            text = urls if name == "path" else _json_values(values)
            if name == "partitionValues" and values.null_count:
                # The per-file encoding puts `{}` for these, last of the action's keys.
                raise Unencodable("files without partition values")
            if first and text.null_count:
                raise Unencodable("a first key that some files lack")  # never so: the path comes first
            key = ("" if first else ",") + orjson.dumps(name).decode() + ":"
            first = False
            if text.null_count:
                pieces.append(_optional(key, text))
            else:
                pieces += (key, text)
        return _join(
            '{"file":{"id":"', ids, '"', self.version, ',"expirationTimestamp":', expiry,
            ',"deltaSingleAction":{"add":{', *pieces, "}}}}\n",
        )  # fmt: skip

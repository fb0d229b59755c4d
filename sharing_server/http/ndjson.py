"""Newline-delimited JSON responses: one line per payload, sent in chunks of a useful size.

The protocol's file listings and the Iceberg catalog's scans stream through
here; `LineBlock`s (a record batch's lines made at once) pass through whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

NDJSON = "application/x-ndjson; charset=utf-8"
JSON = "application/json; charset=utf-8"


# One encoder for every line: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(payload: Any) -> str:
    return _ENCODER.encode(payload)


class LineBlock(bytes):
    """Many file lines encoded in one bytes object (a streamed snapshot's record batch).

    A million files pass down a response's layers (paging, audit, chunking)
    in a few hundred blocks rather than a million lines. `lines` is how many
    it holds; `single_lines` parts them where each line must be counted.
    """

    lines: int

    def __new__(cls, data: Any, lines: int) -> LineBlock:  # `data`: bytes, or any buffer (Arrow's)
        block = super().__new__(cls, data)
        block.lines = lines
        return block


def single_lines(lines: Iterable[Any]) -> Iterator[Any]:
    """`lines` with every `LineBlock` parted into its lines."""
    for line in lines:
        if type(line) is LineBlock:
            yield from line.splitlines(keepends=True)  # JSON lines hold no raw line breaks
        else:
            yield line


def line_bytes(payload: Any) -> bytes:
    """One compact JSON line; orjson, since encoding is a third of a large /query's time.

    Bytes are a line encoded already, newline included, and pass as they are.
    """
    if isinstance(payload, bytes):
        return payload
    try:
        return orjson.dumps(payload, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:  # integers beyond 64 bits, which json handles
        return (dumps(payload) + "\n").encode()


def ndjson_chunks(
    actions: Iterable[dict[str, Any] | bytes], first_bytes: int = 64 * 1024, chunk_bytes: int = 64 * 1024
) -> Iterator[bytes]:
    """Encode actions one per line, grouped into chunks of about `chunk_bytes`.

    A chunk is what a response holds for a client that reads slowly: the next
    one is made only once the client has taken the last. The first is at most
    `first_bytes`, so that it comes quickly (and, made before the headers,
    carries most errors). Lines join one buffer as they are made: kept apart
    until the chunk is full, each would hold a whole allocation of orjson's
    (4 KB for a line of 500 bytes).
    """
    buffer = bytearray()
    limit = min(first_bytes, chunk_bytes)
    for action in actions:
        if type(action) is LineBlock and len(buffer) + len(action) >= limit + chunk_bytes:
            # A block of lines: cut into chunks of the usual size, straight from the block.
            with memoryview(action) as block:
                start = limit - len(buffer)
                buffer += block[:start]
                yield bytes(buffer)
                limit = chunk_bytes
                while len(block) - start >= limit:
                    yield bytes(block[start : start + limit])
                    start += limit
                buffer = bytearray(block[start:])
            continue
        # Pre-encoded lines (bytes) are most of a large listing: no call for them.
        buffer += action if type(action) is bytes or type(action) is LineBlock else line_bytes(action)
        if len(buffer) >= limit:
            # A new buffer before yielding: the full one is not kept while its copy waits to be sent.
            chunk, buffer, limit = bytes(buffer), bytearray(), chunk_bytes
            yield chunk
    if buffer:
        yield bytes(buffer)


FILE_ACTIONS = frozenset({"file", "add", "remove", "cdf"})


def counting_files(
    lines: Iterable[dict[str, Any] | bytes],
    fields: dict[str, Any],
    file_bytes: Callable[[], int] | None = None,
) -> Iterator[dict[str, Any] | bytes]:
    """Pass protocol lines through, counting the file actions among them as they stream.

    Lines already encoded (bytes) are file lines: only those are pre-encoded.
    `file_bytes` tells, once the lines end, the size of the data files they
    handed out (the encoder adds them up as it signs each one).
    """
    fields["files"] = 0
    try:
        for line in lines:
            if type(line) is LineBlock:
                fields["files"] += line.lines
            elif isinstance(line, bytes) or next(iter(line)) in FILE_ACTIONS:
                fields["files"] += 1
            yield line
    finally:
        if file_bytes is not None:
            fields["file_bytes"] = file_bytes()

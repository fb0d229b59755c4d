"""Unit tests of `sharing_server.http.ndjson`: `line_bytes` and `ndjson_chunks`, without HTTP."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from sharing_server.http.ndjson import line_bytes, ndjson_chunks

# -- NDJSON encoding ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"a": 1, "b": [True, None, 1.5]}, b'{"a":1,"b":[true,null,1.5]}\n'),
        ({"name": "café"}, '{"name":"café"}\n'.encode()),
        ({"z": 1, "a": 2}, b'{"z":1,"a":2}\n'),  # keys keep their order
        ({"n": 2**64 - 1}, b'{"n":18446744073709551615}\n'),
        # Beyond 64 bits orjson gives up; the json fallback still writes the number.
        ({"n": 2**64}, b'{"n":18446744073709551616}\n'),
        ({"n": -(2**63) - 1}, b'{"n":-9223372036854775809}\n'),
        ({"é": [2**70, "ü"]}, '{"é":[1180591620717411303424,"ü"]}\n'.encode()),
    ],
)
def test_line_bytes(payload: Any, expected: bytes) -> None:
    assert line_bytes(payload) == expected


def test_ndjson_chunks_small_first_then_bigger() -> None:
    actions = [{"i": n} for n in range(10)]  # 8 bytes a line
    chunks = list(ndjson_chunks(actions, first_bytes=10, chunk_bytes=20))
    assert chunks == [
        b'{"i":0}\n{"i":1}\n',
        b'{"i":2}\n{"i":3}\n{"i":4}\n',
        b'{"i":5}\n{"i":6}\n{"i":7}\n',
        b'{"i":8}\n{"i":9}\n',
    ]
    assert b"".join(chunks) == b"".join(line_bytes(action) for action in actions)


def test_ndjson_chunks_one_line_per_action() -> None:
    actions: list[dict[str, Any]] = [{"protocol": {"minReaderVersion": 1}}, {"file": {"size": 2**65}}, {}]
    joined = b"".join(ndjson_chunks(actions, first_bytes=1, chunk_bytes=1))
    assert joined == b'{"protocol":{"minReaderVersion":1}}\n{"file":{"size":36893488147419103232}}\n{}\n'
    assert list(ndjson_chunks(actions, first_bytes=1, chunk_bytes=1)) == joined.splitlines(keepends=True)


@pytest.mark.parametrize(
    ("count", "first_bytes", "chunk_bytes", "lines_per_chunk"),
    [
        (0, 10, 20, []),
        (1, 10, 20, [1]),
        (3, 100, 200, [3]),  # never full: one chunk at the end
        (5, 8, 8, [1, 1, 1, 1, 1]),
        (6, 16, 1000, [2, 4]),
    ],
)
def test_ndjson_chunk_sizes(
    count: int, first_bytes: int, chunk_bytes: int, lines_per_chunk: list[int]
) -> None:
    chunks = list(ndjson_chunks(({"i": n} for n in range(count)), first_bytes, chunk_bytes))
    assert [chunk.count(b"\n") for chunk in chunks] == lines_per_chunk
    assert all(chunk.endswith(b"\n") for chunk in chunks)


def test_a_chunk_being_made_holds_its_bytes_not_each_lines_allocation() -> None:
    """orjson returns a 500-byte line in a 4 KB allocation: lines kept apart until a chunk is
    full would hold eight times their size, for every stream a slow client holds up."""
    action = {"file": {"url": "https://example.com/" + "x" * 400, "id": "f", "size": 1}}
    length = len(line_bytes(action))
    lines = 1_000
    held: list[int] = []

    def actions() -> Any:
        for _ in range(lines):
            yield action
        held.append(tracemalloc.get_traced_memory()[0] - start)  # the chunk is still being made

    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        (chunk,) = ndjson_chunks(actions(), first_bytes=1 << 30, chunk_bytes=1 << 30)
    finally:
        tracemalloc.stop()
    assert len(chunk) == lines * length
    assert held[0] < 2 * lines * length, f"{held[0]:,} bytes held for {lines * length:,} bytes of lines"

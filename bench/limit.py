"""The limit row: a minimal Python producer of the NDJSON a warm `/query` answers.

What no Python server can beat by much: the table's `add` actions held in
memory, and per request, for each file, one signature (HMAC-SHA256 as our
local URLs, or SigV4 as S3's, both with their key pads hashed once), an md5 id
and one `orjson.dumps`, streamed in 64 KiB chunks by a bare asyncio HTTP/1.1
server. No authentication, no log listing, no paging, no audit line. Run as
`python -m bench.limit LOG PORT local|s3 [ENDPOINT]`, where LOG is a table's
single commit file (the bench's generated tables are one commit).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

CHUNK = 64 * 1024
HEADERS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson; charset=utf-8\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
LIFETIME = 3600


def _pads(key: bytes) -> tuple[Any, Any]:
    """HMAC-SHA256's inner and outer hashes with the key's pads taken in once."""
    key = key.ljust(64, b"\0")
    return hashlib.sha256(bytes(b ^ 0x36 for b in key)), hashlib.sha256(bytes(b ^ 0x5C for b in key))


def _hmac(pads: tuple[Any, Any], message: bytes) -> Any:
    inner, outer = pads[0].copy(), pads[1].copy()
    inner.update(message)
    outer.update(inner.digest())
    return outer


def local_signer(base: str, bucket: str, prefix: str) -> Callable[[str, int], str]:
    """URLs as a server signs for its own files: HMAC of method, bucket, key and expiry."""
    pads = _pads(b"k" * 32)

    def sign(path: str, expires: int) -> str:
        key = f"{prefix}/{path}"
        signature = _hmac(pads, f"GET\n{bucket}\n{key}\n{expires}".encode()).hexdigest()
        return f"{base}/{bucket}/{key}?X-Sharing-Expires={expires}&X-Amz-Signature={signature}"

    return sign


def sigv4_signer(endpoint: str, bucket: str, prefix: str) -> Callable[[str, int], str]:
    """S3 GET URLs presigned with SigV4 (path style), the day's signing key's pads hashed once."""
    now = datetime.now(UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/us-east-1/s3/aws4_request"
    key = b"AWS4secret"
    for part in (day, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    pads = _pads(key)
    host = endpoint.split("://", 1)[1]
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
        + quote(f"AKIAEXAMPLE/{scope}", safe="")
        + f"&X-Amz-Date={stamp}&X-Amz-Expires={LIFETIME}&X-Amz-SignedHeaders=host"
    )
    head = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n"

    def sign(path: str, expires: int) -> str:
        url_path = f"/{bucket}/{prefix}/{path}"
        canonical = f"GET\n{url_path}\n{query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD"
        to_sign = head + hashlib.sha256(canonical.encode()).hexdigest()
        signature = _hmac(pads, to_sign.encode()).hexdigest()
        return f"{endpoint}{url_path}?{query}&X-Amz-Signature={signature}"

    return sign


def load(log: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The head lines (protocol, metadata) and the add actions of a one-commit log."""
    head: list[dict[str, Any]] = []
    adds = []
    for line in log.read_bytes().splitlines():
        action = orjson.loads(line)
        if "add" in action:
            adds.append(action["add"])
        elif "metaData" in action:
            head.append({"metaData": {"id": action["metaData"]["id"], "format": {"provider": "parquet"}}})
    return [{"protocol": {"minReaderVersion": 1}}, *head], adds


def body(
    head: list[dict[str, Any]], adds: list[dict[str, Any]], sign: Callable[[str, int], str]
) -> Iterator[bytes]:
    expires = int(time.time()) + LIFETIME
    expiration = expires * 1000
    buffer = bytearray()
    for line in head:
        buffer += orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    for add in adds:
        path = add["path"]
        line = {
            "file": {
                "url": sign(path, expires),
                "id": hashlib.md5(path.encode()).hexdigest(),
                "partitionValues": add["partitionValues"],
                "size": add["size"],
                "stats": add["stats"],
                "expirationTimestamp": expiration,
            }
        }
        buffer += orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
        if len(buffer) >= CHUNK:
            yield bytes(buffer)
            buffer = bytearray()
    if buffer:
        yield bytes(buffer)


async def serve(
    port: int, head: list[dict[str, Any]], adds: list[dict[str, Any]], sign: Callable[[str, int], str]
) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for header in request.split(b"\r\n"):
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(HEADERS)
                for chunk in body(head, adds, sign):
                    writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    log, port, kind = Path(argv[0]), int(argv[1]), argv[2]
    table = log.parent.parent
    if kind == "local":
        sign = local_signer(f"http://127.0.0.1:{port}/delta-sharing/files", table.parent.name, table.name)
    else:
        sign = sigv4_signer(argv[3], table.parent.name, table.name)
    head, adds = load(log)
    asyncio.run(serve(port, head, adds, sign))


if __name__ == "__main__":
    main(sys.argv[1:])

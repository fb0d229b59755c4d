"""The floors of `load_as_pandas`: what the Python client's two paths cost with a perfect server.

The client (delta-sharing 1.4) reads a table one of two ways, and both carry
costs of their own that no server can take away:

- the delta path (its default, by format auto-detection) hands the log to
  delta-kernel-rs, which reads the files one by one; its floor is that same
  kernel read of the table's files from the local disk, no HTTP at all;
- the parquet path opens each file through fsspec's HTTP file system, eleven
  requests per file (three HEADs, two footers, an existence GET it drops, the
  rest by range), and decodes it with `use_threads=False`; its floor is that
  same per-file read against `serve`, a bare asyncio HTTP/1.1 server that
  answers HEAD, GET and one range from the page cache with `sendfile`: no
  signature, no middleware, no audit.

Run as `python -m bench.client_floor ROOT PORT` to serve the files under ROOT
(`bench.servers.floor_server` does).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

RANGE = re.compile(r"bytes=(\d*)-(\d*)")


async def _answer(root: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Requests of one connection, kept alive until the client closes it."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ")
            fields = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
            path = os.path.join(root, target.split("?")[0].lstrip("/"))
            size = os.stat(path).st_size
            start, end, status, extra = 0, size - 1, "200 OK", ""
            asked = RANGE.match(fields.get("range", ""))
            if asked:
                first, last = asked.groups()
                start = int(first) if first else size - int(last)
                end = min(int(last), size - 1) if first and last else size - 1
                status, extra = "206 Partial Content", f"content-range: bytes {start}-{end}/{size}\r\n"
            writer.write(
                f"HTTP/1.1 {status}\r\ncontent-length: {end - start + 1}\r\naccept-ranges: bytes\r\n"
                f"content-type: application/octet-stream\r\n{extra}\r\n".encode()
            )
            if method == "GET":
                with open(path, "rb") as file:
                    await loop.sendfile(writer.transport, file, start, end - start + 1)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(root: str, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: _answer(root, r, w), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def parquet_path_read(base: str, names: list[str]) -> Any:
    """The client's parquet path over `names` at `base`: its own per-file read, then its concat."""
    import pandas as pd
    from delta_sharing.reader import DeltaSharingReader

    # The client's per-file read (a static method it calls for each file action);
    # a query string, as a signed URL has, changes nothing for fsspec.
    frames = [
        DeltaSharingReader._to_pandas(  # the very code the client runs
            SimpleNamespace(url=f"{base}/{name}?X-Signature=0", partition_values={}), {}, False, None, False
        )
        for name in names
    ]
    return pd.concat(frames, axis=0, ignore_index=True, copy=False)


def kernel_read(table: Path) -> Any:
    """The client's delta path as it reads: delta-kernel-rs over the table, then `to_pandas`."""
    import delta_kernel_rust_sharing_wrapper as kernel
    import pyarrow as pa

    location = f"file://{table}"
    interface = kernel.PythonInterface(location)
    snapshot = kernel.Table(location).snapshot(interface)
    batches = kernel.ScanBuilder(snapshot).build().execute(interface)
    return pa.Table.from_batches(batches).to_pandas(self_destruct=True)


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2])))

"""A loopback TCP proxy that injects network faults between a server and what it depends on.

The fault tests point a replica's PostgreSQL URL or S3 endpoint at `127.0.0.1:<proxy port>`
instead of the real server, then, from the test, black-hole the link (`pause()` … `resume()`:
connections are accepted and bytes read, but nothing is forwarded until resumed, as when a
router drops packets), reset it (`reset()`: every open connection aborted with an RST, as a
restarted firewall or a failed-over load balancer does), slow it (`slow(seconds_per_chunk,
duration)`), or refuse it (`stop()` … `start()`: the port closed, as a stopped server).

Stdlib only: one asyncio loop in a daemon thread; the controls are thread-safe and return once
the fault is in place. The port is picked free once and kept across `stop()`/`start()`.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

from testbed.seaweed import free_port

T = TypeVar("T")
CHUNK = 64 * 1024


@dataclass(eq=False)  # hashed by identity, kept in a set
class _Link:
    """One client connection and the upstream connection opened for it."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


@dataclass
class ProxyCounts:
    """What the proxy did, for a test to check that a fault really met traffic."""

    accepted: int = 0
    reset: int = 0
    held_chunks: int = 0
    slowed_chunks: int = 0


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.counts = ProxyCounts()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._flowing = self._call(self._event())
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._delay = 0.0
        self._slow_until = 0.0
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # Controls (any thread).

    def start(self) -> None:
        """Listen (again) on the proxy's port."""
        self._call(self._listen())

    def stop(self) -> None:
        """Refuse new connections (the port closed) and reset the open ones."""
        self._call(self._close_listener())
        self.reset()

    def pause(self) -> None:
        """Black-hole: accept connections and read what they send, forward nothing."""
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        """Forward again, held bytes first."""
        self._loop.call_soon_threadsafe(self._flowing.set)

    def reset(self) -> int:
        """Abort every open connection with an RST (SO_LINGER 0, then close); how many there were."""
        return self._call(self._reset_all())

    def slow(self, seconds_per_chunk: float, duration: float | None = None) -> None:
        """Delay each forwarded chunk by `seconds_per_chunk`, for `duration` seconds (or until
        `slow(0)`)."""
        self._delay = seconds_per_chunk
        self._slow_until = time.monotonic() + duration if duration is not None else float("inf")

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    @contextmanager
    def slowed(self, seconds_per_chunk: float) -> Iterator[None]:
        self.slow(seconds_per_chunk)
        try:
            yield
        finally:
            self.slow(0)

    def open_connections(self) -> int:
        return len(self._links)

    def close(self) -> None:
        """Stop listening, reset every connection and end the loop's thread."""
        self.stop()
        self._call(self._cancel_tasks())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    # The loop's side.

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    @staticmethod
    async def _event() -> asyncio.Event:
        event = asyncio.Event()
        event.set()
        return event

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    @staticmethod
    async def _cancel_tasks() -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _reset_all(self) -> int:
        links = list(self._links)
        for link in links:
            for writer in (link.client, link.upstream):
                if writer is not None:
                    _abort_with_rst(writer)
            for task in link.tasks:
                task.cancel()
        self._links.difference_update(links)
        self.counts.reset += len(links)
        return len(links)

    async def _serve(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        self.counts.accepted += 1
        link = _Link(client)
        self._links.add(link)
        try:
            await self._flowing.wait()  # a black hole holds new connections too
            upstream_reader, link.upstream = await asyncio.open_connection(*self.target)
        except (OSError, asyncio.CancelledError):
            self._links.discard(link)
            _abort_with_rst(client)
            return
        if link not in self._links:  # reset while connecting
            _abort_with_rst(link.upstream)
            return
        link.tasks = [
            asyncio.create_task(self._pump(client_reader, link.upstream)),
            asyncio.create_task(self._pump(upstream_reader, client)),
        ]
        await asyncio.wait(link.tasks)
        if link in self._links:  # both sides ended by themselves: close politely
            self._links.discard(link)
            for task in link.tasks:
                task.cancel()
            for writer in (client, link.upstream):
                with suppress(OSError):
                    writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK):
                if not self._flowing.is_set():
                    self.counts.held_chunks += 1
                    await self._flowing.wait()
                if self._delay > 0 and time.monotonic() < self._slow_until:
                    self.counts.slowed_chunks += 1
                    await asyncio.sleep(self._delay)
                writer.write(data)
                await writer.drain()
            with suppress(OSError):
                writer.write_eof()
        except (OSError, ConnectionError):
            return


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()

"""A real Hypercorn server running our app in a background thread.

Tests talk to it over loopback HTTP, exactly as recipients do; `stop()` (or
leaving the context) shuts it down.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
from hypercorn.asyncio import serve
from starlette.types import ASGIApp

from sharing_server.service_options import ServiceOptions
from sharing_server.serving import hypercorn_config


class LiveServer:
    def __init__(
        self,
        app: ASGIApp,
        port: int,
        certfile: str | None = None,
        keyfile: str | None = None,
        options: ServiceOptions | None = None,
    ) -> None:
        """`options`, those `app` was made with, give Hypercorn what `serve` would."""
        self.app = app
        self.options = options or ServiceOptions()
        self.port = port
        self.certfile = certfile
        self.keyfile = keyfile
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.certfile else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def _run(self) -> None:
        config = hypercorn_config(self.options)
        config.bind = [f"127.0.0.1:{self.port}"]
        config.certfile = self.certfile
        config.keyfile = self.keyfile
        config.accesslog = None
        config.graceful_timeout = 1

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await serve(self.app, config, shutdown_trigger=self._stop.wait)

        try:
            asyncio.run(main())
        except BaseException as error:  # surfaced by start()
            self._error = error

    def start(self, timeout: float = 15) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._error:
                raise RuntimeError("server failed to start") from self._error
            try:
                httpx.get(f"{self.url}/healthz", verify=False, timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("server did not start in time")

    def stop(self) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""Noticing that a client hung up while its request is still being worked on in a thread.

Once a request's body is read, the next message on its receive channel is
`http.disconnect`, and ASGI servers send it once. `DisconnectWatch` waits for
it in a task and sets a `threading.Event` that work in worker threads checks;
a streaming response, which must hear the disconnect too, takes `receive` from
the watch rather than from the server.
"""

from __future__ import annotations

import asyncio
import threading

from starlette.types import Message, Receive

DISCONNECT: Message = {"type": "http.disconnect"}


class DisconnectWatch:
    """Sets `gone` when the client disconnects; `stop()` once the response is over."""

    def __init__(self, receive: Receive) -> None:
        self.gone = threading.Event()
        self._heard = asyncio.Event()
        self._task = asyncio.create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone.set()
        self._heard.set()

    async def receive(self) -> Message:
        """The receive channel for the response: its one message is the disconnect."""
        await self._heard.wait()
        return DISCONNECT

    def stop(self) -> None:
        self._task.cancel()

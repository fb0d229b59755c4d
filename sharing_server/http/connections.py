"""What one request may hold up: ambiguous framing, a trickled body, a client that stops reading.

Hypercorn lets a body arrive as slowly as its client likes, and a response's
send waits forever on a client that has stopped reading. Its `read_timeout`
cannot help: it times each read (a byte now and then resets it) for the whole
connection (so it would also cut off a long download, during which the client
sends nothing). `ConnectionGuard` sets deadlines per request instead; what
Hypercorn then still cannot do, drop a connection whose unsent bytes no one
takes, the kernel does (`sharing_server.serving`).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from share_store.errors import MalformedRequest, ShareStoreError
from sharing_server.http.errors import RequestTimedOut, share_store_error
from sharing_server.observability.audit import audit_fields

logger = logging.getLogger("sharing_server")

CLOSE = (b"connection", b"close")


class ClientStalled(Exception):
    """A client took none of a response for the send timeout.

    Not a ShareStoreError: the response has started, so no error response can
    follow; `ConnectionGuard` ends it unfinished.
    """


class ConnectionGuard:
    """Refuses requests framed two ways, and times each request's body and each send of its response.

    - `Content-Length` with `Transfer-Encoding`: 400, and the connection is
      closed (RFC 9112 §6.1). Hypercorn frames such a body by its chunks; a proxy
      in front may go by the length, and what the two read differently would
      run here as a request of its own.
    - The whole body must arrive within `body_timeout` seconds of the request's
      head, or the request gets 408 and the connection is closed.
    - Each send of the response must be taken within `send_timeout` seconds, or
      the response is abandoned: what it held (its lines, its buffers, its
      stream slot) is freed at once.
    """

    def __init__(self, app: ASGIApp, body_timeout: float, send_timeout: float) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.send_timeout = send_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        names = {name.lower() for name, _ in scope["headers"]}
        if b"content-length" in names and b"transfer-encoding" in names:
            error = MalformedRequest("A request may not have both Content-Length and Transfer-Encoding.")
            await self._refuse(scope, receive, send, error)
            return
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        body_done = False
        closing = False

        async def timed_receive() -> Message:
            nonlocal body_done, closing
            if body_done:  # only http.disconnect is left, whenever it comes
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                closing = True
                raise RequestTimedOut(
                    f"The request body took longer than {self.body_timeout:g} s to arrive."
                ) from None
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def timed_send(message: Message) -> None:
            if closing and message["type"] == "http.response.start":
                # The rest of the body may still come: nothing after it can be read as a request.
                message["headers"] = [*message.get("headers", []), CLOSE]
            try:
                async with asyncio.timeout(self.send_timeout):
                    await send(message)
            except TimeoutError:
                raise ClientStalled from None

        try:
            await self.app(scope, timed_receive, timed_send)
        except ClientStalled:
            # Returning leaves the response unfinished, which the server answers by
            # closing the connection; the client sees a broken response, never a short one.
            audit_fields(HTTPConnection(scope))["error_code"] = "SEND_TIMEOUT"
            logger.warning("response cut off: its client took nothing for %g s", self.send_timeout)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, error: ShareStoreError) -> None:
        response = await share_store_error(Request(scope, receive), error)
        response.headers["connection"] = "close"
        await response(scope, receive, send)

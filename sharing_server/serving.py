"""Hypercorn's configuration for this server, and the one thing it needs the kernel for.

When a response is given up on (`sharing_server.http.connections`), Hypercorn closes
the connection, but a close waits until the bytes already handed to the socket
are sent: a client that never reads would keep the connection, and those
bytes, forever. So the listening sockets get TCP_USER_TIMEOUT, which accepted
connections inherit: the kernel aborts a connection whose sent data has gone
unacknowledged, or whose receive window has stayed shut, for that long
(Linux; elsewhere the option does not exist and is skipped).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from hypercorn.config import Config, Sockets

from sharing_server.config import ServiceOptions

logger = logging.getLogger("sharing_server")


class HypercornConfig(Config):
    """Hypercorn's Config, whose TCP listening sockets abort connections stalled `user_timeout` seconds."""

    user_timeout: float | None = None

    def create_sockets(self) -> Sockets:
        sockets = super().create_sockets()
        option = getattr(socket, "TCP_USER_TIMEOUT", None)
        if self.user_timeout and option is not None:
            for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, option, round(self.user_timeout * 1000))
        return sockets


def hypercorn_config(options: ServiceOptions) -> HypercornConfig:
    """What Hypercorn takes from our settings; binds, TLS and logs are the caller's to add."""
    config = HypercornConfig()
    config.user_timeout = options.stream_send_timeout
    return config


def quiet_aborted_connections(loop: asyncio.AbstractEventLoop) -> None:
    """Log a connection the kernel aborted as one line, rather than as a traceback.

    Hypercorn (0.18) lets the TimeoutError of closing such a connection escape
    its connection task (its pull request #342), and asyncio logs that as an
    unhandled error. Anything else goes to the handler there was before.
    """
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), TimeoutError) and "client_connected_cb" in context.get(
            "message", ""
        ):
            logger.info("connection aborted: its client took no data for the send timeout")
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)

"""Hypercorn's configuration for this server, and the one thing it needs the kernel for.

When a response is given up on (`sharing_server.http.connections`), Hypercorn closes
the connection, but a close waits until the bytes already handed to the socket
are sent: a client that never reads would keep the connection, and those
bytes, forever. So the listening sockets get TCP_USER_TIMEOUT, which accepted
connections inherit: the kernel aborts a connection whose sent data has gone
unacknowledged, or whose receive window has stayed shut, for that long
(Linux; elsewhere the option does not exist and is skipped).

With several workers, Hypercorn makes the listening sockets once and hands the
same ones to every worker process: one accept queue, whose connections go to
whichever worker wakes first, and asyncio accepts up to a backlog's worth per
wake. Clients that keep their connections (every HTTP client) then stayed with
that worker: 64 connections opened together split 46/18 or 60/4, and a second
worker took little of the load. So each worker binds a listening socket of its
own on the same address (SO_REUSEPORT, which Hypercorn sets with several
workers), and the kernel spreads new connections over them evenly.

Hypercorn's access log (on when the audit log is off) names each request's path, which may hold
a signing grant: its lines go through `sharing_server.observability.redaction` as the audit's do.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hypercorn.config import Config, Sockets
from hypercorn.logging import Logger

from sharing_server.observability.redaction import REDACTED, SECRET_HEADERS, redact_path, redact_query
from sharing_server.service_options import ServiceOptions

if TYPE_CHECKING:
    from hypercorn.typing import ResponseSummary, WWWScope

logger = logging.getLogger("sharing_server")


def _set_user_timeout(sock: socket.socket, user_timeout: float | None) -> None:
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if user_timeout and option is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, option, round(user_timeout * 1000))


def _worker_listener(
    family: int, kind: int, address: tuple[Any, ...], user_timeout: float | None
) -> socket.socket:
    """In a worker process: a listening socket of its own on `address`, as Hypercorn would make it."""
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _set_user_timeout(sock, user_timeout)
    sock.bind(address)
    sock.setblocking(False)
    return sock


class WorkerListener(socket.socket):
    """The parent's bound (never listening) socket, which each worker it is handed to binds afresh.

    Hypercorn hands sockets to its spawned workers by pickling them; this one
    pickles as the call that makes the worker's own SO_REUSEPORT socket on the
    same address. The parent's keeps the port; the kernel sends connections only
    to listening sockets, the workers'.
    """

    user_timeout: float | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_worker_listener, (self.family, self.type, self.getsockname(), self.user_timeout))


def _per_worker(sock: socket.socket, user_timeout: float | None) -> socket.socket:
    """`sock` as a WorkerListener, if it is a TCP socket that workers can each bind (SO_REUSEPORT)."""
    reuse_port = getattr(socket, "SO_REUSEPORT", None)
    if (
        reuse_port is None
        or sock.family not in (socket.AF_INET, socket.AF_INET6)
        or sock.type != socket.SOCK_STREAM
        or not sock.getsockopt(socket.SOL_SOCKET, reuse_port)
    ):
        return sock
    listener = WorkerListener(sock.family, sock.type, sock.proto, fileno=sock.detach())
    listener.user_timeout = user_timeout
    return listener


class HypercornConfig(Config):
    """Hypercorn's Config, whose TCP listening sockets abort connections stalled `user_timeout` seconds,
    and are each worker's own when there are several."""

    user_timeout: float | None = None

    def create_sockets(self) -> Sockets:
        sockets = super().create_sockets()
        for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
            _set_user_timeout(sock, self.user_timeout)
        if self.workers > 1:
            sockets.secure_sockets = [_per_worker(s, self.user_timeout) for s in sockets.secure_sockets]
            sockets.insecure_sockets = [_per_worker(s, self.user_timeout) for s in sockets.insecure_sockets]
        return sockets


class RedactingLogger(Logger):
    """Hypercorn's logger, whose access lines hold paths, queries and headers as the audit's
    redaction leaves them, whichever atoms the format names."""

    def atoms(
        self, request: WWWScope, response: ResponseSummary | None, request_time: float
    ) -> Mapping[str, str]:
        atoms = super().atoms(request, response, request_time)
        assert isinstance(atoms, dict)  # Hypercorn's AccessLogAtoms, changed in place
        path, query = redact_path(request["path"]), redact_query(request["query_string"].decode("latin-1"))
        with_query = path + ("?" + query if query else "")
        method, protocol = atoms["m"], atoms["H"]
        atoms.update(
            {
                "U": path,
                "Uq": with_query,
                "q": query,
                "r": f"{method} {path} {protocol}",
                "R": f"{method} {with_query} {protocol}",
            }
        )
        for atom in list(atoms):  # header atoms: "{name}i" (request), "{name}o" (response)
            if atom.startswith("{") and atom[1:-2] in SECRET_HEADERS:
                atoms[atom] = REDACTED
        return atoms


def hypercorn_config(options: ServiceOptions) -> HypercornConfig:
    """What Hypercorn takes from our settings; binds, TLS and logs are the caller's to add."""
    config = HypercornConfig()
    config.user_timeout = options.stream_send_timeout
    config.keep_alive_timeout = options.keep_alive_timeout
    config.logger_class = RedactingLogger
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

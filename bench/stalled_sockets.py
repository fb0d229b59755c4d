"""Connections that POST a /query and never read the answer, and what became of them."""

from __future__ import annotations

import socket
import time


def stalled_readers(port: int, path: str, token: str, count: int) -> list[socket.socket]:
    """`count` connections that each POST a /query to `path` and then never read the answer.

    A small receive buffer, set before connecting, keeps the advertised window small,
    so the server's sends block once its own socket buffer is full. Opened a batch
    at a time: Hypercorn's listen backlog is 100.
    """
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    ).encode()
    sockets = []
    try:
        for index in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(request)
            if index % 50 == 49:
                time.sleep(0.05)
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def status_of(sock: socket.socket, timeout: float = 5.0) -> str:
    """The status code a stalled reader's response starts with, or how its connection ended."""
    sock.settimeout(timeout)
    try:
        head = sock.recv(64)
    except TimeoutError:
        return "nothing"
    except ConnectionError:
        return "reset"
    return head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1 ") else "closed"

"""Hypercorn's listening sockets: with several workers, each binds its own, and the kernel spreads
connections over them (sharing_server.serving)."""

from __future__ import annotations

import pickle
import socket
from multiprocessing.reduction import ForkingPickler

import pytest

from sharing_server.serving import HypercornConfig, WorkerListener

pytestmark = pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="SO_REUSEPORT is Linux/BSD's")


def config(workers: int) -> HypercornConfig:
    made = HypercornConfig()
    made.bind = ["127.0.0.1:0"]
    made.workers = workers
    made.user_timeout = 7
    return made


def test_one_worker_keeps_hypercorns_socket() -> None:
    sockets = config(1).create_sockets()
    [sock] = sockets.insecure_sockets
    try:
        assert type(sock) is socket.socket
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 7000
    finally:
        sock.close()


def test_each_worker_binds_a_socket_of_its_own() -> None:
    """Handed to a worker (pickled, as Hypercorn's spawned workers get their sockets), the parent's
    socket becomes one bound afresh on the same address, as Hypercorn would make it."""
    [parent] = config(2).create_sockets().insecure_sockets
    assert isinstance(parent, WorkerListener)
    handed = bytes(ForkingPickler.dumps(parent))
    workers = [pickle.loads(handed) for _ in range(2)]
    try:
        for own in workers:
            assert type(own) is socket.socket and own.fileno() != parent.fileno()
            assert own.getsockname() == parent.getsockname()
            assert own.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)
            assert own.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            assert own.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 7000
            assert not own.getblocking()
            own.listen(100)
        # Connections opened together go to both, not all to whichever accepts first.
        clients = [socket.create_connection(parent.getsockname()) for _ in range(64)]
        accepted = [_accept_all(own) for own in workers]
        assert sum(accepted) == 64 and min(accepted) > 0, accepted
        for client in clients:
            client.close()
    finally:
        for sock in (parent, *workers):
            sock.close()


def _accept_all(sock: socket.socket) -> int:
    count = 0
    sock.settimeout(0.5)
    while True:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            return count
        conn.close()
        count += 1
        sock.settimeout(0.05)

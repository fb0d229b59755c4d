"""testbed/fault_proxy.py: each fault does what the fault tests rely on, against a real TCP echo
server on loopback and against PostgreSQL."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import make_url

from testbed.fault_proxy import FaultProxy
from tests.postgres import Postgres


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    proxy = FaultProxy("127.0.0.1", echo.server_address[1])
    try:
        yield proxy
    finally:
        proxy.close()
        echo.shutdown()
        echo.server_close()


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        received += sock.recv(65536)
    return received


def test_forwards_both_ways(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert round_trip(sock, b"x" * 200_000) == b"x" * 200_000
    assert proxy.counts.accepted == 1


def test_pause_holds_the_bytes_until_resume(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert round_trip(sock) == b"ping"
        proxy.pause()
        sock.sendall(b"held")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        # A new connection is accepted (the client cannot tell) but gets nothing either.
        with connect(proxy) as other:
            other.settimeout(0.3)
            other.sendall(b"new")
            with pytest.raises(TimeoutError):
                other.recv(10)
            proxy.resume()
            other.settimeout(5)
            assert other.recv(10) == b"new"
        sock.settimeout(5)
        assert sock.recv(10) == b"held"
    assert proxy.counts.held_chunks >= 1


def test_reset_aborts_open_connections_with_an_rst(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert round_trip(sock) == b"ping"
        assert proxy.reset() == 1
        with pytest.raises(ConnectionResetError):
            sock.sendall(b"after")
            sock.recv(10)
    with connect(proxy) as sock:  # new connections pass again
        assert round_trip(sock) == b"ping"


def test_slow_delays_each_chunk_for_its_duration(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        proxy.slow(0.3, duration=1.0)
        started = time.monotonic()
        assert round_trip(sock) == b"ping"
        assert time.monotonic() - started >= 0.55  # one chunk each way
        time.sleep(1.0)
        started = time.monotonic()
        assert round_trip(sock) == b"ping"
        assert time.monotonic() - started < 0.2


def test_stop_refuses_connections_and_start_listens_on_the_same_port(proxy: FaultProxy) -> None:
    port = proxy.port
    with connect(proxy) as sock:
        assert round_trip(sock) == b"ping"
        proxy.stop()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            sock.sendall(b"after")
            assert sock.recv(10) == b""  # an RST, not a clean end
    proxy.start()
    assert proxy.port == port
    with connect(proxy) as sock:
        assert round_trip(sock) == b"ping"


def test_a_postgresql_connection_through_the_proxy_fails_on_reset(postgres: Postgres) -> None:
    url = make_url(postgres.create_database("fault_proxy_reset"))
    proxy = FaultProxy("127.0.0.1", url.port or 5432)
    try:
        dsn = url.set(drivername="postgresql", port=proxy.port).render_as_string(hide_password=False)
        with psycopg.connect(dsn, connect_timeout=5) as connection:
            assert connection.execute("select 1").fetchone() == (1,)
            proxy.reset()
            with pytest.raises(psycopg.OperationalError):
                connection.execute("select 1")
        with psycopg.connect(dsn, connect_timeout=5) as connection:
            assert connection.execute("select 2").fetchone() == (2,)
    finally:
        proxy.close()
        postgres.drop_database("fault_proxy_reset")

"""The exporter's HTTP server under misbehaving clients: half-sent requests, many idle
connections, clients that hang up early. All on 127.0.0.1."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    http_get,
    parse_page,
    serving,
    value,
    wait_for,
)

FULL_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: "  # the rest never comes


def _connect(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection((LOOPBACK, port), timeout=30)
    s.sendall(data)
    return s


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_a_half_sent_request_is_dropped_after_the_read_timeout() -> None:
    with serving(read_timeout_s=0.5) as server:
        s = _connect(server.port, HALF_REQUEST)
        # The server hangs up without an answer (the 30 s socket timeout is only the
        # test's own deadline: without a server-side timeout this recv raises).
        assert s.recv(100) == b""
        s.close()
        assert server.dropped == 1
        with _connect(server.port, FULL_REQUEST) as ok:
            answer = _read_all(ok)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"test_value 42.0" in answer


def test_many_half_open_connections_hold_no_threads() -> None:
    with serving(read_timeout_s=60, max_connections=1000) as server:
        threads = threading.active_count()
        idle = [_connect(server.port, HALF_REQUEST) for _ in range(300)]
        try:
            wait_for(lambda: server.open_connections == 300, 30, "all 300 to be accepted")
            assert threading.active_count() == threads
            with _connect(server.port, FULL_REQUEST) as ok:  # a real scrape still works
                assert _read_all(ok).startswith(b"HTTP/1.1 200 OK\r\n")
        finally:
            for s in idle:
                s.close()
        wait_for(lambda: server.open_connections == 0, 30, "the idle ones to be gone")


def test_at_the_limit_a_new_scrape_pushes_out_the_oldest_idle_connection() -> None:
    with serving(read_timeout_s=60, max_connections=4) as server:
        idle = [_connect(server.port, HALF_REQUEST) for _ in range(4)]
        try:
            wait_for(lambda: server.open_connections == 4, 30, "the first 4 to be accepted")
            with _connect(server.port, FULL_REQUEST) as ok:  # not locked out by idle ones
                assert _read_all(ok).startswith(b"HTTP/1.1 200 OK\r\n")
            assert idle[0].recv(100) == b""  # the oldest idle one was closed for it
            assert server.open_connections <= 4
        finally:
            for s in idle:
                s.close()


def _threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


def test_the_exporter_is_quiet_and_bounded_under_bad_clients(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter("two_gpus", hostname="node-a")
    threads = _threads_of(exp.proc.pid)
    # Clients that hang up (with a reset) right after asking, before the answer is written.
    for _ in range(200):
        s = _connect(exp.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    # Clients that read a few bytes of the answer and go away.
    for _ in range(50):
        s = _connect(exp.port, FULL_REQUEST)
        s.recv(10)
        s.close()
    # Many connections that never finish their request.
    idle = [_connect(exp.port, HALF_REQUEST) for _ in range(300)]
    try:
        # Accepted in order: once this scrape is answered, all 300 are open over there.
        page = parse_page(http_get(exp.url))
        assert value(page, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == 87
        assert _threads_of(exp.proc.pid) <= threads + 2  # before: one thread each
    finally:
        for s in idle:
            s.close()
    assert exp.stop() == 0
    assert exp.stderr.read_text() == ""

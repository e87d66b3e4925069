"""The web server (`manage.py serve`, uvicorn with dashboard/server.py's protocol)
times out what would otherwise hold a connection forever, in embedded mode,
where no proxy stands in front: connections that never send a request, headers
sent a byte at a time, and idle keep-alive connections."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, _free_port
from tests.integration.test_serve_command import _env
from tests.polling import wait_until

pytestmark = pytest.mark.standalone

HEADER_SECONDS = 2
KEEP_ALIVE_SECONDS = 2


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory(prefix="frontier-timeouts-") as data_dir:
        env = dict(
            _env(data_dir),
            FRONTIER_HTTP_HEADER_SECONDS=str(HEADER_SECONDS),
            FRONTIER_HTTP_KEEP_ALIVE_SECONDS=str(KEEP_ALIVE_SECONDS),
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
        port = _free_port()
        log_path = Path(data_dir) / "serve.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(
                lambda: _answers(port), timeout=60, interval=0.2, what="the server to answer"
            )
            yield port, process
        finally:
            process.terminate()
            process.wait(timeout=30)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return sock.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (reading and dropping what it sends)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _open_connections(pid: int, port: int) -> int:
    """The server's established TCP connections on `port` (from /proc, as `ss` would count them)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01" and inode in inodes:  # 01: ESTABLISHED
                count += 1
    return count


def test_three_hundred_connections_that_send_nothing_are_closed_after_the_header_time(server):
    port, process = server
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(300)]
    try:
        wait_until(
            lambda: _open_connections(process.pid, port) >= 300,
            timeout=10,
            interval=0.1,
            what="the server to accept every connection",
        )
        started = time.monotonic()
        wait_until(
            lambda: _open_connections(process.pid, port) == 0,
            timeout=HEADER_SECONDS + 10,
            interval=0.2,
            what="the server to close the silent connections",
        )
        assert time.monotonic() - started >= HEADER_SECONDS - 1.5
        assert all(_closed_by_server(sock, 1) for sock in socks[:5])
        assert _answers(port)  # and it serves on
    finally:
        for sock in socks:
            sock.close()


def test_headers_sent_a_byte_at_a_time_are_cut_off_after_the_header_time(server):
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        head = b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
        cut = False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.1)
            if time.monotonic() - started > HEADER_SECONDS + 5:
                break
        assert cut or _closed_by_server(sock, 1), "the connection is still open"
        assert HEADER_SECONDS - 0.5 <= time.monotonic() - started <= HEADER_SECONDS + 5


def test_a_second_request_s_slow_headers_are_cut_off_too(server):
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while b"</html>" not in first:
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /login/ HTTP/1.1\r\n")  # and the rest never
        started = time.monotonic()
        assert _closed_by_server(sock, HEADER_SECONDS + 5)
        assert time.monotonic() - started >= HEADER_SECONDS - 0.5


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_time(server):
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b"</html>" not in answer:
            answer += sock.recv(65536)
        started = time.monotonic()
        assert _closed_by_server(sock, KEEP_ALIVE_SECONDS + 5)
        assert time.monotonic() - started >= KEEP_ALIVE_SECONDS - 0.5

"""A client that reads a big download slowly (a user on an ordinary link) makes
the application wait instead of the web server buffering what the client has
not read yet (uvicorn's write flow control): the server's memory stays flat,
the body arrives whole, the connection can carry the next request, and a
client that goes away or stalls mid-download ends the response and the
export's database transaction."""

from __future__ import annotations

import hashlib
import http.client
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from optimizer.export import run_export_stream
from optimizer.models import Evaluation
from tests.factories import recorded_run
from tests.integration.conftest import session_cookie, start_web

OUTPUT = "The refund window is 30 days. " * 6000  # 180 KB per evaluation
BODY_MB = 400 * len(OUTPUT) / 1e6  # 20 candidates × 20 tasks: ~72 MB
STALLED_SECONDS = 3


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _PeakRss(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, _rss_mb(pid), threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak = max(self.peak, _rss_mb(self.pid))


def _open_exports() -> int:
    """Exports in progress on the test database: each reads its run in one
    transaction through a server-side cursor (optimizer.export)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state IN ('active', 'idle in transaction') AND query LIKE %s",
            ["%_django_curs_%"],
        )
        return cursor.fetchone()[0]


def _until_no_open_export(seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while (open_exports := _open_exports()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return open_exports


def _slow_connection(url: str) -> http.client.HTTPConnection:
    """HTTP/1.1 (keep-alive) over a socket with a small receive buffer, so the
    server feels at once that the client is behind."""
    address = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(60)
    sock.connect((address.hostname, address.port))
    client = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    client.sock = sock
    return client


def _big_run(user):
    run = recorded_run(user, candidates=20, val_tasks=20, name="big")
    Evaluation.objects.filter(candidate__run=run).update(output=OUTPUT)
    return run


@pytest.fixture
def served(services_env, user, tmp_path):
    """A big run and a small one, served by a web process (a client stalled for
    STALLED_SECONDS is disconnected); yields (big, small, web, cookie) and stops
    the server after, checking its log is clean."""
    runs = _big_run(user), recorded_run(user, candidates=2, val_tasks=2, name="small")
    web = start_web(
        dict(services_env, FRONTIER_STALLED_CLIENT_SECONDS=str(STALLED_SECONDS)),
        tmp_path / "web.log",
    )
    try:
        yield (*runs, web, session_cookie(user))
        assert "Traceback" not in web.log()
    finally:
        web.stop()


def test_a_slow_client_gets_every_byte_of_a_big_export_and_the_server_stays_small(served):
    run, small, web, cookie = served
    expected = hashlib.sha256()
    for chunk in run_export_stream(run):
        expected.update(chunk)
    client = _slow_connection(web.url)
    client.request("GET", f"/runs/{small.pk}/export.json", headers={"Cookie": cookie})
    assert client.getresponse().read()  # warm: the export path is loaded before the baseline
    sampler = _PeakRss(web.popen.pid)
    before = _rss_mb(web.popen.pid)
    sampler.start()
    started = time.monotonic()
    client.request("GET", f"/runs/{run.pk}/export.json", headers={"Cookie": cookie})
    response = client.getresponse()
    assert response.status == 200
    got, size = hashlib.sha256(), 0
    while piece := response.read(64 * 1024):  # ~10 MB/s at most
        got.update(piece)
        size += len(piece)
        time.sleep(0.005)
    seconds = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    growth = sampler.peak - before
    print(
        f"{size / 1e6:.0f} MB in {seconds:.1f} s; server {before:.0f} MB -> peak {sampler.peak:.0f} MB"
    )
    assert size > 0.9 * BODY_MB * 1e6 and got.hexdigest() == expected.hexdigest()
    assert growth < BODY_MB / 3, (
        f"the server grew by {growth:.0f} MB for a {size / 1e6:.0f} MB body read slowly"
    )
    # The same keep-alive connection carries the next request.
    client.request("GET", f"/runs/{small.pk}/export.json", headers={"Cookie": cookie})
    assert client.getresponse().read()
    client.close()


def test_a_slow_client_that_goes_away_mid_download_ends_the_response_and_its_export(served):
    run, small, web, cookie = served
    client = _slow_connection(web.url)
    client.request("GET", f"/runs/{run.pk}/export.json", headers={"Cookie": cookie})
    response = client.getresponse()
    assert response.status == 200 and response.read(1_000_000)
    time.sleep(1)  # the application now waits for the client
    assert _open_exports() == 1
    client.sock.shutdown(socket.SHUT_RDWR)
    client.close()
    assert _until_no_open_export(20) == 0
    other = _slow_connection(web.url)
    other.request("GET", f"/runs/{small.pk}/export.json", headers={"Cookie": cookie})
    assert other.getresponse().status == 200
    other.close()


def test_a_client_that_stops_reading_mid_download_is_disconnected_after_the_stall_time(served):
    run, small, web, cookie = served
    client = _slow_connection(web.url)
    client.request("GET", f"/runs/{run.pk}/export.json", headers={"Cookie": cookie})
    response = client.getresponse()
    assert response.status == 200 and response.read(1_000_000)
    assert _open_exports() == 1
    time.sleep(STALLED_SECONDS + 1)  # reading nothing: the server's send waits, then gives up
    assert _until_no_open_export(5) == 0
    rest = 0
    try:
        while piece := response.read(1024 * 1024):  # what was in the sockets' buffers, then the end
            rest += len(piece)
    except (http.client.IncompleteRead, ConnectionResetError) as error:
        rest += len(getattr(error, "partial", b""))
    assert 1_000_000 + rest < 0.5 * BODY_MB * 1e6
    assert "read nothing of a response for 3 s: disconnecting it" in web.log()
    client.close()

"""Hostile requests against a real `manage.py serve` process: the
server answers them quickly and its memory stays small
(docs/configuration.md "Limits": one regex or one upload must never take the
whole site down)."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.e2e.conftest import E2E_PASSWORD, E2E_USERNAME


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@pytest.fixture(scope="module")
def token(frontier_server) -> str:
    code = (
        "from django.contrib.auth import get_user_model; "
        "from dashboard.account_services import api_token_create; "
        f"print(api_token_create(user=get_user_model().objects.get(username={E2E_USERNAME!r}), name='hostile')[1])"
    )
    return frontier_server.manage("shell", "-c", code).stdout.strip().splitlines()[-1]


def request(url: str, body: bytes, headers: dict, timeout: float = 60) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_regex_with_a_billion_repeats_is_refused_quickly_and_the_server_stays_small(
    frontier_server, token
):
    pid = frontier_server.process.pid
    before = rss_mb(pid)
    spec = {
        "id": "bomb",
        "checks": [{"id": "code", "type": "regex", "params": {"pattern": "a{1000000000}"}}],
    }
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    started = time.monotonic()
    status, body = request(
        frontier_server.url + "/api/verifiers/lint", json.dumps({"spec": spec}).encode(), headers
    )
    elapsed = time.monotonic() - started
    assert status == 200, body
    lint = json.loads(body)
    assert lint["valid"] is False
    assert lint["problems"] == [
        "checks[0].params.pattern: invalid regular expression: counted repeat "
        "{1000000000} is above the limit of 1,000 repetitions at position 1"
    ]
    # Creating it is a 400 naming the field; nesting 1,000 groups deep too (a RecursionError 500 before).
    status, body = request(
        frontier_server.url + "/api/verifiers/", json.dumps({"spec": spec}).encode(), headers
    )
    assert status == 400 and json.loads(body)["detail"].startswith(
        "checks[0].params.pattern: invalid regular expression"
    )
    deep = {
        "id": "deep",
        "checks": [{"type": "regex", "params": {"pattern": "(" * 1000 + ")" * 1000}}],
    }
    status, body = request(
        frontier_server.url + "/api/verifiers/", json.dumps({"spec": deep}).encode(), headers
    )
    assert status == 400 and "groups nested more than" in json.loads(body)["detail"]
    # Before the fix the server grew by gigabytes and took minutes (then was OOM-killed).
    # Generous bounds: the machine is shared.
    assert elapsed < 20
    assert rss_mb(pid) - before < 100


class PeakRss:
    """The largest RSS of a process while the block runs, sampled every 20 ms."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()

    def __enter__(self):
        self.before = rss_mb(self.pid)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.02)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.growth = max(self.peak, rss_mb(self.pid)) - self.before


def post_streamed(url: str, size: int, headers: dict, content_type: str) -> tuple[int, bytes]:
    """POST `size` bytes of a multipart file upload without holding them in this process."""
    parsed = urllib.parse.urlsplit(url)
    boundary = "frontierboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.json"\r\n'
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
    conn.putrequest("POST", parsed.path)
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    chunk = b" " * (1024 * 1024)
    try:
        conn.send(head)
        sent = 0
        while sent < size:
            piece = chunk[: min(len(chunk), size - sent)]
            conn.send(piece)
            sent += len(piece)
        conn.send(tail)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may answer and close before the body is all sent
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def login_cookies(server_url: str) -> dict:
    """A logged-in session over plain HTTP: the login form with its CSRF token."""
    with urllib.request.urlopen(server_url + "/login/") as response:
        csrf = re.search(r"csrftoken=([^;]+)", response.headers["Set-Cookie"]).group(1)
        form_token = re.search(
            r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()
        ).group(1)
    body = urllib.parse.urlencode(
        {"username": E2E_USERNAME, "password": E2E_PASSWORD, "csrfmiddlewaretoken": form_token}
    )
    conn = http.client.HTTPConnection(
        *urllib.parse.urlsplit(server_url).netloc.split(":"), timeout=30
    )
    conn.request(
        "POST",
        "/login/",
        body,
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"csrftoken={csrf}",
            "Referer": server_url + "/login/",
        },
    )
    response = conn.getresponse()
    assert response.status == 302, response.read()
    session = re.search(
        r"sessionid=([^;]+)", ", ".join(response.headers.get_all("Set-Cookie"))
    ).group(1)
    conn.close()
    return {"csrftoken": csrf, "sessionid": session}


MB = 1024 * 1024


def test_an_anonymous_60_mb_upload_is_refused_before_it_is_read(frontier_server):
    with PeakRss(frontier_server.process.pid) as rss:
        status, body = post_streamed(
            frontier_server.url + "/runs/import/", 60 * MB, {}, "application/json"
        )
    print(
        f"anonymous 60 MB upload: {status}, server RSS {rss.before:.0f} MB, peak growth {rss.growth:.0f} MB"
    )
    assert status == 413 and json.loads(body)["detail"] == f"body: larger than {52 * MB} bytes"
    assert rss.growth < 150  # reading and parsing it whole costs some 700 MB


def test_an_anonymous_upload_under_the_size_limit_is_refused_without_being_read(frontier_server):
    with PeakRss(frontier_server.process.pid) as rss:
        status, _ = post_streamed(
            frontier_server.url + "/runs/import/", 40 * MB, {}, "application/json"
        )
    print(f"anonymous 40 MB upload: {status}, peak growth {rss.growth:.1f} MB")
    assert status == 403
    assert rss.growth < 10


def send_head(url: str, path: str, headers: dict, body: bytes = b"") -> socket.socket:
    """Open a connection and send a POST's request line and headers (and the start
    of its body), never the rest: whatever answers, answers before the body is in."""
    parsed = urllib.parse.urlsplit(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=15)
    head = f"POST {path} HTTP/1.1\r\nHost: {parsed.netloc}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the answer (the server closes the connection after it)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        raise AssertionError(
            f"no complete answer within 15 s (got {data[:200]!r}): the server waits for the body"
        ) from None
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize("path, status", [("/runs/import/", 403), ("/api/tasksets/import", 401)])
def test_an_anonymous_body_above_64_kb_is_answered_as_soon_as_its_headers_arrive(
    frontier_server, path, status
):
    sock = send_head(
        frontier_server.url,
        path,
        {"Content-Type": "application/json", "Content-Length": str(40 * MB)},
    )
    code, body = answer(sock)
    assert code == status
    if path.startswith("/api/"):
        assert json.loads(body) == {"detail": "Authentication required", "problems": []}


def test_a_stale_session_or_a_wrong_token_is_checked_before_the_body_is_read(frontier_server):
    for credentials in ({"Cookie": "sessionid=stale"}, {"Authorization": "Bearer wrong"}):
        sock = send_head(
            frontier_server.url,
            "/runs/import/",
            {"Content-Type": "application/json", "Content-Length": str(40 * MB), **credentials},
        )
        assert answer(sock)[0] == 403, credentials


def test_an_anonymous_chunked_body_is_refused_once_64_kb_arrived(frontier_server):
    chunk = b"%x\r\n" % (100 * 1024) + b" " * (100 * 1024) + b"\r\n"  # one 100 KB chunk, and no end
    sock = send_head(
        frontier_server.url,
        "/runs/import/",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        chunk,
    )
    assert answer(sock)[0] == 403


def test_a_large_body_with_a_valid_token_is_read_after_its_check(frontier_server, token):
    # The connection pauses while the token is checked, then reads on: the API answers about the body.
    body = json.dumps({"spec": {"id": "x" * 100_000}}).encode()
    status, answer_body = request(
        frontier_server.url + "/api/verifiers/lint",
        body,
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert status == 200, answer_body
    assert json.loads(answer_body)["valid"] is False


def test_an_accepted_large_import_is_read_from_disk_and_stays_bounded(frontier_server):
    cookies = login_cookies(frontier_server.url)
    headers = {
        "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
        "X-CSRFToken": cookies["csrftoken"],
        "Referer": frontier_server.url + "/runs/import/",
    }
    with PeakRss(frontier_server.process.pid) as rss:
        status, body = post_streamed(
            frontier_server.url + "/runs/import/", 45 * MB, headers, "application/json"
        )
    print(f"logged-in 45 MB import: {status}, peak growth {rss.growth:.0f} MB")
    assert (
        status == 400 and b"not valid JSON" in body
    )  # 45 MB of spaces: read, refused, nothing saved
    assert rss.growth < 400


# --- websocket frames ---------------------------------------------------------

SEED_RUN = """
from django.contrib.auth import get_user_model
from tests.factories import recorded_run
run = recorded_run(get_user_model().objects.get(username={username!r}), candidates=2, val_tasks=2, name="sockets")
print(run.pk)
"""


@pytest.fixture(scope="module")
def run_socket_url(frontier_server) -> str:
    run_id = int(
        frontier_server.manage(
            "shell", "-c", SEED_RUN.format(username=E2E_USERNAME)
        ).stdout.split()[-1]
    )
    return frontier_server.url.replace("http", "ws") + f"/ws/runs/{run_id}/?after=0"


def replayed(ws) -> list[dict]:
    """The run's log as the socket replays it on connect (it is finished: nothing follows)."""
    events = []
    while not events or events[-1]["type"] != "run.finished":
        events.append(json.loads(ws.recv(timeout=10)))
    return events


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.parametrize("frame", ["this is not JSON", b"\x00\x01binary"])
def test_a_frame_that_is_not_json_text_closes_the_run_socket_with_1003(
    frontier_server, token, run_socket_url, frame
):
    with connect(
        run_socket_url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as ws:
        replayed(ws)
        ws.send(frame)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert (
        closed.value.rcvd is not None and closed.value.rcvd.code == 1003
    )  # not 1011, an internal error
    assert "Traceback" not in frontier_server.log()


def test_a_flood_of_resume_frames_is_answered_by_a_replay_a_second(
    frontier_server, token, run_socket_url
):
    """Each resume replayed from the database: 5,000 frames from one client kept
    the server's CPU busy for seconds. At most one replay a second now."""
    pid = frontier_server.process.pid
    with connect(
        run_socket_url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as ws:
        log = replayed(ws)
        before = cpu_seconds(pid)
        for _ in range(5000):
            ws.send('{"type": "resume"}')
        ws.ping().wait(30)  # answered once the server has read every frame before it
        time.sleep(1.5)  # and the one delayed replay
        spent = cpu_seconds(pid) - before
        ws.send('{"type": "resume"}')
        with pytest.raises(TimeoutError):
            ws.recv(timeout=2)  # nothing new to replay: nothing is sent twice
    print(f"5,000 resume frames: {spent:.2f} s of server CPU; {len(log)} events replayed once")
    # Unlimited, every frame replayed: 3.92 s. Rate-limited, each frame one hop to
    # Django's sync thread: 0.98–1.48 s; handled on the event loop: 0.31 s.
    assert spent < 1.0


def test_the_run_socket_agrees_to_no_compression_a_client_offers(token, run_socket_url):
    """Browsers offer permessage-deflate; compressing each small event once per
    viewer costs more than it saves (docs/benchmarks.md "bench/fanout.py")."""
    with connect(
        run_socket_url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as ws:
        assert "permessage-deflate" in ws.request.headers.get(
            "Sec-WebSocket-Extensions", ""
        )  # offered
        assert ws.protocol.extensions == []  # and declined
        assert replayed(ws)[-1]["type"] == "run.finished"

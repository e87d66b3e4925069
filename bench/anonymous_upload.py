"""What an anonymous upload costs a real web server (`manage.py serve`): it should refuse it before reading it.

Run: ``python bench/anonymous_upload.py`` (``--runs N``, ``--mb M``). Starts its
own server (SQLite in a temporary directory), then for each case POSTs an
M MB body N times to /runs/import/ and prints, as median [min–max], the
server's peak RSS growth over the N requests (sampled every 20 ms from /proc,
a fresh server per case), how long each whole POST took (the client sends
all of it: the server reads and drops the rest after its answer), and how
soon the answer comes when the client sends the headers only (median
[min–max]):

- anonymous, Content-Length: refused from the headers alone;
- anonymous, chunked: refused once 64 KB arrived;
- a stale session cookie: checked off the event loop while the connection
  stops reading, then refused.

A server that read the body before answering would grow by about M MB per
case. Linux only (/proc). The latest figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_hostile_input import MB, PeakRss


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, size: int, headers: dict, chunked: bool) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.putrequest("POST", "/runs/import/")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(size))
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    piece = b" " * MB
    try:
        for _ in range(size // MB):
            conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n" if chunked else piece)
        if chunked:
            conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered and closed before the body was sent
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


def first_answer_ms(port: int, headers: dict, chunked: bool) -> float:
    """Milliseconds from sending the headers (chunked: and one 100 KB chunk) to the
    answer's status line, the rest of the body never sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = "POST /runs/import/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {40 * MB}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    started = time.perf_counter()
    sock.sendall(head.encode() + b"\r\n" + (b"%x\r\n" % (100 * 1024) + b" " * (100 * 1024) + b"\r\n" if chunked else b""))
    sock.recv(64)
    elapsed = (time.perf_counter() - started) * 1000
    sock.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=int, default=40)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="frontier-bench-upload-")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(FRONTIER_DATA_DIR=data_dir, DEBUG="1", DJANGO_SETTINGS_MODULE="dashboard.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    print(f"{args.runs} runs of a {args.mb} MB POST to /runs/import/, a fresh server per case "
          "(machine shared and loaded: read the spread)")
    cases = [("anonymous, Content-Length", {}, False), ("anonymous, chunked", {}, True),
             ("stale session cookie", {"Cookie": "sessionid=stale"}, False)]
    try:
        for label, headers, chunked in cases:
            port = free_port()
            server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(300):
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2)
                        break
                    except OSError:
                        time.sleep(0.2)
                seconds, statuses = [], set()
                # Peak growth over all runs: freed memory stays with the process, so
                # only the first request of a case shows what a body costs.
                with PeakRss(server.pid) as rss:
                    for _ in range(args.runs):
                        started = time.perf_counter()
                        statuses.add(post(port, args.mb * MB, headers, chunked))
                        seconds.append(time.perf_counter() - started)
                answers = [first_answer_ms(port, headers, chunked) for _ in range(args.runs)]
                print(f"{label:28} status {sorted(statuses)}  peak RSS growth {rss.growth:5.1f} MB  "
                      f"whole POST {statistics.median(seconds) * 1000:6.1f} ms [{min(seconds) * 1000:.1f}–"
                      f"{max(seconds) * 1000:.1f}]  answer with no body sent {statistics.median(answers):5.1f} ms "
                      f"[{min(answers):.1f}–{max(answers):.1f}]")
            finally:
                server.terminate()
                server.wait(timeout=15)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

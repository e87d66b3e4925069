"""What an anonymous upload costs the real web server (`manage.py serve`, uvicorn,
embedded mode as `make demo` runs it): it should refuse it from its headers,
before reading the body (dashboard/body_guard.py).

Run: ``python bench/anonymous_upload.py`` (``--repeats R``, ``--runs N``, ``--mb M``).
Starts its own servers (SQLite in a temporary directory); R times, for each
case, a fresh server takes N POSTs of an M MB body to /runs/import/ while its
RSS is sampled every 20 ms from /proc. Prints, per case, the server's peak RSS
growth over its N requests as the median of the R servers [min–max], how long
a whole POST took (the client sends all of it: the server answers, then reads
and drops the rest for a while before closing), and how soon the answer comes
when the client sends the headers only (for chunked: and one 100 KB chunk),
both median [min–max] over every request:

- anonymous, Content-Length: refused (403) from the headers alone;
- anonymous, chunked: refused (403) once 64 KB arrived;
- a stale session cookie: checked off the event loop while the connection
  stops reading, then refused.

Target: ≤ 5 MB growth, the answer coming without the body. Linux only (/proc).
The latest figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import atexit
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

import scratch  # bench/, beside this file

from tests.e2e.test_hostile_input import MB, PeakRss


def post(port: int, size: int, headers: dict, chunked: bool) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.putrequest("POST", "/runs/import/")
    conn.putheader("Content-Type", "application/json")
    conn.putheader(
        "Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(size)
    )
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
    sock.sendall(
        head.encode()
        + b"\r\n"
        + (b"%x\r\n" % (100 * 1024) + b" " * (100 * 1024) + b"\r\n" if chunked else b"")
    )
    sock.recv(64)
    elapsed = (time.perf_counter() - started) * 1000
    sock.close()
    return elapsed


def start_server(env: dict) -> subprocess.Popen:
    port = scratch.free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # scratch.stop stops it with what it starts
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2)
                server.port = port
                return server
            except OSError:
                if server.poll() is not None:
                    raise SystemExit("manage.py serve exited") from None
                time.sleep(0.2)
        raise SystemExit("manage.py serve did not answer within 60 s")
    except BaseException:
        scratch.stop(server)
        raise


def spread(values: list[float], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3, help="fresh servers per case")
    parser.add_argument("--runs", type=int, default=5, help="POSTs per server")
    parser.add_argument("--mb", type=int, default=40)
    args = parser.parse_args()
    scratch.exit_on_signals()
    data_dir = tempfile.mkdtemp(prefix="frontier-bench-upload-")
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)  # also if migrate fails
    env = {k: v for k, v in os.environ.items() if k not in scratch.OWN_PLACES}
    env.update(FRONTIER_DATA_DIR=data_dir, DEBUG="1", DJANGO_SETTINGS_MODULE="dashboard.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    print(
        f"{args.mb} MB POSTs to /runs/import/ served by `manage.py serve` (uvicorn): {args.repeats} fresh servers "
        f"per case, {args.runs} POSTs each; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    cases = [
        ("anonymous, Content-Length", {}, False),
        ("anonymous, chunked", {}, True),
        ("stale session cookie", {"Cookie": "sessionid=stale"}, False),
    ]
    figures = {
        label: {"growth": [], "seconds": [], "answers": [], "statuses": set()}
        for label, _, _ in cases
    }
    try:
        for _ in range(args.repeats):
            for label, headers, chunked in cases:
                got = figures[label]
                server = start_server(env)
                try:
                    # Peak growth over the server's POSTs: freed memory stays with the
                    # process, so the first request of a server shows what a body costs.
                    with PeakRss(server.pid) as rss:
                        for _ in range(args.runs):
                            started = time.perf_counter()
                            got["statuses"].add(post(server.port, args.mb * MB, headers, chunked))
                            got["seconds"].append((time.perf_counter() - started) * 1000)
                    got["growth"].append(rss.growth)
                    got["answers"] += [
                        first_answer_ms(server.port, headers, chunked) for _ in range(args.runs)
                    ]
                finally:
                    scratch.stop(server, timeout=15)
        for label, got in figures.items():
            print(
                f"{label:26} status {sorted(got['statuses'])}  peak RSS growth {spread(got['growth'])} MB  "
                f"whole POST {spread(got['seconds'])} ms  answer with no body sent {spread(got['answers'])} ms"
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

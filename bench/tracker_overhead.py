"""What frontier_tracker costs the optimization it watches.

Run: ``python bench/tracker_overhead.py`` (``--quick`` for fewer repeats). It
runs the offline example optimization (examples/external/track_gepa_run.py:
a duck-typed adapter with no delay, so gepa's own work is all there is to
slow down) three ways and prints the median wall time of `gepa.optimize`:
without a tracker; with a tracker whose server is unreachable (every send
fails and is retried in the background, events pile up in the queue); and with
a tracker whose server answers instantly (a local stub that acknowledges every
batch). The tracker's callbacks run on gepa's thread; everything else runs
on its own threads.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gepa
import scratch  # bench/, beside this file

from frontier_tracker import FrontierTracker

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "example", ROOT / "examples" / "external" / "track_gepa_run.py"
)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
logging.getLogger("frontier_tracker").setLevel(logging.CRITICAL)


class Stub(BaseHTTPRequestHandler):
    def _answer(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(201 if self.path == "/api/external/runs" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(
            {"id": 1, "last_batch": 0} if self.path == "/api/external/runs" else {"stop": False}
        )

    def do_GET(self):
        self._answer({"stop": False, "status": "running"})

    def log_message(self, *args):
        pass


def optimize(callbacks) -> float:
    class Quiet:
        def log(self, message):
            pass

    started = time.perf_counter()
    gepa.optimize(
        seed_candidate={"instructions": "Answer the customer."},
        trainset=example.TASKS,
        valset=example.TASKS,
        adapter=example.PhraseAdapter(),
        reflection_lm=example.reflection_lm,
        max_metric_calls=2000,
        reflection_minibatch_size=2,
        logger=Quiet(),
        seed=0,
        display_progress_bar=False,
        callbacks=callbacks,
        stop_callbacks=[c.stopper for c in callbacks],
    )
    return time.perf_counter() - started


def main() -> None:
    repeats = 3 if "--quick" in sys.argv else 7
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cases = {
        "no tracker": list,
        "tracker, server unreachable": lambda: [
            FrontierTracker(f"http://127.0.0.1:{scratch.free_port()}", "ft_x", max_backoff=0.5)
        ],
        "tracker, server answering": lambda: [
            FrontierTracker(f"http://127.0.0.1:{server.server_port}", "ft_x")
        ],
    }
    for name, make in cases.items():
        times = []
        for _ in range(repeats):
            trackers = make()
            times.append(optimize(trackers))
            for tracker in trackers:
                tracker.close(timeout=0 if "unreachable" in name else 10)
        print(
            f"{name:30s} gepa.optimize median {statistics.median(times) * 1000:7.1f} ms  (min {min(times) * 1000:.1f}, "
            f"max {max(times) * 1000:.1f}; {repeats} runs, 2,000 metric calls each)"
        )
    server.shutdown()


if __name__ == "__main__":
    main()

"""What a busy view thread costs the event loop, by GIL switch interval.

The web process serves websockets on its event loop's thread while views (a
run export) run in worker threads, under one GIL. Each time the loop thread
comes back from a socket call while another thread runs Python, it waits for
the GIL, up to the switch interval. Here an event loop relays one "event" as
20 socket round trips (a delivery to 20 viewers), 200 times, first alone, then
while a thread runs json.dumps over export-like rows, at Python's default 5 ms
and at the web process's 0.5 ms (dashboard/asgi.py). Prints median and p95
per event. No database or server needed:

    .venv/bin/python bench/gil_switch.py
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time


def busy(stop: threading.Event) -> None:
    row = {"task_key": "t1", "output": "The refund window is 30 days. " * 200, "score": 0.5, "result": {"checks": [1, 2, 3]}}
    while not stop.is_set():
        json.dumps([dict(row) for _ in range(20)], ensure_ascii=False)


async def deliveries(events: int = 200, viewers: int = 20) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    pairs = [socket.socketpair() for _ in range(viewers)]
    for a, b in pairs:
        a.setblocking(False)
        b.setblocking(False)
    took = []
    for _ in range(events):
        started = time.perf_counter()
        for a, b in pairs:
            await loop.sock_sendall(a, b"x" * 200)
            await loop.sock_recv(b, 1000)
        took.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.01)
    for a, b in pairs:
        a.close()
        b.close()
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.95)]


def main() -> None:
    for interval in (0.005, 0.0005):
        sys.setswitchinterval(interval)
        idle = asyncio.run(deliveries())
        stop = threading.Event()
        thread = threading.Thread(target=busy, args=(stop,))
        thread.start()
        during = asyncio.run(deliveries())
        stop.set()
        thread.join()
        print(f"switch interval {interval * 1000:g} ms: one event to 20 sockets, median / p95 "
              f"{idle[0]:.1f} / {idle[1]:.1f} ms alone, {during[0]:.1f} / {during[1]:.1f} ms beside a busy thread; "
              f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

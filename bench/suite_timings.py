"""How fast the things the unit suite checks only for behaviour are.

Run: ``.venv/bin/python bench/suite_timings.py``. The unit tests assert what a
user notices (the reply is bounded, the batch runs four at a time, the client
waits what it was told, a cancel lands before the child is evaluated); the wall
times, which a loaded CI machine cannot promise, are printed here instead, each
next to the figure an idle machine should show. Uses a throwaway SQLite
database in a temporary directory.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import scratch  # bench/, beside this file

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
os.environ["FRONTIER_DATA_DIR"] = DATA_DIR = tempfile.mkdtemp(prefix="frontier-bench-timings-")
atexit.register(shutil.rmtree, DATA_DIR, ignore_errors=True)
scratch.exit_on_signals()  # SIGTERM too removes DATA_DIR (atexit)
for name in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "FRONTIER_RUNS_DIR"):
    os.environ.pop(name, None)

import django

django.setup()

import contextlib
import logging

from django.contrib.auth import get_user_model
from django.core.management import call_command

from optimizer.lm import LMError, build_lm, check_endpoint
from optimizer.models import Candidate, Run
from optimizer.runs import runner
from optimizer.runs.adapter import FrontierAdapter
from tests.optimizer.fake_openai import KEY_ENV, FakeOpenAIServer, completion, error_body
from tests.optimizer.run_helpers import REFUND_SPEC, REQUESTS, refund_task_set, refund_verifier
from verifiers_app.engine import compile_specs

logging.disable(logging.WARNING)
os.environ[KEY_ENV] = "sk-bench"


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def show(label: str, seconds: float, idle: str) -> None:
    print(f"   {label:<58} {seconds:6.2f} s   (idle machine: {idle})")


def demo_and_adapter() -> None:
    lm = build_lm({"provider": "demo", "model": "demo"})
    huge = ("flood " + "x" * 994 + ". ") * 1000
    system = 'When the request mentions "flood", mention "pump".\n' * 50 + "z" * 500_000
    show(
        "demo model, a 1 MB input",
        timed(
            lambda: lm.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": huge}]
            )
        ),
        "< 2 s",
    )
    rows = [
        {"task_id": key, "input": text, "expected": None, "params": {}, "metadata": {}}
        for key, text, _ in REQUESTS
    ]
    slow = build_lm({"provider": "demo", "model": "demo", "simulated_latency_ms": 100})
    adapter = FrontierAdapter(task_lm=slow, scorer=compile_specs([REFUND_SPEC]), concurrency=4)
    show(
        "adapter: 8 calls of 100 ms at concurrency 4",
        timed(lambda: adapter.evaluate(rows, {"i": "Be kind."})),
        "0.2 s",
    )


def openai_client() -> None:
    def config(server, **extra):
        return {
            "provider": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_retries": 0,
            "timeout": 5,
            **extra,
        }

    def failing(lm):
        def call():
            with contextlib.suppress(LMError):
                lm.complete([{"role": "user", "content": "hi"}])

        return call

    with FakeOpenAIServer() as server:
        server.default = (503, error_body("busy"), 0)
        lm = build_lm(config(server, max_retries=2, retry_initial_delay=0.2))
        show("openai: two retries with a 0.2 s initial backoff", timed(failing(lm)), "0.45-0.6 s")
        server.default = (200, completion(), 2.0)
        lm = build_lm(config(server, timeout=0.3, max_retries=1, retry_initial_delay=0.01))
        show("openai: a 2 s reply with a 0.3 s timeout, one retry", timed(failing(lm)), "~0.6 s")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = {
        "provider": "openai",
        "model": "m",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "api_key_env": KEY_ENV,
    }
    show("check_endpoint on a closed port", timed(lambda: check_endpoint(unreachable)), "< 0.1 s")


def cancel_latency(owner) -> None:
    from optimizer.services import run_launch

    slow = {"provider": "demo", "model": "demo", "simulated_latency_ms": 2000}
    run = run_launch(
        owner=owner,
        config={
            "task_set_id": refund_task_set(owner).pk,
            "verifier_ids": [REFUND_SPEC["id"]],
            "task_lm": slow,
            "reflection_lm": slow,
            "budget": {"max_metric_calls": 2000},
        },
    )
    worker = threading.Thread(target=runner.execute_run, args=(run.pk,))
    worker.start()
    while not Candidate.objects.filter(run=run).exists():
        time.sleep(0.02)
    started = time.perf_counter()
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    worker.join()
    show(
        "cancel of a run with 2 s model calls (flag set → run ends)",
        time.perf_counter() - started,
        "≤ 2 s heartbeat + ≤ 2 s call in flight",
    )


def embedded_push(owner) -> None:
    """The embedded worker runs a task that publishes an event; a channel-layer
    subscriber (what a websocket consumer is) receives it."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from dashboard.celery_tasks import worker_ping
    from dashboard.embedded import ensure_worker, stop_worker
    from optimizer.models import RunStatus
    from optimizer.runs.events import run_group

    run = Run.objects.create(owner=owner, name="push", status=RunStatus.COMPLETED)
    layer = get_channel_layer()

    async def receive_one() -> float:
        channel = await layer.new_channel()
        await layer.group_add(run_group(run.pk), channel)
        started = time.perf_counter()
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: worker_ping.delay(run.pk, "bench")
        )
        await asyncio.wait_for(layer.receive(channel), timeout=30)
        return time.perf_counter() - started

    ensure_worker(concurrency=1)
    try:
        show(
            "embedded worker task → event on the channel layer",
            async_to_sync(receive_one)(),
            "< 2 s, the bound the unit test used to assert",
        )
    finally:
        stop_worker()


def main() -> None:
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench")
    refund_verifier(owner)
    print("Wall times behind the unit suite's behaviour checks")
    demo_and_adapter()
    openai_client()
    cancel_latency(owner)
    embedded_push(owner)


if __name__ == "__main__":
    main()

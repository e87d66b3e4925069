"""Run speed: our runner vs plain gepa at equal concurrency, and our per-iteration overhead.

Run: ``.venv/bin/python bench/run_throughput.py`` (``--skip-overhead`` or
``--skip-throughput`` for one part). A throwaway SQLite database is created in a
temporary directory (migrations applied) and removed at the end.

Both parts talk to one local OpenAI-compatible HTTP server with a fixed
latency, through the real ``openai`` client. The server runs in a child process
(a model server is another process: in the bench's own it took the interpreter
lock from the contenders, which no deployment does) and keeps connections
alive with TCP_NODELAY, as vLLM, llama.cpp or Ollama do; every contender talks
to the same one. Each client is warmed by one untimed call first (imports,
connection pools). Its replies are deterministic so every contender follows
the same optimization path: a task call (with a system message) answers with the
system prompt itself; a reflection call (no system message) answers with the
current instructions plus one more line "Mention token-NNN.". Every task row
expects all tokens (task_expectations, partial credit), so each proposal
improves and is accepted.

1. Throughput at equal concurrency and equal work (docs/gepa-notes.md §12): valset 30,
   trainset 30, budget 300 metric calls, 100 ms per call, seed 0, concurrency 16,
   each contender run `--repeats` times (median and every run printed). Every
   contender stops by our runner's rule (optimizer.runs.budget.BudgetGuard):
   before an iteration the rest of the budget could not pay for (2 minibatches
   + the valset). gepa's own max_metric_calls checks only that the budget is
   not spent yet, so plain gepa would run one more iteration than ours (318
   calls against 282 at budget 300) and the times would compare unequal work.
   Each line prints the metric calls it made and the best val score it reached.
   (a) plain gepa as its users configure it: DefaultAdapter with a litellm model
       string ("openai/echo", api_base = the local endpoint) and
       max_litellm_workers = 16, reflection_lm the same string (needs litellm:
       `make install-bench`); (a') the same DefaultAdapter with a callable task
       LM on a 16-thread pool (our openai client; writes nothing anywhere);
   (b) ours = the whole runner (`optimizer.runs.runner.execute_run`: adapter at
       concurrency 16, recorder, DB rows, events, checkpoint);
   (c) the latency floor: the sequential LM rounds the run needs (an evaluation
       of n tasks is ceil(n / 16) rounds, a reflection one) x 100 ms.
2. Overhead: 0 ms per call, valset 10, until the pool holds 300 candidates.
   Per iteration, time outside LM work (wall time minus time in
   adapter.batch_evaluate and in the reflection call), over the iterations
   with ≥ 280 candidates in the pool, for bare gepa with our adapter (without a
   run_dir, and with one: gepa's own checkpoint files) and for our runner;
   `--overhead-repeats` interleaved runs of each, medians. Ours minus bare
   gepa without a run_dir is our overhead, checkpoint included (target ≤ 10
   ms). Also prints how much of gepa's time is `_log_candidate_tree` (docs/gepa-notes.md
   §10; our runs skip it, optimizer/runs/checkpoint.py).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch

DATA_DIR = scratch.setup("run")
os.environ["BENCH_KEY"] = "sk-bench"

import django

django.setup()

import logging

import gepa
from django.contrib.auth import get_user_model
from django.core.management import call_command
from gepa.adapters.default_adapter.default_adapter import DefaultAdapter, EvaluationResult
from gepa.core.engine import GEPAEngine

from optimizer.config import iteration_cost
from optimizer.lm import ReflectionCallable, build_lm, build_reflection_lm
from optimizer.models import Run, Task, TaskSet
from optimizer.runs import runner
from optimizer.runs.adapter import FrontierAdapter
from optimizer.runs.recording_thread import RecorderThread
from optimizer.services import run_launch
from verifiers_app.engine import compile_specs
from verifiers_app.services import verifier_create

logging.disable(logging.WARNING)
SEED_PROMPT = "You answer questions."
SPEC = {
    "id": "ladder",
    "name": "Token ladder",
    "kind": "native",
    "checks": [{"id": "tokens", "type": "task_expectations"}],
}
FENCED = re.compile(r"```\n?(.*?)\n?```", re.S)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog (5) drops bursts of connects: 1 s SYN retries


def serve_echo(latency_s: float, port_out) -> None:
    """The endpoint's process: /v1/chat/completions, task calls echo the system
    prompt; reflection calls add one token line. HTTP/1.1 keep-alive, as model
    servers (vLLM, llama.cpp, Ollama) speak it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # TCP_NODELAY, as servers set it: else the body of a kept-alive reply waits ~40 ms for an ACK

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            messages = body["messages"]
            if messages[0]["role"] == "system":
                text = messages[0]["content"]
            else:
                current = FENCED.search(messages[-1]["content"]).group(1).strip()
                text = (
                    f"```\n{current}\nMention token-{current.count('Mention token-') + 1:03d}.\n```"
                )
            if latency_s:
                time.sleep(latency_s)
            raw = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = Server(("127.0.0.1", 0), Handler)
    port_out.send(httpd.server_address[1])
    port_out.close()
    httpd.serve_forever()


class EchoServer:
    """One local endpoint with a fixed latency, in a child process of its own: a
    model server is another process, so its request handling must not compete
    with the contenders for this process's interpreter lock. Every contender
    talks to the same one. Started before any thread of the bench exists (fork)."""

    def __init__(self, latency_s: float):
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        self.process = context.Process(target=serve_echo, args=(latency_s, send), daemon=True)
        self.process.start()
        send.close()
        self.port = receive.recv()
        receive.close()

    def lm(self) -> dict:
        return {
            "provider": "openai",
            "model": "echo",
            "base_url": f"http://127.0.0.1:{self.port}/v1",
            "api_key_env": "BENCH_KEY",
            "max_retries": 0,
            "timeout": 30,
        }

    def close(self) -> None:
        self.process.terminate()
        self.process.join()


def rows(prefix: str, count: int, tokens: int) -> list[dict]:
    expectations = {
        "mustMention": [
            {"text": f"token-{k:03d}", "message": f"Mention token-{k:03d}"}
            for k in range(1, tokens + 1)
        ]
    }
    return [
        {
            "task_id": f"{prefix}-{n}",
            "input": f"Question {prefix} {n}?",
            "expected": None,
            "params": {},
            "metadata": {"expectations": expectations},
        }
        for n in range(count)
    ]


def launch(owner, name: str, train: list[dict], val: list[dict], **config) -> Run:
    task_set = TaskSet.objects.create(owner=owner, name=name)
    for position, (row, split) in enumerate(
        [(r, "train") for r in train] + [(r, "val") for r in val]
    ):
        Task.objects.create(
            task_set=task_set,
            task_id=row["task_id"],
            position=position,
            input=row["input"],
            metadata=row["metadata"],
            split=split,
        )
    return run_launch(
        owner=owner,
        config={
            "task_set_id": task_set.pk,
            "verifier_ids": [SPEC["id"]],
            "seed_components": {"instructions": SEED_PROMPT},
            **config,
        },
    )


class Quiet:
    def log(self, message: str) -> None:
        pass


class Rounds:
    """Counts the sequential LM rounds a run needs: an evaluation of n tasks at
    concurrency c is ceil(n / c) rounds, a reflection call is one. Times the
    endpoint latency, that is the wall time no runner can beat (the floor)."""

    def __init__(self, concurrency: int):
        self.concurrency = concurrency
        self.count = 0

    def wrap(self, owner, name: str, rounds) -> Callable[[], None]:
        original = getattr(owner, name)

        def counted(*args, **kwargs):
            self.count += rounds(*args, **kwargs)
            return original(*args, **kwargs)

        setattr(owner, name, counted)
        return lambda: setattr(owner, name, original)


def spread(times: list[float]) -> str:
    return (
        f"median {statistics.median(times):6.2f} s  (runs {', '.join(f'{t:.2f}' for t in times)})"
    )


def equal_work(ours: int, theirs: int) -> str:
    """What a time ratio means: equal metric calls, or a warning that it compares unequal work."""
    if ours == theirs:
        return f" at equal work ({ours} metric calls each)"
    return f"  (UNEQUAL work: {ours} metric calls against {theirs}; the ratio is not comparable)"


def fair_throughput(
    owner, server: EchoServer, *, repeats: int = 3, latency_s: float = 0.1, concurrency: int = 16
) -> None:
    """Ours and plain gepa at the same concurrency against one endpoint, same seed, budget and data."""
    train, val = rows("train", 30, 40), rows("val", 30, 40)
    lm_config = server.lm()
    scorer = compile_specs([SPEC])

    def evaluator(data, response) -> EvaluationResult:
        result = scorer.score(response, task=data["row"])
        return EvaluationResult(score=result.score, feedback=result.feedback)

    def as_default(row):
        return {"input": row["input"], "additional_context": {}, "answer": "", "row": row}

    budget, minibatch = 300, 3
    cost = iteration_cost(len(val), minibatch)

    def as_ours(state) -> bool:
        """Our runner's budget rule: no iteration the rest of the budget may not cover."""
        return budget - state.total_num_evals < cost

    def plain_gepa(adapter, reflection_lm, **extra) -> tuple[float, object]:
        started = time.perf_counter()
        result = gepa.optimize(
            seed_candidate={"instructions": SEED_PROMPT},
            trainset=[as_default(r) for r in train],
            valset=[as_default(r) for r in val],
            adapter=adapter,
            reflection_lm=reflection_lm,
            reflection_minibatch_size=minibatch,
            max_metric_calls=budget,
            stop_callbacks=[as_ours],
            logger=Quiet(),
            seed=0,
            **extra,
        )
        return time.perf_counter() - started, result

    # Each client is warmed by one untimed call before its contender's runs (imports, connection
    # pools): no contender's first run pays the process's cold start. Ours and (a') share this one.
    build_lm(lm_config).complete(
        [{"role": "system", "content": "warm"}, {"role": "user", "content": "warm"}]
    )

    ours_times, ours_runs, rounds = [], [], Rounds(concurrency)
    # Every evaluation goes through batch_evaluate (evaluate is one pair of it): one pool for all its calls.
    undo = [
        rounds.wrap(
            FrontierAdapter,
            "batch_evaluate",
            lambda self, items, *a, **k: -(-sum(len(batch) for _, batch in items) // concurrency),
        ),
        rounds.wrap(ReflectionCallable, "__call__", lambda *a, **k: 1),
    ]
    for repeat in range(repeats):
        rounds.count = 0
        run = launch(
            owner,
            f"fair-{repeat}",
            train,
            val,
            task_lm=lm_config,
            reflection_lm=lm_config,
            budget={"max_metric_calls": budget},
            minibatch_size=minibatch,
            concurrency=concurrency,
            seed=0,
        )
        started = time.perf_counter()
        runner.execute_run(run.pk)
        ours_times.append(time.perf_counter() - started)
        run.refresh_from_db()
        ours_runs.append(run)
    for restore_one in undo:
        restore_one()
    floor = rounds.count * latency_s

    # Plain gepa as its users run it: a litellm model string, max_litellm_workers = our concurrency.
    litellm_times, litellm_result = [], None
    try:
        os.environ.setdefault(
            "LITELLM_LOCAL_MODEL_COST_MAP", "True"
        )  # no fetch from the internet at import
        import litellm

        litellm.suppress_debug_info = True  # its "Provider List" banners are not ours to print
    except ImportError:
        litellm = None
    if litellm is not None:
        litellm_model = f"openai/{lm_config['model']}"
        endpoint = {"api_base": lm_config["base_url"], "api_key": os.environ["BENCH_KEY"]}
        litellm.completion(
            model=litellm_model,
            messages=[{"role": "user", "content": "```\nwarm\n```"}],
            **endpoint,
        )
        for _ in range(repeats):
            adapter = DefaultAdapter(
                model=litellm_model,
                evaluator=evaluator,
                max_litellm_workers=concurrency,
                litellm_batch_completion_kwargs=endpoint,
            )
            elapsed, litellm_result = plain_gepa(
                adapter, litellm_model, reflection_lm_kwargs=endpoint
            )
            litellm_times.append(elapsed)

    # The same DefaultAdapter with a callable task LM (our openai client) over a thread pool
    # of the same width: plain gepa without litellm's per-call cost.
    lm = build_lm(lm_config)

    class ThreadedDefaultAdapter(DefaultAdapter):
        def __init__(self):
            super().__init__(
                model=lambda messages: lm.complete(list(messages)).text, evaluator=evaluator
            )
            self.pool = ThreadPoolExecutor(max_workers=concurrency)

        def evaluate(self, batch, candidate, capture_traces=False):
            model = self.model
            futures = {}
            # Submit every request of the batch first, then let DefaultAdapter consume the answers in order.
            system = next(iter(candidate.values()))
            for data in batch:
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"{data['input']}"},
                ]
                futures[data["input"]] = self.pool.submit(model, messages)
            self.model = lambda messages: futures[messages[1]["content"]].result()
            try:
                return super().evaluate(batch, candidate, capture_traces)
            finally:
                self.model = model

    threaded_times, threaded_result = [], None
    for _ in range(repeats):
        adapter = ThreadedDefaultAdapter()
        elapsed, threaded_result = plain_gepa(adapter, build_reflection_lm(lm_config))
        adapter.pool.shutdown()
        threaded_times.append(elapsed)

    best = ours_runs[-1]
    ours = statistics.median(ours_times)
    print(
        f"1. Throughput at equal concurrency ({concurrency}) and equal work: valset 30, budget {budget} "
        f"metric calls, every contender stopping by our runner's rule (no iteration the rest may not "
        f"cover: {cost} calls), {latency_s * 1000:.0f} ms per call, seed 0, median of {repeats}"
    )
    print(
        f"   (c) latency floor: {rounds.count} sequential LM rounds x {latency_s * 1000:.0f} ms = {floor:6.2f} s"
    )
    print(
        f"   (b) ours (runner: rows, events, checkpoint): {spread(ours_times)}  = {ours / floor:.2f}x the floor; "
        f"{best.budget_used} metric calls, {best.candidates.count()} candidates, best {best.best_score:.3f}"
    )
    if litellm_times:
        plain = statistics.median(litellm_times)
        print(
            f"   (a) plain gepa, DefaultAdapter('openai/echo', max_litellm_workers={concurrency}): {spread(litellm_times)}"
            f"  = {plain / floor:.2f}x the floor; {litellm_result.total_metric_calls} metric calls, "
            f"{len(litellm_result.candidates)} candidates, best {max(litellm_result.val_aggregate_scores):.3f}"
        )
        print(
            f"       ours / plain gepa (litellm): {ours / plain:.2f}"
            f"{equal_work(best.budget_used, litellm_result.total_metric_calls)}"
        )
    else:
        print(
            "   (a) plain gepa with litellm: skipped, litellm is not installed (make install-bench)"
        )
    threaded = statistics.median(threaded_times)
    print(
        f"   (a') plain gepa, DefaultAdapter + a callable task LM on {concurrency} threads: {spread(threaded_times)}"
        f"  = {threaded / floor:.2f}x the floor; {threaded_result.total_metric_calls} metric calls, "
        f"{len(threaded_result.candidates)} candidates, best {max(threaded_result.val_aggregate_scores):.3f}"
    )
    print(
        f"       ours / plain gepa (threads): {ours / threaded:.2f}"
        f"{equal_work(best.budget_used, threaded_result.total_metric_calls)}"
    )


class Timers:
    """Bench-only instrumentation. One sample per iteration: the wall time of the
    whole loop cycle (end of one iteration to the end of the next, so gepa's
    checkpoint and everything we do around it count), minus the time spent in
    LM work (adapter.evaluate and the reflection call) within it."""

    def __init__(self):
        self.lm_work = 0.0
        self.tree = 0.0
        self.samples: list[tuple[int, float, float]] = []  # (pool size, outside-LM ms, tree ms)
        self._last = (0.0, 0.0, 0.0)

    def tick(self, pool: int) -> None:
        now = time.perf_counter()
        last_time, last_lm, last_tree = self._last
        if last_time:
            outside = (now - last_time) - (self.lm_work - last_lm)
            self.samples.append((pool, outside * 1000, (self.tree - last_tree) * 1000))
        self._last = (now, self.lm_work, self.tree)

    def wrap(self, owner, name: str, counter: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                setattr(self, counter, getattr(self, counter) + time.perf_counter() - started)

        setattr(owner, name, timed)

    def summary(self, from_pool: int) -> tuple[float, float, int]:
        late = [(outside, tree) for pool, outside, tree in self.samples if pool >= from_pool]
        return (
            statistics.median(o for o, _ in late),
            statistics.median(t for _, t in late),
            len(late),
        )


def instrumented() -> Timers:
    timers = Timers()
    timers.wrap(
        FrontierAdapter, "batch_evaluate", "lm_work"
    )  # evaluate is one pair of batch_evaluate
    timers.wrap(ReflectionCallable, "__call__", "lm_work")
    timers.wrap(GEPAEngine, "_log_candidate_tree", "tree")
    return timers


def restore(originals: dict) -> None:
    for (owner, name), value in originals.items():
        setattr(owner, name, value)


def overhead(
    owner, server: EchoServer, pool_target: int = 300, from_pool: int = 280, repeats: int = 3
) -> None:
    train, val = rows("train", 10, pool_target + 20), rows("val", 10, pool_target + 20)
    originals = {
        (o, n): getattr(o, n)
        for o, n in [
            (FrontierAdapter, "batch_evaluate"),
            (ReflectionCallable, "__call__"),
            (GEPAEngine, "_log_candidate_tree"),
            (RecorderThread, "on_iteration_end"),
        ]
    }
    budget = 10 + pool_target * (2 * 3 + 10)

    def bare_gepa(run_dir: str | None) -> tuple[float, float, int, float]:
        """gepa.optimize with our adapter and nothing of ours around it (gepa's own files with a run_dir)."""
        timers = instrumented()

        class Clock:
            def on_iteration_end(self, event):
                timers.tick(len(event["state"].program_candidates))

        adapter = FrontierAdapter(
            task_lm=build_lm(server.lm()), scorer=compile_specs([SPEC]), concurrency=16
        )
        started = time.perf_counter()
        gepa.optimize(
            seed_candidate={"instructions": SEED_PROMPT},
            trainset=train,
            valset=val,
            adapter=adapter,
            reflection_lm=build_reflection_lm(server.lm()),
            reflection_minibatch_size=3,
            max_metric_calls=budget,
            logger=Quiet(),
            callbacks=[Clock()],
            run_dir=run_dir,
            track_best_outputs=False,
            seed=0,
        )
        wall = time.perf_counter() - started
        adapter.close()
        restore(originals)
        return (*timers.summary(from_pool), wall)

    def ours(repeat: int) -> tuple[float, float, int, float]:
        """Our runner: adapter + recorder (rows, events) + DB stopper + checkpoint."""
        timers = instrumented()
        end = RecorderThread.on_iteration_end  # gepa calls it on the engine's thread

        def on_end(self, event):
            end(self, event)
            timers.tick(len(event["state"].program_candidates))

        RecorderThread.on_iteration_end = on_end
        run = launch(
            owner,
            f"overhead-{repeat}",
            train,
            val,
            task_lm=server.lm(),
            reflection_lm=server.lm(),
            budget={"max_metric_calls": budget},
            minibatch_size=3,
            concurrency=16,
        )
        started = time.perf_counter()
        runner.execute_run(run.pk)
        wall = time.perf_counter() - started
        restore(originals)
        run.refresh_from_db()
        assert run.candidates.count() >= pool_target, run.candidates.count()
        return (*timers.summary(from_pool), wall)

    results: dict[str, list[tuple[float, float, int, float]]] = {
        "bare": [],
        "bare+run_dir": [],
        "ours": [],
    }
    for repeat in range(repeats):  # interleaved, so a busy neighbour slows all three alike
        results["bare"].append(bare_gepa(None))
        results["bare+run_dir"].append(bare_gepa(str(Path(DATA_DIR) / f"bare-{repeat}")))
        results["ours"].append(ours(repeat))

    def line(name: str) -> tuple[float, str]:
        outside = [r[0] for r in results[name]]
        median = statistics.median(outside)
        return median, (
            f"{median:7.1f} ms  (runs {', '.join(f'{o:.1f}' for o in outside)}; gepa's _log_candidate_tree "
            f"{statistics.median(r[1] for r in results[name]):.1f} ms; {results[name][0][2]} iterations a run; "
            f"whole run {statistics.median(r[3] for r in results[name]):.1f} s)"
        )

    bare, bare_text = line("bare")
    bare_dir, bare_dir_text = line("bare+run_dir")
    our, our_text = line("ours")
    print(
        f"2. Overhead per iteration outside LM work, pool of {from_pool}-{pool_target} candidates (0 ms per call), "
        f"median of {repeats} runs (each run: the median over its iterations)"
    )
    print(f"   bare gepa + our adapter, no run_dir:      {bare_text}")
    print(f"   bare gepa + our adapter, gepa's run_dir:  {bare_dir_text}")
    print(f"   our runner (rows, events, checkpoint):    {our_text}")
    print(
        f"   ours minus bare gepa without a run_dir: {our - bare:.1f} ms per iteration (target <= 10 ms); "
        f"minus bare gepa with its run_dir: {our - bare_dir:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each contender in the throughput part"
    )
    parser.add_argument(
        "--pool", type=int, default=300, help="candidates in the pool for the overhead part"
    )
    parser.add_argument(
        "--overhead-repeats",
        type=int,
        default=3,
        help="runs of each contender in the overhead part",
    )
    args = parser.parse_args()
    # The endpoints first: forked while the bench has no other thread and no database connection.
    endpoint_s = 0.1
    slow = None if args.skip_throughput else EchoServer(latency_s=endpoint_s)
    instant = None if args.skip_overhead else EchoServer(latency_s=0.0)
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser(
        "bench"
    )  # an operator: may give endpoints inline
    verifier_create(owner=owner, spec=SPEC)
    if slow is not None:
        fair_throughput(owner, slow, repeats=args.repeats, latency_s=endpoint_s)
        slow.close()
    if instant is not None:
        overhead(
            owner,
            instant,
            pool_target=args.pool,
            from_pool=args.pool - 20,
            repeats=args.overhead_repeats,
        )
        instant.close()


if __name__ == "__main__":
    main()

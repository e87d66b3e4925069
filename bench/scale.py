"""Big runs stay fast (the run page, the candidate and compare pages, the
snapshot's size): one command prints every figure.

For each size (default 2,000 candidates × 300 val tasks; `--sizes 2000x300,10000x1000`)
it builds a finished run straight into PostgreSQL, in the shapes of the test
factory run (tests/factories.py: its engine result, verdicts,
events), but fast: candidates through bulk_create, evaluations through COPY,
the front by optimizer.front. Then it prints, each as the median of `--repeat`
(default 3) measurements after one warm-up, with the spread (min–max):

- the run page's snapshot.json: size and server time (the whole Django view:
  middleware, session, selector, JSON encoding; no network), and its queries;
- the candidate page and the compare view of 5 candidates: server time and queries;
- the run page in Chromium against a real web process (`manage.py serve`) on
  this database, each load with an empty browser cache (a new browser context;
  one warm-up load first): the bytes over the wire (every response's
  transferred size, headers included: Chromium's Network.loadingFinished
  encodedDataLength), and two times from navigation: until it shows "● live",
  and until every one of its five charts is drawn (a big run's heatmap, 2-D
  front and verdicts are drawn after "● live").
  A chart is drawn when Plotly's promise for its first newPlot/react resolves
  and the chart's element holds Plotly's drawing (`.main-svg`); the bench wraps
  window.Plotly from an init script to note when (the page's own code is not
  changed, so an older checkout is measured the same way).

`--baseline PATH` measures a server started from another checkout beside ours
(same database, same runs), e.g. `git worktree add ../frontier-main main`.

It uses its own database and Redis DB, never the defaults:
BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/frontier_bench)
and BENCH_REDIS_URL (default redis://127.0.0.1:6379/15). The database is
created if missing and dropped at the end, also when the bench fails or gets
SIGTERM or Ctrl-C, unless `--keep` keeps it: `--reuse` then measures the run
of the same size built before instead of building another.

Usage: .venv/bin/python bench/scale.py [--sizes 2000x300] [--repeat 3] [--keep] [--reuse] [--no-browser] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import scratch  # bench/, beside this file

DATABASE_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/frontier_bench"
)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
PREFIX = f"bench-scale-{os.getpid()}-{uuid.uuid4().hex[:6]}"
# The web processes' data directory (scratch.web_data_env).
DATA_DIR = Path(f"/tmp/{PREFIX}-data")
ENV = {
    "DATABASE_URL": DATABASE_URL,
    "REDIS_URL": REDIS_URL,
    "FRONTIER_CHANNEL_PREFIX": PREFIX,
    "FRONTIER_QUEUE": PREFIX,
    "SECRET_KEY": os.environ.get("BENCH_SECRET_KEY", f"bench-only-{uuid.uuid4().hex}"),
    "DEBUG": "0",
    "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    "DJANGO_SETTINGS_MODULE": "dashboard.settings",
}
CHROMIUM = os.environ.get("FRONTIER_CHROMIUM", "/usr/bin/chromium")


# An evaluation's stored result in the engine's shape (two verifiers, one check each):
# cheap to make in bulk, unlike tests/factories.py's engine-scored outputs.
VERIFIER_IDS = ("policy", "format")


def _verdict(score: float) -> str:
    return "pass" if score >= 0.8 else "borderline" if score >= 0.6 else "fail"


def _result(score: float, per_verifier: dict[str, float]) -> dict:
    verifiers = [
        {
            "id": vid,
            "name": vid.title(),
            "score": s,
            "weight": 1,
            "passed": s >= 1.0,
            "checks": [
                {
                    "id": f"{vid}-mentions",
                    "type": "task_expectations",
                    "weight": 1,
                    "required": False,
                    "score": s,
                    "skipped": False,
                    "reason": ""
                    if s >= 1.0
                    else f"{vid}: must mention the refund window (expected: '30 days')",
                }
            ],
        }
        for vid, s in per_verifier.items()
    ]
    misses = [c["reason"] for v in verifiers for c in v["checks"] if c["reason"]]
    return {
        "score": score,
        "verdict": _verdict(score),
        "passed": not misses,
        "verifiers": verifiers,
        "hits": [],
        "misses": misses,
        "feedback": "\n".join(misses),
    }


def _refuse_defaults() -> None:
    db = urlsplit(DATABASE_URL).path.lstrip("/")
    if db in ("", "postgres", "frontier") or urlsplit(REDIS_URL).path.strip("/") in ("", "0"):
        raise SystemExit(
            "bench/scale.py: use a database and a Redis DB of its own (BENCH_DATABASE_URL, BENCH_REDIS_URL), not the defaults"
        )


def ensure_database() -> None:
    import psycopg

    parts = urlsplit(DATABASE_URL)
    admin = urlunsplit(parts._replace(path="/postgres"))
    name = parts.path.lstrip("/")
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_database() -> None:
    import psycopg

    parts = urlsplit(DATABASE_URL)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f}; {len(values)} runs)"


# ---------------------------------------------------------------- building


def build_scale_run(*, owner, candidates: int, val_tasks: int, seed: int = 11):
    """A finished run of this size, in the factory run's shapes (see the module docstring)."""
    from django.db import connection, transaction
    from django.utils import timezone

    from optimizer.config import (
        DEMO_REFLECTION_LM,
        DEMO_TASK_LM,
        MAX_METRIC_CALLS,
        parse_run_config,
    )
    from optimizer.front import front_members
    from optimizer.models import (
        Candidate,
        Origin,
        Run,
        RunEvent,
        RunStatus,
        run_progress,
        store_rejected_marks,
    )
    from optimizer.runs import event_types as ev
    from optimizer.tasksets.models import Split, Task, TaskSet
    from optimizer.val_summary import val_summary

    rng = random.Random(seed)
    name = f"scale {candidates}x{val_tasks}"
    task_set = TaskSet.objects.create(owner=owner, name=f"{name} tasks {uuid.uuid4().hex[:6]}")
    tasks = Task.objects.bulk_create(
        [
            Task(
                task_set=task_set,
                task_id=f"t{i:04d}",
                position=i,
                input=f"Customer {i}: can I get a refund after {i % 40} days?",
                metadata={
                    "expectations": {
                        "mustMention": [{"text": "30 days", "message": "state the window"}]
                    }
                },
                split=Split.VAL,
            )
            for i in range(val_tasks)
        ],
        batch_size=2000,
    )
    keys = [t.task_id for t in tasks]
    # At most what a launch accepts (a 10,000 × 1,000 run ends a little past it).
    budget = min(val_tasks * candidates * 3, MAX_METRIC_CALLS)
    run = Run.objects.create(
        owner=owner,
        name=name,
        task_set=task_set,
        # The frozen config a launch stores, as the factory run's (pages read it back).
        config=parse_run_config(
            {
                "name": name,
                "task_set_id": task_set.pk,
                "verifier_ids": list(VERIFIER_IDS),
                "seed_components": {"system_prompt": "You are a support agent."},
                "budget": {"max_metric_calls": budget},
                "task_lm": DEMO_TASK_LM.model_dump(mode="json"),
                "reflection_lm": DEMO_REFLECTION_LM.model_dump(mode="json"),
            }
        ).frozen(),
        verifier_specs=[
            {"id": vid, "name": vid.title(), "kind": "native", "checks": []} for vid in VERIFIER_IDS
        ],
        tasks_snapshot=[dict(t.as_row(), split=t.split) for t in tasks],
        status=RunStatus.COMPLETED,
        phase="finished",
        budget_total=budget,
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    # Scores: each child near its parent's mean, a little better on average (as in a real run).
    means: list[float] = []
    vectors: dict[int, tuple[float, ...]] = {}
    rows: list[Candidate] = []
    events: list[tuple[str, dict]] = [
        (ev.RUN_STATUS, {"status": RunStatus.RUNNING, "phase": "seed evaluation"})
    ]
    seq = 0

    def flush_events() -> (
        None
    ):  # streamed: a 10,000-candidate run's candidate.new payloads hold 10M scores
        nonlocal seq
        store_rejected_marks(
            RunEvent.objects.bulk_create(
                [
                    RunEvent(run=run, seq=seq + k, type=t, payload=d)
                    for k, (t, d) in enumerate(events, start=1)
                ]
            )
        )
        seq += len(events)
        events.clear()

    metric_calls = val_tasks
    for index in range(candidates):
        if index == 0:
            parents, origin, base = [], Origin.SEED, 0.35
        elif index >= 4 and rng.random() < 0.15:
            parents, origin = sorted(rng.sample(range(index), 2)), Origin.MERGE
            base = min(0.9, sum(means[p] for p in parents) / 2 + rng.uniform(-0.02, 0.03))
        else:
            parents, origin = [rng.randrange(max(0, index - 50), index)], Origin.REFLECTION
            base = min(0.9, means[parents[0]] + rng.uniform(-0.03, 0.035))
        scores = tuple(round(min(1.0, max(0.0, base + rng.uniform(-0.25, 0.25))), 3) for _ in keys)
        vectors[index] = scores
        mean = sum(scores) / val_tasks
        means.append(mean)
        objective = {
            vid: round(min(1.0, max(0.0, mean + rng.uniform(-0.1, 0.1))), 3) for vid in VERIFIER_IDS
        }
        text = f"You are a support agent. Answer the customer's refund question.\nRule {index}: always state the 30 days refund window."
        verdicts = [_verdict(s) for s in scores]
        task_scores, summary = val_summary(
            (k, s, v, 60, 30 + index % 20, 12.0)
            for k, s, v in zip(keys, scores, verdicts, strict=True)
        )
        if index:
            metric_calls += 3 + val_tasks
            for _ in range(2):  # gepa rejects more rewrites than it accepts
                events.append(
                    (
                        ev.PROPOSAL,
                        {
                            "iteration": index,
                            "parent": parents[0],
                            "components": ["system_prompt"],
                            "accepted": False,
                            "candidate": None,
                            "before": 2.0,
                            "after": 1.4,
                            "minibatch": keys[:3],
                            "texts": {"system_prompt": "A rejected rewrite. " * 20},
                            "reasoning": "It did not help. " * 20,
                            "metric_calls": metric_calls - 2,
                            "cost": 0.0,
                        },
                    )
                )
            events.append(
                (
                    ev.PROPOSAL,
                    {
                        "iteration": index,
                        "parent": parents[0],
                        "components": ["system_prompt"],
                        "accepted": True,
                        "candidate": index,
                        "before": 1.2,
                        "after": 2.1,
                        "minibatch": keys[:3],
                        "texts": {"system_prompt": text},
                        "reasoning": "The feedback asks for the refund window. " * 10,
                        "metric_calls": metric_calls,
                        "cost": 0.0,
                    },
                )
            )
            events.append(
                (
                    ev.TRIALS,
                    {
                        "candidate": None,
                        "split": Split.TRAIN,
                        "items": [
                            {
                                "task_key": k,
                                "score": 0.7,
                                "verdict": "borderline",
                                "output": "Refunds are possible within 30 days. " * 5,
                                "reasons": [
                                    "policy: must mention the refund window (expected: '30 days')"
                                ],
                            }
                            for k in keys[:3]
                        ],
                    },
                )
            )
        events.append(
            (
                ev.CANDIDATE_NEW,
                {
                    "index": index,
                    "parents": parents,
                    "origin": origin,
                    "iteration": index,
                    "metric_calls": metric_calls,
                    "val_score": mean,
                    "objective_scores": objective,
                    "task_scores": task_scores,
                    "verdicts": dict(zip(keys, verdicts, strict=True)),
                    "prompt_chars": len(text),
                    "prompt_tokens": 60,
                    "mean_output_tokens": summary["mean_output_tokens"],
                    "mean_latency_ms": 12.0,
                    "components": {"system_prompt": text},
                },
            )
        )
        events.append((ev.RUN_BUDGET, {"used": metric_calls, "total": budget}))
        if len(events) > 1000:
            flush_events()
        rows.append(
            Candidate(
                run=run,
                index=index,
                components={"system_prompt": text},
                parents=parents,
                origin=origin,
                iteration=index,
                metric_calls=metric_calls,
                val_score=mean,
                objective_scores=objective,
                reflection="" if index == 0 else "The feedback asks for the refund window.",
                val_task_scores=task_scores,
                val_summary=summary,
            )
        )
    members = set(_front(vectors, front_members, keys))
    for row in rows:
        row.on_front = row.index in members
    best = max(range(candidates), key=lambda i: (means[i], -i))
    events.append(
        (
            ev.FRONT_UPDATED,
            {
                "members": sorted(members),
                "leaders": {},
                "best_index": best,
                "best_score": means[best],
            },
        )
    )
    events.append(
        (
            ev.RUN_FINISHED,
            {
                "status": RunStatus.COMPLETED,
                "best_index": best,
                "best_score": means[best],
                "seed_score": means[0],
                "metric_calls": metric_calls,
            },
        )
    )
    flush_events()
    Candidate.objects.bulk_create(rows, batch_size=1000)
    del rows
    pks = dict(Candidate.objects.filter(run=run).values_list("index", "pk"))
    task_pks = [t.pk for t in tasks]
    results = {}  # one engine result (the factory's shape) per distinct score, shared by rows
    copy_sql = (
        "COPY optimizer_evaluation (candidate_id, run_id, task_id, task_key, split, output, score, verdict, passed, result, "
        "feedback, attempts, latency_ms, tokens_in, tokens_out, judge_tokens_in, judge_tokens_out, cost, created_at) FROM STDIN"
    )
    now = timezone.now().isoformat()
    with transaction.atomic(), connection.cursor() as cursor, cursor.cursor.copy(copy_sql) as copy:
        for index, scores in vectors.items():
            out = []
            for key, task_pk, score in zip(keys, task_pks, scores, strict=True):
                if score not in results:
                    results[score] = _copy_text(
                        json.dumps(_result(score, dict.fromkeys(VERIFIER_IDS, score)))
                    )
                out.append(
                    f"{pks[index]}\t{run.pk}\t{task_pk}\t{key}\tval\tRefunds are possible within 30 days (candidate {index}, {key}).\t"
                    f"{score}\t{_verdict(score)}\t{'t' if score >= 1.0 else 'f'}\t{results[score]}\t\t[]\t12.0\t60\t"
                    f"{30 + index % 20}\t0\t0\t0\t{now}\n"
                )
            copy.write("".join(out))
    run_progress(run.pk).update(last_seq=seq, budget_used=metric_calls)
    Run.objects.filter(pk=run.pk).update(
        seed_score=means[0],
        best_score=means[best],
        best_candidate_id=pks[best],
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "ANALYZE optimizer_evaluation; ANALYZE optimizer_candidate; ANALYZE optimizer_runevent"
        )
    run.refresh_from_db()
    return run


def _copy_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _front(vectors, front_members, keys) -> list[int]:
    """optimizer.front's rule over the candidates that top a task (only they can be on
    the front): the same members, without comparing every candidate with every other."""
    tops = [max(v[k] for v in vectors.values()) for k in range(len(keys))]
    toppers = {i for i, v in vectors.items() if any(x == t for x, t in zip(v, tops, strict=True))}
    members = front_members({i: dict(zip(keys, vectors[i], strict=True)) for i in toppers})
    # A topper dominated by another candidate is dominated by a topper too (it tops the same task).
    return members


# ---------------------------------------------------------------- measuring


def measure_view(client, url: str, repeat: int) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)  # warm-up
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        body = response.content
        times.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return times, len(body), len(queries)


def web_env(root: Path) -> dict[str, str]:
    """The environment of the checkout `root`'s processes that serve it."""
    return {**os.environ, **ENV, **scratch.web_data_env(DATA_DIR, root)}


def start_web(port: int, root: Path) -> subprocess.Popen:
    """The checkout at `root` served by its `manage.py serve` on `port`."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=root,
        env=web_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # scratch.stop stops it with what it starts
    )
    return scratch.serving(process, port, "the web process")


# Injected before any page script (an init script runs whatever the page's CSP):
# notes when each chart's first Plotly.newPlot / Plotly.react has drawn.
CHARTS_DRAWN = """
window.__chartsDrawn = {};
(() => {
  let plotly;
  const wrap = (name) => {
    const draw = plotly[name];
    plotly[name] = function (el, ...rest) {
      const done = draw.call(this, el, ...rest);
      const id = typeof el === "string" ? el : el && el.id;
      Promise.resolve(done).then(() => { if (id && !(id in window.__chartsDrawn)) window.__chartsDrawn[id] = performance.now(); });
      return done;
    };
  };
  Object.defineProperty(window, "Plotly", {
    configurable: true,
    get: () => plotly,
    set: (value) => { plotly = value; wrap("newPlot"); wrap("react"); },
  });
})();
"""
RUN_PAGE_CHARTS = ["chart-score", "chart-lineage", "chart-front", "chart-scatter", "chart-verdicts"]
PAGE_STATE = """(charts) => ({
  drawn: charts.map((id) => window.__chartsDrawn[id] ?? null),
  undrawn: charts.filter((id) => !document.querySelector(`#${id} .main-svg`)),
  live: window.__frontierRun?.bootMs?.live ?? null,
  liveText: document.querySelector("[data-field=live]")?.textContent,
  noWebGL: charts.filter((id) => (document.getElementById(id)?.textContent || "").includes("WebGL is not supported")),
})"""


def collect_static(root: Path) -> None:
    """collectstatic for a checkout that serves hashed static files (an older one
    serves them through Django's development handler: nothing to do)."""
    script = (
        "import django; django.setup()\n"
        "try:\n    from dashboard.staticfiles import collect_static_files\nexcept ImportError:\n    pass\n"
        "else:\n    collect_static_files(log=print)"
    )
    subprocess.run([sys.executable, "-c", script], cwd=root, env=web_env(root), check=True)


def load_cold(browser, base: str, session: str, url: str) -> dict:
    """One load of `url` with an empty browser cache: bytes over the wire, ms
    from navigation until every chart is drawn and the page is live."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
    context.add_init_script(CHARTS_DRAWN)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": False})
    urls: dict[str, str] = {}
    sizes: dict[str, int] = {}
    cdp.on(
        "Network.responseReceived", lambda e: urls.__setitem__(e["requestId"], e["response"]["url"])
    )
    cdp.on(
        "Network.loadingFinished",
        lambda e: sizes.__setitem__(e["requestId"], e["encodedDataLength"]),
    )
    page.goto(url)
    deadline = time.monotonic() + 120
    while (
        True
    ):  # polled through the debugging protocol: the CSP forbids page.wait_for_function's eval
        state = page.evaluate(PAGE_STATE, RUN_PAGE_CHARTS)
        if (
            state["live"] is not None
            and all(t is not None for t in state["drawn"])
            and not state["undrawn"]
        ):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}: not every chart drawn and live within 120 s: {state}")
        time.sleep(0.05)
    page.wait_for_timeout(300)  # anything still loading (the websocket's first frames) is counted
    marks = page.evaluate("window.__frontierRun.bootMs")
    by_kind: dict[str, int] = {}
    for request_id, size in sizes.items():
        address = urls.get(request_id, "")
        kind = (
            "plotly"
            if "plotly" in address
            else "snapshot"
            if "snapshot.json" in address
            else "static"
            if "/static/" in address
            else "page and other"
        )
        by_kind[kind] = by_kind.get(kind, 0) + size
    context.close()
    charts = dict(zip(RUN_PAGE_CHARTS, state["drawn"], strict=True))
    return {
        "live": state["live"],
        "drawn": max(state["drawn"]),
        "last": max(charts, key=lambda k: charts[k])[6:],
        "bytes": sum(sizes.values()),
        "by_kind": by_kind,
        "marks": {**marks, **{f"drawn {k[6:]}": round(v) for k, v in charts.items()}},
        "no_webgl": state["noWebGL"],
    }


def measure_page_live(
    run_ids: list[int], session: str, repeat: int, roots: dict[str, Path]
) -> dict[str, dict[int, list[dict]]]:
    """For each checkout in `roots` (label → path): its server, then per run one
    warm-up load and `repeat` cold ones."""
    from playwright.sync_api import sync_playwright

    out: dict[str, dict[int, list[dict]]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        for label, root in roots.items():
            collect_static(root)
            port = scratch.free_port()
            server = start_web(port, root)
            base = f"http://127.0.0.1:{port}"
            try:
                for run_id in run_ids:
                    load_cold(browser, base, session, f"{base}/runs/{run_id}/")  # warms the server
                    out.setdefault(label, {})[run_id] = [
                        load_cold(browser, base, session, f"{base}/runs/{run_id}/")
                        for _ in range(repeat)
                    ]
            finally:
                scratch.stop(server, timeout=20)
        browser.close()
    return out


def load_figures(loads: list[dict]) -> str:
    mb = [load["bytes"] / 1e6 for load in loads]
    kinds = sorted({k for load in loads for k in load["by_kind"]})
    split = ", ".join(
        f"{k} {statistics.median(load['by_kind'].get(k, 0) for load in loads) / 1e6:.2f}"
        for k in kinds
    )
    webgl = {c for load in loads for c in load["no_webgl"]}
    return (
        f"{statistics.median(mb):.2f} MB over the wire (min {min(mb):.2f}, max {max(mb):.2f}; {split}), "
        f'"● live" after {spread([load["live"] for load in loads])}, '
        f"every chart drawn after {spread([load['drawn'] for load in loads])} "
        f"(the last: {', '.join(sorted({load['last'] for load in loads}))})"
        + (f"; NOT DRAWN (no WebGL): {sorted(webgl)}" if webgl else "")
    )


def boot_steps(loads: list[dict]) -> str:
    """Each step of the page's boot (run-page.js bootMs: ms since navigation when
    it ended), the median over the loads, with the step's own share."""
    names = sorted(
        {k for marks in loads for k in marks},
        key=lambda k: statistics.median(m.get(k, 0) for m in loads),
    )
    out, before = [], 0
    for name in names:
        at = statistics.median(m[name] for m in loads if name in m)
        out.append(f"{name} {at:.0f} (+{at - before:.0f})")
        before = at
    return ", ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000x300", help="comma-separated CANDIDATESxTASKS")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure runs of these sizes built by an earlier invocation",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the bench database for a later --reuse"
    )
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--baseline",
        help="another checkout (e.g. a worktree of main) whose server is measured beside ours",
    )
    args = parser.parse_args()
    sizes = [tuple(int(n) for n in size.lower().split("x")) for size in args.sizes.split(",")]

    _refuse_defaults()
    os.environ.update(ENV)
    scratch.exit_on_signals()
    try:
        ensure_database()
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connections
        from django.test import Client

        from optimizer.models import Run

        call_command("migrate", verbosity=0)
        user, _ = get_user_model().objects.get_or_create(
            username="bench-scale", defaults={"is_superuser": False}
        )
        client = Client()
        client.force_login(user)
        runs = []
        for candidates, tasks in sizes:
            name = f"scale {candidates}x{tasks}"
            run = (
                Run.objects.filter(owner=user, name=name).order_by("-pk").first()
                if args.reuse
                else None
            )
            if run is None:
                started = time.perf_counter()
                run = build_scale_run(owner=user, candidates=candidates, val_tasks=tasks)
                print(
                    f"[{name}] built run {run.pk} ({candidates * tasks:,} evaluations) in {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
            runs.append(run)
            times, size, queries = measure_view(
                client, f"/runs/{run.pk}/snapshot.json", args.repeat
            )
            snap = json.loads(client.get(f"/runs/{run.pk}/snapshot.json").content)
            print(
                f"[{name}] snapshot.json: {size / 1e6:.2f} MB, {queries} queries, server time {spread(times)}; "
                f"heatmap rows {len(snap['rows'])} of {len(snap['candidates']['index'])}",
                flush=True,
            )
            times, size, queries = measure_view(client, f"/runs/{run.pk}/scores.json", args.repeat)
            print(
                f"[{name}] scores.json (500 more heatmap rows): {size / 1e6:.2f} MB, {queries} queries, server time {spread(times)}",
                flush=True,
            )
            middle = candidates // 2
            times, size, queries = measure_view(
                client, f"/runs/{run.pk}/candidates/{middle}/", args.repeat
            )
            print(
                f"[{name}] candidate page (#{middle}, {tasks} evaluations): {queries} queries, server time {spread(times)}",
                flush=True,
            )
            picks = "&".join(
                f"c={i}"
                for i in (0, candidates // 4, candidates // 2, 3 * candidates // 4, candidates - 1)
            )
            times, size, queries = measure_view(
                client, f"/runs/{run.pk}/compare/?{picks}", args.repeat
            )
            print(
                f"[{name}] compare view (5 candidates): {queries} queries, server time {spread(times)}",
                flush=True,
            )
        if not args.no_browser:
            session = client.cookies["sessionid"].value
            connections.close_all()
            roots = {"this checkout": ROOT} | (
                {"baseline": Path(args.baseline).resolve()} if args.baseline else {}
            )
            loads = measure_page_live([run.pk for run in runs], session, args.repeat, roots)
            for run in runs:
                for label in roots:
                    print(
                        f"[{run.name}] run page, cold cache, {label} ({roots[label]}): {load_figures(loads[label][run.pk])}",
                        flush=True,
                    )
                    print(
                        f"[{run.name}]   its steps, ms since navigation (median): {boot_steps([load['marks'] for load in loads[label][run.pk]])}",
                        flush=True,
                    )
        connections.close_all()
    finally:
        scratch.run_each(
            *([] if args.keep else [drop_database]),
            functools.partial(scratch.delete_keys, REDIS_URL, PREFIX),
            functools.partial(shutil.rmtree, DATA_DIR, ignore_errors=True),
        )


if __name__ == "__main__":
    main()

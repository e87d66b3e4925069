"""Run export benchmark: memory of the web process and
other viewers' latency while a big run downloads.

For each --sizes (approximate export megabytes) it bulk-inserts a run of
--candidates candidates × --tasks val tasks (SQL INSERT … SELECT from a
template candidate; the output text is sized to reach the target), starts
the web process (`manage.py serve`, uvicorn) on it (PostgreSQL + the
channels-redis layer), and, --repeats times:

1. connects --viewers websocket clients to another run, publishes an event
   every 100 ms and takes their commit → arrival p95 while idle (6 s);
2. downloads `/runs/<id>/export.json` with curl (to /dev/null; at full speed,
   or at --rate like a client on an ordinary link), sampling the web
   process's RSS every 100 ms, with the same viewers and events going;
3. the same for `/runs/<id>/export.csv`.

Prints, per download, the bytes, seconds, the time to the first byte and
(CSV) to the first row as curl receives them over HTTP, the web process's
CPU seconds and RSS before / peak during (growth), and the viewers' p95 idle
vs during (and their ratio); then, per export, the medians over the repeats
with their spread.

--baseline PATH serves another checkout (e.g. `git worktree add
../frontier-main main`) beside ours on the same database, its downloads
alternating with ours. --insert-cost N then times N bulk inserts of one
candidate's evaluations (as the run's writer makes them) with the CSV-order
index, without it, and with it rebuilt.

--other-runs K builds K more runs of the same size in the same database
before the downloads (the exported run is the first built). --explain
prints EXPLAIN (ANALYZE, BUFFERS) of the CSV export's query for the val
split, as the server-side cursor the export reads it through.
--statistics missing leaves the tables never analysed (autovacuum off for
them; vacuumed, so the visibility map is set): the planner without column
statistics, as just after a big import. --old-index also builds the
CSV-order index the code before Evaluation.run read (migration 0021's, not
led by the run), for a --baseline checkout of that code.

--switch-intervals compares GIL switch intervals: `default` is the web
process as served (Python's 5 ms), a number (ms) starts another web process
on the same database with that interval (set at start-up by a bench-only
`sitecustomize`); the downloads alternate between them. Usage:

    .venv/bin/python bench/export.py [--sizes 100,400] [--candidates 400] [--tasks 300] [--viewers 20]
                                     [--repeats 3] [--kinds json,csv] [--rate 20M] [--hogs 0]
                                     [--switch-intervals default,0.5] [--baseline PATH]
                                     [--insert-cost N] [--other-runs K] [--explain]
                                     [--statistics fresh|missing] [--old-index]

--rate limits curl's download rate (curl's --limit-rate: 20M is 20 MiB/s);
--hogs starts that many CPU-bound processes for the whole bench (a loaded
machine).

Needs PostgreSQL and Redis (BENCH_POSTGRES_URL, BENCH_REDIS_URL: give your own
Redis DB number); uses a scratch database and channel prefix, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live
import scratch


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def build_big_run(
    owner, *, candidates: int, tasks: int, megabytes: float, statistics: str = "fresh"
):
    from django.db import connection

    from optimizer.models import Candidate, Evaluation
    from tests.factories import recorded_run

    run = recorded_run(owner=owner, candidates=1, val_tasks=tasks, name=f"export {megabytes:g} MB")
    template = run.candidates.get(index=0)
    Candidate.objects.bulk_create(
        [
            Candidate(
                run=run,
                index=i,
                components=template.components,
                parents=[0],
                origin="reflection",
                iteration=i,
                metric_calls=i * tasks,
                val_score=0.5,
                objective_scores=template.objective_scores,
                usage=template.usage,
            )
            for i in range(1, candidates)
        ],
        batch_size=1000,
    )
    # ~450 bytes of JSON per evaluation besides the output text.
    pad = max(0, int(megabytes * 1e6 / (candidates * tasks)) - 450)
    fields = [
        f.column
        for f in Evaluation._meta.concrete_fields
        if f.column not in ("id", "candidate_id", "output")
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO optimizer_evaluation (candidate_id, output, {', '.join(fields)}) "
            f"SELECT c.id, repeat('The refund window is 30 days. ', %s / 30 + 1) || c.id, {', '.join('e.' + f for f in fields)} "
            f"FROM optimizer_evaluation e JOIN optimizer_candidate c ON c.run_id = %s AND c.index > 0 "
            f"WHERE e.candidate_id = %s",
            [pad, run.pk, template.pk],
        )
        # Settled tables, as autovacuum leaves them after a run's inserts: statistics
        # (the planner's estimate of a run's candidates and evaluations) and the
        # visibility map (an index-only scan reads no table page). `missing`:
        # vacuumed (the visibility map, the tables' sizes) but never analysed, as
        # just after a big import with autovacuum not yet come round.
        analyse = "ANALYZE " if statistics == "fresh" else ""
        cursor.execute(f"VACUUM {analyse}optimizer_evaluation, optimizer_candidate")
    return run


STATISTICS_TABLES = ("optimizer_evaluation", "optimizer_candidate")


def keep_statistics_away() -> None:
    """Autovacuum kept from analysing the tables the CSV export reads (for
    --statistics missing; before anything is written to them)."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in STATISTICS_TABLES:
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def statistics_rows() -> int:
    """pg_stats rows of the tables the CSV export reads (0: never analysed)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = ANY(%s)", [list(STATISTICS_TABLES)]
        )
        return cursor.fetchone()[0]


class _Editor:
    """What the index migration's functions use of a schema editor."""

    def execute(self, sql):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(sql)

    @property
    def connection(self):
        from django.db import connection

        return connection


async def watch(user, port: int, run, viewers: int, phases: dict, stop: threading.Event) -> None:
    """Viewers of `run`; a thread publishes a ping every 100 ms; each arrival is
    filed under the phase current at its commit."""
    import websockets
    from asgiref.sync import sync_to_async
    from django.test import Client

    client = Client()
    await sync_to_async(client.force_login)(user)
    after = await sync_to_async(lambda: run.last_seq)()  # the progress row: a query
    headers = {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
        "Origin": f"http://127.0.0.1:{port}",
    }
    sockets = [
        await websockets.connect(
            f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after={after}", additional_headers=headers
        )
        for _ in range(viewers)
    ]
    commits: dict[int, tuple[float, str]] = {}

    def publish() -> None:
        from django.db import close_old_connections, transaction

        from optimizer.runs.events import publish_run_event

        while not stop.is_set():
            with transaction.atomic():
                holder: dict = {}
                transaction.on_commit(lambda: holder.setdefault("t", time.perf_counter()))
                event = publish_run_event(run.pk, "worker.ping", {"host": "bench", "note": "x"})
            commits[event.seq] = (holder["t"], phases["now"])
            time.sleep(0.1)
        close_old_connections()

    async def listen(ws) -> None:
        async for raw in ws:
            seq = int(raw[8 : raw.index(",")])
            while seq not in commits:  # the publisher files the commit just after on_commit
                await asyncio.sleep(0.001)
            at, phase = commits[seq]
            phases.setdefault(phase, []).append((time.perf_counter() - at) * 1000)

    listeners = [asyncio.create_task(listen(ws)) for ws in sockets]
    await asyncio.sleep(0.5)
    await asyncio.to_thread(publish)
    await asyncio.sleep(1.0)
    for ws in sockets:
        await ws.close()
    for task in listeners:
        task.cancel()


def insert_cost(run, repeats: int) -> None:
    """What the CSV-order index (migration 0023_evaluation_csv_order_by_run) costs the
    run's writer: bulk_create of one candidate's evaluations (as the recorder
    writes them, copies of candidate 0's) with the index, without it (dropped),
    and with it again (rebuilt concurrently), `repeats` times each."""
    import importlib

    from optimizer.models import Candidate, Evaluation

    index = importlib.import_module("optimizer.migrations.0023_evaluation_csv_order_by_run")
    rows = list(Evaluation.objects.filter(candidate__run=run, candidate__index=0))
    template = run.candidates.get(index=0)
    top = run.candidates.count()

    def one_candidate(n: int) -> float:
        candidate = Candidate.objects.create(
            run=run,
            index=top + n,
            components=template.components,
            parents=[0],
            origin="reflection",
            val_score=0.5,
        )
        copies = []
        for row in rows:
            row.pk, row.candidate = None, candidate
            copies.append(
                Evaluation(
                    **{f.attname: getattr(row, f.attname) for f in Evaluation._meta.concrete_fields}
                )
            )
        started = time.perf_counter()
        Evaluation.objects.bulk_create(copies)
        return time.perf_counter() - started

    times: dict[str, list[float]] = {"with the index": [], "without it": [], "with it again": []}
    n = 0
    for label in times:
        if label == "without it":
            index.drop(_Editor())
        elif label == "with it again":
            started = time.perf_counter()
            index.create(_Editor())
            print(f"index rebuilt concurrently in {time.perf_counter() - started:.1f} s")
        for _ in range(repeats):
            n += 1
            times[label].append(one_candidate(n) * 1000)
    print(f"bulk_create of one candidate's {len(rows)} evaluations, median (min-max) of {repeats}:")
    for label, values in times.items():
        print(f"  {label}: {spread(values, ' ms', 1)}")
    with_index = statistics.median(times["with the index"] + times["with it again"])
    print(f"  with / without: {with_index / statistics.median(times['without it']):.3f}")


def explain_csv(run) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the CSV export's query for `run`'s val
    split as the export sends it (captured from run_export_csv_stream): the
    DECLARE of its server-side cursor, for which the planner aims at the first
    rows (cursor_tuple_fraction), so a plain SELECT can be planned otherwise."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from optimizer.export import run_export_csv_stream

    with CaptureQueriesContext(connection) as queries:
        for _ in run_export_csv_stream(run):
            pass
    sql = next(
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("DECLARE") and "= 'val'" in q["sql"]
    )
    print(f"the CSV export's query for the val split:\n  {sql}")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        print("\n".join("  " + row[0] for row in cursor.fetchall()), flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time `pid` has used (its children not counted)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def download(url: str, cookie: str, pid: int, rate: str = "") -> dict:
    """One curl download from the web process `pid`: bytes, seconds, seconds
    to the first byte and to the end of the first line after the header (the
    first row of a CSV; None for JSON), RSS before and peak, CPU seconds. The
    body is read from curl's stdout as it arrives (and thrown away)."""
    before = rss_mb(pid)
    cpu = cpu_seconds(pid)
    peak = before
    limit = ["--limit-rate", rate] if rate else []
    started = time.perf_counter()
    curl = subprocess.Popen(
        ["curl", "-sS", "--fail", *limit, "-o", "-", "-H", f"Cookie: {cookie}", url],
        stdout=subprocess.PIPE,
    )
    got = {"bytes": 0, "first_byte": None, "first_row": None}

    def read() -> None:
        lines = 0
        while chunk := curl.stdout.read1(1 << 16):
            if got["first_byte"] is None:
                got["first_byte"] = time.perf_counter() - started
            got["bytes"] += len(chunk)
            if got["first_row"] is None and url.endswith(".csv"):
                lines += chunk.count(b"\n")
                if lines >= 2:
                    got["first_row"] = time.perf_counter() - started

    reader = threading.Thread(target=read)
    reader.start()
    try:
        while reader.is_alive():
            peak = max(peak, rss_mb(pid))
            reader.join(0.1)
    finally:
        if reader.is_alive():  # the bench is stopped half-way: curl (and so its reader) ends
            scratch.stop(curl)
    if curl.wait() != 0:
        raise SystemExit(f"curl {url} failed ({curl.returncode})")
    return {
        **got,
        "seconds": time.perf_counter() - started,
        "before": before,
        "peak": peak,
        "cpu": cpu_seconds(pid) - cpu,
    }


def spread(values: list[float], unit: str = "", digits: int = 0) -> str:
    return f"{statistics.median(values):.{digits}f}{unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="100,400", help="approximate export sizes in MB, comma-separated"
    )
    parser.add_argument("--candidates", type=int, default=400)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kinds", default="json,csv")
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes to run meanwhile")
    parser.add_argument(
        "--rate", default="", help="curl --limit-rate for the exports (a slow client), e.g. 20M"
    )
    parser.add_argument(
        "--baseline",
        default="",
        help="another checkout (e.g. a worktree of main) served beside ours on the same database",
    )
    parser.add_argument(
        "--insert-cost",
        type=int,
        default=0,
        help="also time this many bulk inserts of one candidate's evaluations with and without the CSV-order index",
    )
    parser.add_argument(
        "--other-runs",
        type=int,
        default=0,
        help="build this many more runs of each size in the same database before the downloads",
    )
    parser.add_argument(
        "--statistics",
        choices=("fresh", "missing"),
        default="fresh",
        help="fresh: the tables analysed after the bulk insert; missing: never analysed (autovacuum off)",
    )
    parser.add_argument(
        "--old-index",
        action="store_true",
        help="also build the CSV-order index before the one led by the run (migration 0021's), "
        "which a --baseline checkout of that code reads",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print EXPLAIN (ANALYZE, BUFFERS) of the CSV export's query for the val split",
    )
    parser.add_argument(
        "--switch-intervals",
        default="default",
        help="comma-separated: default, or a GIL switch interval in ms (one web process each, alternated)",
    )
    args = parser.parse_args()
    modes = args.switch_intervals.split(",") + (["baseline"] if args.baseline else [])
    try:
        [float(mode) for mode in modes if mode not in ("default", "baseline")]
    except ValueError:
        parser.error("--switch-intervals: default or numbers of milliseconds")

    os.environ.update(live.ENV)
    webs: dict[str, tuple[int, subprocess.Popen]] = {}
    custom = tempfile.mkdtemp(prefix="bench-export-")
    hogs: list[subprocess.Popen] = []
    try:
        live.create_database()
        Path(custom, "sitecustomize.py").write_text(
            "import os, sys\nsys.setswitchinterval(float(os.environ['BENCH_SWITCH_INTERVAL']))\n"
        )
        for _ in range(args.hogs):  # one by one: clean_up stops those that started
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connections
        from django.test import Client

        from tests.factories import recorded_run

        call_command("migrate", verbosity=0)
        if args.statistics == "missing":
            keep_statistics_away()
        user = get_user_model().objects.create_user("bench", password="x")
        watched = recorded_run(owner=user, candidates=3, val_tasks=5, name="watched")
        runs = []
        for size in (float(s) for s in args.sizes.split(",")):
            # The run exported first, then --other-runs more of the same size, not exported.
            for other in range(1 + args.other_runs):
                started = time.perf_counter()
                run = build_big_run(
                    user,
                    candidates=args.candidates,
                    tasks=args.tasks,
                    megabytes=size,
                    statistics=args.statistics,
                )
                if not other:
                    runs.append((size, run))
                which = "another" if other else "a"
                print(
                    f"built {which} {args.candidates} × {args.tasks} run for ~{size:g} MB"
                    f"{' (not exported)' if other else ''} in {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
        if args.old_index:
            import importlib

            index = importlib.import_module("optimizer.migrations.0023_evaluation_csv_order_by_run")
            started = time.perf_counter()
            index.create(_Editor(), index.OLD)
            print(f"built the old CSV-order index in {time.perf_counter() - started:.0f} s")
        print(f"statistics {args.statistics}: {statistics_rows()} pg_stats rows", flush=True)
        if args.explain:
            for _, run in runs:
                explain_csv(run)
        connections.close_all()
        client = Client()
        client.force_login(user)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        for mode in modes:
            root = live.ROOT
            if mode == "baseline":
                root = Path(args.baseline).resolve()
                switch = {
                    "PYTHONPATH": os.pathsep.join([str(root), str(root / "clients" / "python")])
                }
            elif mode == "default":
                switch = {}
            else:
                switch = {
                    "BENCH_SWITCH_INTERVAL": str(float(mode) / 1000),
                    "PYTHONPATH": os.pathsep.join(
                        filter(None, [custom, os.environ.get("PYTHONPATH")])
                    ),
                }
            port = scratch.free_port()
            webs[mode] = (port, live.start_web(port, extra_env=switch, root=root))
            # warm up: imports, connections
            download(
                f"http://127.0.0.1:{port}/runs/{watched.pk}/export.json", cookie, webs[mode][1].pid
            )
        speed = f"at {args.rate}/s" if args.rate else "at full speed"

        results: dict[tuple[str, float, str], list[dict]] = {}
        for repeat in range(args.repeats):
            for size, run in runs:
                for kind, mode in [
                    (kind, mode) for kind in args.kinds.split(",") for mode in modes
                ]:
                    port, web = webs[mode]
                    watched.refresh_from_db()  # the viewers start after its last event
                    phases: dict = {"now": "idle"}
                    stop = threading.Event()
                    viewers = threading.Thread(
                        target=lambda: asyncio.run(
                            watch(user, port, watched, args.viewers, phases, stop)
                        )
                    )
                    viewers.start()
                    try:
                        time.sleep(6)
                        phases["now"] = "export"
                        load = os.getloadavg()[0]
                        got = download(
                            f"http://127.0.0.1:{port}/runs/{run.pk}/export.{kind}",
                            cookie,
                            web.pid,
                            args.rate,
                        )
                    finally:  # also when the bench is stopped: the viewers' publisher ends
                        phases["now"] = "after"
                        stop.set()
                        viewers.join()
                    before, peak, seconds = got["before"], got["peak"], got["seconds"]
                    idle, during = phases.get("idle", [0]), phases.get("export", [0])
                    p95_idle, p95_during = live.pct(idle, 0.95), live.pct(during, 0.95)
                    results.setdefault((mode, size, kind), []).append(
                        {
                            "mb": got["bytes"] / 1e6,
                            "seconds": seconds,
                            "first_byte": got["first_byte"],
                            "first_row": got["first_row"] or 0.0,
                            "cpu": got["cpu"],
                            "growth": peak - before,
                            "idle": p95_idle,
                            "during": p95_during,
                            "ratio": p95_during / max(p95_idle, 1e-9),
                            "load": load,
                        }
                    )
                    row_note = f", first row {got['first_row']:.2f} s" if kind == "csv" else ""
                    print(
                        f"[{mode} #{repeat + 1}] export.{kind} of the ~{size:g} MB run {speed}: {got['bytes'] / 1e6:.1f} MB in "
                        f"{seconds:.1f} s, first byte {got['first_byte']:.2f} s"
                        f"{row_note} (web process CPU {got['cpu']:.1f} s); its RSS {before:.0f} MB before, peak {peak:.0f} MB "
                        f"(+{peak - before:.0f} MB); {args.viewers} viewers' "
                        f"event p95 {p95_idle:.0f} ms idle (median {statistics.median(idle):.0f}), "
                        f"{p95_during:.0f} ms during (median {statistics.median(during):.0f}, "
                        f"{len(during)} deliveries), ratio {p95_during / max(p95_idle, 1e-9):.2f}x; "
                        f"load average {load:.1f} → {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        for (mode, size, kind), rows in results.items():
            of = {name: [row[name] for row in rows] for name in rows[0]}
            print(
                f"[{mode}] export.{kind} of the ~{size:g} MB run {speed}, median (min-max) of {len(rows)}: "
                f"{spread(of['mb'], ' MB', 1)} in {spread(of['seconds'], ' s', 1)}, first byte {spread(of['first_byte'], ' s', 2)}, "
                f"{'first row ' + spread(of['first_row'], ' s', 2) + ', ' if kind == 'csv' else ''}web process CPU {spread(of['cpu'], ' s', 1)}, "
                f"RSS growth {spread(of['growth'], ' MB')}; viewers' p95 {spread(of['idle'], ' ms')} idle, "
                f"{spread(of['during'], ' ms')} during, ratio {spread(of['ratio'], 'x', 2)}; "
                f"load average {min(of['load']):.1f}-{max(of['load']):.1f}"
            )
        if args.insert_cost:
            insert_cost(runs[-1][1], args.insert_cost)
    finally:
        shutil.rmtree(custom, ignore_errors=True)
        live.clean_up([web for _, web in webs.values()] + hogs)


if __name__ == "__main__":
    main()

"""Websocket fan-out benchmark.

Starts a web process (one, or --webs N behind the same Redis) on a scratch
PostgreSQL database with the channels-redis layer, connects --viewers
websocket clients to one run (spread over the web processes), and publishes
events the way a live run does, at --rate iterations a second: per iteration
one batch of minibatch trials + run.budget, then one batch of candidate.new +
the val trials + front.updated + proposal (payload sizes as the recorder
writes them for --tasks val tasks). Publishing runs in its own process; every
client records each event's arrival. Prints commit → arrival latency (median,
p95, max over every delivery), deliveries per second and the web processes'
CPU per delivery.

--servers names the web servers to compare: `uvicorn` (Frontier's own,
`manage.py serve`) and `daphne` (plain daphne 4.2.3 on the same application,
the server Frontier used before; `make install-bench` installs it). Each gets
its web processes, started once; --repeats rounds alternate them on the same
run, and the end prints each server's p95 as the median of its rounds with
their spread. The viewers offer permessage-deflate as browsers do, and each
round prints what the server agreed to; `--deflate on,off` alternates rounds
whose viewers offer it with rounds whose viewers do not. Usage:

    .venv/bin/python bench/fanout.py [--viewers 200] [--rate 1] [--seconds 20] [--tasks 30] [--webs 1]
                                     [--servers uvicorn,daphne] [--repeats 3] [--deflate on,off]

Needs PostgreSQL and Redis: BENCH_POSTGRES_URL (default
postgres://postgres@127.0.0.1:5432/postgres) and BENCH_REDIS_URL (give your
own Redis DB number, e.g. redis://127.0.0.1:6379/8). Creates a uniquely named
database and channel prefix and removes both at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live
import scratch

PUBLISHER = r"""
import json, random, sys, time
import django
django.setup()
from django.db import transaction
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_events

run_id, rate, seconds, tasks, out = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = random.Random(1)
keys = [f"t{i:03d}" for i in range(tasks)]
item = lambda k: {"task_key": k, "score": rng.random(), "verdict": "fail", "output": "x" * 600, "reasons": ["state the window"] * 2}
commits = {}
start = time.time()
n = 0
while time.time() - start < seconds:
    due = start + n / rate
    time.sleep(max(0.0, due - time.time()))
    index = n + 1
    batches = [
        [(ev.TRIALS, {"candidate": 0, "split": "train", "items": [item(k) for k in keys[:3]]}),
         (ev.RUN_BUDGET, {"used": 10 * n, "total": 100000, "cost": 0.0, "max_cost": None, "tokens": 1000 * n, "usage": {}, "eta_seconds": 10.0})],
        [(ev.CANDIDATE_NEW, {"index": index, "parents": [0], "origin": "reflection", "iteration": n, "metric_calls": 10 * n,
                             "val_score": rng.random(), "objective_scores": {"v": 0.5}, "task_scores": {k: rng.random() for k in keys},
                             "verdicts": {k: "fail" for k in keys}, "prompt_chars": 900, "prompt_tokens": 200, "mean_output_tokens": 40.0,
                             "mean_latency_ms": 5.0, "components": {"system_prompt": "p" * 900}, "usage": {}, "cost": 0.0}),
         (ev.TRIALS, {"candidate": index, "split": "val", "items": [item(k) for k in keys]}),
         (ev.FRONT_UPDATED, {"index": index, "took": keys[:2], "joined": [], "added": [index], "removed": [], "best_index": index, "best_score": 0.9}),
         (ev.PROPOSAL, {"iteration": n, "parent": 0, "components": ["system_prompt"], "accepted": True, "candidate": index, "before": 1.0,
                        "after": 2.0, "minibatch": keys[:3], "texts": {"system_prompt": "p" * 900}, "reasoning": "r" * 500,
                        "metric_calls": 10 * n, "usage": {}, "cost": 0.0})],
    ]
    for batch in batches:
        with transaction.atomic():
            holder = {}
            transaction.on_commit(lambda: holder.setdefault("t", time.time()))
            rows = publish_run_events(run_id, batch)
        for row in rows:
            commits[row.seq] = holder["t"]
    n += 1
json.dump(commits, open(out, "w"))
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (a figure the machine's load does not inflate)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def viewers(
    run, user, ports: list[int], count: int, args, pids: list[int], label: str, deflate: bool
) -> dict:
    """One round: `count` viewers on `ports` (offering permessage-deflate, as
    browsers do, when `deflate`); prints its figures and returns them."""
    import websockets
    from asgiref.sync import sync_to_async
    from django.test import Client

    client = Client()
    await sync_to_async(client.force_login)(user)
    after = await sync_to_async(lambda: run.last_seq)()  # the progress row: a query
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    arrivals: list[dict[int, float]] = [{} for _ in range(count)]
    sockets = []
    for k in range(count):
        port = ports[k % len(ports)]
        sockets.append(
            await websockets.connect(
                f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after={after}",
                additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
                max_size=None,
                compression="deflate" if deflate else None,
            )
        )
    extensions = sockets[0].response.headers.get("Sec-WebSocket-Extensions") or "none"

    async def listen(k: int, ws) -> None:
        try:
            async for raw in ws:
                # '{"seq": N, …': the seq without decoding the whole event (the clients share this process's CPU)
                arrivals[k][int(raw[8 : raw.index(",")])] = time.time()
        except websockets.ConnectionClosed:
            pass

    listeners = [asyncio.create_task(listen(k, ws)) for k, ws in enumerate(sockets)]
    await asyncio.sleep(1.0)  # every consumer has joined the group
    cpu_before = [cpu_seconds(pid) for pid in pids]
    mine_before = cpu_seconds(os.getpid())
    out = Path(f"/tmp/{live.TAG}-commits.json")
    publisher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PUBLISHER,
        str(run.pk),
        str(args.rate),
        str(args.seconds),
        str(args.tasks),
        str(out),
        cwd=str(HERE.parent),
        env={**os.environ, **live.ENV},
    )
    try:
        await publisher.wait()
        commits = {int(k): v for k, v in json.loads(out.read_text()).items()}
    finally:  # also when the bench is stopped: the publisher and its file go with it
        if publisher.returncode is None:
            publisher.kill()
            await publisher.wait()
        out.unlink(missing_ok=True)
    last = max(commits)
    deadline = time.time() + 60
    while time.time() < deadline and not all(last in a for a in arrivals):
        await asyncio.sleep(0.2)
    cpu = sum(cpu_seconds(pid) for pid in pids) - sum(cpu_before)
    mine = cpu_seconds(os.getpid()) - mine_before
    for ws in sockets:
        await ws.close()
    for task in listeners:
        task.cancel()

    latencies = [(a[seq] - commits[seq]) * 1000 for a in arrivals for seq in commits if seq in a]
    missing = sum(1 for a in arrivals for seq in commits if seq not in a)
    span = max(commits.values()) - min(commits.values()) or 1
    figures = {
        "p95": live.pct(latencies, 0.95),
        "median": statistics.median(latencies),
        "max": max(latencies),
        "cpu_ms": 1000 * cpu / max(1, len(latencies)),
        "missing": missing,
        "load": os.getloadavg()[0],
        "rss": sum(rss_mb(pid) for pid in pids),
    }
    print(
        f"[{label}] fan-out: {count} viewers on {len(ports)} web process(es), {args.rate:g} iterations/s for {args.seconds:g} s "
        f"({len(commits)} events, {args.tasks} val tasks): {len(latencies)} deliveries "
        f"(~{len(latencies) / span:.0f}/s), {missing} missing; commit → arrival median {figures['median']:.0f} ms, "
        f"p95 {figures['p95']:.0f} ms, max {figures['max']:.0f} ms; "
        f"web CPU {cpu:.1f} s = {figures['cpu_ms']:.2f} ms per delivery (the viewers' process: {mine:.1f} s), "
        f"web RSS {figures['rss']:.0f} MB; "
        f"load average {figures['load']:.1f}; extensions agreed: {extensions}",
        flush=True,
    )
    return figures


def spread(values: list[float], unit: str, digits: int = 0) -> str:
    return (
        f"{statistics.median(values):.{digits}f} {unit} (min {min(values):.{digits}f}, max {max(values):.{digits}f}; "
        f"{len(values)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument(
        "--rate", type=float, default=1.0, help="iterations a second (2 batches, 6 events each)"
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument(
        "--webs", type=int, default=1, help="web processes (of each server) behind the same Redis"
    )
    parser.add_argument(
        "--servers", default="uvicorn", help="comma-separated: uvicorn, daphne (alternated)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="rounds; each runs every server once"
    )
    parser.add_argument(
        "--deflate",
        default="on",
        help="whether the viewers offer permessage-deflate (browsers do): on, off, or on,off (alternated)",
    )
    args = parser.parse_args()
    servers = args.servers.split(",")
    if any(server not in ("uvicorn", "daphne") for server in servers):
        parser.error("--servers: uvicorn, daphne")
    deflates = args.deflate.split(",")
    if any(deflate not in ("on", "off") for deflate in deflates):
        parser.error("--deflate: on, off")
    variants = [(server, deflate) for server in servers for deflate in deflates]
    name = {
        variant: variant[0] if len(deflates) == 1 else f"{variant[0]}, deflate {variant[1]}"
        for variant in variants
    }

    os.environ.update(live.ENV)
    webs: dict[str, list] = {}
    try:
        live.create_database()
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connections

        from tests.factories import recorded_run

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="x")
        run = recorded_run(owner=user, candidates=3, val_tasks=args.tasks)
        connections.close_all()
        ports: dict[str, list[int]] = {}
        for server in servers:
            ports[server] = [scratch.free_port() for _ in range(args.webs)]
            webs[server] = []  # filled as they start: clean_up stops those that did
            for port in ports[server]:
                webs[server].append(live.start_web(port, server))
        rounds: dict[tuple[str, str], list[dict]] = {variant: [] for variant in variants}
        for repeat in range(args.repeats):
            for server, deflate in variants:
                rounds[server, deflate].append(
                    asyncio.run(
                        viewers(
                            run,
                            user,
                            ports[server],
                            args.viewers,
                            args,
                            [web.pid for web in webs[server]],
                            f"{name[server, deflate]} #{repeat + 1}",
                            deflate == "on",
                        )
                    )
                )
                connections.close_all()
        for variant, figures in rounds.items():
            print(
                f"{name[variant]}: {args.viewers} viewers, p95 {spread([f['p95'] for f in figures], 'ms')}, "
                f"median latency {spread([f['median'] for f in figures], 'ms')}, "
                f"CPU per delivery {spread([f['cpu_ms'] for f in figures], 'ms', 2)}, "
                f"{sum(f['missing'] for f in figures)} missing; load average "
                f"{min(f['load'] for f in figures):.1f}-{max(f['load'] for f in figures):.1f}"
            )
    finally:
        live.clean_up([web for group in webs.values() for web in group])


if __name__ == "__main__":
    main()

"""Compare view server time: 5 candidates × 500 tasks (target < 1 s), and 8
candidates with ~4,000-word prompts (target ≤ 300 ms).

Run: ``python bench/compare.py`` (``--quick`` for fewer repeats). It builds a
throwaway SQLite database in a temporary directory (migrations applied), fills
it with a finished run of 12 candidates over 500 val + 100 holdout tasks (the
test factory: lineage, growing prompts, outputs scored by the real engine), then times the
full request → rendered HTML of the compare page through Django's test client
(URL routing, middleware, auth, selectors, template) for several filter
settings, and prints the median and worst of the repeats for each.

The 8 candidates × ~4,000 words case is timed as a first view (nothing the
page keeps in memory computed yet: bootstrap intervals, prompt diffs) and as
the table's next page. ``--baseline PATH`` then times that case for another
checkout (e.g. ``git worktree add ../frontier-main main``) beside this one:
each side in its own process (its own database, the same data), alternated
for 3 rounds, printing both medians with their spread and the ratio.
``--profile`` prints where that request spends its time (cProfile).
``--intervals`` prints instead what lift intervals cost (the bootstrap:
10,000 resamples) at 500, 2,000 and 10,000 tasks: the peak memory
(tracemalloc, which numpy reports its arrays to) and wall time of one
interval alone, and of 7 over the same tasks as a page computes them
(``shared_draws``: the 7 together); with ``BENCH_CHECKOUT=PATH`` for
another checkout's code.
``--served`` then times that case as a browser gets it: a web process
(``manage.py serve``: uvicorn) on the same database, a plain HTTP client
with the session cookie of a logged-in user, each round on a fresh server
(its first view of the page computes everything), for 5 rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
# --baseline runs this file again with BENCH_CHECKOUT naming the other
# checkout: its code is imported, the measuring is this file's.
ROOT = Path(os.environ.get("BENCH_CHECKOUT") or BENCH_DIR.parent)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH_DIR))
import scratch

DATA_DIR = scratch.setup("compare")
# Pages name static files by their hashed names: collected once into the
# checkout's usual static root (as `manage.py serve` and the tests do), not
# into the throwaway data directory each time.
from dashboard.lib.site_files import default_data_dir

os.environ.setdefault("FRONTIER_STATIC_ROOT", str(default_data_dir() / "static"))

import django

django.setup()

from dashboard.staticfiles import collect_static_files

collect_static_files(log=print)

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse

from tests.factories import recorded_run

TARGET_S = 1.0
CANDIDATES = (0, 3, 6, 9, 11)
LONG_TARGET_S = 0.3
EIGHT = (0, 2, 3, 5, 6, 8, 9, 11)
CASES = {
    "default (val, all tasks, page 1)": "",
    "largest regression first": "&sort=regression",
    "only differences, page 3": "&only=diff&page=3",
    "only failures, baseline #11": "&only=fail&baseline=11",
    "text search in outputs": "&q=refund+within",
    "diff against the seed": "&diff=seed&sort=regression",
}


def build() -> tuple[Client, object]:
    setup_test_environment()  # lets the test client use host "testserver"
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-password-123")
    started = time.perf_counter()
    run = recorded_run(
        user, candidates=12, val_tasks=500, holdout_tasks=100, name="bench", task_prefix="val-"
    )
    print(f"built run {run.pk}: 12 candidates × 600 tasks in {time.perf_counter() - started:.1f} s")
    client = Client()
    client.force_login(user)
    return client, run


def main() -> int:
    if "--intervals" in sys.argv:
        intervals()
        return 0
    if "--long-only" in sys.argv:  # one side of --baseline: the big-prompt times as JSON
        client, run = build()
        print("TIMES " + json.dumps(long_prompts(client, run, repeats=5)))
        return 0
    repeats = 5 if "--quick" in sys.argv else 15
    client, run = build()
    base = reverse("compare:compare", args=[run.pk]) + "?" + "&".join(f"c={i}" for i in CANDIDATES)
    worst_median = 0.0
    print(f"{'case':38} {'median ms':>10} {'max ms':>8}")
    for label, extra in CASES.items():
        client.get(base + extra)  # warm caches (templates, queries) once
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            response = client.get(base + extra)
            times.append(time.perf_counter() - t0)
            assert response.status_code == 200, (label, response.status_code)
        median = statistics.median(times)
        worst_median = max(worst_median, median)
        print(f"{label:38} {median * 1000:10.1f} {max(times) * 1000:8.1f}")
    verdict = "OK" if worst_median < TARGET_S else "TOO SLOW"
    print(
        f"slowest median {worst_median * 1000:.1f} ms (target < {TARGET_S * 1000:.0f} ms): {verdict}"
    )
    take_away(client, run, repeats=3 if "--quick" in sys.argv else 5)
    times = long_prompts(client, run, repeats=5, profile="--profile" in sys.argv)
    long_ok = all(statistics.median(values) <= LONG_TARGET_S for values in times.values())
    for label, values in times.items():
        print(
            f"8 candidates × ~4,000 words, {label}: median {statistics.median(values) * 1000:.0f} ms "
            f"({min(values) * 1000:.0f}-{max(values) * 1000:.0f}, {len(values)} repeats; "
            f"target ≤ {LONG_TARGET_S * 1000:.0f} ms)"
        )
    print(f"8 candidates × ~4,000 words: {'OK' if long_ok else 'TOO SLOW'}")
    diff_ok = diff_worst_case()
    if "--served" in sys.argv:
        long_ok = served(client, run) and long_ok
    if "--baseline" in sys.argv:
        side_by_side(Path(sys.argv[sys.argv.index("--baseline") + 1]).resolve())
    return 0 if worst_median < TARGET_S and diff_ok and long_ok else 1


def intervals(repeats: int = 5) -> None:
    """The peak memory and time of one interval alone, and of a page's 7
    together (the draws shared): medians of `repeats` after one untimed (a fresh
    process's first allocations cost more), each on new differences, the
    time and the peak measured in two runs of the same work."""
    import contextlib
    import tracemalloc

    import numpy as np

    from optimizer import confidence

    rng = np.random.default_rng(1)
    print(f"{'lift intervals':24} {'peak MB':>8} {'ms':>7} {'ms min-max':>12}")
    for n in (500, 2_000, 10_000):
        for label, page in (("1 alone", False), ("7 on a page", True)):
            peaks, times = [], []
            for repeat in range(repeats + 1):  # the first one warms up, untimed
                pairs = [rng.uniform(0, 1, (n, 2)).round(3) for _ in range(7 if page else 1)]

                def lifts(pairs=pairs, page=page) -> None:
                    confidence._interval.cache_clear()
                    with confidence.shared_draws() if page else contextlib.nullcontext():
                        for p in pairs:
                            confidence.lift_of_pairs(p)

                t0 = time.perf_counter()
                lifts()
                if repeat == 0:
                    continue
                times.append(time.perf_counter() - t0)
                tracemalloc.start()  # timed apart: tracing slows every allocation
                lifts()
                peaks.append(tracemalloc.get_traced_memory()[1] / 1e6)
                tracemalloc.stop()
            spread = f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f}"
            print(
                f"{f'{n:,} tasks, {label}':24} {statistics.median(peaks):8.1f} "
                f"{statistics.median(times) * 1000:7.1f} {spread:>12}"
            )


def side_by_side(baseline: Path, rounds: int = 3) -> None:
    """The 8 × ~4,000-word compare view of `baseline`'s code and of this
    checkout's, each in a fresh process, alternated `rounds` times."""
    import subprocess

    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for label, checkout in (("baseline", baseline), ("this checkout", BENCH_DIR.parent)):
            paths = [
                str(checkout),
                str(checkout / "clients" / "python"),
                os.environ.get("PYTHONPATH"),
            ]
            env = {
                **os.environ,
                "BENCH_CHECKOUT": str(checkout),
                "PYTHONPATH": os.pathsep.join(filter(None, paths)),
            }
            env.pop("FRONTIER_STATIC_ROOT", None)  # each checkout's own collected files
            out = subprocess.run(
                [sys.executable, __file__, "--long-only"],
                env=env,
                cwd=checkout,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for case, values in json.loads(out.split("TIMES ", 1)[1]).items():
                times.setdefault((case, label), []).extend(values)
    print(
        f"\n{'8 candidates × ~4,000 words':38} {'median ms':>10} {'min-max':>12}  ({rounds} rounds × 5)"
    )
    for (case, label), values in times.items():
        spread = f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f}"
        print(f"{case + ', ' + label:38} {statistics.median(values) * 1000:10.0f} {spread:>12}")
    for case, label in times:
        if label == "baseline":
            ratio = statistics.median(times[(case, "this checkout")]) / statistics.median(
                times[(case, label)]
            )
            print(f"{case}: this checkout / baseline {ratio:.3f}")


def served(client: Client, run, rounds: int = 5) -> bool:
    """The 8 × ~4,000-word compare view (long_prompts left the prompts so) over
    HTTP from a real web process, each round a fresh one: its first view, the
    table's next page, the first view again. True if every median is within
    the target."""
    import subprocess
    import urllib.request
    from urllib.parse import urlsplit

    url = reverse("compare:compare", args=[run.pk]) + "?" + "&".join(f"c={i}" for i in EIGHT)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    def get(port: int, path: str) -> float:
        """Seconds until the whole page has arrived."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Cookie": cookie}
        )
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
        took = time.perf_counter() - t0
        # A lost session is a redirect to the login page (urllib follows it).
        if response.status != 200 or urlsplit(response.url).path != path.split("?")[0]:
            raise SystemExit(f"GET {path}: {response.status} {response.url}")
        return took

    times: dict[str, list[float]] = {"first view": [], "next page": [], "again": []}
    for _ in range(rounds):
        port = scratch.free_port()
        web = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-worker", "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "ALLOWED_HOSTS": "127.0.0.1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            scratch.serving(web, port, "manage.py serve")
            get(port, reverse("runs:list"))  # the process's first request: imports, templates
            times["first view"].append(get(port, url))
            times["next page"].append(get(port, url + "&page=2"))
            times["again"].append(get(port, url))
        finally:
            scratch.stop(web)
    print(
        f"\n{'8 × ~4,000 words, served':38} {'median ms':>10} {'min-max':>12}  ({rounds} fresh servers)"
    )
    ok = True
    for label, values in times.items():
        median = statistics.median(values)
        ok = ok and median <= LONG_TARGET_S
        spread = f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f}"
        print(f"{label:38} {median * 1000:10.0f} {spread:>12}")
    print(f"served: {'OK' if ok else 'TOO SLOW'} (target ≤ {LONG_TARGET_S * 1000:.0f} ms)")
    return ok


def diff_worst_case() -> bool:
    """The prompt diff on the pairs that are worst for SequenceMatcher
    (docs/configuration.md "Limits"; unbounded, it takes 6.8 s on two 4 KB
    prompts of one repeated word), next to a realistic heavy edit; each must
    take ≤ 1 s whatever level it falls back to."""
    import random

    from optimizer.textdiff import SAME, word_diff

    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(3000)]
    weights = [1 / (i + 1) for i in range(3000)]

    def prose(sentences):
        return [
            " ".join(rng.choices(vocab, weights, k=rng.randint(6, 20))) + "."
            for _ in range(sentences)
        ]

    base = prose(400)
    edited = [s if rng.random() > 0.3 else prose(1)[0] for s in base]
    cases = {
        "4 KB of one word, ends differ": ("x " + "word " * 800, "word " * 800 + "y"),
        "12 KB of one word, ends differ": ("x " + "word " * 2400, "word " * 2400 + "y"),
        "4 KB vs 12 KB of one word": ("word " * 800, "word " * 2400),
        "20,000 tokens of two words": (
            " ".join(rng.choice("ab") for _ in range(10_000)),
            " ".join(rng.choice("ab") for _ in range(10_000)),
        ),
        "200 KB of two kinds of line": (
            "\n".join(rng.choice(["aa", "bb"]) for _ in range(60_000)),
            "\n".join(rng.choice(["aa", "bb"]) for _ in range(60_000)),
        ),
        "21 KB prose, 30% of sentences rewritten": (" ".join(base), " ".join(edited)),
    }
    print(f"{'prompt diff':42} {'ms':>8}  result")
    worst = 0.0
    for label, (old, new) in cases.items():
        t0 = time.perf_counter()
        ops = word_diff(old, new)
        elapsed = time.perf_counter() - t0
        worst = max(worst, elapsed)
        shape = "whole texts" if not any(op == SAME for op, _ in ops) else f"{len(ops)} pieces"
        print(f"{label:42} {elapsed * 1000:8.1f}  {shape}")
    verdict = "OK" if worst <= TARGET_S else "TOO SLOW"
    print(
        f"slowest prompt diff {worst * 1000:.1f} ms (target ≤ {TARGET_S * 1000:.0f} ms): {verdict}"
    )
    return worst <= TARGET_S


def _timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def take_away(client: Client, run, *, repeats: int) -> None:
    """The other pages of a large run, and export → import of the whole run
    through the same views a user clicks (no target; figures to watch)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from optimizer.models import Evaluation, Run

    def get(url):
        """The page's whole body (a streamed export is timed until its last byte)."""
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        return b"".join(response.streaming_content) if response.streaming else response.content

    pages = {
        "task drill-down (5 candidates)": reverse("compare:task", args=[run.pk])
        + "?"
        + "&".join(f"c={i}" for i in CANDIDATES)
        + "&task=val-000",
        "prompt history of #11": reverse("compare:history", args=[run.pk, 11]),
        "promotion report": reverse("compare:promotion", args=[run.pk]),
        "export CSV": reverse("compare:export_csv", args=[run.pk]),
    }
    print(f"\n{'page (12 candidates × 600 tasks)':38} {'median ms':>10}")
    for label, url in pages.items():
        get(url)
        print(f"{label:38} {_timed(lambda url=url: get(url), repeats)[0] * 1000:10.1f}")
    median, body = _timed(lambda: get(reverse("compare:export_json", args=[run.pk])), repeats)
    print(f"{'export JSON (' + f'{len(body) / 1e6:.1f} MB)':38} {median * 1000:10.1f}")

    def upload():
        response = client.post(
            reverse("compare:import"), {"file": SimpleUploadedFile("run.json", body)}
        )
        assert response.status_code == 302, response.status_code
        return Run.objects.latest("pk")

    median, copy = _timed(upload, repeats)
    print(f"{'import that JSON':38} {median * 1000:10.1f}")
    ours = sorted(
        Evaluation.objects.filter(candidate__run=run).values_list(
            "candidate__index", "split", "task_key", "score"
        )
    )
    theirs = sorted(
        Evaluation.objects.filter(candidate__run=copy).values_list(
            "candidate__index", "split", "task_key", "score"
        )
    )
    print(f"imported copy has identical scores: {ours == theirs} ({len(theirs)} evaluations)")
    url = reverse("compare:runs") + f"?a={run.pk}&b={copy.pk}"
    get(url)
    print(
        f"{'compare runs (original vs copy)':38} {_timed(lambda: get(url), repeats)[0] * 1000:10.1f}"
    )


def forget_computed() -> None:
    """Empties what the page keeps in memory between requests (the bootstrap
    intervals; the prompt diffs where the checkout keeps them): a first view."""
    from optimizer import confidence, textdiff

    for cache in (getattr(confidence, "_interval", None), getattr(textdiff, "_cached_diff", None)):
        if cache is not None:
            cache.cache_clear()


def long_prompts(
    client: Client, run, *, repeats: int, profile: bool = False
) -> dict[str, list[float]]:
    """The word diff is the one part whose cost grows with prompt length (GEPA
    prompts grow as reflections add rules): the compare view of the same five
    candidates once their prompts are ~N words, each a 5% word edit of one
    text; then of eight at ~4,000 words (the most the page compares): a first
    view (nothing computed before) and the table's next page. Returns their times."""
    import random

    from optimizer.models import Candidate

    rng = random.Random(5)
    vocab = [
        "the",
        "a",
        "to",
        "of",
        "and",
        "in",
        "is",
        "for",
        "you",
        "your",
        "customer",
        "refund",
        "order",
        "item",
        "days",
        "must",
        "never",
        "always",
        "state",
        "quote",
        "answer",
        "return",
        "receipt",
        "within",
        "policy",
        "store",
        "credit",
        "replacement",
        "exchange",
        "shipping",
        "reply",
        "if",
        "when",
        "not",
        "do",
        "be",
    ]
    url = reverse("compare:compare", args=[run.pk]) + "?" + "&".join(f"c={i}" for i in CANDIDATES)
    print(f"\n{'compare view, prompts of':38} {'median ms':>10}")
    for words in (500, 2000, 4000):
        sentences = [
            " ".join(rng.choice(vocab) for _ in range(9)).capitalize() + "."
            for _ in range(words // 9)
        ]
        for candidate in run.candidates.all():
            edited = [
                " ".join(w if rng.random() > 0.05 else "carefully" for w in s.split(" "))
                for s in sentences
            ]
            Candidate.objects.filter(pk=candidate.pk).update(
                components={"system_prompt": " ".join(edited)}
            )
        client.get(url)
        median, _ = _timed(lambda: client.get(url), 3)
        print(f"{f'~{words} words each':38} {median * 1000:10.1f}")
    url = reverse("compare:compare", args=[run.pk]) + "?" + "&".join(f"c={i}" for i in EIGHT)
    assert client.get(url).status_code == 200
    times: dict[str, list[float]] = {"first view": [], "next page": []}
    for _ in range(repeats):
        forget_computed()
        t0 = time.perf_counter()
        client.get(url)
        times["first view"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        client.get(url + "&page=2")
        times["next page"].append(time.perf_counter() - t0)
    if profile:
        import cProfile
        import pstats

        for label, forget in (("first view", True), ("next page", False)):
            if forget:
                forget_computed()
            print(f"\n--- profile of the 8 candidates' {label}")
            profiler = cProfile.Profile()
            profiler.runcall(client.get, url + ("" if forget else "&page=2"))
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return times


if __name__ == "__main__":
    sys.exit(main())

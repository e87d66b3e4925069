"""Re-scoring benchmark: a finished run of --candidates × --tasks stored val
outputs re-scored with another verifier, end to end (optimizer/scorings.py).

It bulk-inserts the run into a scratch PostgreSQL database (outputs of a few
hundred characters, varied per candidate and task, so scores differ), then
--repeats times asks for a scoring with a six-check verifier (the tasks'
mustMention / mustNotMention, a regex, contains, not_contains, a length
bound) and runs the worker's function in this process: reading every output
from PostgreSQL, scoring it, ranking, the front, and writing the results.
Prints each time, then the median with its spread against the 30 s target.

    .venv/bin/python bench/rescore.py [--candidates 2000] [--tasks 300] [--repeats 3]

Needs PostgreSQL (BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres);
the scratch database is removed at the end, also when the bench fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import live

TARGET_SECONDS = 30.0
VERIFIER = {
    "id": "bench-rescore",
    "name": "Refund answer, stricter",
    "kind": "native",
    "checks": [
        {"id": "mentions", "type": "task_expectations", "weight": 4},
        {"id": "window", "type": "regex", "weight": 2, "params": {"pattern": r"\b30 days\b"}},
        {"id": "receipt", "type": "contains", "params": {"value": "receipt"}},
        {"id": "no-guarantee", "type": "not_contains", "params": {"value": "guarantee"}},
        {"id": "long-enough", "type": "min_length", "params": {"value": 80}},
        {"id": "short-enough", "type": "max_length", "params": {"value": 2000}},
    ],
}


def build_run(owner, *, candidates: int, tasks: int):
    """A finished run: candidate 0 as the factory records it, the others bulk-inserted
    with outputs that say a different subset of each task's phrases."""
    from django.db import connection

    from optimizer.models import Candidate, Evaluation
    from tests.factories import recorded_run

    run = recorded_run(owner=owner, candidates=1, val_tasks=tasks, name="rescore bench")
    template = run.candidates.get(index=0)
    Candidate.objects.bulk_create(
        [
            Candidate(
                run=run,
                index=i,
                components={"system_prompt": f"{template.components['system_prompt']} Rule {i}."},
                parents=[0],
                origin="reflection",
                iteration=i,
                metric_calls=i * tasks,
                val_score=0.5,
                objective_scores=template.objective_scores,
            )
            for i in range(1, candidates)
        ],
        batch_size=1000,
    )
    fields = [
        f.column
        for f in Evaluation._meta.concrete_fields
        if f.column not in ("id", "candidate_id", "output", "score")
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO optimizer_evaluation (candidate_id, output, score, {', '.join(fields)}) "
            "SELECT c.id, "
            "'Reply of candidate ' || c.index || ' to ' || e.task_key || '. ' "
            "|| CASE WHEN (c.index + e.id) %% 2 = 0 THEN 'The refund window is 30 days. ' ELSE '' END "
            "|| CASE WHEN (c.index * 3 + e.id) %% 3 = 0 THEN 'Please keep the receipt. ' ELSE '' END "
            "|| CASE WHEN (c.index + e.id * 7) %% 5 = 0 THEN 'Quote order #' || (1000 + t.position) || '. ' ELSE '' END "
            "|| CASE WHEN (c.index + e.id) %% 11 = 0 THEN 'We guarantee it. ' ELSE '' END "
            "|| 'The money goes back to the original payment method once the item is returned. "
            "We are happy to help with any further questions you may have about your order, "
            "the shipping of the replacement and the steps of the return.', "
            f"((c.index * 31 + e.id) %% 100) / 100.0, {', '.join('e.' + f for f in fields)} "
            "FROM optimizer_evaluation e "
            "JOIN optimizer_candidate c ON c.run_id = %s AND c.index > 0 "
            "JOIN optimizer_task t ON t.id = e.task_id "
            "WHERE e.candidate_id = %s",
            [run.pk, template.pk],
        )
        cursor.execute("ANALYZE")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    os.environ.update({k: v for k, v in live.ENV.items() if k != "REDIS_URL"})
    os.environ.pop("REDIS_URL", None)
    try:
        live.create_database()
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from optimizer.models import Evaluation
        from optimizer.scorings.execute import scoring_execute
        from optimizer.scorings.services import scoring_create

        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench", password="x")
        started = time.perf_counter()
        run = build_run(user, candidates=args.candidates, tasks=args.tasks)
        outputs = Evaluation.objects.filter(candidate__run=run).count()
        print(
            f"built a run of {args.candidates:,} candidates × {args.tasks} val tasks "
            f"({outputs:,} stored outputs) in {time.perf_counter() - started:.0f} s"
        )
        times = []
        for n in range(args.repeats):
            started = time.perf_counter()
            scoring = scoring_create(
                run=run, user=user, specs=[VERIFIER], source=[{"edited": True}]
            )
            assert scoring_execute(scoring.pk) == "done"
            times.append(time.perf_counter() - started)
            scoring.refresh_from_db()
            summary = scoring.summary
            print(
                f"re-score {n + 1}: {times[-1]:.1f} s end to end "
                f"({summary['outputs'] / times[-1]:,.0f} outputs/s; {summary['changed']:,} scores "
                f"changed, best is candidate {summary['best']['index']}, front of {len(summary['front'])})"
            )
        median = statistics.median(times)
        print(
            f"re-score of {outputs:,} outputs: median {median:.1f} s (min {min(times):.1f}, "
            f"max {max(times):.1f}, {len(times)} runs) against the {TARGET_SECONDS:.0f} s target: "
            f"{'met' if median <= TARGET_SECONDS else 'MISSED'}; load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    finally:
        live.clean_up(redis=False)


if __name__ == "__main__":
    main()

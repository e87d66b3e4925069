"""`manage.py optimize` as a user runs it: real processes on a real SQLite file
(WAL), so stop, cancel and kill -9 happen across processes as they would in use."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import WINDOW_ONLY
from tests.optimizer.run_helpers import REFUND_SPEC, REQUESTS
from tests.polling import wait_until

# Spawns manage.py processes on a SQLite file of its own: an integration test
# that needs neither PostgreSQL nor Redis.
pytestmark = pytest.mark.standalone

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {
    "run_id",
    "status",
    "seed_score",
    "best_score",
    "best_candidate",
    "best_candidate_index",
    "metric_calls",
    "run_url",
}


class Site:
    """A fresh data directory (SQLite file, runs dir) and a way to run manage.py on it."""

    def __init__(self, path: Path):
        self.path = path
        self.db = path / "frontier.sqlite3"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
            "SQLITE_PATH": str(self.db),
            "FRONTIER_RUNS_DIR": str(path / "runs"),
            "PYTHONPATH": str(ROOT),
        }

    def command(self, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "manage.py"), *args]

    def manage(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(*args),
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(*args),
            cwd=self.path,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def query(self, sql: str, *params):
        with sqlite3.connect(self.db, timeout=30) as db:
            return db.execute(sql, params).fetchall()

    def candidates(self, run_id: int) -> list[int]:
        return [
            row[0]
            for row in self.query(
                'SELECT "index" FROM optimizer_candidate WHERE run_id = ? ORDER BY "index"', run_id
            )
        ]

    def events(self, run_id: int, type: str) -> list[dict]:
        rows = self.query(
            "SELECT payload FROM optimizer_runevent WHERE run_id = ? AND type = ? ORDER BY seq",
            run_id,
            type,
        )
        return [json.loads(row[0]) for row in rows]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = Site(tmp_path_factory.mktemp("site"))
    (site.path / "refund.json").write_text(json.dumps(REFUND_SPEC))
    rows = [
        {
            "task_id": key,
            "input": text,
            "split": "train" if n % 2 == 0 else "val",
            "metadata": {
                "expectations": {
                    "mustMention": [{"text": phrase, "message": f"Offer the {phrase} option"}]
                }
            },
        }
        for n, (key, text, phrase) in enumerate(REQUESTS)
    ]
    (site.path / "refunds.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    assert site.manage("migrate", "--noinput").returncode == 0
    # Slow simulated endpoints, so a run lasts long enough to be stopped, cancelled or killed.
    create = (
        "from optimizer.models import ModelEndpoint as M\n"
        "M.objects.create(name='slow-demo', provider='demo', model='demo', options={'simulated_latency_ms': 40})\n"
        "M.objects.create(name='slowest-demo', provider='demo', model='demo', options={'simulated_latency_ms': 4000})\n"
    )
    assert site.manage("shell", "-c", create).returncode == 0
    return site


def last_run_id(site) -> int:
    return site.query("SELECT coalesce(max(id), 0) FROM optimizer_run")[0][0]


RUN_WAIT = ("optimize", "run", "--verifier", "refund.json", "--tasks", "refunds.jsonl", "--wait")


def run_wait(site, *extra: str) -> subprocess.CompletedProcess:
    """`optimize run --wait` on the site's refund verifier and tasks, to its end."""
    return site.manage(*RUN_WAIT, *extra)


def launch(site, *extra: str) -> tuple[subprocess.Popen, int]:
    """Start `optimize run --wait`; returns the process and the id its run will get."""
    run_id = last_run_id(site) + 1
    return site.start(*RUN_WAIT, *extra), run_id


def test_run_wait_prints_the_json_summary_on_stdout_and_progress_on_stderr(site):
    done = run_wait(site, "--model", "demo", "--budget", "80")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary) == SUMMARY_KEYS
    assert summary["status"] == "completed"
    assert summary["best_score"] > summary["seed_score"]
    assert summary["best_candidate"]["instructions"].startswith("You are a helpful assistant.")
    # A hard cap: never above the budget, and less than one iteration (2·3 + 4 calls) left unspent.
    assert 80 - (2 * 3 + 4) < summary["metric_calls"] <= 80
    assert "metric calls" in done.stderr and "[" in done.stderr

    status = site.manage("optimize", "status", str(summary["run_id"]))
    assert json.loads(status.stdout)["best_score"] == summary["best_score"]


def test_a_preset_budget_below_a_few_proposals_is_warned_about(site):
    done = run_wait(site, "--budget", "10")
    assert "warning: budget: 10 metric calls allow only 0 proposal(s)" in done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def test_a_run_whose_tasks_carry_answers_no_chosen_verifier_reads_is_warned_about(site):
    """An answer column (`output`) is imported as `expected`, which only row
    verifiers read: a run with a native verifier says so on stderr, naming the
    field and the task set, and still runs."""
    rows = [
        {"instruction": text, "output": phrase, "split": "train" if n % 2 == 0 else "val"}
        for n, (_, text, phrase) in enumerate(REQUESTS)
    ]
    (site.path / "answers.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    done = site.manage(
        "optimize",
        "run",
        "--verifier",
        "refund.json",
        "--tasks",
        "answers.jsonl",
        "--budget",
        "10",
        "--wait",
    )
    assert (
        f'warning: tasks: {len(rows)} task(s) of task set "answers" carry expected (an answer '
        "column such as output or answer is imported as expected) but no chosen verifier reads it"
    ) in done.stderr, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--verifier", "missing-verifier", "--tasks", "refunds.jsonl"),
            '--verifier: no verifier with id "missing-verifier"',
        ),
        (
            ("--verifier", "refund.json", "--tasks", "nowhere"),
            '--tasks: no task set named "nowhere"',
        ),
        (
            ("--verifier", "refund.json", "--tasks", "refunds.jsonl", "--model", "gpt-9"),
            'task_lm: no model endpoint named "gpt-9"',
        ),
        (
            ("--verifier", "refund.json", "--tasks", "refunds.jsonl", "--budget", "lots"),
            "budget.preset: Input should be",
        ),
        (
            ("--verifier", "refund.json", "--tasks", "refunds.jsonl", "--parallel-proposals", "9"),
            "parallel_proposals: Input should be less than or equal to 8",
        ),
        (
            ("--verifier", "refund.json", "--tasks", "refunds.jsonl", "--budget", "9914443"),
            "budget.max_metric_calls: 9,914,443 metric calls is above your limit of 50,000 per run (set by an administrator)",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_option(site, args, message):
    runs_before = last_run_id(site)
    done = site.manage("optimize", "run", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert last_run_id(site) == runs_before  # nothing half-saved


def test_resume_names_its_option_not_the_service_s_argument(site):
    done = run_wait(site, "--budget", "20")
    run_id = json.loads(done.stdout)["run_id"]
    resumed = site.manage("optimize", "resume", str(run_id), "--extra-budget", "-5")
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    assert (
        resumed.stderr.strip().splitlines()[-1]
        == "CommandError: --extra-budget: must not be negative"
    )


def test_a_set_with_no_val_tasks_is_refused_like_in_the_launch_form_not_validated_on_train(site):
    rows = [
        json.loads(line) | {"split": "train"}
        for line in (site.path / "refunds.jsonl").read_text().splitlines()
    ]
    (site.path / "all-train.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    done = site.manage("optimize", "run", "--verifier", "refund.json", "--tasks", "all-train.jsonl")
    assert done.returncode == 2
    assert (
        'splits.val: task set "all-train" has no tasks in split "val"; split it first: manage.py tasks split all-train'
        in done.stderr
    )


def test_a_refused_launch_leaves_no_imported_verifier_or_task_set_behind(site):
    (site.path / "fresh-spec.json").write_text(json.dumps({**REFUND_SPEC, "id": "fresh-spec"}))
    (site.path / "fresh-tasks.jsonl").write_text((site.path / "refunds.jsonl").read_text())
    done = site.manage(
        "optimize",
        "run",
        "--verifier",
        "fresh-spec.json",
        "--tasks",
        "fresh-tasks.jsonl",
        "--model",
        "gpt-9",
    )
    assert done.returncode == 2 and 'task_lm: no model endpoint named "gpt-9"' in done.stderr
    assert site.query("SELECT count(*) FROM optimizer_taskset WHERE name = 'fresh-tasks'") == [(0,)]
    assert site.query("SELECT count(*) FROM verifiers_app_verifier WHERE slug = 'fresh-spec'") == [
        (0,)
    ]


def test_stop_from_another_process_ends_the_run_between_iterations(site):
    waiting, run_id = launch(site, "--model", "slow-demo", "--budget", "2000")
    wait_until(lambda: len(site.candidates(run_id)) >= 2, what="two candidates", interval=0.05)
    assert site.manage("optimize", "stop", str(run_id)).returncode == 0
    out, err = waiting.communicate(timeout=60)
    summary = json.loads(out)
    assert summary["status"] == "stopped" and summary["metric_calls"] < 2000


def test_pause_from_another_process_ends_the_wait_paused_and_resume_wait_completes_it(site):
    """`optimize pause` lets the iteration finish and the run holds nothing: the
    `--wait` that ran it returns with the status "paused"; `optimize resume
    --wait` goes on to the end, its budget_used the task calls it counted."""
    waiting, run_id = launch(site, "--model", "slow-demo", "--budget", "400")
    wait_until(lambda: len(site.candidates(run_id)) >= 1, what="the seed", interval=0.05)
    paused = site.manage("optimize", "pause", str(run_id))
    assert paused.returncode == 0 and json.loads(paused.stdout)["run_id"] == run_id, paused.stderr
    out, err = waiting.communicate(timeout=60)
    assert json.loads(out)["status"] == "paused", err[-2000:]
    assert site.query("SELECT status, claim FROM optimizer_run WHERE id = ?", run_id) == [
        ("paused", "")
    ]
    resumed = site.manage("optimize", "resume", str(run_id), "--wait")
    assert json.loads(resumed.stdout)["status"] == "completed", resumed.stderr[-2000:]
    ((used, usage),) = site.query(
        "SELECT budget_used, usage FROM optimizer_runprogress WHERE run_id = ?", run_id
    )
    assert used == json.loads(usage)["task"]["calls"]
    assert len(site.events(run_id, "run.paused")) == 1


def test_cancel_aborts_without_waiting_for_the_iteration(site):
    # 4 s per model call: after the seed, the parent's minibatch (one wave) and the
    # reflection take 8 s before the child's minibatch starts. The cancel (a process
    # start plus at most one 2 s heartbeat) lands well inside that, so the child is
    # never evaluated; a stop would finish the iteration. No clock is read here: how
    # fast a cancel lands is a figure of bench/suite_timings.py.
    waiting, run_id = launch(site, "--model", "slowest-demo", "--budget", "2000")
    wait_until(lambda: site.candidates(run_id) == [0], what="the seed candidate", interval=0.05)
    assert site.manage("optimize", "cancel", str(run_id)).returncode == 0
    out, _ = waiting.communicate(timeout=60)
    summary = json.loads(out)
    assert summary["status"] == "stopped"
    assert (
        summary["metric_calls"] <= 4 + 3
    )  # the seed on 4 val tasks, the parent on a minibatch of 3
    assert site.query("SELECT phase FROM optimizer_run WHERE id = ?", run_id) == [("cancelled",)]
    assert site.candidates(run_id) == [0]


def test_a_run_killed_mid_flight_resumes_to_completion_without_lost_or_duplicated_candidates(site):
    waiting, run_id = launch(site, "--model", "slow-demo", "--budget", "200")
    wait_until(lambda: len(site.candidates(run_id)) >= 2, what="two candidates", interval=0.05)
    os.kill(waiting.pid, signal.SIGKILL)
    waiting.wait()
    assert site.query("SELECT status FROM optimizer_run WHERE id = ?", run_id) == [("running",)]
    killed_with = len(site.candidates(run_id))

    # A live worker refreshes the heartbeat every few seconds; this one is dead,
    # so after STALE_AFTER its heartbeat is old. Age it instead of waiting 30 s.
    site.query(
        "UPDATE optimizer_runprogress SET heartbeat_at = '2000-01-01 00:00:00' WHERE run_id = ?",
        run_id,
    )
    done = site.manage("optimize", "resume", str(run_id), "--wait")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"

    indices = site.candidates(run_id)
    assert indices == list(range(len(indices))) and len(indices) >= killed_with
    announced = [e["index"] for e in site.events(run_id, "candidate.new")]
    assert sorted(announced) == indices
    iterations = [e["iteration"] for e in site.events(run_id, "proposal")]
    assert len(iterations) == len(set(iterations))
    seqs = [
        row[0]
        for row in site.query(
            "SELECT seq FROM optimizer_runevent WHERE run_id = ? ORDER BY seq", run_id
        )
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    assert (site.path / "runs" / str(run_id) / "gepa_state.bin").exists()


def test_ctrl_c_while_waiting_stops_the_run_and_still_prints_the_summary(site):
    waiting, run_id = launch(site, "--model", "slow-demo", "--budget", "2000")
    wait_until(lambda: len(site.candidates(run_id)) >= 2, what="two candidates", interval=0.05)
    waiting.send_signal(signal.SIGINT)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    stored = site.query("SELECT status, phase, error FROM optimizer_run WHERE id = ?", run_id)
    # On a failure, what the command printed and what the database holds say which side erred.
    assert json.loads(out)["status"] == "stopped", (stored, err)
    assert "stopping after the current iteration" in err
    assert stored[0][0] == "stopped", (stored, err)


# `optimize run --wait` whose Ctrl-C lands inside a query: the SELECT has run,
# its rows are not read yet, and the cursor is held in a reference cycle (as a
# traceback's frames can hold it) that the garbage collector has not freed.
INTERRUPTED_INSIDE_A_QUERY = """
import gc
from django.core.management import call_command
from django.db import connection
from optimizer.management.commands import optimize

draw = optimize.Command._draw

def draw_then_interrupt(self, run):
    draw(self, run)
    if run.budget_used >= 20:
        optimize.Command._draw = draw
        cursor = connection.cursor()
        cursor.execute("SELECT status FROM optimizer_run")
        held = [cursor]
        held.append(held)
        gc.disable()
        raise KeyboardInterrupt

optimize.Command._draw = draw_then_interrupt
call_command(
    "optimize", "run", "--verifier", "refund.json", "--tasks", "refunds.jsonl",
    "--model", "slow-demo", "--budget", "2000", "--wait",
)
"""


def test_ctrl_c_inside_a_query_prints_the_status_the_run_ended_with(site):
    """On SQLite a statement left open keeps its connection's snapshot: the
    command printed "stopping" for a run the database held as stopped."""
    run_id = last_run_id(site) + 1

    done = site.manage("shell", "-c", INTERRUPTED_INSIDE_A_QUERY)

    assert done.returncode == 0, done.stderr
    assert site.query("SELECT status FROM optimizer_run WHERE id = ?", run_id) == [("stopped",)]
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "stopped"


def test_rescore_wait_scores_in_the_command_and_prints_the_summary(site):
    """Embedded, `optimize rescore --wait` scores in a thread of its own while it
    draws the bar from the database; both write and read the same SQLite file."""
    done = run_wait(site, "--budget", "40")
    run_id = json.loads(done.stdout)["run_id"]
    before = site.query("SELECT id, val_score FROM optimizer_candidate WHERE run_id = ?", run_id)
    outputs = site.query(
        "SELECT count(*) FROM optimizer_evaluation WHERE run_id = ? AND split = 'val'", run_id
    )[0][0]
    (site.path / "window.json").write_text(json.dumps(WINDOW_ONLY))

    rescored = site.manage(
        "optimize", "rescore", str(run_id), "--verifier", "window.json", "--wait"
    )

    assert rescored.returncode == 0, rescored.stderr
    printed = json.loads(rescored.stdout)
    assert printed["run_id"] == run_id and printed["status"] == "done"
    assert printed["name"] == "window-only v1"
    assert printed["summary"]["outputs"] == outputs > 0
    assert f"{outputs}/{outputs} outputs" in rescored.stderr
    assert (
        site.query("SELECT id, val_score FROM optimizer_candidate WHERE run_id = ?", run_id)
        == before
    )

"""`manage.py optimize run|status|stop|cancel|pause|resume|rescore` (docs/architecture.md "Public contracts").

    optimize run --verifier ID|FILE [--verifier …] --tasks SET|FILE --model M
                 [--reflection-model M] --budget N|light|medium|heavy [--wait]
    optimize status ID · optimize stop ID · optimize cancel ID · optimize pause ID
    optimize resume ID [--extra-budget N] [--wait]
    optimize import-gepa RUN_DIR|gepa_state.bin [--name N] [--user U]
    optimize rescore ID --verifier ID|FILE [--verifier …] [--name N] [--wait]

With --wait a progress bar goes to stderr and the JSON summary
{"run_id", "status", "seed_score", "best_score", "best_candidate", "metric_calls"}
to stdout; the exit code is 1 when the run failed. In embedded mode (no
REDIS_URL) --wait executes the run in this process; in distributed mode the run
is queued for the workers and this command follows it. A model is `demo` (the
offline simulator) or the name of a model endpoint configured in the admin.
Bad input exits with code 2 and one sentence naming the option.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from optimizer.config import RunConfigError
from optimizer.models import Run, RunStatus
from optimizer.runs.queued import server_is_alive
from optimizer.runs.runner import execute_run
from optimizer.selectors import run_wait_summary
from optimizer.services import (
    RunStateError,
    run_cancel,
    run_launch,
    run_pause,
    run_resume,
    run_snapshot_warnings,
    run_stop,
)
from optimizer.tasksets.models import TaskSet
from optimizer.tasksets.services import taskset_import
from verifiers_app.engine import SpecError
from verifiers_app.services import verifier_resolve

BAD_INPUT = 2
BAR_WIDTH = 30


def bad_input(message: str) -> CommandError:
    return CommandError(message, returncode=BAD_INPUT)


class Command(BaseCommand):
    help = "Launch, follow and control optimization runs."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="launch a run")
        run.add_argument(
            "--verifier",
            action="append",
            required=True,
            help="verifier id or spec JSON file (repeatable)",
        )
        run.add_argument(
            "--tasks", required=True, help="task set name or id, or a task file (JSONL, YAML, CSV)"
        )
        run.add_argument(
            "--model", default="demo", help='task model: "demo" or a model endpoint name'
        )
        run.add_argument("--reflection-model", help="reflection model (default: the task model)")
        run.add_argument(
            "--budget", default="light", help="metric calls, or light / medium / heavy"
        )
        run.add_argument(
            "--parallel-proposals",
            type=int,
            default=1,
            metavar="P",
            help="proposals per iteration, evaluated together (default 1: classic GEPA)",
        )
        run.add_argument(
            "--no-holdout",
            dest="evaluate_holdout",
            action="store_false",
            help="do not evaluate the seed and the best on the set's holdout split at the end "
            "(by default they are, when the set has holdout tasks; not metric calls)",
        )
        run.add_argument(
            "--name", default="", help="run name (default: the task set's name and the time)"
        )
        run.add_argument(
            "--user", help="owner of the run (default: the first superuser, else 'cli')"
        )
        run.add_argument(
            "--wait", action="store_true", help="follow the run and print a JSON summary"
        )
        for name, help_text in (
            ("status", "print a run's summary, phase and error as JSON"),
            ("stop", "stop a run after the iteration in flight"),
            ("cancel", "abort a run now, abandoning the evaluation in flight"),
            (
                "pause",
                "pause a run after the iteration in flight (it holds no worker); resume continues it",
            ),
        ):
            sub.add_parser(name, help=help_text).add_argument(
                "run_id", type=int, help="the run's id"
            )
        resume = sub.add_parser(
            "resume",
            help="resume a paused/stopped/failed/crashed run, or continue a completed one",
        )
        resume.add_argument("run_id", type=int, help="the run's id")
        resume.add_argument(
            "--extra-budget",
            type=int,
            default=0,
            metavar="N",
            help="metric calls to add (needed to continue a completed run)",
        )
        resume.add_argument(
            "--wait", action="store_true", help="follow the run and print a JSON summary"
        )
        rescore = sub.add_parser(
            "rescore",
            help="re-score a finished run's stored outputs with another verifier (no model calls)",
        )
        rescore.add_argument("run_id", type=int, help="the run's id")
        rescore.add_argument(
            "--verifier",
            action="append",
            required=True,
            help="verifier id or spec JSON file (repeatable), resolved as `optimize run` does",
        )
        rescore.add_argument(
            "--name", default="", help="the scoring's name (default: the verifiers)"
        )
        rescore.add_argument(
            "--wait",
            action="store_true",
            help="follow the scoring and print its summary (embedded mode always scores here)",
        )
        replay = sub.add_parser(
            "import-gepa", help="replay a gepa run_dir (its gepa_state.bin) as an external run"
        )
        replay.add_argument("path", help="a gepa run_dir, or its gepa_state.bin")
        replay.add_argument(
            "--name", default="", help="run name (default: from the number of candidates)"
        )
        replay.add_argument(
            "--user", help="owner of the run (default: the first superuser, else 'cli')"
        )

    def handle(self, *args, action, **options):
        if action == "rescore":
            self._rescore(options)
            return
        if action == "import-gepa":
            run = self._replay(options)
        elif action == "run":
            # All or nothing: a verifier file or task file imported on the way is
            # rolled back when the launch is refused (bad model, budget, split …).
            with transaction.atomic():
                run = self._launch(options)
        else:
            found = Run.objects.filter(pk=options["run_id"]).first()
            if found is None:
                raise bad_input(f"run_id: there is no run {options['run_id']}")
            run = found
            try:
                if action == "stop":
                    run = run_stop(run=run)
                elif action == "cancel":
                    run = run_cancel(run=run)
                elif action == "pause":
                    run = run_pause(run=run)
                elif action == "resume":
                    run = run_resume(run=run, extra_budget=options["extra_budget"])
            except RunStateError as error:
                # The service names its arguments (extra_budget); here they are options.
                raise bad_input(re.sub(r"^extra_budget:", "--extra-budget:", str(error))) from None
        if options.get("wait"):
            run = self._follow(run)
        elif action != "status":
            note = self._who_executes() if run.status == RunStatus.QUEUED else ""
            self.stderr.write(f"run {run.pk}: {run.status}{note}")
        run.refresh_from_db()
        self.stdout.write(
            json.dumps(
                {**run_wait_summary(run), "phase": run.phase, "error": run.error}
                if action == "status"
                else run_wait_summary(run)
            )
        )
        if options.get("wait") and run.status == RunStatus.FAILED:
            self.stderr.write(f"run {run.pk} failed: {run.error}")
            sys.exit(1)

    @staticmethod
    def _who_executes() -> str:
        if not settings.EMBEDDED:
            return " for the workers (`celery -A dashboard worker`)"
        if server_is_alive():
            return ": the running Frontier server starts it within a second or two"
        return (
            ": no Frontier server is running to execute it; start one with `python manage.py serve` "
            "(it starts queued runs), or pass --wait to run it in this command"
        )

    # -- run ----------------------------------------------------------------

    def _launch(self, options) -> Run:
        owner = self._owner(options["user"])
        try:
            verifiers = [verifier_resolve(ref, owner=owner) for ref in options["verifier"]]
        except (SpecError, ValueError, LookupError) as error:
            raise bad_input(f"--verifier: {str(error).removeprefix('verifier: ')}") from None
        task_set = self._task_set(options["tasks"], owner)
        # Like the launch form and the API: an empty split is refused, never filled
        # silently with train tasks (a val score on the training tasks is no score).
        splits = {"train": "train", "val": "val"}
        task_lm = options["model"]
        reflection_lm = options["reflection_model"] or options["model"]
        budget = options["budget"]
        config = {
            "name": options["name"],
            "task_set_id": task_set.pk,
            "splits": splits,
            "verifier_ids": [v.slug for v in verifiers],
            "task_lm": task_lm,
            "reflection_lm": reflection_lm,
            "budget": {"max_metric_calls": int(budget)} if budget.isdigit() else {"preset": budget},
            "parallel_proposals": options["parallel_proposals"],
            "evaluate_holdout": options["evaluate_holdout"],
        }
        try:
            run = run_launch(owner=owner, config=config)
        except RunConfigError as error:
            field, message = error.problems[0]
            if field.startswith("splits."):
                message += f"; split it first: manage.py tasks split {shlex.quote(task_set.name)} (or import the file again)"
            raise bad_input(f"{field}: {message}") from None

        for warning in run_snapshot_warnings(run):
            self.stderr.write(f"warning: {warning}")
        return run

    def _rescore(self, options) -> None:
        from optimizer.models import ScoringStatus
        from optimizer.scorings.execute import scoring_execute
        from optimizer.scorings.reads import scoring_out
        from optimizer.scorings.services import ScoringRefused, scoring_create

        run = Run.objects.filter(pk=options["run_id"]).select_related("owner").first()
        if run is None:
            raise bad_input(f"run_id: there is no run {options['run_id']}")
        try:
            with transaction.atomic():  # a spec file saved on the way goes with a refused scoring
                verifiers = [verifier_resolve(ref, owner=run.owner) for ref in options["verifier"]]
                scoring = scoring_create(
                    run=run,
                    user=run.owner,
                    specs=[v.spec for v in verifiers],
                    source=[{"id": v.slug, "version": v.version} for v in verifiers],
                    name=options["name"],
                )
        except (SpecError, LookupError) as error:
            raise bad_input(f"--verifier: {str(error).removeprefix('verifier: ')}") from None
        except ScoringRefused as error:
            raise bad_input(f"run_id: {error}") from None
        if options["wait"] or settings.EMBEDDED:
            raised: list[Exception] = []
            if settings.EMBEDDED:  # this process's queue has no worker: it scores here

                def score_here() -> None:
                    try:
                        scoring_execute(scoring.pk)
                    except Exception as error:  # reported below, with the scoring's status
                        raised.append(error)

                threading.Thread(target=score_here, daemon=True).start()
            while True:
                failed_here = bool(raised)  # read before the status: it was not settled here
                scoring.refresh_from_db()
                total = max(scoring.total, 1)
                filled = round(BAR_WIDTH * min(scoring.done, total) / total)
                self.stderr.write(
                    f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {scoring.done}/{scoring.total} outputs · {scoring.status}",
                    ending="",
                )
                self.stderr.flush()
                if scoring.status in (ScoringStatus.DONE, ScoringStatus.FAILED):
                    break
                if failed_here:  # before taking the scoring (one not taken here is followed)
                    raise CommandError(
                        f"\nscoring {scoring.pk} did not run here ({type(raised[0]).__name__}: "
                        f"{raised[0]}); it is {scoring.status}",
                        returncode=1,
                    )
                time.sleep(0.25)
            self.stderr.write("")
        else:
            self.stderr.write(f"scoring {scoring.pk} of run {run.pk}: {scoring.status}")
        out = scoring_out(scoring)
        self.stdout.write(json.dumps({"run_id": run.pk, **out}))
        if scoring.status == ScoringStatus.FAILED:
            self.stderr.write(f"scoring {scoring.pk} failed: {scoring.error}")
            sys.exit(1)

    def _replay(self, options) -> Run:
        from optimizer.external.replay import run_replay_gepa_state
        from optimizer.external.services import ExternalRunError

        path = Path(options["path"])
        if path.is_dir():
            path = path / "gepa_state.bin"
        if not path.is_file():
            raise bad_input(f"path: {path} does not exist (a gepa run_dir holds gepa_state.bin)")
        try:
            return run_replay_gepa_state(
                owner=self._owner(options["user"]), raw=path.read_bytes(), name=options["name"]
            )
        except ExternalRunError as error:
            raise bad_input(str(error)) from None

    def _owner(self, username: str | None):
        users = get_user_model().objects
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise bad_input(f"--user: there is no user {username!r}")
            return user
        return (
            users.filter(is_superuser=True).order_by("pk").first()
            or users.get_or_create(username="cli")[0]
        )

    def _task_set(self, ref: str, owner) -> TaskSet:
        path = Path(ref)
        if path.is_file():
            try:
                task_set, _ = taskset_import(
                    owner=owner, name=path.stem, filename=path.name, content=path.read_bytes()
                )
            except SpecError as error:
                raise bad_input(f"--tasks: {error}") from None
            return task_set
        sets = TaskSet.objects.visible_to(owner)
        found = sets.filter(name=ref).first() or (
            sets.filter(pk=int(ref)).first() if ref.isdigit() else None
        )
        if found is None:
            raise bad_input(f'--tasks: no task set named "{ref}" and no file at that path')
        return found

    # -- follow -------------------------------------------------------------

    def _follow(self, run: Run) -> Run:
        """Execute here (embedded) or wait for a worker (distributed), drawing progress on stderr."""
        worker = None
        if settings.EMBEDDED:
            # The bar says what the runner's "Run N started." log line would (that line
            # is for a server's terminal), and a line between two draws breaks the bar.
            logging.getLogger("optimizer.runs.runner").setLevel(logging.WARNING)
            worker = threading.Thread(target=execute_run, args=(run.pk,), daemon=True)
            worker.start()
        try:
            while True:
                run.refresh_from_db()
                self._draw(run)
                settled = run.status in RunStatus.finished() or run.status == RunStatus.PAUSED
                if settled and (worker is None or not worker.is_alive()):
                    break  # finished, or paused (`optimize resume` goes on)
                if (
                    worker is not None
                    and not worker.is_alive()
                    and run.status not in RunStatus.finished()
                ):
                    break  # not executed here (e.g. a live worker elsewhere holds it)
                time.sleep(0.25)
        except KeyboardInterrupt:
            # The interrupt can land inside a query. On SQLite the statement it left
            # open keeps this connection's snapshot, until the garbage collector
            # frees it: every later read would miss the run's end. A new
            # connection reads what the database holds.
            connection.close()
            self.stderr.write("\nstopping after the current iteration (Ctrl-C again to leave now)")
            with contextlib.suppress(RunStateError):  # it finished meanwhile
                run_stop(run=run)
            try:
                while worker is not None and worker.is_alive():
                    worker.join(0.25)
            except KeyboardInterrupt:
                self.stderr.write(
                    f"left run {run.pk} unfinished; `manage.py optimize resume {run.pk}` continues it"
                )
                sys.exit(130)
        self.stderr.write("")
        return run

    def _draw(self, run: Run) -> None:
        total = max(run.budget_total, 1)
        done = min(run.budget_used, total)
        filled = round(BAR_WIDTH * done / total)
        best = (
            f"best {run.best_score:.3f} (seed {run.seed_score:.3f})"
            if run.best_score is not None
            else "scoring the seed"
        )
        self.stderr.write(
            f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {run.budget_used}/{run.budget_total} metric calls · {best} · {run.status}",
            ending="",
        )
        self.stderr.flush()

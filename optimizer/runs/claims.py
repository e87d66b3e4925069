"""One run, one runner.

A worker that claims a run stores a fresh random token on it (`Run.claim`).
Every write the runner makes afterwards (events, candidates, evaluations,
budget, status, heartbeat) is conditional on that token: an UPDATE ... WHERE
claim = <mine> that touches no row means another worker took the run over
(ours looked dead to the watchdog: a long database outage, a frozen VM), and
this worker stops without writing anything more. The conditional UPDATE also
takes the run row's lock, so a takeover (runner.claim, SELECT ... FOR UPDATE)
waits for a write in flight to commit, and that write never lands after it.

The frequent writes (heartbeat, budget, event counter) go to the run's narrow
RunProgress row, not the wide run row (optimizer.models.RunProgress). They are
conditional on the same token, kept on the run only: the progress UPDATE
matches only while a sub-SELECT finds the run with our token, and that
sub-SELECT locks the run row (FOR NO KEY UPDATE: a lock, not a new row
version), so the takeover's guarantee above holds for them too.

In embedded mode every process that runs runs (the server's worker, `optimize
run --wait`) shares one machine and one data directory, and each also holds an
advisory lock (flock) on the run's directory while it runs it
(`process_lock`). The operating system drops that lock when the process ends,
however it ends (Ctrl-C, kill -9), so a running run whose lock is free has no
runner, and a server that starts can take it back at once instead of waiting
for its heartbeat to go stale. Distributed workers share no machine: there,
the heartbeat alone decides.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Field, Model, QuerySet

if TYPE_CHECKING:
    from optimizer.models import Run, RunProgress

log = logging.getLogger(__name__)

#: The file in a run's directory that the process running it holds locked (embedded mode).
LOCK_FILE = "worker.lock"


class ClaimLost(RuntimeError):
    """Another worker holds this run now: stop without writing."""


class RunClaim:
    """This worker's hold on one run."""

    def __init__(self, run_id: int, token: str) -> None:
        self.run_id = run_id
        self.token = token
        self.lost = threading.Event()

    @staticmethod
    def new_token() -> str:
        return secrets.token_hex(16)

    def runs(self) -> QuerySet[Run]:
        """The run, if this worker still holds it (an empty queryset once it lost it)."""
        from optimizer.models import Run

        return Run.objects.filter(pk=self.run_id, claim=self.token)

    def progress(self) -> QuerySet[RunProgress]:
        """The run's progress row, if this worker still holds the run; an UPDATE
        of it locks the run row while checking the token (see the module docstring)."""
        from optimizer.models import Run, RunProgress

        mine = (
            Run.objects.filter(pk=self.run_id, claim=self.token)
            .select_for_update(no_key=True)
            .values("pk")
        )
        return RunProgress.objects.filter(run_id=self.run_id, run_id__in=mine)

    def update(self, **fields: Any) -> None:
        """UPDATE the run WHERE claim = mine (its PROGRESS_FIELDS on the progress
        row); raises ClaimLost (and remembers it) when no row matched."""
        from optimizer.models import PROGRESS_FIELDS

        if self.lost.is_set():
            self.give_up()
        progress = {name: fields.pop(name) for name in list(fields) if name in PROGRESS_FIELDS}
        # One transaction (the sub-SELECT's lock needs one; no savepoint inside
        # another one). ClaimLost is raised once it is over.
        with transaction.atomic(savepoint=False):
            matched = (not fields or bool(self.runs().update(**fields))) and (
                not progress or bool(self.progress().update(**progress))
            )
        if not matched:
            self.give_up()

    def take_seqs(self, count: int, **progress: Any) -> int:
        """Inside a transaction: add `count` to the progress row's last_seq (and write
        its `progress` fields) while this worker holds the run, as `update` does;
        returns the new last_seq, or raises ClaimLost. One statement (UPDATE ...
        RETURNING) built once per set of fields, not an ORM UPDATE and a SELECT:
        the writer takes seqs for every batch of events it commits."""
        from django.db import connection

        from optimizer.models import RunProgress

        if self.lost.is_set():
            self.give_up()
        names = tuple(sorted(progress))
        statement = _take_seqs_sql(names, connection.vendor)
        values = [
            _field(RunProgress, name).get_db_prep_save(progress[name], connection) for name in names
        ]
        with connection.cursor() as cursor:
            cursor.execute(statement, [count, *values, self.run_id, self.run_id, self.token])
            row = cursor.fetchone()
        if row is None:
            self.give_up()
        return int(row[0])

    def hold(self) -> None:
        """Inside a transaction: lock the run row while it is still ours, else raise ClaimLost."""
        if self.lost.is_set() or not list(
            self.runs().select_for_update().values_list("pk", flat=True)
        ):
            self.give_up()

    def give_up(self) -> None:
        if not self.lost.is_set():
            log.warning(
                "run %s: another worker holds it now; this worker stops without writing",
                self.run_id,
            )
        self.lost.set()
        raise ClaimLost(f"run {self.run_id} is held by another worker")


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.column:
        raise ValueError(f"{model.__name__}.{name} is not a column")
    return field


@functools.cache
def _take_seqs_sql(names: tuple[str, ...], vendor: str) -> str:
    """RunClaim.take_seqs's statement for the progress fields `names`: the
    progress UPDATE of `RunClaim.update`, its sub-SELECT locking the run row.
    Every name in it is a column or table of our models, quoted."""
    from django.db import connection

    from optimizer.models import PROGRESS_FIELDS, Run, RunProgress

    unknown = set(names) - (PROGRESS_FIELDS - {"last_seq"})
    if unknown:
        raise ValueError(f"not progress fields: {sorted(unknown)}")
    quote = connection.ops.quote_name

    def column(model: type[Model], name: str) -> str:
        return quote(str(_field(model, name).column))

    last_seq, run_id, pk = (
        column(RunProgress, "last_seq"),
        column(RunProgress, "run"),
        column(Run, "id"),
    )
    sets = ", ".join(
        [f"{last_seq} = {last_seq} + %s", *(f"{column(RunProgress, n)} = %s" for n in names)]
    )
    lock = " FOR NO KEY UPDATE" if vendor == "postgresql" else ""
    return (
        f"UPDATE {quote(RunProgress._meta.db_table)} SET {sets} "  # noqa: S608 (quoted model names)
        f"WHERE {run_id} = %s AND {run_id} IN (SELECT {pk} FROM {quote(Run._meta.db_table)} "
        f"WHERE {pk} = %s AND {column(Run, 'claim')} = %s{lock}) RETURNING {last_seq}"
    )


@contextlib.contextmanager
def process_lock(directory: Path) -> Iterator[bool | None]:
    """Try to lock the run whose directory this is for this process, without
    waiting: yields True while this process holds it, False when another
    process (or another thread of this one) does, and None where the platform
    has no flock (nothing can be told: the heartbeat decides)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield None
        return
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "ab") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)

"""Reviewer notes: what a person noticed in an output, for GEPA's reflection to read.

A note belongs to one task of a native run. From the moment it is saved, every
reflection whose minibatch holds that task reads it beside the verifiers'
feedback (the runner reads the run's notes from the database each time it
builds a reflective dataset: optimizer/runs/adapter.py). Saving, editing and
removing a note each publish an event (`note.saved`, `note.deleted`), so every
open run page shows the change.

Who may write: whoever steers the run (Run.steerable_by: its owner, an admin,
a user it is shared with steering rights) creates notes; the note's author or
one who steers the run edits or removes one. External runs are
observe-only (gepa's callbacks cannot change what their reflection reads) and
imported runs were not executed here: both are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from optimizer.config import RunConfigError, parse_run_config
from optimizer.models import EXTERNAL_OBSERVE_ONLY, ReviewerNote, Run
from optimizer.runs import event_types as ev
from optimizer.runs.events import publish_run_event
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_NOTE_CHARS = 2000
# The most notes one reflection reads on one task (the newest), and on one run in all:
# a reflection prompt stays bounded however many notes people write.
MAX_NOTES_PER_TASK = 5
MAX_NOTES_PER_RUN = 1000

EXTERNAL_REFUSAL = EXTERNAL_OBSERVE_ONLY
IMPORTED_REFUSAL = "an imported run was not executed here: nothing reads its notes; fork it instead"


class NoteStateError(ValueError):
    """The run does not take notes (external or imported): one sentence why."""


def notes_refusal(run: Run) -> str | None:
    """Why this run takes no notes, or None when it does."""
    if run.is_external:
        return EXTERNAL_REFUSAL
    if run.imported:
        return IMPORTED_REFUSAL
    return None


def _task_keys(run: Run) -> set[str]:
    return {str(row.get("task_id")) for row in run.tasks_snapshot or [] if row.get("task_id")}


def train_task_keys(run: Run) -> set[str]:
    """The tasks GEPA draws reflection minibatches from: the only ones whose notes it reads."""
    train = parse_run_config(run.config).splits.train
    return {
        str(row.get("task_id"))
        for row in run.tasks_snapshot or []
        if row.get("split") == train and row.get("task_id")
    }


def _clean_text(text: Any) -> str:
    if not isinstance(text, str):
        raise RunConfigError([("text", "must be text")])
    cleaned = text.strip()
    if not cleaned:
        raise RunConfigError([("text", "must not be empty")])
    if len(cleaned) > MAX_NOTE_CHARS:
        raise RunConfigError(
            [("text", f"at most {MAX_NOTE_CHARS:,} characters, got {len(cleaned):,}")]
        )
    if "\x00" in cleaned:
        raise RunConfigError([("text", "must not contain a NUL character")])
    return cleaned


def _check_run(run: Run) -> None:
    refusal = notes_refusal(run)
    if refusal:
        raise NoteStateError(refusal)


def reviewer_note_create(*, run: Run, user: User, task_key: Any, text: Any) -> ReviewerNote:
    """A new note on `task_key` (a task of the run's frozen snapshot, any split).
    Raises PermissionDenied unless `user` steers the run, NoteStateError for an
    external or imported run, RunConfigError naming `task_key` or `text`."""
    if not run.steerable_by(user):
        raise PermissionDenied(
            f"run {run.pk} is shared with you read-only: its owner can give you steering rights"
        )
    _check_run(run)
    if not isinstance(task_key, str) or task_key not in _task_keys(run):
        raise RunConfigError([("task_key", f"run {run.pk} has no task {str(task_key)[:200]!r}")])
    cleaned = _clean_text(text)
    with transaction.atomic():
        # The run row is the lock: the per-run limit holds under concurrent writers.
        Run.objects.select_for_update().filter(pk=run.pk).first()
        if ReviewerNote.objects.filter(run=run).count() >= MAX_NOTES_PER_RUN:
            raise RunConfigError(
                [
                    (
                        "text",
                        f"run {run.pk} already has {MAX_NOTES_PER_RUN:,} notes: edit or remove one",
                    )
                ]
            )
        note = ReviewerNote.objects.create(
            run=run, task_key=task_key, text=cleaned, author=user, author_name=user.get_username()
        )
        publish_run_event(run.pk, ev.NOTE_SAVED, note.as_dict())
    return note


def _may_change(note: ReviewerNote, run: Run, user: User) -> bool:
    return bool(run.steerable_by(user) or (note.author_id and note.author_id == user.pk))


def reviewer_note_edit(*, run: Run, note_id: int, user: User, text: Any) -> ReviewerNote:
    """Replace a note's text; the next reflections on its task read the new one."""
    _check_run(run)
    cleaned = _clean_text(text)
    with transaction.atomic():
        note = ReviewerNote.objects.select_for_update().filter(run=run, pk=note_id).first()
        if note is None:
            raise ReviewerNote.DoesNotExist(f"run {run.pk} has no note {note_id}")
        if not _may_change(note, run, user):
            raise PermissionDenied("only the note's author or who steers the run edits it")
        note.text = cleaned
        note.updated_at = timezone.now()
        note.save(update_fields=["text", "updated_at"])
        publish_run_event(run.pk, ev.NOTE_SAVED, note.as_dict())
    return note


def reviewer_note_delete(*, run: Run, note_id: int, user: User) -> None:
    """Remove a note: no reflection reads it from now on (those that did keep saying so)."""
    _check_run(run)
    with transaction.atomic():
        note = ReviewerNote.objects.select_for_update().filter(run=run, pk=note_id).first()
        if note is None:
            raise ReviewerNote.DoesNotExist(f"run {run.pk} has no note {note_id}")
        if not _may_change(note, run, user):
            raise PermissionDenied("only the note's author or who steers the run removes it")
        publish_run_event(run.pk, ev.NOTE_DELETED, {"id": note.pk, "task_key": note.task_key})
        note.delete()


def reviewer_notes_copy(*, source: Run, target: Run) -> int:
    """Copy `source`'s notes to `target` (a fork), authors and times kept, for the
    tasks `target`'s snapshot holds; returns how many. No events: the target is new."""
    keys = _task_keys(target)
    copies = [
        ReviewerNote(
            run=target,
            task_key=note.task_key,
            text=note.text,
            author_id=note.author_id,
            author_name=note.author_name,
            created_at=note.created_at,
            updated_at=note.updated_at,
        )
        for note in ReviewerNote.objects.filter(run=source).order_by("pk")
        if note.task_key in keys
    ]
    ReviewerNote.objects.bulk_create(copies)
    return len(copies)


def run_notes(run: Run) -> list[dict]:
    """The run's notes, oldest first, as the API and the run page show them."""
    return [n.as_dict() for n in ReviewerNote.objects.filter(run=run).order_by("created_at", "pk")]


def notes_on_tasks(run_id: int, task_keys: list[str]) -> dict[str, list[JSONObject]]:
    """What a reflection on these tasks reads now: per task, its newest
    MAX_NOTES_PER_TASK notes (`id`, `task_key`, `author`, `text`), oldest
    first. One indexed query, bounded by the run's note limit."""
    found: dict[str, list[JSONObject]] = {}
    rows = (
        ReviewerNote.objects.filter(run_id=run_id, task_key__in=set(task_keys))
        .order_by("-updated_at", "-pk")
        .values_list("pk", "task_key", "author_name", "text")[:MAX_NOTES_PER_RUN]
    )
    for pk, key, author, text in rows:
        kept = found.setdefault(key, [])
        if len(kept) < MAX_NOTES_PER_TASK:
            kept.append({"id": pk, "task_key": key, "author": author, "text": text})
    return {key: list(reversed(notes)) for key, notes in found.items()}

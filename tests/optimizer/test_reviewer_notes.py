"""Reviewer notes GEPA reads (optimizer/reviewer_notes.py): who may write them,
what is refused, what the reflection reads, and where they travel (events,
API, export and import, forks)."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from gepa.strategies.instruction_proposal import InstructionProposalSignature

from optimizer.export import run_export, run_export_stream, run_import
from optimizer.lm.simulator.reflection import records_from_dataset
from optimizer.models import Candidate, ReviewerNote, RunEvent, RunKind
from optimizer.reviewer_notes import (
    EXTERNAL_REFUSAL,
    MAX_NOTE_CHARS,
    notes_on_tasks,
    reviewer_note_create,
)
from optimizer.runs import event_types as ev
from optimizer.services import run_fork, run_launch
from tests.factories import recorded_run
from tests.optimizer.run_helpers import refund_task_set, refund_verifier, run_config
from tests.optimizer.runs.test_adapter import ROWS, SEED, demo_adapter

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(owner=user, candidates=2, val_tasks=3)


def notes_url(run, note_id=None) -> str:
    return f"/api/runs/{run.pk}/notes" + (f"/{note_id}" if note_id is not None else "")


def post(client: Client, url: str, body: dict, method: str = "post"):
    return getattr(client, method)(url, data=json.dumps(body), content_type="application/json")


def test_a_saved_note_is_listed_and_announced_to_open_pages(run, user, user_client):
    """POST answers 201 with the note; GET lists it; a note.saved event carries it."""
    response = post(
        user_client, notes_url(run), {"task_key": "t001", "text": "  give the tracking number  "}
    )
    assert response.status_code == 201, response.content
    note = response.json()
    assert note["text"] == "give the tracking number" and note["author"] == "alice"
    listed = user_client.get(notes_url(run)).json()
    assert [n["id"] for n in listed["notes"]] == [note["id"]]
    assert listed["writable"] is True and listed["refusal"] is None
    saved = RunEvent.objects.filter(run=run, type=ev.NOTE_SAVED).get()
    assert saved.payload["id"] == note["id"] and saved.payload["task_key"] == "t001"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"task_key": "t001", "text": "   "}, "text"),
        ({"task_key": "t001", "text": "x" * (MAX_NOTE_CHARS + 1)}, "text"),
        ({"task_key": "t001", "text": "bad \x00 byte"}, "text"),
        ({"task_key": "no-such-task", "text": "a note"}, "task_key"),
    ],
)
def test_a_bad_note_is_a_400_naming_the_field_and_saves_nothing(run, user_client, body, field):
    response = post(user_client, notes_url(run), body)
    assert response.status_code == 400, response.content
    assert [p["field"] for p in response.json()["problems"]] == [field]
    assert not ReviewerNote.objects.exists()
    assert not RunEvent.objects.filter(run=run, type=ev.NOTE_SAVED).exists()


def test_a_note_may_be_on_any_split_of_the_frozen_tasks(user):
    run = recorded_run(owner=user, candidates=1, val_tasks=1, holdout_tasks=1)
    note = reviewer_note_create(run=run, user=user, task_key="hold-000", text="holdout too")
    assert note.task_key == "hold-000"


def test_a_read_only_sharer_cannot_write_edit_or_remove_notes(run, user, other_user, other_client):
    """Sharing is read-only: the sharer reads the notes, and each write is a 403."""
    run.shared_with.add(other_user)
    note = reviewer_note_create(run=run, user=user, task_key="t000", text="the owner's note")
    listed = other_client.get(notes_url(run)).json()
    assert [n["id"] for n in listed["notes"]] == [note.pk] and listed["writable"] is False
    assert post(other_client, notes_url(run), {"task_key": "t000", "text": "x"}).status_code == 403
    assert post(other_client, notes_url(run, note.pk), {"text": "x"}, "patch").status_code == 403
    assert other_client.delete(notes_url(run, note.pk)).status_code == 403
    note.refresh_from_db()
    assert note.text == "the owner's note"


def test_a_sharer_with_steering_rights_is_told_they_may_write_notes_and_does(
    run, user, other_user, other_client
):
    """The list says `writable` for whom a write would succeed: who steers the run."""
    run.steered_by.add(other_user)
    assert other_client.get(notes_url(run)).json()["writable"] is True
    written = post(other_client, notes_url(run), {"task_key": "t000", "text": "cite the order"})
    assert written.status_code == 201 and written.json()["author"] == other_user.username


def test_someone_who_cannot_see_the_run_gets_a_404(run, user, other_client):
    note = reviewer_note_create(run=run, user=user, task_key="t000", text="private")
    assert other_client.get(notes_url(run)).status_code == 404
    assert post(other_client, notes_url(run), {"task_key": "t000", "text": "x"}).status_code == 404
    assert other_client.delete(notes_url(run, note.pk)).status_code == 404
    assert ReviewerNote.objects.filter(pk=note.pk).exists()


def test_a_note_is_edited_and_removed_with_an_event_each(run, user, user_client):
    note = reviewer_note_create(run=run, user=user, task_key="t000", text="first")
    edited = post(user_client, notes_url(run, note.pk), {"text": "second"}, "patch")
    assert edited.status_code == 200 and edited.json()["text"] == "second"
    assert user_client.delete(notes_url(run, note.pk)).status_code == 204
    assert not ReviewerNote.objects.exists()
    types = list(
        RunEvent.objects.filter(run=run, type__startswith="note.")
        .order_by("seq")
        .values_list("type", flat=True)
    )
    assert types == [ev.NOTE_SAVED, ev.NOTE_SAVED, ev.NOTE_DELETED]
    assert user_client.delete(notes_url(run, note.pk)).status_code == 404


def test_an_external_run_refuses_notes_with_one_sentence(run, user, user_client):
    run.kind = RunKind.EXTERNAL
    run.save(update_fields=["kind"])
    response = post(user_client, notes_url(run), {"task_key": "t000", "text": "a note"})
    assert response.status_code == 409
    assert response.json()["detail"] == EXTERNAL_REFUSAL
    assert user_client.get(notes_url(run)).json()["refusal"] == EXTERNAL_REFUSAL
    page = user_client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        "observe-only" in page
        and "Note for GEPA" not in user_client.get(f"/runs/{run.pk}/candidates/0/").content.decode()
    )


def test_an_imported_run_refuses_new_notes(run, user, user_client):
    run.imported = True
    run.save(update_fields=["imported"])
    response = post(user_client, notes_url(run), {"task_key": "t000", "text": "a note"})
    assert response.status_code == 409 and "imported" in response.json()["detail"]


def test_the_reflective_dataset_holds_a_note_only_beside_its_own_task():
    """And gepa's own reflection prompt shows it under a reviewer's heading."""
    notes = {
        "shoes": [{"id": 7, "task_key": "shoes", "author": "alice", "text": "quote the order date"}]
    }
    asked: list[list[str]] = []

    def source(keys):
        asked.append(keys)
        return {k: v for k, v in notes.items() if k in keys}

    adapter = demo_adapter(notes_source=source)
    batch = adapter.evaluate(ROWS[:2], SEED, capture_traces=True)
    dataset = adapter.make_reflective_dataset(SEED, batch, ["instructions"])
    shoes, laptop = dataset["instructions"]
    assert shoes["Reviewer note (from alice)"] == "quote the order date"
    assert not any(key.startswith("Reviewer note") for key in laptop)
    assert asked == [["shoes", "laptop"]]
    assert adapter.take_notes_read() == {"minibatch": ["shoes", "laptop"], "notes": notes["shoes"]}
    assert adapter.take_notes_read() is None
    prompt = InstructionProposalSignature.prompt_renderer(
        {
            "current_instruction_doc": SEED["instructions"],
            "dataset_with_feedback": dataset["instructions"],
        }
    )
    assert "## Reviewer note (from alice)\nquote the order date" in prompt
    assert prompt.index("## Feedback") < prompt.index("## Reviewer note (from alice)")


def test_notes_on_tasks_reads_each_task_s_newest_notes_as_they_are_now(run, user):
    first = reviewer_note_create(run=run, user=user, task_key="t000", text="one")
    reviewer_note_create(run=run, user=user, task_key="t001", text="elsewhere")
    first.text = "one, edited"
    first.save(update_fields=["text"])
    read = notes_on_tasks(run.pk, ["t000", "t002"])
    assert list(read) == ["t000"]
    assert [n["text"] for n in read["t000"]] == ["one, edited"]


def test_the_simulated_reflection_reads_a_note_as_one_more_line_of_feedback():
    records = records_from_dataset(
        [
            {
                "Inputs": {"task": "where is my parcel?"},
                "Generated Outputs": "Your order number is 12.",
                "Feedback": "Score 1.00 (pass). Every check passed.",
                "Reviewer note (from alice)": 'should mention "tracking number"',
            }
        ]
    )
    assert records[0].feedback.endswith('should mention "tracking number"')


def test_a_fork_carries_the_notes_with_their_authors(user):
    """Through run_launch's `forked_from`, which the API's fork and the launch form's both use."""
    refund_verifier(user)
    launched = run_launch(owner=user, config=run_config(refund_task_set(user)))
    Candidate.objects.create(run=launched, index=0, components={"instructions": "Help."})
    reviewer_note_create(run=launched, user=user, task_key="laptop", text="keep this")
    fork = run_fork(run=launched, candidate_index=0, owner=user)
    copied = ReviewerNote.objects.get(run=fork)
    assert (copied.task_key, copied.text, copied.author, copied.author_name) == (
        "laptop",
        "keep this",
        user,
        "alice",
    )
    assert ReviewerNote.objects.filter(run=launched).count() == 1


def test_the_export_holds_the_notes_and_the_import_restores_them(run, user, other_user):
    reviewer_note_create(run=run, user=user, task_key="t002", text="exported")
    document = run_export(run)
    assert [(n["task_key"], n["text"], n["author"]) for n in document["reviewer_notes"]] == [
        ("t002", "exported", "alice")
    ]
    assert b"".join(run_export_stream(run)).decode() == json.dumps(document, ensure_ascii=False)
    imported = run_import(owner=other_user, data=document)
    note = ReviewerNote.objects.get(run=imported)
    assert (note.task_key, note.text, note.author_name, note.author) == (
        "t002",
        "exported",
        "alice",
        None,
    )

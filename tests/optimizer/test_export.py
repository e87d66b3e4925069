import copy
import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from optimizer.confidence import paired_lift
from optimizer.export import (
    RunImportError,
    run_export,
    run_export_csv,
    run_export_stream,
    run_import,
    run_import_stream,
)
from optimizer.models import Candidate, Evaluation, Run, RunEvent
from tests.factories import recorded_run
from tests.optimizer.run_helpers import run_demo_with_holdout

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return recorded_run(
        user,
        candidates=4,
        val_tasks=5,
        holdout_tasks=3,
        name="Refund policy run",
        task_prefix="val-",
    )


def _scores(run):
    return sorted(
        Evaluation.objects.filter(candidate__run=run).values_list(
            "candidate__index", "split", "task_key", "score", "verdict"
        )
    )


def test_an_exported_run_imports_back_with_identical_scores_lineage_and_events(run, other_user):
    data = json.loads(
        json.dumps(run_export(run))
    )  # through real JSON, as a downloaded file would be

    imported = run_import(owner=other_user, data=data)

    assert imported.pk != run.pk and imported.owner == other_user and imported.imported
    assert _scores(imported) == _scores(run)
    assert list(
        imported.candidates.values_list("index", "parents", "components", "val_score")
    ) == list(run.candidates.values_list("index", "parents", "components", "val_score"))
    assert imported.best_candidate.index == run.best_candidate.index
    assert (imported.seed_score, imported.best_score) == (run.seed_score, run.best_score)
    assert list(imported.events.values_list("seq", "type", "payload")) == list(
        run.events.values_list("seq", "type", "payload")
    )
    assert imported.last_seq == run.last_seq


def test_exporting_an_imported_run_gives_the_same_document_again(run, other_user):
    first = run_export(run)
    second = run_export(run_import(owner=other_user, data=copy.deepcopy(first)))
    for doc in (first, second):
        for name in ("created_at", "task_set", "name"):
            doc["run"].pop(name)
        for event in doc["events"]:
            event.pop("created_at")
    assert second == first


def test_the_streamed_json_is_byte_for_byte_the_document_in_small_pieces(run):
    Evaluation.objects.filter(candidate__run=run, task_key="val-001").update(
        output='naïve “quotes” ✓ and \\ " \n'
    )
    expected = json.dumps(run_export(run), ensure_ascii=False).encode()

    pieces = list(run_export_stream(run, piece_bytes=1000))

    assert b"".join(pieces) == expected
    assert (
        len(pieces) > 5 and max(len(p) for p in pieces) < 1000 + 10_000
    )  # a piece is at most one row past the mark


def _split_scores(candidate, split):
    return dict(
        Evaluation.objects.filter(candidate=candidate, split=split).values_list("task_key", "score")
    )


def test_the_json_export_carries_best_vs_seed_on_val_and_holdout_with_its_interval(user):
    run = recorded_run(user, candidates=4, val_tasks=12, holdout_tasks=10, task_prefix="val-")
    seed, best = run.candidates.get(index=0), run.best_candidate
    lift = run_export(run)["lift"]
    assert (lift["seed_index"], lift["best_index"]) == (0, best.index) and best.index != 0
    for split, tasks in (("val", 12), ("holdout", 10)):
        expected = paired_lift(_split_scores(seed, split), _split_scores(best, split))
        assert lift[split] == expected.as_dict()
        assert lift[split]["tasks"] == tasks and lift[split]["low"] is not None
        assert lift[split]["method"] == "paired bootstrap, percentile, 10,000 resamples, seed 0"


def test_a_run_without_holdout_tasks_exports_no_holdout_lift(user):
    run = recorded_run(user, candidates=3, val_tasks=4, holdout_tasks=0)
    lift = run_export(run)["lift"]
    assert lift["holdout"] is None
    assert lift["val"]["tasks"] == 4 and lift["val"]["low"] is None  # too few to tell


def test_an_import_computes_its_own_lift_and_reads_files_without_one(run, other_user):
    data = json.loads(json.dumps(run_export(run)))
    told = copy.deepcopy(data["lift"])
    data["lift"]["val"].update(confirmed=True, text="a lift of +0.900, surely")
    copy_of_run = run_import(owner=other_user, data=data)
    assert run_export(copy_of_run)["lift"] == told
    del data["lift"]  # written before exports carried it
    data["run"]["name"] = "older file"
    assert run_export(run_import(owner=other_user, data=data))["lift"] == told


def test_the_csv_sorts_task_keys_by_code_point_like_the_document(run):
    for n, key in enumerate(["b", "B", "a", "ä", "_x"]):
        Evaluation.objects.filter(candidate__run=run, task_key=f"val-00{n}").update(task_key=key)
    keys = [row[0] for row in csv.reader(io.StringIO(run_export_csv(run))) if row[1] == "val"]
    assert keys == sorted(keys) and {"b", "B", "a", "ä", "_x"} <= set(keys)


def test_the_csv_has_one_row_per_task_and_one_score_column_per_candidate(run):
    rows = list(csv.reader(io.StringIO(run_export_csv(run))))
    header, body = rows[0], rows[1:]
    assert header == [
        "task_key",
        "split",
        "candidate_0",
        "candidate_1",
        "candidate_2",
        "candidate_3",
    ]
    assert len(body) == Evaluation.objects.filter(candidate__run=run, candidate__index=0).count()
    stored = {(i, s, k): v for i, s, k, v, _ in _scores(run)}
    for key, split, *scores in body:
        assert [float(x) for x in scores] == [stored[(i, split, key)] for i in range(4)]


def test_a_task_key_that_looks_like_a_formula_is_defused_in_the_csv(run):
    Evaluation.objects.filter(candidate__run=run, task_key="val-000").update(
        task_key='=HYPERLINK("http://x")'
    )
    text = run_export_csv(run)
    assert "'=HYPERLINK" in text and "\n=HYPERLINK" not in text


def _csv_as_a_whole_table(run) -> str:
    """The CSV as a pivot of every evaluation sorted at once (how the export
    was first written): split in declared order then any other, task key by
    code point, one column per candidate by index, missing scores empty."""
    from optimizer.export import _csv_cell, _csv_column
    from optimizer.tasksets.models import Split

    candidates = list(
        run.candidates.order_by("index").values_list(
            "pk", "index", "origin", "parents", "author__username"
        )
    )
    column = {pk: n for n, (pk, *_) in enumerate(candidates)}
    table: dict[tuple[int, str, str], list[str]] = {}
    for cand, key, split, score in Evaluation.objects.filter(candidate__run=run).values_list(
        "candidate_id", "task_key", "split", "score"
    ):
        rank = Split.values.index(split) if split in Split.values else len(Split.values)
        table.setdefault((rank, key, split), [""] * len(candidates))[column[cand]] = repr(score)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["task_key", "split", *(_csv_column(*c[1:]) for c in candidates)])
    for (_, key, split), scores in sorted(table.items()):
        writer.writerow([_csv_cell(key), split, *scores])
    return out.getvalue()


def test_the_streamed_csv_is_the_whole_table_byte_for_byte_with_gaps_and_every_split(
    run, user, other_user
):
    """Rows stream in index order; the file is the one a pivot of the whole run
    gives: held-out and train rows, a task some candidates lack, a candidate
    with no scores, a human candidate's column, keys needing quotes or
    defusing, and another run's evaluations on the same keys left out."""
    other = recorded_run(other_user, candidates=3, val_tasks=5, holdout_tasks=2, task_prefix="val-")
    first = run.candidates.get(index=0)
    Evaluation.objects.filter(
        candidate__run=run, task_key="val-001", candidate__index__gt=1
    ).delete()
    Evaluation.objects.filter(candidate__run=run, task_key="val-003", candidate__index=0).delete()
    Evaluation.objects.filter(candidate__run=run, candidate__index=2).delete()
    for key, split, score in [
        ("train-b", "train", 0.25),
        ("train-a", "train", 1.0),
        ('with "quotes", commas', "val", 0.1),
        ("-1 minus", "holdout", 0.0),
        ("ü umlaut", "val", 1 / 3),
        ("Zebra", "val", 0.5),
        ("not a known split", "dev", 0.75),
        ("after every known split", "zz", 0.5),
        ("between two", "test", 0.25),
    ]:
        Evaluation.objects.create(
            candidate=first, run=run, task_key=key, split=split, score=score, verdict="pass"
        )
    Candidate.objects.filter(run=run, index=3).update(origin="human", author=user, parents=[1])
    text = run_export_csv(run)
    assert text == _csv_as_a_whole_table(run)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][-1] == "candidate_3 (human: edited from 1 by alice)"
    assert [row[:2] for row in rows[1:3]] == [["train-a", "train"], ["train-b", "train"]]
    assert [row[1] for row in rows[-3:]] == ["zz", "test", "dev"]  # other splits last, by key
    assert ["'-1 minus", "holdout", "0.0", "", "", ""] in rows
    gap = next(row for row in rows if row[0] == "val-001")
    assert gap[2] and gap[3] and gap[4:] == ["", ""]
    assert all(row[4] == "" for row in rows[1:])  # candidate 2 has no scores
    assert len(rows) == 1 + 2 + 5 + 3 + 3 + 1 + 3  # header, train, val, extras, holdout, others
    assert other.candidates.count() == 3


def _broken(run, mutate):
    data = json.loads(json.dumps(run_export(run)))
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(format="something.else"), "format"),
        (lambda d: d["run"].update(status="exploded"), "run.status"),
        (
            lambda d: d["candidates"][1]["evaluations"][2].update(score=1.5),
            "candidates.1.evaluations.2.score",
        ),
        (
            lambda d: d["candidates"][2]["evaluations"][0].update(verdict="great"),
            "candidates.2.evaluations.0.verdict",
        ),
        (lambda d: d["candidates"][3].update(parents=[42]), "candidates.3.parents"),
        (lambda d: d["candidates"][1].update(index=0), "candidates.1.index"),
        (lambda d: d["candidates"][0].pop("components"), "candidates.0.components"),
        (
            lambda d: d["candidates"][0].update(run_code="__import__('os').system('true')"),
            "candidates.0.run_code",
        ),
        (lambda d: d["run"].update(best_index=99), "run.best_index"),
        (lambda d: d["events"][1].update(seq=1), "events.1.seq"),
        (lambda d: d["lift"]["val"].update(improved=-1), "lift.val.improved"),
        (
            lambda d: d["candidates"][0]["components"].update(system_prompt="x" * 200_001),
            "candidates.0.components.system_prompt",
        ),
    ],
)
def test_a_broken_file_is_rejected_naming_the_field_and_nothing_is_saved(
    run, other_user, mutate, field
):
    data = _broken(run, mutate)
    counts = (
        Run.objects.count(),
        Candidate.objects.count(),
        Evaluation.objects.count(),
        RunEvent.objects.count(),
    )

    with pytest.raises(RunImportError) as err:
        run_import(owner=other_user, data=data)

    assert str(err.value).startswith(field), str(err.value)
    assert (
        Run.objects.count(),
        Candidate.objects.count(),
        Evaluation.objects.count(),
        RunEvent.objects.count(),
    ) == counts


def test_a_file_that_is_not_an_object_is_rejected_with_a_sentence(other_user):
    with pytest.raises(RunImportError, match="JSON object"):
        run_import(owner=other_user, data=[1, 2, 3])


def test_a_run_exported_while_running_is_imported_as_stopped(run, other_user):
    data = _broken(run, lambda d: d["run"].update(status="running"))
    assert run_import(owner=other_user, data=data).status == "stopped"


@pytest.fixture
def demo_run(user, settings, tmp_path, monkeypatch):
    from optimizer.runs import runner

    settings.RUNS_DIR = tmp_path / "runs"
    monkeypatch.setattr(
        runner, "HEARTBEAT_SECONDS", 3600
    )  # see tests/optimizer/runs/test_runner.py
    return run_demo_with_holdout(user)


def _evaluations(run):
    return sorted(
        Evaluation.objects.filter(candidate__run=run).values_list(
            "candidate__index",
            "split",
            "task_key",
            "score",
            "verdict",
            "passed",
            "output",
            "feedback",
            "result",
            "attempts",
        )
    )


@pytest.mark.django_db(transaction=True)
def test_a_run_made_by_the_real_runner_round_trips_through_the_download_and_upload_with_identical_scores(
    demo_run, user_client, other_client, other_user
):
    body = b"".join(
        user_client.get(reverse("compare:export_json", args=[demo_run.pk])).streaming_content
    )
    response = other_client.post(
        reverse("compare:import"), {"file": SimpleUploadedFile("run.json", body)}
    )

    imported = Run.objects.get(owner=other_user)
    assert response.status_code == 302 and imported.imported
    assert (
        demo_run.candidates.count() >= 3
        and Evaluation.objects.filter(candidate__run=demo_run, split="holdout").exists()
    )
    assert _evaluations(imported) == _evaluations(demo_run)
    fields = (
        "index",
        "parents",
        "origin",
        "iteration",
        "metric_calls",
        "components",
        "val_score",
        "objective_scores",
        "on_front",
        "reflection",
    )
    assert list(imported.candidates.order_by("index").values_list(*fields)) == list(
        demo_run.candidates.order_by("index").values_list(*fields)
    )
    assert (
        imported.best_candidate.index,
        imported.seed_score,
        imported.best_score,
        imported.budget_used,
    ) == (
        demo_run.best_candidate.index,
        demo_run.seed_score,
        demo_run.best_score,
        demo_run.budget_used,
    )
    assert list(imported.events.order_by("seq").values_list("seq", "type", "payload")) == list(
        demo_run.events.order_by("seq").values_list("seq", "type", "payload")
    )
    # The CSV of the copy is the CSV of the original, column for column.
    assert b"".join(
        user_client.get(reverse("compare:export_csv", args=[demo_run.pk])).streaming_content
    ) == b"".join(
        other_client.get(reverse("compare:export_csv", args=[imported.pk])).streaming_content
    )


def test_an_unnamed_run_from_a_long_named_task_set_gets_a_name_that_fits_the_column(
    run, other_user
):
    data = _broken(run, lambda d: d["run"].update(name="", task_set="T" * 500))
    imported = run_import(owner=other_user, data=data)
    assert imported.name == ("Imported " + "T" * 500)[:200]


class _Trickle(io.BytesIO):
    """A file that hands out at most `size` bytes a read: every value straddles reads."""

    def __init__(self, data: bytes, size: int):
        super().__init__(data)
        self.size = size

    def read(self, n=-1):
        return super().read(self.size)


def test_an_import_read_a_few_bytes_at_a_time_gives_the_same_run(run, other_user):
    body = b"".join(run_export_stream(run))
    imported = run_import_stream(owner=other_user, raw=_Trickle(b"\xef\xbb\xbf" + body, 7))

    assert _scores(imported) == _scores(run) and imported.last_seq == run.last_seq
    assert list(imported.events.values_list("seq", "type", "payload")) == list(
        run.events.values_list("seq", "type", "payload")
    )
    assert imported.best_candidate.index == run.best_candidate.index


def test_a_bad_last_event_names_its_line_and_saves_none_of_the_candidates_read_before_it(
    run, other_user
):
    body = json.dumps(run_export(run), indent=1).encode()
    last = body.rindex(b'"seq": ')
    broken = body[:last] + b'"seq": "seven"' + body[last + len(f'"seq": {run.last_seq}') :]
    bad_line = broken[: broken.index(b'"seven"')].count(b"\n") + 1
    wrong_json = body.replace(b'"events": [', b'"events": [}', 1)
    counts = (
        Run.objects.count(),
        Candidate.objects.count(),
        Evaluation.objects.count(),
        RunEvent.objects.count(),
    )

    with pytest.raises(RunImportError) as bad_value:
        run_import_stream(owner=other_user, raw=_Trickle(broken, 1000))
    with pytest.raises(RunImportError) as bad_syntax:
        run_import_stream(owner=other_user, raw=_Trickle(wrong_json, 1000))

    assert str(bad_value.value).startswith(
        f"events.{run.events.count() - 1}.seq: Input should be a valid integer"
    )
    syntax_line = wrong_json[: wrong_json.index(b"[}")].count(b"\n") + 1
    assert f"file: not valid JSON at line {syntax_line}, column" in str(bad_syntax.value)
    assert bad_line > 100  # the error came after every candidate was written (and rolled back)
    assert (
        Run.objects.count(),
        Candidate.objects.count(),
        Evaluation.objects.count(),
        RunEvent.objects.count(),
    ) == counts


def test_an_import_holds_one_candidate_in_memory_not_the_file(run, other_user, tmp_path):
    import tracemalloc

    template = run_export(run)

    def peak_importing(candidates: int) -> tuple[int, int]:
        document = {
            **template,
            "run": {**template["run"], "best_index": 0, "chosen_index": None},
            "candidates": [
                {
                    **template["candidates"][0],
                    "index": i,
                    "parents": [0] if i else [],
                    "evaluations": [
                        {**e, "output": f"{i} " + "the refund window is 30 days " * 400}
                        for e in template["candidates"][0]["evaluations"]
                    ],
                }
                for i in range(candidates)
            ],
        }
        path = tmp_path / f"{candidates}.json"
        path.write_text(json.dumps(document))
        del document
        tracemalloc.start()
        with path.open("rb") as raw:
            imported = run_import_stream(owner=other_user, raw=raw)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert imported.candidates.count() == candidates
        return path.stat().st_size, peak

    small_size, small_peak = peak_importing(30)
    big_size, big_peak = peak_importing(150)

    assert big_size > 4 * small_size and big_size > 10e6
    # Flat: five times the file, about the same memory (one candidate and a read chunk).
    assert big_peak < 1.5 * small_peak and big_peak < big_size / 2, (
        small_size,
        small_peak,
        big_size,
        big_peak,
    )


def test_an_import_the_file_refuses_says_why_not_that_the_json_is_invalid(user, user_client):
    """A RunImportError is a ValueError: the import page named it "not valid JSON"."""
    run = recorded_run(owner=user, candidates=2, val_tasks=2)
    document = json.loads(b"".join(run_export_stream(run)))
    document["run"]["verifier_specs"][0]["id"] = ""
    upload = SimpleUploadedFile(
        "run.json", json.dumps(document).encode(), content_type="application/json"
    )
    response = user_client.post("/runs/import/", {"file": upload})
    assert response.status_code == 400
    text = response.content.decode()
    assert "run.verifier_specs.0.id" in text and "not valid JSON" not in text


def test_a_candidate_a_user_wrote_is_exported_as_human_with_its_author(run, user, other_user):
    """JSON: origin human and the author's name; CSV: its column says who edited it
    from which candidate; the file imports back elsewhere (where the name is no user)."""
    Candidate.objects.filter(run=run, index=2).update(origin="human", author=user, parents=[1])
    document = run_export(run)
    human = next(c for c in document["candidates"] if c["index"] == 2)
    assert (human["origin"], human["author"], human["parents"]) == ("human", "alice", [1])
    assert all(c["author"] is None for c in document["candidates"] if c["index"] != 2)
    header = next(csv.reader(io.StringIO(run_export_csv(run))))
    assert "candidate_2 (human: edited from 1 by alice)" in header
    assert "candidate_1" in header
    copy_ = run_import(owner=other_user, data=document)
    assert copy_.candidates.get(index=2).origin == "human"

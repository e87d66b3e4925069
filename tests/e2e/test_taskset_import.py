import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS, E2E_USERNAME, Api

DATASETS = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"


def test_a_broken_csv_is_refused_by_line_then_an_alpaca_file_is_previewed_and_saved_only_on_confirm(
    page, frontier_server
):
    page.goto("/tasksets/import/")
    page.get_by_label("Task set name").fill("Alpaca tips")
    page.get_by_label("File (.jsonl, .json, .yaml, .csv or .tsv)").set_input_files(
        str(DATASETS / "broken-unterminated-quote.csv")
    )
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".problems")).to_contain_text(
        "broken-unterminated-quote.csv line 3: unterminated quote: the quoted value that starts on this line never ends"
    )
    expect(page.get_by_role("button", name="Confirm import")).to_be_disabled()

    page.get_by_role("link", name="Choose another file").click()
    page.get_by_label("Task set name").fill("Alpaca tips")
    page.get_by_label("File (.jsonl, .json, .yaml, .csv or .tsv)").set_input_files(
        str(DATASETS / "alpaca.jsonl")
    )
    page.get_by_role("button", name="Preview").click()
    rows = page.get_by_role("table", name="Rows as they will be stored").locator("tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.nth(1)).to_contain_text("Translate the sentence into French.")
    expect(page.locator('[data-field="split-counts"]')).to_contain_text(
        "2 train · 2 val · 0 holdout"
    )
    expect(page.locator('[data-field="split-rule"]')).to_have_text(
        "4 rows without a split dealt by the rule: 60/40/0 below 10 rows, seed 0 (2 train, 2 val)."
    )
    # Alpaca's answer column becomes `expected`, which only row verifiers read.
    expect(page.locator('[data-field="read-by"]')).to_contain_text(
        "expected ← output: read only by row verifiers"
    )
    # Nothing saved yet: the task set list does not know the set.
    listing = page.context.new_page()
    listing.goto("/tasksets/")
    expect(listing.get_by_text("Alpaca tips")).to_have_count(0)
    listing.close()

    page.get_by_label("train", exact=True).fill("0.75")
    page.get_by_label("val", exact=True).fill("0.25")
    page.get_by_role("button", name="Update preview").click()
    expect(page.locator('[data-field="split-counts"]')).to_contain_text(
        "3 train · 1 val · 0 holdout"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "taskset-import-preview.png"), full_page=True)
    page.get_by_role("button", name="Confirm import").click()
    expect(
        page.get_by_text(
            "Imported alpaca.jsonl into Alpaca tips: 4 new, 0 updated, 0 unchanged; 4 rows "
            "without a split dealt as asked: train 0.75, val 0.25, seed 0 (3 train, 1 val)."
        )
    ).to_be_visible()
    expect(page.locator("table.data tbody tr")).to_have_count(4)
    expect(page).to_have_url(re.compile(r"/tasksets/\d+/$"))


def test_a_script_imports_and_dry_runs_over_plain_http_with_a_bearer_token(frontier_server):
    token = (
        frontier_server.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model\n"
            "from dashboard.account_services import api_token_create\n"
            f"print(api_token_create(user=get_user_model().objects.get(username={E2E_USERNAME!r}), name='e2e-import')[1])",
        )
        .stdout.strip()
        .splitlines()[-1]
    )

    def call(body):
        request = urllib.request.Request(
            f"{frontier_server.url}/api/tasksets/import",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    content = (DATASETS / "semicolon.csv").read_bytes().decode("utf-8")
    status, report = call(
        {"name": "Planets", "filename": "semicolon.csv", "content": content, "dry_run": True}
    )
    assert status == 200 and report["ok"] is True and report["delimiter"] == ";"
    assert [r["input"] for r in report["rows"]][:1] == ["Largest planet; by mass?"]
    status, broken = call(
        {
            "name": "Planets",
            "filename": "ragged.csv",
            "content": (DATASETS / "broken-ragged.csv").read_text(),
        }
    )
    assert status == 400 and broken["problems"][0]["field"] == "ragged.csv line 3"
    assert broken["problems"][0]["message"].startswith("row: 4 values but the header has 3 columns")
    status, done = call({"name": "Planets", "filename": "semicolon.csv", "content": content})
    assert (status, done["created"]) == (201, 3)


def test_the_launch_form_offers_split_now_for_a_set_with_no_val_tasks(
    page, frontier_server, tmp_path
):
    rows = tmp_path / "all-train.yaml"
    rows.write_text(
        "".join(
            f"- {{task_id: q{i}, input: 'What is {i} + {i}?', split: train, "
            f"verifier: {{kind: in_process, fn_name: contains, expected: '{2 * i}'}}}}\n"
            for i in range(1, 6)
        )
    )
    frontier_server.manage(
        "tasks", "import", str(rows), "--set", "All train", "--owner", E2E_USERNAME
    )
    page.goto("/runs/new/")
    page.get_by_label("Task set").select_option(label="All train (5 tasks)")
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.locator('[data-problems-for="splits"]')).to_contain_text(
        'task set "All train" has no tasks in split "val"'
    )
    page.get_by_role("button", name=re.compile("^Split now")).click()
    expect(page.locator('[data-field="dry-run-result"]')).to_have_text(
        "dry run passed: ready to launch"
    )
    expect(page.locator('[data-problems-for="splits"]')).to_be_hidden()


def test_a_jsonl_error_names_the_column_python_names_for_that_row(frontier_server, tmp_path):
    """A row cut short in the middle of a file (a BOM, CRLF line breaks, a tab
    and a multi-byte character before the error, a blank line at the end) is
    reported by the CLI and by a token script at the column `json.loads` of
    that row gives (47), not at "column 1" of the line break after it."""
    bad = '{"input":\t"Où est la gare ?", "answer": "Nord"'
    with pytest.raises(json.JSONDecodeError) as python:
        json.loads(bad)
    assert python.value.colno == 47
    rows = ['{"input": "What is 2 + 2?", "answer": "4"}', '{"input": "Capital of Peru?"}']
    content = "\ufeff" + "\r\n".join([*rows, bad, '{"input": "ok"}', ""]) + "\r\n"
    path = tmp_path / "cut.jsonl"
    path.write_bytes(content.encode("utf-8"))
    expected = f"cut.jsonl line 3: invalid JSON ({python.value.msg} at column 47)"

    cli = frontier_server.manage(
        "tasks", "import", str(path), "--set", "Cut short", "--owner", E2E_USERNAME, check=False
    )
    assert cli.returncode == 2 and expected in cli.stderr, cli.stderr
    status, body, _ = Api(frontier_server.url, frontier_server.new_token()).call(
        "POST",
        "/api/tasksets/import",
        {"name": "Cut short", "filename": "cut.jsonl", "content": content, "dry_run": True},
    )
    assert status == 200 and [f"{p['field']}: {p['message']}" for p in body["problems"]] == [
        expected
    ], body


def test_a_dry_run_warns_when_no_chosen_verifier_reads_the_imported_answer_column(
    frontier_server,
):
    """Alpaca's `output` column is imported as `expected`, which only row
    verifiers read: the import preview says what reads it, a launch's dry run
    with only a native verifier warns (naming the field and the set), and with
    an in_process verifier that compares the output with it, it does not."""
    api = Api(frontier_server.url, frontier_server.new_token())
    body = {
        "name": "Alpaca answers",
        "filename": "alpaca.jsonl",
        "content": (DATASETS / "alpaca.jsonl").read_text(),
    }
    status, preview, _ = api.call("POST", "/api/tasksets/import", {**body, "dry_run": True})
    assert status == 200 and preview["mapping"]["expected"] == ["output"], preview
    assert preview["read_by"]["expected"].startswith("read only by row verifiers"), preview
    status, imported, _ = api.call("POST", "/api/tasksets/import", body)
    assert status == 201, imported
    for spec in (
        {"id": "alpaca-polite", "checks": [{"type": "min_length", "params": {"value": 2}}]},
        {"id": "alpaca-exact", "kind": "in_process", "fn_name": "exact_match"},
    ):
        status, created, _ = api.call("POST", "/api/verifiers/", {"spec": spec})
        assert status == 201, created
    config = {
        "task_set_id": imported["id"],
        "verifier_ids": ["alpaca-polite"],
        "budget": {"max_metric_calls": 40},
        "task_lm": {"provider": "demo", "model": "demo-task"},
    }
    status, dry, _ = api.call("POST", "/api/runs/dry-run", {"config": config})
    ignored = [w for w in dry["warnings"] if "carry expected" in w]
    assert status == 200 and dry["ok"] and len(ignored) == 1, dry
    assert ignored[0].startswith(
        'tasks: 4 task(s) of task set "Alpaca answers" carry expected (an answer column such as '
        "output or answer is imported as expected) but no chosen verifier reads it"
    ), ignored
    config["verifier_ids"] = ["alpaca-polite", "alpaca-exact"]
    status, dry, _ = api.call("POST", "/api/runs/dry-run", {"config": config})
    assert status == 200 and not [w for w in dry["warnings"] if "carry expected" in w], dry


def test_a_jsonl_file_named_json_and_an_unterminated_string_get_plain_messages(
    frontier_server, tmp_path
):
    """One row object per line saved as `.json` is told to use the JSONL name
    (not "a JSON object needs its rows in a list"); an unterminated string says
    where it starts once ("starting at column 11", not "at at")."""
    rows = '{"input": "What is 2 + 2?"}\n{"input": "Capital of Peru?"}\n'
    (tmp_path / "rows.json").write_text(rows)
    (tmp_path / "open.jsonl").write_text('{"input": "x"}\n{"input": "abc\n')
    for name, message in (
        (
            "rows.json",
            "rows.json line 2: a second JSON object after the first: one row object per line is "
            "JSONL; name the file .jsonl (or choose the format jsonl)",
        ),
        (
            "open.jsonl",
            "open.jsonl line 2: invalid JSON (Unterminated string starting at column 11)",
        ),
    ):
        cli = frontier_server.manage(
            "tasks", "import", str(tmp_path / name), "--set", "Plain", "--dry-run", check=False
        )
        assert cli.returncode == 2 and message in cli.stderr, cli.stderr


def test_the_launch_forms_dry_run_says_no_chosen_verifier_reads_the_answers(
    page, frontier_server, tmp_path
):
    """In the browser too: tasks whose answers (`expected`, from Alpaca's
    `output`) only row verifiers read, launched with a native verifier, get a
    warning from the form's dry run naming the field and the set."""
    frontier_server.manage(
        "tasks",
        "import",
        str(DATASETS / "alpaca.jsonl"),
        "--set",
        "Alpaca form",
        "--owner",
        E2E_USERNAME,
    )
    spec = tmp_path / "length.json"
    spec.write_text(
        json.dumps(
            {
                "id": "alpaca-length",
                "name": "Alpaca length",
                "checks": [{"type": "min_length", "params": {"value": 2}}],
            }
        )
    )
    frontier_server.manage("verifiers", "create", str(spec), "--owner", E2E_USERNAME)
    page.goto("/runs/new/")
    page.get_by_label("Task set").select_option(label="Alpaca form (4 tasks)")
    page.get_by_label("Alpaca length").check()
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.locator('[data-problems-for="budget.warning"]')).to_contain_text(
        'tasks: 4 task(s) of task set "Alpaca form" carry expected'
    )

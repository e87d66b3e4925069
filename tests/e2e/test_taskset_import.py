import json
import re

from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS


def test_a_broken_file_is_refused_with_line_and_field_then_a_good_one_is_imported_and_split(page, tmp_path):
    rows = [{"task_id": f"t{i}", "input": f"Ticket {i}: the printer on floor {i} is jammed"} for i in range(1, 11)]
    broken = tmp_path / "tickets.jsonl"
    broken.write_text("\n".join(json.dumps(r) for r in rows[:2]) + '\n{"task_id": "t3", "input": "x", "verifier": {"kind": "in_process", "fn_name": "foo"}}\n')
    page.goto("/tasksets/import/")
    page.get_by_label("Task set name").fill("Printer tickets")
    page.get_by_label("File (.jsonl, .yaml/.yml or .csv)").set_input_files(str(broken))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("heading", name="Nothing was imported")).to_be_visible()
    expect(page.locator(".problems")).to_contain_text('tickets.jsonl line 3: verifier.fn_name: unknown fn "foo"')

    good = tmp_path / "tickets.jsonl"
    good.write_text("\n".join(json.dumps(r) for r in rows))
    page.get_by_label("File (.jsonl, .yaml/.yml or .csv)").set_input_files(str(good))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("Imported tickets.jsonl into Printer tickets: 10 new, 0 updated, 0 unchanged.")).to_be_visible()

    page.get_by_label("train").fill("0.7")
    page.get_by_label("val", exact=True).fill("0.3")
    page.get_by_role("button", name="Split all tasks").click()
    expect(page.get_by_text("Split with seed 0: 7 train, 3 val.")).to_be_visible()
    page.get_by_label("Search tasks").fill("floor 10")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("table.data tbody tr")).to_have_count(1)
    page.get_by_role("link", name="t10").click()
    expect(page).to_have_url(re.compile(r"/tasksets/\d+/tasks/\d+/$"))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "taskset-task-edit.png"), full_page=True)

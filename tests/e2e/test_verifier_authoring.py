import json
import re

from playwright.sync_api import expect

from tests.e2e.conftest import ARTIFACTS


def test_a_user_writes_a_verifier_sees_the_regex_error_inline_fixes_it_tries_it_and_saves_it(page):
    page.goto("/verifiers/new/")
    form = page.locator("#spec-form")
    form.get_by_label("Id", exact=True).fill("greeting-check")
    form.get_by_label("Name", exact=True).fill("Greeting <b>check</b>")
    form.get_by_role("button", name="Add a check").click()
    second = form.locator(".check-card").nth(1)
    second.get_by_label("Type").select_option("regex")
    pattern = second.get_by_label("pattern")
    pattern.fill("^(Hello")

    error = page.locator('[data-error-for="checks[1].params.pattern"]')
    expect(error).to_contain_text("checks[1].params.pattern: invalid regular expression")
    expect(pattern).to_have_class(re.compile("invalid"))
    # The raw JSON follows the form.
    expect(page.locator("#spec-json")).to_have_value(re.compile(r'"pattern": "\^\(Hello"'))

    pattern.fill("^Hello")
    expect(error).to_have_count(0)
    expect(page.locator("#lint-status")).to_have_text("Valid")

    output = page.get_by_label("Output to score")
    output.fill("Hi there")
    expect(page.get_by_test_id("try-score")).to_have_text("0.500")
    expect(page.get_by_test_id("try-verdict")).to_have_text("fail")
    expect(page.get_by_test_id("try-passed")).to_have_text(
        'verifier "Greeting <b>check</b>" failed (0.500 < passThreshold 1)'
    )
    breakdown = page.locator("table.breakdown")
    expect(breakdown.locator("tr", has_text="greeting-check/regex-hello")).to_contain_text(
        'output does not match pattern "^Hello"'
    )
    expect(page.get_by_test_id("try-feedback")).to_contain_text("greeting-check/regex-hello")

    output.fill("Hello there")
    expect(page.get_by_test_id("try-score")).to_have_text("1.000")
    expect(page.get_by_test_id("try-passed")).to_have_text(
        'verifier "Greeting <b>check</b>" passed (1.000 ≥ passThreshold 1)'
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "verifier-editor-try-it.png"), full_page=True)

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(re.compile(r"/verifiers/greeting-check/$"))
    expect(page.get_by_text("Created verifier greeting-check (version 1).")).to_be_visible()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Verifiers").click()
    page.get_by_role("searchbox").fill("greeting")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name="Greeting <b>check</b>")).to_be_visible()


def test_editing_the_json_updates_the_form_and_a_json_typo_is_reported(page):
    page.goto("/verifiers/new/")
    spec_json = page.locator("#spec-json")
    spec_json.fill(
        '{"id": "len", "checks": [{"id": "short", "type": "max_length", "params": {"value": 5}}]}'
    )
    expect(page.locator("#spec-form").get_by_label("value")).to_have_value("5")
    spec_json.fill('{"id": "len", "checks": [')
    expect(page.locator("#lint-problems")).to_contain_text("JSON:")


def test_each_param_gets_the_input_its_json_schema_type_asks_for(page):
    page.goto("/verifiers/new/")
    form = page.locator("#spec-form")
    card = form.locator(".check-card").first
    card.get_by_label("Type").select_option("contains")
    expect(card.get_by_label("caseSensitive (optional)")).to_have_attribute("type", "checkbox")
    card.get_by_label("Type").select_option("min_length")
    value = card.get_by_label("value")
    expect(value).to_have_attribute("type", "number")
    expect(value).to_have_attribute("min", "0")
    card.get_by_label("Type").select_option("json_keys")
    card.get_by_label("requiredKeys, comma-separated").fill("name, room")
    expect(page.locator("#spec-json")).to_have_value(
        re.compile(r'"requiredKeys": \[\s*"name",\s*"room"\s*\]')
    )


def test_a_misspelled_check_type_is_warned_about_next_to_its_field_until_it_is_fixed(page):
    page.goto("/verifiers/new/")
    page.locator("#spec-json").fill(
        '{"id": "typo", "checks": [{"id": "json", "type": "json_valdi"}]}'
    )
    warning = page.locator('[data-warning-for="checks[0].type"]')
    expect(warning).to_contain_text(
        'unknown check type "json_valdi" (did you mean "json_valid"? scoring skips this check)'
    )
    expect(page.locator("#lint-status")).to_have_text("Valid · 1 warning")
    expect(page.locator("[data-error-for]")).to_have_count(0)
    page.get_by_label("Output to score").fill("not json")
    expect(page.locator("table.breakdown")).to_contain_text(
        'unknown check type "json_valdi" (skipped)'
    )
    page.locator("#spec-form").get_by_label("Type").select_option("json_valid")
    expect(warning).to_have_count(0)
    expect(page.locator("#lint-status")).to_have_text("Valid")


def test_try_it_scores_against_a_task_picked_from_a_task_set(page, frontier_server):
    frontier_server.manage("demo_setup", "--no-run")
    page.goto("/verifiers/refund-policy-quality/edit/")
    page.get_by_label("Task set").select_option(label="Refund tickets (20)")
    page.get_by_label("Task", exact=True).select_option(index=1)
    expect(page.locator("#try-task-json")).to_have_value(re.compile(r'"task_id": "rt-01"'))
    output = page.get_by_label("Output to score")
    output.fill("So sorry! We can send you a gift card right away.")
    feedback = page.get_by_test_id("try-feedback")
    expect(feedback).to_contain_text("offer a full refund")
    expect(feedback).to_contain_text("do not offer a gift card")
    expect(page.get_by_test_id("try-score")).to_have_text("0.000")
    output.fill("You will get a full refund. What is your order number?")
    expect(page.get_by_test_id("try-score")).to_have_text("1.000")
    expect(page.get_by_test_id("try-verdict")).to_have_text("pass")
    # Pasted bare metadata counts as the task's metadata.
    page.locator("#try-task-json").fill(
        '{"expectations": {"mustMention": [{"text": "apology", "message": "open with an apology"}]}}'
    )
    expect(page.get_by_test_id("try-feedback")).to_contain_text("open with an apology")
    page.screenshot(path=str(ARTIFACTS / "verifier-try-it-with-task.png"), full_page=True)


def test_saving_a_misspelled_check_type_asks_first_and_the_saved_page_says_it_again(page):
    page.goto("/verifiers/new/")
    page.locator("#spec-json").fill(
        '{"id": "typo-save", "name": "Typo", "checks": [{"id": "json", "type": "json_validd"}]}'
    )
    expect(page.locator("#lint-status")).to_have_text("Valid · 1 warning")
    asked = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_timeout(500)
    assert page.url.endswith("/verifiers/new/")  # not saved
    assert (
        len(asked) == 1
        and 'unknown check type "json_validd" (did you mean "json_valid"?' in asked[0]
    ), asked
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(re.compile(r"/verifiers/typo-save/$"))
    expect(
        page.get_by_text('Saved with a warning: checks[0].type: unknown check type "json_validd"')
    ).to_be_visible()


# A verifier whose checks weigh 4 and 1: an output with "refund" and no apology
# scores 0.8, a pass by the default verdict thresholds, below a passThreshold of 1.
TWO_JUDGMENTS = {
    "id": "two-judgments",
    "name": "Refund first",
    "checks": [
        {"id": "refund", "type": "contains", "weight": 4, "params": {"value": "refund"}},
        {"id": "apology", "type": "contains", "params": {"value": "sorry"}},
    ],
}


def test_try_it_shows_the_verdict_by_its_thresholds_and_passed_by_the_pass_threshold(page):
    """The two judgments of docs/verifier-semantics.md "Passed and verdict", each
    with the numbers that decide it: the verdict by the run thresholds the panel
    shows (editable for the preview), passed / failed by the Pass threshold."""
    page.goto("/verifiers/new/")
    page.locator("#spec-json").fill(json.dumps(TWO_JUDGMENTS))
    page.get_by_label("Output to score").fill("You get a refund.")
    judgments = page.get_by_test_id("try-judgments")
    expect(judgments.locator("li").first).to_have_text(
        "score 0.800 · verdict pass (run thresholds: pass ≥ 0.8, borderline ≥ 0.6)"
    )
    passed = page.get_by_test_id("try-passed")
    expect(passed).to_have_text('verifier "Refund first" failed (0.800 < passThreshold 1)')
    page.locator("#spec-form").get_by_label("Pass threshold").fill("0.75")
    expect(passed).to_have_text('verifier "Refund first" passed (0.800 ≥ passThreshold 0.75)')
    expect(page.get_by_test_id("try-verdict")).to_have_text("pass")  # the verdict did not move
    page.get_by_label("Verdict pass ≥").fill("0.9")
    expect(judgments.locator("li").first).to_have_text(
        "score 0.800 · verdict borderline (run thresholds: pass ≥ 0.9, borderline ≥ 0.6)"
    )
    expect(passed).to_have_text('verifier "Refund first" passed (0.800 ≥ passThreshold 0.75)')
    page.screenshot(path=str(ARTIFACTS / "verifier-two-judgments.png"), full_page=True)


def test_a_test_case_expecting_failed_flips_when_the_pass_threshold_changes(page):
    """A test case states what it expects of each judgment; changing the Pass
    threshold re-judges its passed expectation at once, the verdict's stays."""
    page.goto("/verifiers/new/")
    page.locator("#spec-json").fill(json.dumps(TWO_JUDGMENTS))
    page.get_by_label("Output to score").fill("You get a refund.")
    expect(page.get_by_test_id("try-verdict")).to_have_text("pass")
    # The selects follow the result: verdict pass, verifier failed.
    expect(page.get_by_label("Expected verdict")).to_have_value("pass")
    expect(page.get_by_label("Expected of this verifier")).to_have_value("failed")
    page.get_by_label("Test case name").fill("refund, no apology")
    page.get_by_role("button", name="Save as test case").click()
    row = page.locator("tr[data-case='0']")
    expect(row.get_by_test_id("case-expected")).to_have_text("verdict passverifier failed")
    expect(row.get_by_test_id("case-verdict")).to_have_text("✓ verdict pass")
    expect(row.get_by_test_id("case-passed")).to_have_text("✓ verifier failed")
    expect(page.locator("#suite-summary")).to_have_text("1 of 1 as expected")

    page.locator("#spec-form").get_by_label("Pass threshold").fill("0.8")
    expect(row.get_by_test_id("case-passed")).to_have_text("✗ verifier passed")
    expect(row.get_by_test_id("case-verdict")).to_have_text("✓ verdict pass")
    expect(page.locator("#suite-summary")).to_have_text("0 of 1 as expected")
    page.locator("#spec-form").get_by_label("Pass threshold").fill("1")
    expect(page.locator("#suite-summary")).to_have_text("1 of 1 as expected")

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(re.compile(r"/verifiers/two-judgments/$"))
    page.goto("/verifiers/two-judgments/edit/")
    expect(page.locator("#suite-summary")).to_have_text("1 of 1 as expected")


def test_a_new_check_is_named_after_its_type_and_argument_until_the_user_names_it(page):
    """GEPA's feedback quotes check ids ("verifier/check: reason"), so a new
    check's id says what it checks (not "check-2"): derived from its type and
    short argument, unique in the verifier, derived again when either changes,
    the user's own once they type a name, and the spec's ids never change."""
    page.goto("/verifiers/new/")
    form = page.locator("#spec-form")
    form.get_by_label("Id", exact=True).fill("named-checks")
    form.get_by_role("button", name="Add a check").click()
    card = form.locator(".check-card").nth(1)
    name = card.get_by_label("Check name")
    expect(name).to_be_focused()
    expect(name).to_have_value("contains")
    card.get_by_label("value").fill("refund")
    expect(name).to_have_value("contains-refund")
    card.get_by_label("Type").select_option("regex")
    expect(name).to_have_value("regex")
    card.get_by_label("pattern").fill("^Dear")
    expect(name).to_have_value("regex-dear")

    form.get_by_role("button", name="Add a check").click()
    second = form.locator(".check-card").nth(2)
    second.get_by_label("Type").select_option("regex")
    expect(second.get_by_label("Check name")).to_have_value("regex")
    second.get_by_label("pattern").fill(r"\d{3}")  # not words: the type alone, kept unique
    form.get_by_role("button", name="Add a check").click()
    third = form.locator(".check-card").nth(3)
    third.get_by_label("Type").select_option("regex")
    expect(third.get_by_label("Check name")).to_have_value("regex-2")
    third.get_by_label("pattern").fill("[0-9]+")
    expect(third.get_by_label("Check name")).to_have_value("regex-2")

    second.get_by_label("Check name").fill("order-number")
    second.get_by_label("Type").select_option("json_valid")
    expect(second.get_by_label("Check name")).to_have_value("order-number")
    first = form.locator(".check-card").first  # the spec's own check keeps its id
    first.get_by_label("Type").select_option("json_valid")
    expect(first.get_by_label("Check name")).to_have_value("expectations")

    expect(page.locator("#lint-status")).to_have_text("Valid")
    page.get_by_label("Output to score").fill("Hello")
    expect(page.get_by_test_id("try-feedback")).to_contain_text("named-checks/regex-dear:")
    spec = json.loads(page.locator("#spec-json").input_value())
    assert [c["id"] for c in spec["checks"]] == [
        "expectations",
        "regex-dear",
        "order-number",
        "regex-2",
    ]
    assert all(next(iter(check)) == "id" for check in spec["checks"])  # the JSON names it first

"""Money is written the same way on the server (optimizer.runs.budget.format_cost:
exports, the CLI, the first render of a page) and in the browser
(static/js/money.js, tests/js/money.test.mjs): both read these cases."""

import json
from pathlib import Path

import pytest

from optimizer.runs.budget import format_cost

CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "money_cases.json").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['cost']}-{c['pricing']}" for c in CASES])
def test_the_server_writes_money_as_the_browser_does_half_cents_rounded_up(case):
    assert format_cost(case["cost"], case["pricing"]) == case["expected"]

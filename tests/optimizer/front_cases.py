"""Cases of the "on the front" rule, shared by this Python test and Node's test of
static/js/front.js (tests/js/front.test.mjs): tests/fixtures/front_cases.json
holds them as (name, {index: {task: score}}, expected members)."""

import json
from pathlib import Path

_CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "front_cases.json").read_text(
        encoding="utf-8"
    )
)

FRONT_CASES = [
    (
        case["name"],
        {int(index): scores for index, scores in case["candidates"].items()},
        case["expected"],
    )
    for case in _CASES
]

// static/js/money.js: money and token counts as every page writes them; money
// as the server writes it too (optimizer/runs/budget.py format_cost, same cases).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { money, tokens } from "../../static/js/money.js";

const CASES = JSON.parse(readFileSync(new URL("../fixtures/money_cases.json", import.meta.url), "utf-8"));

for (const { cost, pricing, expected } of CASES) {
  test(`the browser writes ${cost} (${pricing}) as the server does: ${expected}`, () => {
    assert.equal(money(cost, pricing), expected);
  });
}

test("token counts read in thousands and millions", () => {
  assert.deepEqual([0, 999, 1000, 12345, 2500000, null].map(tokens), ["0", "999", "1.0k", "12.3k", "2.5M", "0"]);
});

// static/js/front.js: the run page's front rule (the server's, optimizer/front.py)
// and the 2-D front on picked axes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { frontMembers, nonDominated } from "../../static/js/front.js";

// The cases tests/optimizer/test_front.py checks the server's rule with.
const CASES = JSON.parse(readFileSync(new URL("../fixtures/front_cases.json", import.meta.url), "utf-8"));

for (const { name, candidates, expected } of CASES) {
  test(`the browser's front rule is the server's: ${name}`, () => {
    const tasks = [...new Set(Object.values(candidates).flatMap((perTask) => Object.keys(perTask)))].sort();
    const rows = Object.entries(candidates).map(([index, perTask]) => [Number(index), tasks.map((t) => perTask[t] ?? null)]);
    assert.deepEqual(frontMembers(rows), expected);
  });
}

test("the front does not depend on the order candidates arrive in", () => {
  const rows = [[2, [0.6, 0.6]], [0, [1, 0]], [1, [0, 1]]];
  assert.deepEqual(frontMembers(rows), [0, 1]);
  assert.deepEqual(frontMembers([...rows].reverse()), [0, 1]);
});

test("a candidate scored on no task is never on the front", () => {
  assert.deepEqual(frontMembers([[0, [null, null]], [1, [0.2, null]]]), [1]);
});

const ids = (points) => points.map((p) => p.id).sort((a, b) => a - b);

test("a point beaten on both axes is off the 2-D front", () => {
  const points = [{ id: 0, x: 0.5, y: 0.5 }, { id: 1, x: 0.9, y: 0.9 }, { id: 2, x: 1.0, y: 0.1 }];
  assert.deepEqual(ids(nonDominated(points, true, true)), [1, 2]);
});

test("equal on one axis and worse on the other is dominated; equal on both is a tie that stays", () => {
  const points = [{ id: 0, x: 0.5, y: 0.9 }, { id: 1, x: 0.5, y: 0.4 }, { id: 2, x: 0.5, y: 0.9 }];
  assert.deepEqual(ids(nonDominated(points, true, true)), [0, 2]);
});

test("on a 'less is better' axis (prompt tokens) the shortest prompt wins ties on score", () => {
  const points = [{ id: 0, x: 120, y: 0.8 }, { id: 1, x: 300, y: 0.8 }, { id: 2, x: 400, y: 0.95 }];
  assert.deepEqual(ids(nonDominated(points, false, true)), [0, 2]);
  // The same points with more tokens counted as better: the long prompt alone.
  assert.deepEqual(ids(nonDominated(points, true, true)), [2]);
});

test("no points, no front", () => {
  assert.deepEqual(nonDominated([], true, true), []);
});

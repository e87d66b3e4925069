// static/js/run/state.js: the run page's model, and websocket events merged into it.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  addScoresPage, bestIndex, bestSoFar, controlShown, leadCount, leadCounts, lineageEdges, lineageSummary, mergeEvent, moreRows, recomputeMembers, role, tableRowsNext, unzip, verdictCounts,
} from "../../static/js/run/state.js";
import { candidateNew, loaded } from "./snapshot.mjs";

const NOW = Date.parse("2026-01-01T00:10:00Z");
const seed = { index: 0, val_score: 0.4, scores: [0.4, 0.4], verdict_counts: [1, 1, 0] };

test("a snapshot's candidates keep their order, score rows and verdicts", () => {
  const S = loaded({ candidates: [seed, { index: 1, parents: [0], val_score: 0.6, scores: [0.9, 0.3], verdict_counts: [1, 0, 1] }], members: [0, 1] });
  assert.deepEqual(S.order, [0, 1]);
  assert.deepEqual(S.byIndex.get(1).scores, [0.9, 0.3]);
  assert.deepEqual(verdictCounts(S, 1), [1, 0, 1]);
  assert.deepEqual([...S.members], [0, 1]);
  assert.equal(S.taskColumn.get("t2"), 1);
});

test("a new candidate is added once, in the snapshot's shape, with its scores rounded as the server rounds them", () => {
  const S = loaded({ candidates: [seed] });
  const c = mergeEvent(S, candidateNew(1, { val: 0.75, task_scores: { t1: 0.12345, t2: 1 }, verdicts: { t1: "pass", t2: "fail" } }), NOW);
  assert.equal(c.index, 1);
  assert.deepEqual(S.order, [0, 1]);
  assert.deepEqual(c.scores, [0.123, 1]);
  assert.equal(c.verdicts, "pf");
  assert.equal(c.preview, "[instructions]\nprompt 1");
});

test("a task the new candidate was not scored on is a gap, and an unknown verdict a dash", () => {
  const S = loaded({ candidates: [seed] });
  const c = mergeEvent(S, candidateNew(1, { task_scores: { t2: 0.5 }, verdicts: { t2: "odd" } }), NOW);
  assert.deepEqual(c.scores, [null, 0.5]);
  assert.equal(c.verdicts, "--");
});

test("a long prompt's preview is clipped to the snapshot's limit", () => {
  const S = loaded({ candidates: [seed] });
  const c = mergeEvent(S, candidateNew(1, { components: { instructions: "x".repeat(500) } }), NOW);
  assert.equal(c.preview.length, S.limits.preview);
  assert.ok(c.preview.endsWith("…"));
});

test("a candidate announced again (a resumed run re-announces its seed) changes nothing", () => {
  const S = loaded({ candidates: [seed] });
  const before = S.byIndex.get(0);
  assert.equal(mergeEvent(S, candidateNew(0, { val: 0.99 }), NOW), null);
  assert.deepEqual(S.order, [0]);
  assert.equal(S.byIndex.get(0), before);
});

test("the seed's score is taken from its candidate.new when the snapshot had none", () => {
  const S = loaded();
  mergeEvent(S, candidateNew(0, { val: 0.3 }), NOW);
  assert.equal(S.run.seed_score, 0.3);
  mergeEvent(S, candidateNew(1, { val: 0.8 }), NOW);
  assert.equal(S.run.seed_score, 0.3);
});

test("the best is the server's named best, else the highest val score, first of ties", () => {
  const S = loaded({ candidates: [seed, { index: 1, val_score: 0.7 }, { index: 2, val_score: 0.7 }] });
  assert.equal(bestIndex(S), 1);
  mergeEvent(S, { seq: 1, type: "front.updated", data: { leaders: { t1: [2] }, best_index: 2, best_score: 0.7 } }, NOW);
  assert.equal(bestIndex(S), 2);
  assert.equal(role(S, 2), "best");
  assert.equal(S.run.best_score, 0.7);
  // A best the page has not seen yet (its candidate.new is still on the way) is not used.
  mergeEvent(S, { seq: 2, type: "front.updated", data: { leaders: {}, best_index: 9 } }, NOW);
  assert.equal(bestIndex(S), 1);
});

test("front.updated of a run recorded before deltas replaces the leaders; lead counts and roles follow", () => {
  const S = loaded({ candidates: [seed, { index: 1, val_score: 0.6 }], members: [0, 1], leaders: { t1: [0], t2: [0] } });
  assert.equal(leadCount(S, 0), 2);
  mergeEvent(S, { seq: 1, type: "front.updated", data: { leaders: { t1: [0, 1], t2: [1] } } }, NOW);
  assert.equal(leadCount(S, 0), 1);
  assert.equal(leadCount(S, 1), 2);
  assert.equal(role(S, 0), "front");
  mergeEvent(S, { seq: 2, type: "front.updated", data: { leaders: {} } }, NOW);
  assert.equal(leadCount(S, 1), 0);
});

test("a front.updated delta makes the candidate the only leader where it took a task and a co-leader where it joined", () => {
  const S = loaded({ candidates: [seed, { index: 1, val_score: 0.6 }, { index: 2, val_score: 0.7 }], leaders: { t1: [0], t2: [0], t3: [1] } });
  mergeEvent(S, { seq: 1, type: "front.updated", data: { index: 2, took: ["t1"], joined: ["t3"], added: [2], removed: [], best_index: 2, best_score: 0.7 } }, NOW);
  assert.deepEqual(S.leaders, { t1: [2], t2: [0], t3: [1, 2] });
  assert.equal(leadCount(S, 2), 2);
  // A delta seen twice (a replay after a reconnect) changes nothing more.
  mergeEvent(S, { seq: 1, type: "front.updated", data: { index: 2, took: ["t1"], joined: ["t3"], added: [2], removed: [] } }, NOW);
  assert.deepEqual(S.leaders, { t1: [2], t2: [0], t3: [1, 2] });
  // An empty delta leaves the front as it was.
  mergeEvent(S, { seq: 2, type: "front.updated", data: { index: 1, took: [], joined: [], added: [], removed: [] } }, NOW);
  assert.deepEqual(S.leaders, { t1: [2], t2: [0], t3: [1, 2] });
});

test("members are recomputed from the candidates' scores by the shared rule, and each candidate's flag follows", () => {
  const S = loaded({ candidates: [seed], members: [0] });
  mergeEvent(S, candidateNew(1, { task_scores: { t1: 0.9, t2: 0.1 } }), NOW);
  mergeEvent(S, candidateNew(2, { task_scores: { t1: 0.2, t2: 0.6 } }), NOW);
  recomputeMembers(S);
  assert.deepEqual([...S.members], [1, 2]); // the seed leads no task any more
  assert.deepEqual(S.order.map((i) => S.byIndex.get(i).on_front), [false, true, true]);
});

test("the best-so-far line steps up at each new best and runs on to the budget spent", () => {
  const S = loaded({
    run: { budget_used: 95 },
    candidates: [{ index: 0, val_score: 0.4, metric_calls: 10 }, { index: 1, val_score: 0.3, metric_calls: 30 },
                 { index: 2, val_score: null, metric_calls: 40 }, { index: 3, val_score: 0.8, metric_calls: 60 }],
  });
  assert.deepEqual(bestSoFar(S), { x: [10, 60, 95], y: [0.4, 0.8, 0.8] });
});

test("with no scored candidate there is no best-so-far line", () => {
  assert.deepEqual(bestSoFar(loaded({ run: { budget_used: 50 } })), { x: [], y: [] });
});

test("lineage edges join a child to each parent the page knows, a merge has two", () => {
  const S = loaded({ candidates: [seed, { index: 1, parents: [0], val_score: 0.5 }] });
  const merge = mergeEvent(S, candidateNew(2, { val: 0.7, parents: [0, 1] }), NOW);
  assert.deepEqual(lineageEdges(S, merge), { x: [0, 2, null, 1, 2, null], y: [0.4, 0.7, null, 0.5, 0.7, null], merge: true });
  const orphan = mergeEvent(S, candidateNew(3, { val: 0.1, parents: [42] }), NOW);
  assert.deepEqual(lineageEdges(S, orphan), { x: [], y: [], merge: false });
});

test("run.status running starts the clock once and a resume clears the error and the stop reason", () => {
  const S = loaded({ run: { status: "failed", active: false, started_at: null, finished_at: "2026-01-01T00:05:00Z", error: "boom", stop_reason: "error" } });
  mergeEvent(S, { seq: 1, type: "run.status", data: { status: "running", phase: "optimizing" } }, NOW);
  assert.equal(S.run.active, true);
  assert.equal(S.run.started_at, "2026-01-01T00:10:00.000Z");
  assert.equal(S.run.finished_at, null);
  assert.equal(S.run.error, "");
  assert.equal(S.run.stop_reason, "");
  mergeEvent(S, { seq: 2, type: "run.status", data: { status: "running" } }, NOW + 5000);
  assert.equal(S.run.started_at, "2026-01-01T00:10:00.000Z");
  assert.equal(S.run.phase, "optimizing"); // a status without a phase keeps the last one
});

test("run.status failed keeps the error and is no longer active", () => {
  const S = loaded();
  mergeEvent(S, { seq: 1, type: "run.status", data: { status: "failed", error: "model unreachable" } }, NOW);
  assert.equal(S.run.active, false);
  assert.equal(S.run.error, "model unreachable");
});

test("run.budget moves the budget, and cost, tokens and ETA when the worker sent them", () => {
  const S = loaded({ run: { usage: { task: { calls: 1 } } } });
  mergeEvent(S, { seq: 1, type: "run.budget", data: { used: 40, total: 100 } }, NOW);
  assert.equal(S.run.budget_used, 40);
  assert.equal(S.run.cost, 0);
  mergeEvent(S, { seq: 2, type: "run.budget", data: { used: 50, total: 100, cost: 0.25, tokens: 1200, eta_seconds: 30 } }, NOW);
  assert.deepEqual([S.run.cost, S.run.tokens, S.run.eta_seconds], [0.25, 1200, 30]);
  assert.deepEqual(S.run.usage, { task: { calls: 1 } }); // kept when the event carries none
});

test("run.finished stops the run where the page saw it finish and records the final best", () => {
  const S = loaded({ candidates: [seed], run: { eta_seconds: 12 } });
  mergeEvent(S, { seq: 1, type: "run.finished", data: { status: "completed", best_index: 0, best_score: 0.4, cost: 1.5, stop_reason: "budget spent" } }, NOW);
  assert.equal(S.run.active, false);
  assert.equal(S.finishedAt, NOW);
  assert.deepEqual([S.run.best_index, S.run.best_score, S.run.cost, S.run.stop_reason, S.run.eta_seconds], [0, 0.4, 1.5, "budget spent", null]);
});

test("any event from an external run's tracker counts as a sign of life, until it finished", () => {
  const S = loaded({ run: { kind: "external" } });
  mergeEvent(S, { seq: 1, type: "trials", data: { items: [] } }, NOW);
  assert.equal(S.run.client_seen_at, "2026-01-01T00:10:00.000Z");
  mergeEvent(S, { seq: 2, type: "run.finished", data: { status: "completed" } }, NOW + 60000);
  assert.equal(S.run.client_seen_at, "2026-01-01T00:10:00.000Z");
  const managed = loaded();
  mergeEvent(managed, { seq: 1, type: "trials", data: {} }, NOW);
  assert.equal(managed.run.client_seen_at, null);
});

test("events the state does not keep (proposals, trials, errors) pass their data through to the page", () => {
  const S = loaded();
  const data = { iteration: 3, accepted: false };
  assert.equal(mergeEvent(S, { seq: 1, type: "proposal", data }, NOW), data);
  assert.deepEqual(mergeEvent(S, { seq: 2, type: "error" }, NOW), {});
});

// ---- a big run: columns, heatmap rows, more rows on demand -------------------------

test("columns unzip into one object per item, in order; no columns, no items", () => {
  assert.deepEqual(unzip({ index: [0, 1], val_score: [0.4, null] }), [{ index: 0, val_score: 0.4 }, { index: 1, val_score: null }]);
  assert.deepEqual(unzip({}), []);
  assert.deepEqual(unzip({ index: [] }), []);
});

const bigRun = () => loaded({
  candidates: [seed, { index: 1, val_score: 0.2 }, { index: 2, val_score: 0.9, scores: [0.9, 0.9] }, { index: 3, val_score: 0.1 }],
  rows: [0, 2], leaders: { t1: [2], t2: [2] }, members: [2],
});

test("a big run's candidates outside the snapshot's rows are listed without scores and lead a dash of tasks", () => {
  const S = bigRun();
  assert.deepEqual(S.order, [0, 1, 2, 3]);
  assert.deepEqual(S.rows, [0, 2]);
  assert.equal(S.byIndex.get(1).scores, null);
  assert.equal(leadCount(S, 1), null);
  assert.equal(leadCount(S, 2), 2);
  assert.equal(leadCount(S, 0), 0);
  assert.ok(moreRows(S));
});

test("a page of more rows fills the missing candidates' scores by task key, keeps the rows in order and moves the cursor", () => {
  const S = bigRun();
  const added = addScoresPage(S, {
    tasks: ["t2", "t9", "t1"], rows: [0, 1, 2, 3], more: true,
    scores: [[0.4, 1, 0.4], [0.5, 1, 0.1], [0.9, 1, 0.9], [0.2, 1, 0.3]], previews: ["a", "b", "c", "d"],
  });
  assert.deepEqual(added, [1, 3]);
  assert.deepEqual(S.rows, [0, 1, 2, 3]);
  assert.deepEqual(S.byIndex.get(1).scores, [0.1, 0.5]); // t1, t2; the unknown t9 dropped
  assert.equal(S.byIndex.get(3).preview, "d");
  assert.equal(S.rowsCursor, 3);
  assert.equal(leadCount(S, 1), 0);
});

test("the last page of rows ends the paging; a run whose rows all came has no more", () => {
  const S = bigRun();
  addScoresPage(S, { tasks: ["t1", "t2"], rows: [1], more: true, scores: [[0.1, 0.1]], previews: [""] });
  assert.equal(S.rowsCursor, 1);
  assert.ok(moreRows(S));
  addScoresPage(S, { tasks: ["t1", "t2"], rows: [3], more: false, scores: [[0.3, 0.3]], previews: [""] });
  assert.equal(S.rowsCursor, Infinity);
  assert.ok(!moreRows(S));
  assert.ok(!moreRows(loaded({ candidates: [seed] })));
});

test("members are recomputed over the rows the page holds; a candidate without scores is not on the front", () => {
  const S = bigRun();
  recomputeMembers(S);
  assert.deepEqual([...S.members], [2]);
  assert.equal(S.byIndex.get(1).on_front, false);
});

test("a live candidate brings its scores, so it joins the heatmap's rows", () => {
  const S = bigRun();
  mergeEvent(S, candidateNew(4, { task_scores: { t1: 1, t2: 1 } }), NOW);
  assert.deepEqual(S.rows, [0, 2, 4]);
  assert.equal(leadCount(S, 4), 0);
});

test("verdict counts are the snapshot's as recorded, and a live candidate's are counted from its verdicts", () => {
  const S = loaded({ candidates: [{ ...seed, verdict_counts: [3, 1, 2] }] });
  assert.deepEqual(verdictCounts(S, 0), [3, 1, 2]);
  mergeEvent(S, candidateNew(1, { task_scores: { t1: 1, t2: 0 }, verdicts: { t1: "pass", t2: "fail" } }), NOW);
  assert.deepEqual(verdictCounts(S, 1), [1, 0, 1]);
});

test("every heatmap row's lead count comes from one pass over the leaders, as leadCount counts one", () => {
  const S = bigRun();
  const counts = leadCounts(S);
  assert.deepEqual([...counts], [[0, 0], [2, 2]]);
  for (const [i, n] of counts) assert.equal(leadCount(S, i), n);
  assert.equal(counts.has(1), false); // no scores loaded: not counted ("–")
});

test("a big run's candidates table grows page by page, in candidate order, and 'all' brings every remaining row", () => {
  const S = bigRun();
  assert.deepEqual(tableRowsNext(S, 2), [0, 1]);
  S.tableShown = 2;
  assert.deepEqual(tableRowsNext(S, 2 + 2), [2, 3]);
  assert.deepEqual(tableRowsNext(S, Infinity), [2, 3]);
  S.tableShown = 4;
  assert.deepEqual(tableRowsNext(S, Infinity), []);
});

test("the best candidate found once colours many candidates as if found for each", () => {
  const S = bigRun();
  const best = bestIndex(S);
  assert.deepEqual(S.order.map((i) => role(S, i, best)), S.order.map((i) => role(S, i)));
});

test("a big run's lineage summary keeps the front, the best, the seed and the top scores, each with every ancestor", () => {
  const S = loaded({
    candidates: [
      seed, { index: 1, parents: [0], val_score: 0.2 }, { index: 2, parents: [0], val_score: 0.3 },
      { index: 3, parents: [2], val_score: 0.5 }, { index: 4, parents: [1, 3], val_score: 0.9 }, { index: 5, parents: [1], val_score: 0.1 },
      { index: 6, parents: [5], val_score: 0.35 },
    ],
    members: [6], run: { best_index: 4 },
  });
  // top 1 is #4 (and the best): its ancestors #1, #3, #2, #0; the front member #6 brings #5.
  assert.deepEqual(lineageSummary(S, 1), [0, 1, 2, 3, 4, 5, 6]);
  S.members = new Set();
  assert.deepEqual(lineageSummary(S, 1), [0, 1, 2, 3, 4]);
  assert.deepEqual(lineageSummary(S, 0), [0, 1, 2, 3, 4]); // the best alone
});

test("a pause sets the budget line to the metric calls of the checkpoint it paused at", () => {
  const S = loaded({ candidates: [seed] });
  mergeEvent(S, { type: "run.budget", seq: 1, data: { used: 14, total: 150 } }, NOW);
  mergeEvent(S, { type: "run.paused", seq: 2, data: { by: "alice", iteration: null, metric_calls: 12 } }, NOW);
  assert.equal(S.run.budget_used, 12);
});

test("a paused run offers Resume and Stop, a running one Pause and Stop, a finished one Resume", () => {
  const S = loaded({ candidates: [seed] });
  const shown = () => ["queued running", "active paused", "finished", "active"].filter((when) => controlShown(when, S.run));
  mergeEvent(S, { type: "run.status", seq: 1, data: { status: "running", phase: "optimizing" } }, NOW);
  assert.deepEqual(shown(), ["queued running", "active paused", "active"]);
  mergeEvent(S, { type: "run.status", seq: 2, data: { status: "running", phase: "pausing after this iteration (asked by alice)" } }, NOW);
  assert.equal(S.run.pause_requested, true);
  mergeEvent(S, { type: "run.paused", seq: 3, data: { by: "alice", iteration: 2, metric_calls: 30 } }, NOW);
  mergeEvent(S, { type: "run.status", seq: 4, data: { status: "paused", phase: "paused by alice" } }, NOW);
  assert.equal(S.run.active, false);
  assert.equal(S.run.pause_requested, false);
  assert.deepEqual(shown(), ["active paused", "finished"]);
  mergeEvent(S, { type: "run.status", seq: 5, data: { status: "queued", phase: "queued to resume" } }, NOW);
  assert.deepEqual(shown(), ["queued running", "active paused", "active"]);
  mergeEvent(S, { type: "run.finished", seq: 6, data: { status: "completed", best_index: 0, best_score: 0.4 } }, NOW);
  assert.deepEqual(shown(), ["finished"]);
});

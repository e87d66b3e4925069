// static/js/run/text.js and format.js: the run page's words and header numbers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { clip, duration, esc, fmt } from "../../static/js/format.js";
import { mergeEvent } from "../../static/js/run/state.js";
import {
  candidateLine, clientLine, clock, headerFigures, hover, injectionText, leadText, originText, minibatchMean, promptText, proposalLine, rowsNote, statusLine, tableNote, lineageNote,
  trialJudgments,
} from "../../static/js/run/text.js";
import { candidateNew, loaded } from "./snapshot.mjs";

const START = "2026-01-01T00:00:00Z";
const at = (seconds) => Date.parse(START) + seconds * 1000;

test("durations read as seconds, minutes and seconds, or hours and minutes", () => {
  assert.equal(duration(0), "0s");
  assert.equal(duration(59.4), "59s");
  assert.equal(duration(59.6), "1m 0s");
  assert.equal(duration(125), "2m 5s");
  assert.equal(duration(3600 * 2 + 61), "2h 1m");
});

test("a missing or unreadable number is a dash, never NaN", () => {
  assert.equal(fmt(null), "–");
  assert.equal(fmt(undefined), "–");
  assert.equal(fmt(NaN), "–");
  assert.equal(fmt(0.12345), "0.123");
  assert.equal(fmt(0.5, 2), "0.50");
});

test("markup in untrusted text is escaped for Plotly; quotes are left as they are", () => {
  assert.equal(esc('<img src=x onerror="alert(1)"> & co'), '&lt;img src=x onerror="alert(1)"&gt; &amp; co');
  assert.equal(esc(null), "");
});

test("clipped text keeps the limit, the ellipsis included", () => {
  assert.equal(clip("abcdef", 4), "abc…");
  assert.equal(clip("abc", 4), "abc");
});

test("a candidate's hover escapes its origin and preview and breaks the preview's lines", () => {
  const text = hover({ index: 3, origin: "<b>x</b>", val_score: 0.5, parents: [1, 2], metric_calls: 40, preview: "a <script>\nb" });
  assert.equal(text, "<b>#3</b> &lt;b&gt;x&lt;/b&gt; · val 0.500<br>parents #1 + #2 · 40 calls<br>a &lt;script&gt;<br>b");
});

test("a human candidate says whom it was edited by and from which candidate, escaped in the hover", () => {
  const c = { index: 5, origin: "human", author: "<al>", val_score: 0.75, parents: [2], metric_calls: 48, preview: "p" };
  assert.equal(originText(c), "human · edited from #2 by <al>");
  assert.equal(originText({ ...c, author: "" }), "human · edited from #2 by a deleted user");
  assert.equal(originText({ ...c, origin: "merge" }), "merge");
  assert.match(hover(c), /^<b>#5<\/b> human · edited from #2 by &lt;al&gt; · val 0.750/);
});

test("an edited candidate's stream line follows its status", () => {
  const d = { injection: 1, status: "pending", edited_from: 0, author: "alice", reason: "", candidate: null };
  assert.equal(injectionText(d), "alice's edit of #0: waits for the next iteration boundary");
  assert.equal(injectionText({ ...d, status: "applied", candidate: 7 }), "alice's edit of #0 → #7: evaluated on the val set, in the pool");
  assert.equal(injectionText({ ...d, status: "refused", reason: "the run ended before it could be evaluated" }),
    "alice's edit of #0: refused, the run ended before it could be evaluated");
});

test("the elapsed clock runs while the run is active and the ETA follows its pace", () => {
  const S = loaded({ run: { started_at: START, budget_used: 25, budget_total: 100 } });
  assert.deepEqual(clock(S, at(60)), { elapsed: "1m 0s", eta: "ETA 3m 0s" }); // 25 calls a minute, 75 left
});

test("the worker's own ETA wins over the page's estimate", () => {
  const S = loaded({ run: { started_at: START, budget_used: 25, budget_total: 100, eta_seconds: 10 } });
  assert.equal(clock(S, at(60)).eta, "ETA 10s");
});

test("no ETA before the first metric call, once the budget is spent, or after the run finished", () => {
  assert.equal(clock(loaded({ run: { started_at: START, budget_used: 0 } }), at(60)).eta, "");
  assert.equal(clock(loaded({ run: { started_at: START, budget_used: 100, budget_total: 100 } }), at(60)).eta, "");
  assert.equal(clock(loaded({ run: { started_at: START, budget_used: 50, active: false } }), at(60)).eta, "");
});

test("a finished run's clock stops when it finished, or when the page saw it finish", () => {
  const S = loaded({ run: { started_at: START, active: false, finished_at: "2026-01-01T00:02:00Z" } });
  assert.equal(clock(S, at(3600)).elapsed, "2m 0s");
  const seen = loaded({ run: { started_at: START, active: false } });
  seen.finishedAt = at(90);
  assert.equal(clock(seen, at(3600)).elapsed, "1m 30s");
});

test("a run that has not started has no clock", () => {
  assert.equal(clock(loaded({ run: { started_at: null } }), at(10)), null);
});

test("the header shows the best, its gain over the seed, the budget bar and who spent what", () => {
  const S = loaded({
    candidates: [{ index: 0, val_score: 0.4 }, { index: 1, val_score: 0.65 }],
    run: {
      budget_used: 150, budget_total: 120, cost: 0.004, tokens: 12345,
      usage: { task: { calls: 3, tokens_in: 1500, tokens_out: 20, cost: 0.003 }, reflection: { calls: 0 }, judge: { calls: 1, tokens_in: 10, tokens_out: 2, cost: 0.001 } },
    },
  });
  const h = headerFigures(S);
  assert.equal(h.best, "0.650");
  assert.deepEqual(h.delta, { text: "(+0.250 vs seed)", up: true });
  assert.equal(h.budgetPct, 100); // a hard cap overshot by a last batch still draws a full bar, not more
  assert.equal(h.budget, "150 / 120");
  assert.equal(h.cost, "$0.0040");
  assert.equal(h.tokens, "12.3k tokens");
  assert.equal(h.costSplit, "task 3 calls · 1.5k in / 20 out · $0.0030 | judge 1 calls · 10 in / 2 out · $0.0010");
});

test("a best below the seed is a loss; no candidate yet is a dash and no delta", () => {
  const worse = loaded({ candidates: [{ index: 0, val_score: 0.5 }], run: { seed_score: 0.7 } });
  assert.deepEqual(headerFigures(worse).delta, { text: "(-0.200 vs seed)", up: false });
  const empty = headerFigures(loaded({ run: { budget_total: 0 } }));
  assert.equal(empty.best, "–");
  assert.equal(empty.delta, null);
  assert.equal(empty.budgetPct, 0);
});

test("a seed the task model answered none of its val tasks for is no score: live, and once the run failed", () => {
  // Live: its candidate.new says scored: false; the front names no best.
  const S = loaded({});
  mergeEvent(S, candidateNew(0, { val: 0, scored: false }), 0);
  mergeEvent(S, { seq: 100, type: "front.updated", data: { index: 0, took: [], joined: [], best_index: null, best_score: null } }, 0);
  assert.deepEqual([headerFigures(S).best, headerFigures(S).delta], ["–", null]);
  mergeEvent(S, { seq: 101, type: "run.finished", data: { status: "failed", best_index: null, best_score: null, seed_score: null } }, 0);
  assert.deepEqual([headerFigures(S).best, headerFigures(S).delta, S.run.seed_score], ["–", null, null]);
  // Reloaded: the snapshot of the failed run holds the candidate, and no best or seed score.
  const reloaded = loaded({ candidates: [{ index: 0, val_score: 0 }], run: { status: "failed", active: false } });
  assert.deepEqual([headerFigures(reloaded).best, headerFigures(reloaded).delta], ["–", null]);
});

test("the demo simulator's cost says it is free", () => {
  assert.equal(headerFigures(loaded({ run: { pricing: "simulator", cost: 0 } })).cost, "free (demo simulator)");
});

test("an external run's client is live, then silent after its silence window; other runs have no such line", () => {
  const S = loaded({ run: { kind: "external", client_seen_at: START, silent_after: 60 } });
  assert.deepEqual(clientLine(S, at(5)), { text: "heard from 5s ago", state: "live" });
  assert.deepEqual(clientLine(S, at(125)), { text: "silent for 2m 5s: the tracker's process stopped reporting", state: "silent" });
  assert.deepEqual(clientLine(loaded({ run: { kind: "external" } }), at(5)), { text: "not heard from yet", state: "silent" });
  assert.equal(clientLine(loaded(), at(5)), null);
  const finished = clientLine(loaded({ run: { kind: "external", active: false, status: "completed" } }), at(5));
  assert.deepEqual(finished, { text: "finished (completed)", state: "finished" });
});

test("what GEPA is doing: one line per status", () => {
  assert.match(statusLine({ status: "running", phase: "optimizing" }), /^Optimizing: /);
  assert.equal(statusLine({ status: "running", phase: "" }), "Running: starting.");
  assert.match(statusLine({ status: "running", phase: "resuming" }), /^Resuming: everything recorded so far stays/);
  assert.equal(statusLine({ status: "completed" }), "Finished: the budget is spent.");
  assert.equal(statusLine({ status: "running", phase: "pausing after this iteration (asked by alice)" }), "Pausing: GEPA finishes the current iteration, then pauses.");
  assert.match(statusLine({ status: "paused", phase: "paused by alice" }), /^Paused: GEPA's checkpoint is saved and no worker is held/);
  assert.equal(statusLine({ status: "weird" }), "weird");
});

test("a proposal's line shows minibatch means, not gepa's sums", () => {
  const p = { iteration: 4, parent: 2, candidate: 5, accepted: true, before: 1, after: 3, minibatch_size: 4 };
  assert.equal(minibatchMean(p), 0.75);
  assert.equal(proposalLine(p), "Iteration 4: a rewrite of #2 improved it (0.25 → 0.75 on a minibatch of 4); it became candidate #5 and was scored on the val set.");
  const rejected = { iteration: 5, parent: 5, accepted: false, before: 2, after: 1, minibatch: ["a", "b"] };
  assert.equal(proposalLine(rejected), "Iteration 5: a rewrite of #5 did not beat it (1.00 → 0.50 on a minibatch of 2); discarded, GEPA tries again.");
});

test("the seed's candidate line says it is the seed", () => {
  assert.equal(candidateLine({ index: 0, val_score: 0.4 }), "Candidate #0 scored 0.400 on the val set (the seed).");
  assert.equal(candidateLine({ index: 2, val_score: null }), "Candidate #2 scored – on the val set.");
});

test("a one-component prompt is its text; several are headed by their names", () => {
  assert.equal(promptText({ instructions: "Be brief." }), "Be brief.");
  assert.equal(promptText({ a: "one", b: "two" }), "## a\none\n\n## b\ntwo");
  assert.equal(promptText(null), "");
});

test("a candidate whose scores are not loaded leads a dash of tasks, not 0", () => {
  const S = loaded({
    candidates: [{ index: 0, val_score: 0.4, scores: [1, 1] }, { index: 1, val_score: 0.3 }, { index: 2, val_score: 0.2, scores: [0, 0] }],
    rows: [0, 2], leaders: { t1: [0], t2: [0] },
  });
  assert.equal(leadText(S, 0), "2");
  assert.equal(leadText(S, 2), "0");
  assert.equal(leadText(S, 1), "–");
  assert.equal(rowsNote(S), "2 of 3 candidates shown (the front, the seed, the best and the top scores first).");
  S.tableShown = 2;
  assert.equal(tableNote(S), "Showing the first 2 of 3 candidates (in candidate order).");
});

test("a summarised lineage says how many candidates it draws and which", () => {
  assert.equal(lineageNote(856, 10000, 100), "Showing 856 of 10000 candidates: the front, the best, the top 100 by val score and their ancestors.");
});

test("a scored task says its verdict by the run thresholds and its verifiers' passed by their passThresholds", () => {
  const judging = { thresholds: { pass: 0.8, borderline: 0.6 }, pass_thresholds: { strict: 0.9 } };
  assert.deepEqual(trialJudgments({ task_key: "t", score: 0.8, verdict: "pass", passed: false }, judging),
    { verdict: "verdict pass (0.800 ≥ 0.8)", passed: "verifiers failed (passThreshold: strict 0.9)" });
  assert.equal(trialJudgments({ task_key: "t", score: 0.657, verdict: "borderline", passed: false }, judging).verdict,
    "verdict borderline (0.6 ≤ 0.657 < 0.8)");
  assert.equal(trialJudgments({ task_key: "t", score: 0.7, verdict: "fail", passed: false }, judging).verdict,
    "verdict fail (a required check failed, whatever the score)");
  assert.equal(trialJudgments({ task_key: "t", score: 0.2, verdict: "fail" }, judging).verdict, "verdict fail (0.200 < 0.6)");
  // No verifier scored it (an external run's adapter, or an event recorded before `passed`): no passed to show.
  assert.equal(trialJudgments({ task_key: "t", score: 0.2, verdict: "fail" }, judging).passed, null);
});

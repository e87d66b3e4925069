// @ts-check
// The run page's words and header numbers, from the state (pure: no DOM; Node's
// tests import it). Untrusted strings that go to Plotly pass through esc().
import { duration, esc, escLines, fmt } from "../format.js";
import { money, tokens } from "../money.js";
import { bestIndex, leadCount } from "./state.js";

/**
 * @typedef {import("./state.js").Candidate} Candidate
 * @typedef {import("./state.js").Proposal} Proposal
 * @typedef {import("./state.js").ProposalScores} ProposalScores
 * @typedef {import("./state.js").Run} Run
 * @typedef {import("./state.js").RunState} RunState
 * @typedef {import("./state.js").TrialItem} TrialItem
 * @typedef {import("./state.js").Judging} Judging
 */

export const VERDICT_NAMES = { p: "pass", b: "borderline", f: "fail" };

// Where a candidate came from, in words: its origin, and for one a user wrote,
// "human · edited from #N by <user>" (plain text: escape it for markup).
/** @param {Candidate} c */
export function originText(c) {
  if (c.origin !== "human") return c.origin;
  return `human · edited from #${c.parents[0] ?? 0} by ${c.author || "a deleted user"}`;
}

// A user's edited candidate in the proposals stream (plain text).
/** @param {import("./state.js").Injection} d */
export function injectionText(d) {
  const who = `${d.author || "a user"}'s edit of #${d.edited_from}`;
  if (d.status === "applied") return `${who} → #${d.candidate}: evaluated on the val set, in the pool`;
  if (d.status === "refused") return `${who}: refused, ${d.reason}`;
  return `${who}: waits for the next iteration boundary`;
}

// A candidate's hover text (Plotly markup).
/** @param {Candidate} c */
export function hover(c) {
  const parents = c.parents.length ? c.parents.map((p) => `#${p}`).join(" + ") : "none";
  return `<b>#${c.index}</b> ${esc(originText(c))} · val ${fmt(c.val_score)}<br>parents ${parents} · ${c.metric_calls} calls<br>${escLines(c.preview)}`;
}

// A scored task's two judgments, each with what decides it (docs/verifier-semantics.md
// "Passed and verdict"): `verdict pass (0.823 ≥ 0.8)` and, when verifiers scored it,
// `verifiers failed (passThreshold: strict 0.9)`.
/** @param {TrialItem} item @param {Judging} judging @returns {{verdict: string, passed: string | null}} */
export function trialJudgments(item, judging) {
  const t = judging.thresholds, score = fmt(item.score);
  const why = item.verdict === "pass" ? `${score} ≥ ${t.pass}`
    : item.verdict === "borderline" ? `${t.borderline} ≤ ${score} < ${t.pass}`
      : item.score >= t.borderline ? "a required check failed, whatever the score" : `${score} < ${t.borderline}`;
  const bars = Object.entries(judging.pass_thresholds).map(([id, bar]) => `${id} ${bar}`).join(", ");
  const passed = item.passed === null || item.passed === undefined ? null
    : `verifiers ${item.passed ? "passed" : "failed"}${bars ? ` (passThreshold: ${bars})` : ""}`;
  return { verdict: `verdict ${item.verdict} (${why})`, passed };
}

// A candidate's "leads N" count; a dash when its scores are not loaded.
// `counts`: leadCounts(S), passed by a caller that labels many candidates (found once).
/** @param {RunState} S @param {number} index @param {Map<number, number>} [counts] */
export const leadText = (S, index, counts) => {
  const n = counts ? (counts.get(index) ?? null) : leadCount(S, index);
  return n === null ? "–" : String(n);
};

// Under a big run's heatmap: how many candidates it shows.
/** @param {RunState} S */
export const rowsNote = (S) => `${S.rows.length} of ${S.order.length} candidates shown (the front, the seed, the best and the top scores first).`;

// Under a big run's summarised lineage.
/** @param {number} shown @param {number} total @param {number} top */
export const lineageNote = (shown, total, top) =>
  `Showing ${shown} of ${total} candidates: the front, the best, the top ${top} by val score and their ancestors.`;

// Under a big run's candidates table: how many rows it shows.
/** @param {RunState} S */
export const tableNote = (S) => `Showing the first ${S.tableShown} of ${S.order.length} candidates (in candidate order).`;

// before / after are sums over the minibatch (gepa's); the page shows means.
/** @param {ProposalScores} p */
export const minibatchSize = (p) => (p.minibatch_size ?? (p.minibatch && p.minibatch.length)) || 1;
/** @param {ProposalScores} p */
export const minibatchMean = (p) => p.after / minibatchSize(p);
/** @param {ProposalScores} p */
export const proposalHover = (p) => `rejected from #${p.parent} · minibatch ${fmt(p.before / minibatchSize(p), 2)} → ${fmt(minibatchMean(p), 2)}`;

// A prompt's text: one component as it is, several under "## name" headings.
/** @param {Record<string, string> | null | undefined} components */
export const promptText = (components) => {
  const entries = Object.entries(components || {});
  return entries.length === 1 ? entries[0][1] : entries.map(([name, text]) => `## ${name}\n${text}`).join("\n\n");
};

// ---- the header ------------------------------------------------------------------

// Best score, its gain over the seed, budget, cost: what the header shows.
/** @param {RunState} S */
export function headerFigures(S) {
  const r = S.run;
  const seedCandidate = r.active && !S.byIndex.get(0)?.unscored ? S.byIndex.get(0) : undefined;
  const seed = r.seed_score ?? seedCandidate?.val_score ?? null;
  const bi = bestIndex(S);
  // A null val score counts as 0 (Math.max reads it so).
  const best = bi === null ? r.best_score : Math.max(r.best_score ?? -Infinity, /** @type {number} */ (S.byIndex.get(bi).val_score));
  const known = best !== null && best !== -Infinity;
  const gain = seed !== null && known ? best - seed : null;
  return {
    best: known ? fmt(best) : "–",
    // null: leave the delta as it is.
    delta: gain === null ? null : { text: `(${gain >= 0 ? "+" : ""}${fmt(gain)} vs seed)`, up: gain >= 0 },
    budgetPct: r.budget_total ? Math.min(100, (100 * r.budget_used) / r.budget_total) : 0,
    budget: `${r.budget_used} / ${r.budget_total}`,
    cost: money(r.cost, r.pricing),
    // An external run's tracker may report no usage at all: say so rather than "0 tokens".
    tokens: r.pricing === "not_reported" && !r.tokens ? "tokens not reported" : `${tokens(r.tokens)} tokens`,
    // Task model vs reflection model (and the verify judge): who spent what.
    costSplit: ["task", "reflection", "judge"]
      .filter((role) => r.usage?.[role]?.calls)
      .map((role) => { const u = r.usage[role]; return `${role} ${u.calls} calls · ${tokens(u.tokens_in)} in / ${tokens(u.tokens_out)} out · ${money(u.cost, r.pricing)}`; })
      .join(" | "),
  };
}

// Elapsed time and ETA at `now` (ms); null before the run started. A finished
// run's clock stops at finished_at (or when the page saw it finish).
/** @param {RunState} S @param {number} now */
export function clock(S, now) {
  const r = S.run;
  if (!r.started_at) return null;
  const start = Date.parse(r.started_at);
  const end = r.finished_at ? Date.parse(r.finished_at) : r.active ? now : S.finishedAt || now;
  const seconds = Math.max(0, (end - start) / 1000);
  const left = r.budget_total - r.budget_used;
  // The worker's own estimate (its observed pace, concurrency included) when it sent one.
  const eta = r.eta_seconds ?? (r.budget_used > 0 ? (seconds * left) / r.budget_used : null);
  return { elapsed: duration(seconds), eta: r.active && eta !== null && left > 0 ? `ETA ${duration(eta)}` : "" };
}

// An external run's tracker reports from its owner's process: when it was last
// heard from, when it went silent, when it finished. null for other runs.
/** @param {RunState} S @param {number} now */
export function clientLine(S, now) {
  const r = S.run;
  if (r.kind !== "external") return null;
  if (!r.active) {
    const at = r.finished_at ? Date.parse(r.finished_at) : S.finishedAt;
    return { text: `finished (${r.status})${at ? ` at ${new Date(at).toLocaleTimeString()}` : ""}`, state: "finished" };
  }
  if (!r.client_seen_at) return { text: "not heard from yet", state: "silent" };
  const age = Math.max(0, (now - Date.parse(r.client_seen_at)) / 1000);
  const silent = age > /** @type {number} */ (r.silent_after); // an external run's summary has it
  return { text: silent ? `silent for ${duration(age)}: the tracker's process stopped reporting` : `heard from ${duration(age)} ago`, state: silent ? "silent" : "live" };
}

// ---- what GEPA is doing now (one line, from the latest event) ----------------------

/** @type {Record<string, string>} */
const STATUS_LINES = {
  queued: "Queued: waiting for a worker to pick the run up.",
  stopping: "Stopping: GEPA finishes the current iteration, then stops.",
  stopped: "Stopped by the user.",
  completed: "Finished: the budget is spent.",
  failed: "Failed: see the error below.",
  abandoned: "Abandoned: its tracker went silent, so the run ended with what it had sent.",
  paused: "Paused: GEPA's checkpoint is saved and no worker is held. Resume goes on where it stopped, paying nothing again for what was already evaluated.",
};

/** @param {Run} run */
export function statusLine(run) {
  // A server that starts (or a worker that takes a run over) says so before GEPA goes on.
  if (run.status === "running" && run.phase === "resuming") return "Resuming: everything recorded so far stays, and GEPA goes on where it stopped.";
  if (run.status === "running" && (run.phase || "").startsWith("pausing")) return "Pausing: GEPA finishes the current iteration, then pauses.";
  if (run.status === "running") return run.phase === "optimizing" ? "Optimizing: GEPA picks a parent from the front, reflects on its misses and proposes a rewrite." : `Running: ${run.phase || "starting"}.`;
  return STATUS_LINES[run.status] || run.status;
}

/** @param {Proposal} p */
export function proposalLine(p) {
  const n = minibatchSize(p);
  const scores = `${fmt(p.before / n, 2)} → ${fmt(p.after / n, 2)} on a minibatch of ${n}`;
  return p.accepted
    ? `Iteration ${p.iteration}: a rewrite of #${p.parent} improved it (${scores}); it became candidate #${p.candidate} and was scored on the val set.`
    : `Iteration ${p.iteration}: a rewrite of #${p.parent} did not beat it (${scores}); discarded, GEPA tries again.`;
}

/** @param {Candidate} c */
export const candidateLine = (c) => `Candidate #${c.index} scored ${fmt(c.val_score)} on the val set${c.index === 0 ? " (the seed)" : ""}.`;

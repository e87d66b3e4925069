// @ts-check
// The run page's model: the snapshot, then every websocket event merged into
// it. Pure (no DOM, no Plotly, no clock of its own: callers pass `now`), so
// Node's tests import it (tests/js/). The page's modules draw from it.
import { frontMembers } from "../front.js";
import { clip } from "../format.js";

// ---- shapes ---------------------------------------------------------------------
//
// What the page reads of the snapshot (dashboard/selectors.py run_snapshot) and
// of the events (optimizer/runs/event_types.py, whose models are the reference:
// these name only the fields the page reads).

/**
 * @typedef {{calls: number, tokens_in: number, tokens_out: number, cost: number}} RoleUsage
 * @typedef {Record<string, RoleUsage>} Usage per role (task, reflection, judge) and their total; {} when unknown
 */

/**
 * The run read model (optimizer/runs/summary.py run_summary), changed by events.
 * @typedef {object} Run
 * @property {string} status
 * @property {string} phase
 * @property {boolean} active
 * @property {string} kind "native" or "external"
 * @property {number} budget_used
 * @property {number} budget_total
 * @property {number | null} seed_score
 * @property {number | null} best_score
 * @property {number | null} best_index
 * @property {number} last_seq
 * @property {string | null} started_at ISO 8601
 * @property {string | null} finished_at ISO 8601
 * @property {string} error
 * @property {string} stop_reason
 * @property {number} cost
 * @property {string} pricing "priced", "unpriced", "simulator" or "not_reported"
 * @property {number} tokens
 * @property {Usage} usage
 * @property {boolean} [pause_requested] a pause was asked: the run pauses after its iteration
 * @property {number | null} [eta_seconds] from run.budget events
 * @property {string | null} [client_seen_at] an external run's: ISO 8601
 * @property {number} [silent_after] an external run's: seconds
 */

/**
 * One candidate as the page holds it: an entry of the snapshot's columns, or a
 * candidate.new event's (candidateFromEvent).
 * @typedef {object} Candidate
 * @property {number} index
 * @property {number[]} parents
 * @property {string} origin
 * @property {number} iteration
 * @property {number} metric_calls
 * @property {number | null} val_score
 * @property {Record<string, number>} objective_scores verifier id → mean score
 * @property {boolean} on_front
 * @property {number | null} prompt_tokens
 * @property {number | null} mean_output_tokens
 * @property {number | null} mean_latency_ms
 * @property {number[]} [verdict_counts] the snapshot's: [pass, borderline, fail]
 * @property {string} [verdicts] a live candidate's: a letter (p, b, f or -) per val task
 * @property {string} preview
 * @property {number} cost
 * @property {string | null} [author] origin human: the user who wrote it (edited from parents[0])
 * @property {Array<number | null> | null} scores per val task (S.tasks); null until its heatmap row is loaded
 * @property {boolean} [unscored] a live candidate's: the task model answered none of its val tasks (its 0 is no score)
 */

/**
 * The state's candidates by index. `get` reads as present, as strict TypeScript
 * reads an array's element: the page looks up the indices it holds (S.order,
 * S.rows, S.members), and checks the ones that may be missing.
 * @typedef {{get(index: number): Candidate} & Map<number, Candidate>} Candidates
 */

/**
 * How the page clips stream text and how many stream items it keeps.
 * @typedef {object} Limits
 * @property {number} text
 * @property {number} reasons
 * @property {number} preview
 * @property {number} proposals
 * @property {number} trials
 * @property {number} errors
 * @property {number} scores_page
 * @property {number} table_rows
 */

/**
 * The snapshot sends big lists as columns: {field: [value per item]}.
 * @template T
 * @typedef {{[K in keyof T]: Array<T[K]>}} Columns
 */

/**
 * A proposal's numbers (the score chart's rejected marks): `before` and `after`
 * are sums over the minibatch.
 * @typedef {object} ProposalScores
 * @property {number | null} parent
 * @property {number} before
 * @property {number} after
 * @property {number} metric_calls
 * @property {number} [minibatch_size]
 * @property {string[]} [minibatch] task keys
 */

/**
 * A proposal event's data (and the snapshot's proposals).
 * @typedef {ProposalScores & {
 *   iteration: number, accepted: boolean, candidate: number | null, components?: string[],
 *   texts?: Record<string, string>, reasoning?: string, usage?: Usage, cost?: number,
 *   seq?: number,
 *   notes?: {id: number, task_key: string, author: string, text: string}[],
 * }} Proposal
 */

/**
 * One task scored (an item of a trials event).
 * @typedef {object} TrialItem
 * @property {string} task_key
 * @property {number} score
 * @property {string} verdict "pass", "borderline" or "fail"
 * @property {string} [output]
 * @property {string[]} [reasons]
 * @property {boolean | null} [passed] every verifier passed; null or absent when no verifier scored it
 */

/**
 * What decides a run's two judgments: its verdict thresholds and each
 * verifier's passThreshold by id (docs/verifier-semantics.md "Passed and verdict").
 * @typedef {{thresholds: {pass: number, borderline: number}, pass_thresholds: Record<string, number>}} Judging
 */

/**
 * A trials event's data: evaluations of one candidate in the order they ran (one batch, or a
 * fast run's minibatches of that candidate written together); `candidate` null for a proposal
 * not yet accepted.
 * @typedef {{candidate: number | null, split: string, items?: TrialItem[]}} Trials
 */

/**
 * An error event's data.
 * @typedef {{where: string, message: string, iteration: number | null}} RunError
 */

/**
 * /runs/<id>/snapshot.json.
 * @typedef {object} Snapshot
 * @property {Run} run
 * @property {string[]} verifiers
 * @property {string[]} tasks val task keys: the heatmap's columns
 * @property {Columns<Omit<Candidate, "scores" | "verdicts">>} candidates
 * @property {number[]} rows the candidates whose scores come along
 * @property {Array<Array<number | null>>} scores one row per index of `rows`
 * @property {{members: number[], leaders: Record<string, number[]>}} front
 * @property {Limits} limits
 * @property {Judging} judging
 * @property {Columns<ProposalScores>} rejected
 * @property {Proposal[]} proposals
 * @property {Injection[]} [injections] users' edited candidates, oldest first
 * @property {Array<TrialItem & {candidate: number | null, split: string}>} trials
 * @property {RunError[]} errors
 * @property {import("../reviewer-notes.js").Note[]} reviewer_notes what GEPA's reflection reads beside the feedback
 * @property {string | null} notes_refusal why the run takes no notes (external, imported), else null
 */

/**
 * A page of /runs/<id>/scores.json (dashboard/selectors.py run_scores_page).
 * @typedef {object} ScoresPage
 * @property {string[]} tasks
 * @property {number[]} rows
 * @property {Array<Array<number | null>>} scores
 * @property {string[]} previews
 * @property {boolean} more
 */

/**
 * A websocket message: one RunEvent (`data`: the type's payload).
 * @typedef {{seq: number, type: string, data?: unknown}} RunEvent
 */

/**
 * The page's model.
 * @typedef {object} RunState
 * @property {Run} run
 * @property {string[]} tasks
 * @property {Map<string, number>} taskColumn task key → its column in `tasks`
 * @property {string[]} verifiers
 * @property {Candidates} byIndex
 * @property {number[]} order every candidate's index, in birth order
 * @property {Set<number>} members
 * @property {Record<string, number[]>} leaders task key → the indices with its top score
 * @property {number[]} rows
 * @property {number} rowsCursor
 * @property {number} tableShown
 * @property {Set<number>} selected
 * @property {number | null} finishedAt when the page saw the run finish (ms)
 * @property {Limits} limits
 * @property {Judging} judging
 * @property {number | null} shownBest
 */

const ACTIVE = ["queued", "running", "stopping"];

// Which run controls the page shows. A control's data-when lists, space-separated,
// when it applies: "active" (queued, running, stopping), "finished" (anything
// else, a paused run included), or a status by name ("paused", "running" …).
/** @param {string} when @param {Run} run */
export function controlShown(when, run) {
  return when.split(/\s+/).some((token) => (token === "active" ? run.active : token === "finished" ? !run.active : token === run.status));
}
/** @type {Record<string, string>} */
const VERDICT_LETTERS = { pass: "p", borderline: "b", fail: "f" };

// `run` and `limits` are the snapshot's: loadSnapshot sets them before anything reads them.
/** @returns {RunState} */
export function createState() {
  return {
    run: /** @type {any} */ (null), tasks: [], taskColumn: new Map(), verifiers: [],
    byIndex: new Map(), order: [], members: new Set(), leaders: {},
    // The heatmap's rows: candidates whose per-task scores the page holds (a big
    // run's snapshot sends the front and the top ones; "more rows" fetches the
    // others a page at a time, after `rowsCursor`, the last index asked for;
    // Infinity once there are no more).
    rows: [], rowsCursor: -1,
    // How many candidates (the first ones of `order`) the candidates table shows.
    tableShown: 0,
    selected: new Set(), finishedAt: null, limits: /** @type {any} */ (null), shownBest: null,
    judging: { thresholds: { pass: 0.8, borderline: 0.6 }, pass_thresholds: {} },
  };
}

// The snapshot sends big lists as columns ({field: [value per item]}): one object per item here.
/**
 * @template T
 * @param {Columns<T>} columns
 * @returns {T[]}
 */
export function unzip(columns) {
  const fields = /** @type {Array<keyof T>} */ (Object.keys(columns));
  const n = fields.length ? columns[fields[0]].length : 0;
  const out = new Array(n);
  for (let k = 0; k < n; k++) { const item = /** @type {T} */ ({}); for (const f of fields) item[f] = columns[f][k]; out[k] = item; }
  return out;
}

// The JSON snapshot (/runs/<id>/snapshot.json): `candidates` come as columns,
// their per-task scores as a matrix with one row per index of `rows` (every
// candidate of a small run; a big run's front and top ones); the others have
// `scores: null` until "more rows" brings them (addScoresPage).
/** @param {RunState} S @param {Snapshot} snap */
export function loadSnapshot(S, snap) {
  S.run = snap.run;
  S.tasks = snap.tasks;
  S.tasks.forEach((key, k) => S.taskColumn.set(key, k));
  S.verifiers = snap.verifiers;
  S.limits = snap.limits;
  S.judging = snap.judging;
  const rowOf = new Map(snap.rows.map((index, k) => [index, k]));
  for (const c of unzip(snap.candidates)) addCandidate(S, { ...c, scores: rowOf.has(c.index) ? snap.scores[/** @type {number} */ (rowOf.get(c.index))] : null });
  S.rowsCursor = -1;
  S.members = new Set(snap.front.members);
  S.leaders = snap.front.leaders;
}

/** @param {RunState} S @param {Candidate} c */
export function addCandidate(S, c) {
  S.byIndex.set(c.index, c);
  S.order.push(c.index);
  if (c.scores) S.rows.push(c.index);
}

// Merge a page of scores.json ({tasks, rows, scores, previews, more}) into the
// heatmap's rows: candidates the page already holds scores for are skipped, a
// task the page does not know is dropped, rows stay in index order. Returns
// the indices added.
/** @param {RunState} S @param {ScoresPage} page */
export function addScoresPage(S, page) {
  const column = page.tasks.map((key) => S.taskColumn.get(key));
  /** @type {number[]} */
  const added = [];
  page.rows.forEach((index, k) => {
    const c = S.byIndex.get(index);
    S.rowsCursor = Math.max(S.rowsCursor, index);
    if (!c || c.scores) return;
    c.scores = S.tasks.map(() => null);
    column.forEach((at, j) => { if (at !== undefined) /** @type {Array<number | null>} */ (c.scores)[at] = page.scores[k][j]; });
    c.preview = page.previews[k];
    S.rows.push(index);
    added.push(index);
  });
  S.rows.sort((a, b) => a - b);
  if (!page.more) S.rowsCursor = Infinity;
  return added;
}

// Whether scores.json has rows the heatmap does not show yet.
/** @param {RunState} S */
export const moreRows = (S) => S.rows.length < S.order.length && S.rowsCursor !== Infinity;

/**
 * A candidate.new event's data.
 * @typedef {object} CandidateNew
 * @property {number} index
 * @property {number[]} [parents]
 * @property {string} origin
 * @property {number} iteration
 * @property {number} metric_calls
 * @property {number} val_score
 * @property {boolean} [scored] false: the task model answered none of its val tasks
 * @property {Record<string, number>} [objective_scores]
 * @property {Record<string, number>} [task_scores] val task → score
 * @property {Record<string, string>} [verdicts] val task → verdict
 * @property {number} prompt_tokens
 * @property {number} mean_output_tokens
 * @property {number} mean_latency_ms
 * @property {Record<string, string>} [components] component name → text (preview)
 * @property {number} [cost]
 * @property {string | null} [author] origin human: who wrote it
 */

/**
 * A candidate.injected event's data (and the snapshot's injections): a user's
 * edited candidate, pending, applied (as candidate `candidate`) or refused.
 * @typedef {object} Injection
 * @property {number} injection
 * @property {"pending" | "applied" | "refused"} status
 * @property {number} edited_from
 * @property {string} author
 * @property {string} reason
 * @property {number | null} candidate
 * @property {Record<string, string>} [components]
 * @property {number} [seq]
 */

// A candidate.new event's data in the snapshot's shape.
/** @param {RunState} S @param {CandidateNew} d @returns {Candidate} */
export function candidateFromEvent(S, d) {
  const preview = Object.entries(d.components || {}).map(([name, text]) => `[${name}]\n${text}`).join("\n\n");
  return {
    index: d.index, parents: d.parents || [], origin: d.origin, iteration: d.iteration,
    metric_calls: d.metric_calls, val_score: d.val_score, objective_scores: d.objective_scores || {},
    on_front: false, prompt_tokens: d.prompt_tokens, mean_output_tokens: d.mean_output_tokens,
    mean_latency_ms: d.mean_latency_ms, preview: clip(preview, S.limits.preview), cost: d.cost ?? 0,
    // Rounded as the snapshot's score matrix is, so a live page and a reload draw the same front.
    scores: S.tasks.map((key) => (key in (d.task_scores || {}) ? Math.round(/** @type {Record<string, number>} */ (d.task_scores)[key] * 1000) / 1000 : null)),
    verdicts: S.tasks.map((key) => VERDICT_LETTERS[(d.verdicts || {})[key]] || "-").join(""),
    unscored: d.scored === false,
    author: d.author ?? null,
  };
}

// The run's best candidate as the server named it, else (live) the highest val score (first of ties).
/** @param {RunState} S @returns {number | null} */
export function bestIndex(S) {
  if (S.run.best_index !== null && S.run.best_index !== undefined && S.byIndex.has(S.run.best_index)) return S.run.best_index;
  // A finished run's best is the server's: none when no candidate has a score (every call failed).
  if (!S.run.active) return null;
  let best = null;
  // A null val score compares as 0 (JavaScript's `>`).
  const score = (/** @type {number} */ i) => /** @type {number} */ (S.byIndex.get(i).val_score);
  for (const i of S.order) if (!S.byIndex.get(i).unscored && (best === null || score(i) > score(best))) best = i;
  return best;
}

// How many tasks a candidate tops; null when its scores are not loaded (not a heatmap row).
/** @param {RunState} S @param {number} index */
export function leadCount(S, index) {
  if (!S.byIndex.get(index)?.scores) return null;
  let n = 0;
  for (const group of Object.values(S.leaders)) if (group.includes(index)) n += 1;
  return n;
}

// Every heatmap row's lead count (index → tasks it tops), in one pass over the leaders.
/** @param {RunState} S @returns {Map<number, number>} */
export function leadCounts(S) {
  const counts = new Map(S.rows.filter((i) => S.byIndex.get(i)?.scores).map((i) => [i, 0]));
  for (const group of Object.values(S.leaders)) for (const i of group) if (counts.has(i)) counts.set(i, /** @type {number} */ (counts.get(i)) + 1);
  return counts;
}

// The lineage of a big run, summarised: the front, the best, the seed and the
// `top` by val score, with every ancestor of theirs (so each line leads back to
// the seed), ascending.
/** @param {RunState} S @param {number} top @returns {number[]} */
export function lineageSummary(S, top) {
  const ranked = S.order.filter((i) => S.byIndex.get(i).val_score !== null && S.byIndex.get(i).val_score !== undefined)
    .sort((a, b) => /** @type {number} */ (S.byIndex.get(b).val_score) - /** @type {number} */ (S.byIndex.get(a).val_score) || a - b);
  // No best yet (null) is filtered out with any index the state does not hold.
  const stack = [...S.members, ...ranked.slice(0, top), 0, /** @type {number} */ (bestIndex(S))].filter((i) => S.byIndex.has(i));
  /** @type {Set<number>} */
  const kept = new Set();
  while (stack.length) {
    const i = /** @type {number} */ (stack.pop());
    if (kept.has(i)) continue;
    kept.add(i);
    for (const p of S.byIndex.get(i).parents) if (S.byIndex.has(p)) stack.push(p);
  }
  return [...kept].sort((a, b) => a - b);
}

// The candidates the table adds to show the first `upto` of S.order (Infinity: all of them).
/** @param {RunState} S @param {number} upto */
export const tableRowsNext = (S, upto) => S.order.slice(S.tableShown, Math.min(S.order.length, upto));

// "best", "front" or "other": how charts colour a candidate (`best`: bestIndex(S),
// passed by a caller that asks for many candidates, so it is found once).
/**
 * @param {RunState} S
 * @param {number} index
 * @returns {"best" | "front" | "other"}
 */
export function role(S, index, best = bestIndex(S)) {
  if (index === best) return "best";
  return S.members.has(index) ? "front" : "other";
}

// Members by the shared rule (front.js), as the server's recorder computes them,
// over the rows the page holds: they include every front member, so the front
// is exact (dashboard/selectors.py run_snapshot).
/** @param {RunState} S */
export function recomputeMembers(S) {
  const rows = /** @type {Array<[number, Array<number | null>]>} */ (S.rows.map((i) => [i, S.byIndex.get(i).scores]));
  S.members = new Set(frontMembers(rows));
  for (const [i, c] of S.byIndex) c.on_front = S.members.has(i);
}

// The best-so-far line: a step at every new best val score, then on to the
// budget spent so far (the best has held since).
/** @param {RunState} S */
export function bestSoFar(S) {
  /** @type {number[]} */
  const x = [], y = [];
  let best = -Infinity;
  for (const i of S.order) {
    const c = S.byIndex.get(i);
    if (c.val_score === null || c.val_score === undefined) continue;
    if (c.val_score > best || !x.length) { best = Math.max(best, c.val_score); x.push(c.metric_calls); y.push(best); }
  }
  const end = Math.max(S.run.budget_used || 0, x.length ? x[x.length - 1] : 0);
  if (x.length && end > x[x.length - 1]) { x.push(end); y.push(best); }
  return { x, y };
}

// Parent → child edges of one candidate (Plotly line segments, null-separated);
// `merge` when it has two parents.
/** @param {RunState} S @param {Candidate} c */
export function lineageEdges(S, c) {
  /** @type {Array<number | null>} */
  const x = [], y = [];
  for (const p of c.parents) {
    const parent = S.byIndex.get(p);
    if (!parent) continue;
    x.push(p, c.index, null); y.push(parent.val_score, c.val_score, null);
  }
  return { x, y, merge: c.parents.length > 1 };
}

// [pass, borderline, fail] counts of one candidate's val verdicts: the
// snapshot's as recorded, or counted from a live candidate's letters.
/** @param {RunState} S @param {number | null} index @returns {number[]} */
export function verdictCounts(S, index) {
  /** @type {Record<string, number>} */
  const counts = { p: 0, b: 0, f: 0 };
  const c = /** @type {Map<number | null, Candidate>} */ (S.byIndex).get(index); // no best yet: null
  if (c?.verdict_counts) return c.verdict_counts;
  if (c) for (const letter of /** @type {string} */ (c.verdicts)) if (letter in counts) counts[letter] += 1;
  return ["p", "b", "f"].map((k) => counts[k]);
}

// ---- event merging ---------------------------------------------------------------
//
// One function per event type changes the state; the page then redraws what
// the type touches. Each returns what changed, or null when the event changes
// nothing (a resumed run re-announces its seed). Events arrive in seq order
// (live-socket.js LiveSocket drops repeats and catches gaps up). `d`: the
// type's payload (optimizer/runs/event_types.py), as far as the state reads it.

/** @type {Record<string, (S: RunState, d: any, now: number) => unknown>} */
const merges = {
  "run.status": (S, /** @type {{status: string, phase?: string, error?: string}} */ d, now) => {
    Object.assign(S.run, { status: d.status, phase: d.phase ?? S.run.phase, active: ACTIVE.includes(d.status) });
    if (d.error) S.run.error = d.error;
    if (S.run.active) { S.run.finished_at = null; S.finishedAt = null; S.run.error = d.error || ""; S.run.stop_reason = ""; } // resumed: run_resume clears the error and the stop reason
    S.run.pause_requested = d.status === "running" && (d.phase ?? "").startsWith("pausing");
    if (!S.run.started_at && d.status === "running") S.run.started_at = new Date(now).toISOString();
    return S.run;
  },
  "run.budget": (S, /** @type {{used: number, total: number, cost?: number, tokens?: number, usage?: Usage, eta_seconds?: number | null}} */ d) => {
    Object.assign(S.run, { budget_used: d.used, budget_total: d.total });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, tokens: d.tokens, usage: d.usage ?? S.run.usage, eta_seconds: d.eta_seconds });
    return S.run;
  },
  "candidate.new": (S, /** @type {CandidateNew} */ d) => {
    if (S.byIndex.has(d.index)) return null; // a resumed run re-announces the seed
    const c = candidateFromEvent(S, d);
    addCandidate(S, c);
    if (S.run.seed_score === null && c.index === 0 && !c.unscored) S.run.seed_score = c.val_score;
    return c;
  },
  "front.updated": (S, /** @type {{index: number, took?: string[], joined?: string[], leaders?: Record<string, number[]>, best_index?: number | null, best_score?: number | null}} */ d) => {
    // A delta (took / joined); a run recorded before deltas sends the whole front (leaders).
    if (d.leaders) S.leaders = { ...d.leaders };
    for (const key of d.took || []) S.leaders[key] = [d.index];
    for (const key of d.joined || []) S.leaders[key] = [...(S.leaders[key] || []).filter((i) => i !== d.index), d.index];
    if (d.best_index !== undefined && d.best_index !== null) S.run.best_index = d.best_index;
    if (d.best_score !== undefined) S.run.best_score = d.best_score;
    return S.leaders;
  },
  // Its metric calls are the budget line at the checkpoint it paused at (lower than the
  // last run.budget when a lost worker's iteration was not recorded).
  "run.paused": (S, /** @type {{metric_calls?: number}} */ d) => {
    S.run.pause_requested = false;
    if (typeof d.metric_calls === "number") S.run.budget_used = d.metric_calls;
    return S.run;
  },
  "run.finished": (S, /** @type {{status: string, best_index: number | null, best_score: number | null, seed_score?: number | null, cost?: number, stop_reason?: string}} */ d, now) => {
    Object.assign(S.run, { status: d.status, active: false, best_index: d.best_index, best_score: d.best_score, seed_score: d.seed_score === undefined ? S.run.seed_score : d.seed_score });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, stop_reason: d.stop_reason, eta_seconds: null });
    S.finishedAt = now;
    return S.run;
  },
};

// Merge one event ({type, seq, data}) into the state; returns what changed
// (null: nothing). Types the state does not keep (proposal, trials, error)
// return their data: the page only lists them.
/**
 * @param {RunState} S
 * @param {RunEvent} event
 * @param {number} now ms
 * @returns {unknown}
 */
export function mergeEvent(S, event, now) {
  const d = event.data || {};
  const merge = merges[event.type];
  const changed = merge ? merge(S, d, now) : d;
  if (S.run.kind === "external" && S.run.active) S.run.client_seen_at = new Date(now).toISOString(); // every batch is a sign of life
  return changed;
}

// The run page's model: the snapshot, then every websocket event merged into
// it. Pure (no DOM, no Plotly, no clock of its own: callers pass `now`), so
// Node's tests import it (tests/js/). The page's modules draw from it.
import { frontMembers } from "../front.js";
import { clip } from "../format.js";

const ACTIVE = ["queued", "running", "stopping"];
const VERDICT_LETTERS = { pass: "p", borderline: "b", fail: "f" };

export function createState() {
  return {
    run: null, tasks: [], taskColumn: new Map(), verifiers: [],
    byIndex: new Map(), order: [], members: new Set(), leaders: {},
    // The heatmap's rows: candidates whose per-task scores the page holds (a big
    // run's snapshot sends the front and the top ones; "more rows" fetches the
    // others a page at a time, after `rowsCursor`, the last index asked for;
    // Infinity once there are no more).
    rows: [], rowsCursor: -1,
    // How many candidates (the first ones of `order`) the candidates table shows.
    tableShown: 0,
    selected: new Set(), finishedAt: null, limits: null, shownBest: null,
  };
}

// The snapshot sends big lists as columns ({field: [value per item]}): one object per item here.
export function unzip(columns) {
  const fields = Object.keys(columns);
  const n = fields.length ? columns[fields[0]].length : 0;
  const out = new Array(n);
  for (let k = 0; k < n; k++) { const item = {}; for (const f of fields) item[f] = columns[f][k]; out[k] = item; }
  return out;
}

// The JSON snapshot (/runs/<id>/snapshot.json): `candidates` come as columns,
// their per-task scores as a matrix with one row per index of `rows` (every
// candidate of a small run; a big run's front and top ones); the others have
// `scores: null` until "more rows" brings them (addScoresPage).
export function loadSnapshot(S, snap) {
  S.run = snap.run;
  S.tasks = snap.tasks;
  S.tasks.forEach((key, k) => S.taskColumn.set(key, k));
  S.verifiers = snap.verifiers;
  S.limits = snap.limits;
  const rowOf = new Map(snap.rows.map((index, k) => [index, k]));
  for (const c of unzip(snap.candidates)) addCandidate(S, { ...c, scores: rowOf.has(c.index) ? snap.scores[rowOf.get(c.index)] : null });
  S.rowsCursor = -1;
  S.members = new Set(snap.front.members);
  S.leaders = snap.front.leaders;
}

export function addCandidate(S, c) {
  S.byIndex.set(c.index, c);
  S.order.push(c.index);
  if (c.scores) S.rows.push(c.index);
}

// Merge a page of scores.json ({tasks, rows, scores, previews, more}) into the
// heatmap's rows: candidates the page already holds scores for are skipped, a
// task the page does not know is dropped, rows stay in index order. Returns
// the indices added.
export function addScoresPage(S, page) {
  const column = page.tasks.map((key) => S.taskColumn.get(key));
  const added = [];
  page.rows.forEach((index, k) => {
    const c = S.byIndex.get(index);
    S.rowsCursor = Math.max(S.rowsCursor, index);
    if (!c || c.scores) return;
    c.scores = S.tasks.map(() => null);
    column.forEach((at, j) => { if (at !== undefined) c.scores[at] = page.scores[k][j]; });
    c.preview = page.previews[k];
    S.rows.push(index);
    added.push(index);
  });
  S.rows.sort((a, b) => a - b);
  if (!page.more) S.rowsCursor = Infinity;
  return added;
}

// Whether scores.json has rows the heatmap does not show yet.
export const moreRows = (S) => S.rows.length < S.order.length && S.rowsCursor !== Infinity;

// A candidate.new event's data in the snapshot's shape.
export function candidateFromEvent(S, d) {
  const preview = Object.entries(d.components || {}).map(([name, text]) => `[${name}]\n${text}`).join("\n\n");
  return {
    index: d.index, parents: d.parents || [], origin: d.origin, iteration: d.iteration,
    metric_calls: d.metric_calls, val_score: d.val_score, objective_scores: d.objective_scores || {},
    on_front: false, prompt_tokens: d.prompt_tokens, mean_output_tokens: d.mean_output_tokens,
    mean_latency_ms: d.mean_latency_ms, preview: clip(preview, S.limits.preview), cost: d.cost ?? 0,
    // Rounded as the snapshot's score matrix is, so a live page and a reload draw the same front.
    scores: S.tasks.map((key) => (key in (d.task_scores || {}) ? Math.round(d.task_scores[key] * 1000) / 1000 : null)),
    verdicts: S.tasks.map((key) => VERDICT_LETTERS[(d.verdicts || {})[key]] || "-").join(""),
  };
}

// The run's best candidate as the server named it, else the highest val score (first of ties).
export function bestIndex(S) {
  if (S.run.best_index !== null && S.run.best_index !== undefined && S.byIndex.has(S.run.best_index)) return S.run.best_index;
  let best = null;
  for (const i of S.order) if (best === null || S.byIndex.get(i).val_score > S.byIndex.get(best).val_score) best = i;
  return best;
}

// How many tasks a candidate tops; null when its scores are not loaded (not a heatmap row).
export function leadCount(S, index) {
  if (!S.byIndex.get(index)?.scores) return null;
  let n = 0;
  for (const group of Object.values(S.leaders)) if (group.includes(index)) n += 1;
  return n;
}

// Every heatmap row's lead count (index → tasks it tops), in one pass over the leaders.
export function leadCounts(S) {
  const counts = new Map(S.rows.filter((i) => S.byIndex.get(i)?.scores).map((i) => [i, 0]));
  for (const group of Object.values(S.leaders)) for (const i of group) if (counts.has(i)) counts.set(i, counts.get(i) + 1);
  return counts;
}

// The lineage of a big run, summarised: the front, the best, the seed and the
// `top` by val score, with every ancestor of theirs (so each line leads back to
// the seed), ascending.
export function lineageSummary(S, top) {
  const ranked = S.order.filter((i) => S.byIndex.get(i).val_score !== null && S.byIndex.get(i).val_score !== undefined)
    .sort((a, b) => S.byIndex.get(b).val_score - S.byIndex.get(a).val_score || a - b);
  const stack = [...S.members, ...ranked.slice(0, top), 0, bestIndex(S)].filter((i) => S.byIndex.has(i));
  const kept = new Set();
  while (stack.length) {
    const i = stack.pop();
    if (kept.has(i)) continue;
    kept.add(i);
    for (const p of S.byIndex.get(i).parents) if (S.byIndex.has(p)) stack.push(p);
  }
  return [...kept].sort((a, b) => a - b);
}

// The candidates the table adds to show the first `upto` of S.order (Infinity: all of them).
export const tableRowsNext = (S, upto) => S.order.slice(S.tableShown, Math.min(S.order.length, upto));

// "best", "front" or "other": how charts colour a candidate (`best`: bestIndex(S),
// passed by a caller that asks for many candidates, so it is found once).
export function role(S, index, best = bestIndex(S)) {
  if (index === best) return "best";
  return S.members.has(index) ? "front" : "other";
}

// Members by the shared rule (front.js), as the server's recorder computes them,
// over the rows the page holds: they include every front member, so the front
// is exact (dashboard/selectors.py run_snapshot).
export function recomputeMembers(S) {
  S.members = new Set(frontMembers(S.rows.map((i) => [i, S.byIndex.get(i).scores])));
  for (const [i, c] of S.byIndex) c.on_front = S.members.has(i);
}

// The best-so-far line: a step at every new best val score, then on to the
// budget spent so far (the best has held since).
export function bestSoFar(S) {
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
export function lineageEdges(S, c) {
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
export function verdictCounts(S, index) {
  const counts = { p: 0, b: 0, f: 0 };
  const c = S.byIndex.get(index);
  if (c?.verdict_counts) return c.verdict_counts;
  if (c) for (const letter of c.verdicts) if (letter in counts) counts[letter] += 1;
  return ["p", "b", "f"].map((k) => counts[k]);
}

// ---- event merging ---------------------------------------------------------------
//
// One function per event type changes the state; the page then redraws what
// the type touches. Each returns what changed, or null when the event changes
// nothing (a resumed run re-announces its seed). Events arrive in seq order
// (live-socket.js LiveSocket drops repeats and catches gaps up).

const merges = {
  "run.status": (S, d, now) => {
    Object.assign(S.run, { status: d.status, phase: d.phase ?? S.run.phase, active: ACTIVE.includes(d.status) });
    if (d.error) S.run.error = d.error;
    if (S.run.active) { S.run.finished_at = null; S.finishedAt = null; S.run.error = d.error || ""; S.run.stop_reason = ""; } // resumed: run_resume clears the error and the stop reason
    if (!S.run.started_at && d.status === "running") S.run.started_at = new Date(now).toISOString();
    return S.run;
  },
  "run.budget": (S, d) => {
    Object.assign(S.run, { budget_used: d.used, budget_total: d.total });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, tokens: d.tokens, usage: d.usage ?? S.run.usage, eta_seconds: d.eta_seconds });
    return S.run;
  },
  "candidate.new": (S, d) => {
    if (S.byIndex.has(d.index)) return null; // a resumed run re-announces the seed
    const c = candidateFromEvent(S, d);
    addCandidate(S, c);
    if (S.run.seed_score === null && c.index === 0) S.run.seed_score = c.val_score;
    return c;
  },
  "front.updated": (S, d) => {
    // A delta (took / joined); a run recorded before deltas sends the whole front (leaders).
    if (d.leaders) S.leaders = { ...d.leaders };
    for (const key of d.took || []) S.leaders[key] = [d.index];
    for (const key of d.joined || []) S.leaders[key] = [...(S.leaders[key] || []).filter((i) => i !== d.index), d.index];
    if (d.best_index !== undefined && d.best_index !== null) S.run.best_index = d.best_index;
    if (d.best_score !== undefined) S.run.best_score = d.best_score;
    return S.leaders;
  },
  "run.finished": (S, d, now) => {
    Object.assign(S.run, { status: d.status, active: false, best_index: d.best_index, best_score: d.best_score, seed_score: d.seed_score ?? S.run.seed_score });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, stop_reason: d.stop_reason, eta_seconds: null });
    S.finishedAt = now;
    return S.run;
  },
};

// Merge one event ({type, seq, data}) into the state; returns what changed
// (null: nothing). Types the state does not keep (proposal, trials, error)
// return their data: the page only lists them.
export function mergeEvent(S, event, now) {
  const d = event.data || {};
  const merge = merges[event.type];
  const changed = merge ? merge(S, d, now) : d;
  if (S.run.kind === "external" && S.run.active) S.run.client_seen_at = new Date(now).toISOString(); // every batch is a sign of life
  return changed;
}

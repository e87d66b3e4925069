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
    selected: new Set(), finishedAt: null, limits: null, shownBest: null,
  };
}

// The JSON snapshot (/runs/<id>/snapshot.json): scores and verdicts come as
// matrices, one row per candidate.
export function loadSnapshot(S, snap) {
  S.run = snap.run;
  S.tasks = snap.tasks;
  S.tasks.forEach((key, k) => S.taskColumn.set(key, k));
  S.verifiers = snap.verifiers;
  S.limits = snap.limits;
  snap.candidates.forEach((c, row) => addCandidate(S, { ...c, scores: snap.scores[row], verdicts: snap.verdicts[row] }));
  S.members = new Set(snap.front.members);
  S.leaders = snap.front.leaders;
}

export function addCandidate(S, c) {
  S.byIndex.set(c.index, c);
  S.order.push(c.index);
}

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

// How many tasks a candidate tops.
export function leadCount(S, index) {
  let n = 0;
  for (const group of Object.values(S.leaders)) if (group.includes(index)) n += 1;
  return n;
}

// "best", "front" or "other": how charts colour a candidate.
export function role(S, index) {
  if (index === bestIndex(S)) return "best";
  return S.members.has(index) ? "front" : "other";
}

// Members by the shared rule (front.js), as the server's recorder computes them.
export function recomputeMembers(S) {
  S.members = new Set(frontMembers(S.order.map((i) => [i, S.byIndex.get(i).scores])));
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

// [pass, borderline, fail] counts of one candidate's val verdicts.
export function verdictCounts(S, index) {
  const counts = { p: 0, b: 0, f: 0 };
  const c = S.byIndex.get(index);
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

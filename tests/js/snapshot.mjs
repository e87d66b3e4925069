// A run page snapshot in the shape dashboard/selectors.py run_snapshot answers,
// and candidate.new events in the shape the recorder publishes: the one builder
// of run-page data for Node's tests.
import { createState, loadSnapshot } from "../../static/js/run/state.js";

export const TASKS = ["t1", "t2"];

// The snapshot's candidate columns (dashboard/selectors.py CANDIDATE_COLUMNS).
export const CANDIDATE_COLUMNS = [
  "index", "parents", "origin", "iteration", "metric_calls", "val_score", "objective_scores", "on_front", "prompt_tokens",
  "mean_output_tokens", "mean_latency_ms", "verdict_counts", "preview", "cost",
];

// {field: [value per item]}, as the snapshot sends big lists.
export function columns(items, fields) {
  return Object.fromEntries(fields.map((f) => [f, items.map((item) => item[f])]));
}

// `candidates`: one object per candidate (its `scores` row, if it is a heatmap
// row); `rows`: the indices whose scores come along (default: all, as for a
// run of up to HEATMAP_ROWS candidates).
export function snapshot({ run = {}, candidates = [], leaders = {}, members = null, rows = null, rejected = [] } = {}) {
  const full = candidates.map((c) => ({
    parents: [], origin: "seed", iteration: 0, metric_calls: 0, objective_scores: {}, on_front: false,
    prompt_tokens: 10, mean_output_tokens: 5, mean_latency_ms: 1, verdict_counts: [0, 0, 0], preview: "", cost: 0, ...c,
  }));
  const shown = rows ?? full.map((c) => c.index);
  const byIndex = new Map(full.map((c) => [c.index, c]));
  return {
    run: {
      id: 1, name: "run", kind: "managed", status: "running", phase: "optimizing", active: true,
      best_index: null, best_score: null, seed_score: null, budget_used: 0, budget_total: 100,
      last_seq: 0, started_at: "2026-01-01T00:00:00Z", finished_at: null, eta_seconds: null,
      cost: 0, tokens: 0, usage: {}, pricing: "priced", stop_reason: "", error: "",
      client_seen_at: null, silent_after: 60, ...run,
    },
    verifiers: ["policy"],
    tasks: TASKS,
    candidates: columns(full, CANDIDATE_COLUMNS),
    rows: shown,
    scores: shown.map((i) => byIndex.get(i).scores ?? TASKS.map(() => null)),
    front: { members: members ?? [], leaders },
    rejected: columns(rejected, ["metric_calls", "parent", "before", "after", "minibatch_size"]),
    proposals: [], trials: [], errors: [],
    limits: { text: 2000, reasons: 3, preview: 40, proposals: 20, trials: 50, errors: 20, scores_page: 500 },
  };
}

export function loaded(options) {
  const S = createState();
  loadSnapshot(S, snapshot(options));
  return S;
}

let seq = 0;
export function candidateNew(index, { val = 0.5, parents = index ? [index - 1] : [], task_scores = {}, verdicts = {}, ...rest } = {}) {
  seq += 1;
  return {
    seq, type: "candidate.new",
    data: { index, parents, origin: index ? "reflection" : "seed", iteration: index, metric_calls: 10 * index, val_score: val,
            components: { instructions: `prompt ${index}` }, task_scores, verdicts, ...rest },
  };
}

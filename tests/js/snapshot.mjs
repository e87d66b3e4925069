// A run page snapshot in the shape dashboard/selectors.py run_snapshot answers,
// and candidate.new events in the shape the recorder publishes: the one builder
// of run-page data for Node's tests.
import { createState, loadSnapshot } from "../../static/js/run/state.js";

export const TASKS = ["t1", "t2"];

export function snapshot({ run = {}, candidates = [], leaders = {}, members = null } = {}) {
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
    candidates: candidates.map((c) => ({
      parents: [], origin: "seed", iteration: 0, metric_calls: 0, objective_scores: {}, on_front: false,
      prompt_tokens: 10, mean_output_tokens: 5, mean_latency_ms: 1, preview: "", cost: 0, ...c,
    })),
    scores: candidates.map((c) => c.scores ?? TASKS.map(() => null)),
    verdicts: candidates.map((c) => c.verdicts ?? "--"),
    front: { members: members ?? [], leaders },
    rejected: [], proposals: [], trials: [], errors: [],
    limits: { text: 2000, reasons: 3, preview: 40, proposals: 20, trials: 50, errors: 20 },
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

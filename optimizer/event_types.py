"""The run event catalogue: every RunEvent.type and its payload.

Events are written by `optimizer.events.publish_run_event` (the recorder in the
runner is the main writer) and reach browsers as websocket messages
`{"seq": n, "type": t, "data": {...}}`. The run page's JSON snapshot plus these
events must be enough to draw every chart; the DB rows (Run, Candidate,
Evaluation) are the source of truth for pages rendered from scratch.

All text inside payloads is untrusted and already bounded in size by the writer
(outputs and prompts truncated to PREVIEW_CHARS with an ellipsis); browsers must
still escape it.
"""

PREVIEW_CHARS = 2000

# {"status": RunStatus value, "phase": str, "error": str (only when failed)}
RUN_STATUS = "run.status"
# {"used": int, "total": int (metric calls), "cost": float (money spent so far, every role),
#  "max_cost": float|null (the run's cost cap), "tokens": int (input + output, every role),
#  "usage": {task|reflection|judge|total: {calls, tokens_in, tokens_out, cost}},
#  "eta_seconds": float|null (wall time left at the pace observed on the worker)}
# — the latest of gepa's budget updates, folded into the iteration's next batch
# (or sent alone when nothing else was published for a second)
RUN_BUDGET = "run.budget"
# A candidate entered the pool (the seed, an accepted reflection or a merge) and
# was scored on the valset:
# {"index", "parents": [int], "origin": "seed"|"reflection"|"merge", "iteration",
#  "metric_calls", "val_score", "objective_scores": {verifier_id: float},
#  "task_scores": {task_key: float}, "verdicts": {task_key: "pass"|"borderline"|"fail"},
#  "prompt_chars": int, "prompt_tokens": int, "mean_output_tokens": float, "mean_latency_ms": float,
#  "components": {name: text (preview)},
#  "usage": {task|reflection|judge|total: {calls, tokens_in, tokens_out, cost}} (what the
#  iteration that found it spent, its valset scoring included), "cost": float}
CANDIDATE_NEW = "candidate.new"
# What a newly scored candidate changed in GEPA's per-task Pareto front (a
# delta: the whole front is in the run page's snapshot, and folding the deltas
# of a run's events in seq order rebuilds it):
# {"index": int (the candidate just scored),
#  "took": [task_key] (tasks it now leads alone: their leaders become [index]),
#  "joined": [task_key] (tasks where it ties the top score: index joins their leaders),
#  "added": [candidate index] (entered the front ★), "removed": [candidate index] (left it),
#  "best_index": int, "best_score": float}
# Runs recorded before this shape carry {"members": [...], "leaders": {task_key: [...]}, ...}
# (the whole front); the run page reads both.
FRONT_UPDATED = "front.updated"
# A reflection proposal (accepted or rejected):
# {"iteration", "parent": int, "components": [names updated], "accepted": bool,
#  "candidate": int|null (the new index when accepted), "before": float, "after": float
#  (minibatch score sums), "minibatch": [task_key], "texts": {name: text (preview)},
#  "reasoning": str, "metric_calls": int,
#  "usage": {task|reflection|judge|total: {calls, tokens_in, tokens_out, cost}}, "cost": float}
#  (usage: what the iteration spent up to the decision)
PROPOSAL = "proposal"
# One evaluation batch: {"candidate": int|null (null: a proposal not yet accepted),
#  "split": "train"|"val"|"holdout", "items": [{"task_key", "score", "verdict",
#  "output": preview, "reasons": [str]}]}
TRIALS = "trials"
# {"where": "reflection"|"task_lm"|"verifier"|"runner", "message": str, "iteration": int|null}
ERROR = "error"
# {"status", "best_index", "best_score", "seed_score", "metric_calls", "cost": float,
#  "stop_reason": str ("budget reached", "cost cap reached", "perfect validation score",
#  "no improvement in N iterations", "stopped by the user", "cancelled", "" when failed)}
RUN_FINISHED = "run.finished"
# The promotion report, when the run has a holdout split: the seed and the best
# candidate scored on it at the end (their Evaluations carry split "holdout"):
# {"seed_score": float, "best_index": int, "best_score": float, "tasks": int}
HOLDOUT_SCORED = "holdout.scored"
# Diagnostics: {"host": str, "note": str}
WORKER_PING = "worker.ping"

CATALOGUE = (RUN_STATUS, RUN_BUDGET, CANDIDATE_NEW, FRONT_UPDATED, PROPOSAL, TRIALS, ERROR, RUN_FINISHED,
             HOLDOUT_SCORED, WORKER_PING)

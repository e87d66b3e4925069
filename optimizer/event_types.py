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
# {"used": int, "total": int}  — metric calls; sent after every gepa budget update
RUN_BUDGET = "run.budget"
# A candidate entered the pool (the seed, an accepted reflection or a merge) and
# was scored on the valset:
# {"index", "parents": [int], "origin": "seed"|"reflection"|"merge", "iteration",
#  "metric_calls", "val_score", "objective_scores": {verifier_id: float},
#  "task_scores": {task_key: float}, "verdicts": {task_key: "pass"|"borderline"|"fail"},
#  "prompt_chars": int, "prompt_tokens": int, "mean_output_tokens": float, "mean_latency_ms": float,
#  "components": {name: text (preview)}}
CANDIDATE_NEW = "candidate.new"
# GEPA's per-task Pareto front after a valset evaluation:
# {"members": [candidate index], "leaders": {task_key: [candidate index]},
#  "best_index": int, "best_score": float}
FRONT_UPDATED = "front.updated"
# A reflection proposal (accepted or rejected):
# {"iteration", "parent": int, "components": [names updated], "accepted": bool,
#  "candidate": int|null (the new index when accepted), "before": float, "after": float
#  (minibatch score sums), "minibatch": [task_key], "texts": {name: text (preview)},
#  "reasoning": str, "metric_calls": int}
PROPOSAL = "proposal"
# One evaluation batch: {"candidate": int|null (null: a proposal not yet accepted),
#  "split": "train"|"val"|"holdout", "items": [{"task_key", "score", "verdict",
#  "output": preview, "reasons": [str]}]}
TRIALS = "trials"
# {"where": "reflection"|"task_lm"|"verifier"|"runner", "message": str, "iteration": int|null}
ERROR = "error"
# {"status", "best_index", "best_score", "seed_score", "metric_calls"}
RUN_FINISHED = "run.finished"
# The promotion report, when the run has a holdout split: the seed and the best
# candidate scored on it at the end (their Evaluations carry split "holdout"):
# {"seed_score": float, "best_index": int, "best_score": float, "tasks": int}
HOLDOUT_SCORED = "holdout.scored"
# Diagnostics: {"host": str, "note": str}
WORKER_PING = "worker.ping"

CATALOGUE = (RUN_STATUS, RUN_BUDGET, CANDIDATE_NEW, FRONT_UPDATED, PROPOSAL, TRIALS, ERROR, RUN_FINISHED,
             HOLDOUT_SCORED, WORKER_PING)

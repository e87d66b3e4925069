"""What a run will do before it starts: the dry run's plan.

`run_plan` turns a validated config and its task rows into plain numbers: split
sizes, what each preset means in metric calls for this set, the range of
iterations, task-model, judge and reflection calls, tokens, money and wall time,
and the warnings. Tokens and latency come from what the endpoint did in past
evaluations here (the recorder stored them), else from one probe call when the
caller allows it, else from the prompt's length; the plan says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from django.db.models import Avg, Count

from optimizer.config import PRESET_PROPOSALS, RunConfig, proposal_cost, resolved_lm
from optimizer.lm import LMConfig, LMError, build_lm
from optimizer.models import Evaluation, Run
from verifiers_app.engine.json_types import JSONObject

CHARS_PER_TOKEN = 4
GUESSED_OUTPUT_TOKENS = 200
GUESSED_LATENCY_MS = 1500.0
FEEDBACK_CHARS = 300  # what a reflective example adds besides the input and the output
HISTORY_ROWS = 500
HISTORY_RUNS = 20


@dataclass(frozen=True)
class CallStats:
    tokens_in: float
    tokens_out: float
    latency_ms: float
    source: str  # "past evaluations" | "probe call" | "simulator" | "guess"


def observed_stats(lm: LMConfig) -> CallStats | None:
    """Mean tokens and latency of this endpoint's task calls in past runs here."""
    # The few latest runs of this model first (the runs table is small), then their rows.
    runs = Run.objects.filter(
        config__task_lm__model=lm.model, config__task_lm__provider=lm.provider
    ).order_by("-pk")
    run_ids = list(runs.values_list("pk", flat=True)[:HISTORY_RUNS])
    rows = Evaluation.objects.filter(candidate__run_id__in=run_ids, tokens_out__gt=0).order_by(
        "-pk"
    )[:HISTORY_ROWS]
    stats = Evaluation.objects.filter(pk__in=rows.values("pk")).aggregate(
        n=Count("pk"), tin=Avg("tokens_in"), tout=Avg("tokens_out"), latency=Avg("latency_ms")
    )
    if not stats["n"]:
        return None
    return CallStats(
        stats["tin"], stats["tout"], stats["latency"], f"past evaluations ({stats['n']})"
    )


def probe_stats(lm: LMConfig, prompt: str, task_input: str) -> CallStats | None:
    """One real task call (the seed prompt on one train task); None if it fails."""
    try:
        response = build_lm(lm).complete(
            [{"role": "system", "content": prompt}, {"role": "user", "content": task_input}]
        )
    except LMError:
        return None
    return CallStats(response.tokens_in, response.tokens_out, response.latency_ms, "probe call")


def _task_stats(lm: LMConfig, prompt: str, rows: list[JSONObject], *, probe: bool) -> CallStats:
    mean_input = fmean(len(row.get("input", "")) for row in rows) if rows else 0
    tokens_in = (len(prompt) + mean_input) / CHARS_PER_TOKEN
    if lm.provider == "demo":
        return CallStats(tokens_in, GUESSED_OUTPUT_TOKENS / 2, lm.simulated_latency_ms, "simulator")
    observed = observed_stats(lm)
    if observed is not None:
        return observed
    if probe and rows:
        probed = probe_stats(lm, prompt, rows[0].get("input", ""))
        if probed is not None:
            return probed
    return CallStats(tokens_in, lm.max_tokens or GUESSED_OUTPUT_TOKENS, GUESSED_LATENCY_MS, "guess")


def _cost(lm: LMConfig | None, calls: float, tokens_in: float, tokens_out: float) -> float:
    if lm is None or lm.provider == "demo":
        return 0.0
    return (
        calls
        * (tokens_in * lm.price_in_per_million + tokens_out * lm.price_out_per_million)
        / 1_000_000
    )


def _round(value: float) -> float:
    return round(value, 6) if value < 1 else round(value, 2)


def run_plan(config: RunConfig, rows: list[JSONObject], *, probe: bool = False) -> JSONObject:
    """The plan of a run whose endpoint names are resolved into LMConfigs.
    `rows` are the task rows with their split. `probe`: allow one real task call
    when the endpoint has no history here (a dry run; never the live form)."""
    splits = {
        name: sum(1 for row in rows if row.get("split") == split)
        for name, split in (
            ("train", config.splits.train),
            ("val", config.splits.val),
            ("holdout", config.splits.holdout),
        )
        if split
    }
    V, m = splits.get("val", 0), config.minibatch_size  # noqa: N806 - the paper's names: |val|, minibatch
    budget = config.max_metric_calls(V)
    iteration = config.iteration_cost(V)
    presets = {
        name: {"proposals": proposals, "metric_calls": V + proposals * proposal_cost(V, m)}
        for name, proposals in PRESET_PROPOSALS.items()
    }
    # Hard cap: the run stops once less than one iteration's worst case is left.
    spendable = max(0, budget - V)
    iterations_low = spendable // iteration  # every proposal accepted (each scored on the valset)
    iterations_high = (
        (spendable - iteration) // (2 * m) + 1 if spendable >= iteration else 0
    )  # every one rejected
    metric_low = V + iterations_low * iteration if iterations_low else V
    metric_high = budget if iterations_low else V
    verify = config.verify
    attempts = verify.max_verify if verify.enabled else 1
    task_calls = (metric_low, metric_high * attempts)
    judge_calls = (
        (metric_low, metric_high * attempts) if verify.enabled and verify.judge == "llm" else (0, 0)
    )
    per_proposal = len(config.seed_components) if config.module_selector == "all" else 1
    reflection_calls = (iterations_low * per_proposal, iterations_high * per_proposal)

    task_lm = resolved_lm(config.task_lm)  # run_plan_for resolved them
    reflection_lm = resolved_lm(config.reflection_lm)
    judge_lm = resolved_lm(verify.judge_lm) if verify.enabled and verify.judge == "llm" else None
    prompt = "\n\n".join(config.seed_components.values())
    train = [row for row in rows if row.get("split") == config.splits.train]
    task = _task_stats(task_lm, prompt, train or rows, probe=probe)
    # A reflection reads the prompt and m examples (input, output, feedback) and writes a prompt.
    reflect_in = (
        len(prompt) + m * (FEEDBACK_CHARS + (task.tokens_in * CHARS_PER_TOKEN - len(prompt)))
    ) / CHARS_PER_TOKEN
    reflect_in += m * task.tokens_out
    reflect_out = len(prompt) * 1.5 / CHARS_PER_TOKEN
    reflect_latency = (
        GUESSED_LATENCY_MS
        if reflection_lm.provider != "demo"
        else reflection_lm.simulated_latency_ms
    )
    judge_in, judge_out = task.tokens_in + task.tokens_out, 20

    def spend(i: int) -> dict[str, float]:
        tokens = (
            task_calls[i] * (task.tokens_in + task.tokens_out)
            + reflection_calls[i] * (reflect_in + reflect_out)
            + judge_calls[i] * (judge_in + judge_out)
        )
        cost = (
            _cost(task_lm, task_calls[i], task.tokens_in, task.tokens_out)
            + _cost(reflection_lm, reflection_calls[i], reflect_in, reflect_out)
            + _cost(judge_lm, judge_calls[i], judge_in, judge_out)
        )
        seconds = (
            task_calls[i] * task.latency_ms / 1000 / config.concurrency
            + judge_calls[i] * task.latency_ms / 1000 / config.concurrency
            + reflection_calls[i] * reflect_latency / 1000
        )
        return {"tokens": round(tokens), "cost": _round(cost), "seconds": round(seconds, 1)}

    low, high = spend(0), spend(1)
    holdout = _holdout_plan(
        config, splits.get("holdout", 0), task, task_lm, judge_lm, attempts, (judge_in, judge_out)
    )
    warnings: list[str] = []
    budget_warning = config.budget_warning(V) if V else None
    if budget_warning:
        warnings.append(budget_warning)
    if V and budget < V + iteration:
        warnings.append(
            f"budget: {budget} metric calls cover the seed's {V} but not one iteration ({iteration} at most): nothing will be optimized."
        )
    priced = [
        lm for lm in (task_lm, reflection_lm, judge_lm) if lm is not None and lm.provider != "demo"
    ]
    if any(not (lm.price_in_per_million or lm.price_out_per_million) for lm in priced):
        warnings.append(
            "cost: an endpoint has no price set, so its calls count as free; set its prices to see money."
        )
    if config.budget.max_cost is not None and low["cost"] > config.budget.max_cost:
        warnings.append(
            f"cost cap: {config.budget.max_cost} is below the lowest expected cost ({low['cost']}): the run will stop early."
        )
    if (
        holdout
        and config.budget.max_cost is not None
        and high["cost"] + holdout["cost"][1] > config.budget.max_cost
    ):
        warnings.append(
            f"cost cap: the held-out evaluation at the end (up to {holdout['cost'][1]}) comes out of "
            f"the same cap of {config.budget.max_cost}; a run that spends most of it may not finish "
            "scoring the seed and the best on the held-out split."
        )
    if task.source == "guess":
        warnings.append(
            "time and tokens are guesses: this endpoint has no past evaluations here (a dry run probes it once)."
        )
    free = not priced
    return {
        "splits": splits,
        "minibatch_size": m,
        "presets": presets,
        "budget": {
            "metric_calls": budget,
            "max_cost": config.budget.max_cost,
            "iteration_cost": iteration,
        },
        "iterations": [iterations_low, iterations_high],
        "metric_calls": [metric_low, metric_high],
        "calls": {
            "task": list(task_calls),
            "reflection": list(reflection_calls),
            "judge": list(judge_calls),
        },
        "tokens": [low["tokens"], high["tokens"]],
        "cost": [low["cost"], high["cost"]],
        "free": free,
        "seconds": [low["seconds"], high["seconds"]],
        "per_task_call": {
            "tokens_in": round(task.tokens_in),
            "tokens_out": round(task.tokens_out),
            "latency_ms": round(task.latency_ms, 1),
            "source": task.source,
        },
        "holdout": holdout,
        "warnings": warnings,
    }


def _holdout_plan(
    config: RunConfig,
    tasks: int,
    task: CallStats,
    task_lm: LMConfig,
    judge_lm: LMConfig | None,
    attempts: int,
    judge_tokens: tuple[float, int],
) -> JSONObject | None:
    """The held-out evaluation at the end (optimizer/runs/runner.py `_score_holdout`):
    the seed and the best candidate on every held-out task. They are not metric
    calls (the budget in metric calls is the optimization's alone) but they are
    model calls, so tokens, money and time count them. One set of evaluations
    when the best is the seed; the plan shows the most."""
    if not config.splits.holdout or not tasks:
        return None
    evaluations = 2 * tasks
    task_calls = (evaluations, evaluations * attempts)
    judging = config.verify.enabled and config.verify.judge == "llm"
    judge_calls = task_calls if judging else (0, 0)
    judge_in, judge_out = judge_tokens

    def spend(i: int) -> dict[str, float]:
        tokens = task_calls[i] * (task.tokens_in + task.tokens_out) + judge_calls[i] * (
            judge_in + judge_out
        )
        cost = _cost(task_lm, task_calls[i], task.tokens_in, task.tokens_out) + _cost(
            judge_lm, judge_calls[i], judge_in, judge_out
        )
        seconds = (task_calls[i] + judge_calls[i]) * task.latency_ms / 1000 / config.concurrency
        return {"tokens": round(tokens), "cost": _round(cost), "seconds": round(seconds, 1)}

    low, high = spend(0), spend(1)
    return {
        "split": config.splits.holdout,
        "tasks": tasks,
        "evaluations": evaluations,
        "metric_calls": 0,
        "calls": {"task": list(task_calls), "judge": list(judge_calls)},
        "tokens": [low["tokens"], high["tokens"]],
        "cost": [low["cost"], high["cost"]],
        "seconds": [low["seconds"], high["seconds"]],
    }

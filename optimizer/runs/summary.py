"""The run read model: what every page, list row, push and API answer shows of
a run, built here only (run_summary), and the runs list's row of it. The run
engine's publisher pushes list rows (optimizer.runs.events), so this module
stands below it and imports nothing that publishes."""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from dashboard.lib.site_url import site_url
from optimizer.config import DEMO_MODEL_LABEL, lm_is_simulator
from optimizer.models import Run, RunStatus
from optimizer.runs.budget import format_cost, run_max_cost, run_pricing
from verifiers_app.engine.json_types import JSONObject

# What every run read joins (run_summary reads them; "progress": the run's
# budget, cost, usage, heartbeat and last_seq, on their own narrow row).
RUN_JOINS = ("task_set", "owner", "best_candidate", "chosen_candidate", "progress")
# The run page calls an external client silent after this long without a batch or a control poll.
SILENT_AFTER_SECONDS = 30


def run_is_simulator(run: Run) -> bool:
    """True when the run's task or reflection model is the offline demo simulator
    (the one definition behind every "simulator" badge and the API's `simulator`)."""
    config = run.config if isinstance(run.config, dict) else {}
    return not run.is_external and any(
        lm_is_simulator(config.get(role)) for role in ("task_lm", "reflection_lm")
    )


def run_url(run: Run) -> str:
    """The run page's absolute address (dashboard/lib/site_url.py says which)."""
    return site_url() + reverse("runs:detail", args=[run.pk])


def run_model_label(run: Run) -> JSONObject:
    """The task model as the UI shows it; the demo simulator is labelled as one."""
    if run.is_external:  # the user's own adapter and models: we only know where it runs
        return {"label": "the run's own adapter", "is_simulator": False, "model": ""}
    lm = (run.config or {}).get("task_lm") or {}
    model = (
        lm if isinstance(lm, str) else lm.get("model", "")
    )  # a str: a name never resolved (an imported run)
    label = DEMO_MODEL_LABEL if lm_is_simulator(lm) else (model or "–")
    return {"label": label, "is_simulator": run_is_simulator(run), "model": model}


def run_summary(run: Run) -> JSONObject:
    """The run read model: every field a page, a list row (run_list_row) or the
    API (optimizer.api.RunOut.of) shows of a run, built here only. The queryset
    should come from run_list or run_for_user (their joins keep it one query)."""
    pricing = run_pricing(run.config, run.external)
    return {
        "id": run.pk,
        "name": str(run),
        "status": run.status,
        "phase": run.phase,
        "active": run.status in RunStatus.active(),
        "budget_used": run.budget_used,
        "budget_total": run.budget_total,
        "seed_score": run.seed_score,
        "best_score": run.best_score,
        "delta": (run.best_score - run.seed_score)
        if run.best_score is not None and run.seed_score is not None
        else None,
        "budget_pct": min(100, round(100 * run.budget_used / run.budget_total))
        if run.budget_total
        else 0,
        "best_index": run.best_candidate.index if run.best_candidate is not None else None,
        "chosen_index": run.chosen_candidate.index if run.chosen_candidate is not None else None,
        "simulator": run_is_simulator(run),
        "url": run_url(run),
        "notes": run.notes,
        "forked_from": run.forked_from_id,
        "forked_from_candidate": run.forked_from_candidate,
        "error": run.error,
        "stop_requested": run.stop_requested,
        "pause_requested": run.pause_requested,
        "model": run_model_label(run),
        "task_set": run.task_set.name if run.task_set is not None else "",
        "owner": run.owner.get_username(),
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "last_seq": run.last_seq,
        "task_set_id": run.task_set_id,
        "tags": list(run.tags or []),
        "archived": run.archived,
        "kind": run.kind,
        "external": run.external or {},
        **run_client_status(run),
        # Money and tokens, recorded by the runner (never re-summed here).
        "cost": run.cost,
        "pricing": pricing,
        "cost_label": format_cost(run.cost, pricing),
        "tokens": int((run.usage or {}).get("total", {}).get("tokens_in", 0))
        + int((run.usage or {}).get("total", {}).get("tokens_out", 0)),
        "usage": run.usage or {},
        "max_cost": run_max_cost(run.config),
        "stop_reason": run.stop_reason,
    }


def run_client_status(run: Run) -> JSONObject:
    """For an external run: when its tracker was last heard from (a batch or a
    stop poll) and whether it went silent. Empty for a native run."""
    if not run.is_external:
        return {}
    seen = run.heartbeat_at
    silent = run.status in RunStatus.active() and (
        seen is None or (timezone.now() - seen).total_seconds() > SILENT_AFTER_SECONDS
    )
    return {
        "client_seen_at": seen.isoformat() if seen else None,
        "client_silent": silent,
        "silent_after": SILENT_AFTER_SECONDS,
    }


LIST_ROW_FIELDS = (
    "id",
    "name",
    "status",
    "phase",
    "best_score",
    "seed_score",
    "delta",
    "budget_used",
    "budget_total",
    "budget_pct",
    "model",
    "task_set",
    "owner",
    "created_at",
    "started_at",
    "finished_at",
    "last_seq",
    "task_set_id",
    "tags",
    "archived",
    "kind",
    "cost",
    "pricing",
    "cost_label",
    "stop_reason",
)


def run_list_row(run: Run) -> JSONObject:
    """One row of the runs list: what the page, list.json and the `runs` push show
    (no error text or other run-page fields). `last_seq` orders two versions of a row."""
    summary = run_summary(run)
    return {key: summary[key] for key in LIST_ROW_FIELDS}


def run_list_row_for_push(run_id: int) -> tuple[int, JSONObject] | None:
    """(owner id, list row) of a run for the `runs` group, or None if it is gone.
    One query; the owner id lets a consumer admit the owner without another."""
    # Sent after every event batch of a live run: leave out the JSON a row never shows
    # (the frozen task rows and specs, the best prompt), whose decoding cost ~10 ms each time.
    run = (
        Run.objects.select_related(*RUN_JOINS)
        .defer(
            "tasks_snapshot",
            "verifier_specs",
            "best_candidate__components",
            "best_candidate__parents",
            "best_candidate__objective_scores",
            "chosen_candidate__components",
            "chosen_candidate__parents",
            "chosen_candidate__objective_scores",
        )
        .filter(pk=run_id)
        .first()
    )
    return None if run is None else (run.owner_id, run_list_row(run))

"""Re-scoring pages of a run: the form (a saved verifier, or an edited spec),
the result beside the original, its progress JSON, and "launch a new run from
this best under the new verifier". Who controls the run re-scores it and forks
from a scoring; whoever sees the run sees its scorings."""

from __future__ import annotations

import json

from django.contrib import messages
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from dashboard.lib.api_errors import split_problem
from optimizer import selectors as run_selectors
from optimizer.models import Run, Scoring, ScoringStatus
from optimizer.scorings.reads import scoring_out
from optimizer.scorings.services import ScoringRefused, scoring_create, scoring_source
from verifiers_app.engine import SpecError
from verifiers_app.models import Verifier
from verifiers_app.services import spec_from_json, verifier_upsert

RANKING_ROWS = 200


def _scoring(run: Run, scoring_id: int) -> Scoring:
    scoring = run.scorings.select_related("created_by").filter(pk=scoring_id).first()
    if scoring is None:
        raise Http404("No such scoring of this run")
    return scoring


def _run_specs_text(run: Run) -> str:
    """The run's own frozen specs, as the form's starting point (one spec, or a list)."""
    specs = run.verifier_specs
    return json.dumps(specs[0] if len(specs) == 1 else specs, indent=2)


@require_http_methods(["GET", "POST"])
def scoring_new(request, run_id: int):
    """GET: the form. POST: ask for the scoring, then its page (the form again, naming the field, when refused)."""
    run = run_selectors.run_for_user(request.user, run_id, control=True)
    verifiers = Verifier.objects.visible_to(request.user).order_by("slug")
    form = {
        "mode": "spec",
        "verifier_id": "",
        "version": "",
        "spec": _run_specs_text(run),
        "name": "",
    }
    problems: list[tuple[str, str]] = []
    if request.method == "POST":
        post = request.POST
        form = {
            "mode": "verifier" if post.get("mode") == "verifier" else "spec",
            "verifier_id": post.get("verifier_id", "")[:100],
            "version": post.get("version", "")[:10],
            "spec": post.get("spec", ""),
            "name": post.get("name", "")[:200],
        }
        try:
            if form["mode"] == "verifier":
                version = form["version"].strip()
                if version and not version.isdigit():
                    raise SpecError("version: a whole number")
                specs, source = scoring_source(
                    user=request.user,
                    verifier_id=form["verifier_id"],
                    version=int(version) if version else None,
                )
            else:
                specs, source = scoring_source(
                    user=request.user, spec=spec_from_json(form["spec"], source="spec")
                )
            scoring = scoring_create(
                run=run, user=request.user, specs=specs, source=source, name=form["name"]
            )
        except SpecError as error:
            problems = [split_problem(p) for p in error.problems]
        except ScoringRefused as error:
            problems = [("run", str(error))]
        else:
            return redirect(reverse("runs:scoring", args=[run.pk, scoring.pk]))
    return render(
        request,
        "runs/scoring_new.html",
        {
            "run": run,
            "verifiers": verifiers,
            "form": form,
            "problems": problems,
            "scorings": run.scorings.all(),
        },
        status=400 if problems else 200,
    )


@require_safe
def scoring_detail(request, run_id: int, scoring_id: int):
    run = run_selectors.run_for_user(request.user, run_id)
    scoring = _scoring(run, scoring_id)
    original_front = set(scoring.summary.get("original_front", []))
    rows = [
        {
            "index": c.index,
            "rank": c.rank,
            "original_rank": c.original_rank,
            "val_score": c.val_score,
            "original_score": c.original_score,
            "on_front": c.on_front,
            "was_on_front": c.index in original_front,
            "moved": (c.original_rank or 0) - (c.rank or 0),
            "moved_by": abs((c.original_rank or 0) - (c.rank or 0)),
            "delta": None
            if c.val_score is None or c.original_score is None
            else c.val_score - c.original_score,
            "cut": len(c.cut_tasks),
            "kept": c.kept,
        }
        for c in scoring.candidates.order_by("rank", "index").defer("task_scores")[:RANKING_ROWS]
    ]
    return render(
        request,
        "runs/scoring.html",
        {
            "run": run,
            "scoring": scoring,
            "summary": scoring.summary,
            "rows": rows,
            "shown": len(rows),
            "done": scoring.status == ScoringStatus.DONE,
            "can_control": run.controllable_by(request.user),
            "scorings": run.scorings.all(),
            "specs_text": json.dumps(scoring.specs, indent=2),
        },
    )


@require_safe
def scoring_json(request, run_id: int, scoring_id: int):
    """The scoring's status and progress (its page polls it until it is done)."""
    run = run_selectors.run_for_user(request.user, run_id)
    out = scoring_out(_scoring(run, scoring_id))
    return JsonResponse({k: out[k] for k in ("id", "status", "done", "total", "error")})


@require_POST
def scoring_fork(request, run_id: int, scoring_id: int):
    """Launch a new run from the scoring's best under its verifiers: each spec is
    saved as one of the user's verifiers first (a new verifier, or a new version of
    their verifier with that id; unchanged when it is already the same), then the
    launch form opens prefilled with the best candidate's prompt and those verifiers."""
    run = run_selectors.run_for_user(request.user, run_id, control=True)
    scoring = _scoring(run, scoring_id)
    best = (scoring.summary or {}).get("best")
    if scoring.status != ScoringStatus.DONE or not best:
        messages.error(request, "This scoring has no best candidate (yet) to start from.")
        return redirect(reverse("runs:scoring", args=[run.pk, scoring.pk]))
    try:
        with transaction.atomic():
            ids = [verifier_upsert(owner=request.user, spec=spec)[0].slug for spec in scoring.specs]
    except SpecError as error:
        messages.error(request, f"The scoring's verifier could not be saved: {error}")
        return redirect(reverse("runs:scoring", args=[run.pk, scoring.pk]))
    query = urlencode(
        {"fork": run.pk, "candidate": best["index"], "verifiers": ",".join(ids)}, doseq=False
    )
    return redirect(f"{reverse('runs:new')}?{query}")

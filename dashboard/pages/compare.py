"""Compare candidates and runs, prompt history, promotion, export and import.
Views check access, read query parameters, call one selector or
service and render; bad parameters get a 400 page naming the parameter."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_safe

from dashboard import compare_selectors as sel
from dashboard import judgments
from dashboard.forms import PromotionForm, RunImportForm
from dashboard.lib.storable import JsonTooDeep, parse_json
from optimizer.confidence import LEVEL, METHOD, MIN_PAIRS, shared_draws
from optimizer.downloads import run_export_download
from optimizer.export import RunImportError, run_import, run_import_stream
from optimizer.external.replay import run_replay_gepa_state
from optimizer.external.services import ExternalRunError
from optimizer.models import Run, ScoringStatus
from optimizer.promotion import DEFAULT_MIN_IMPROVEMENT, promotion_report, run_promote
from optimizer.runs.budget import format_cost, run_pricing
from optimizer.runs.summary import RUN_JOINS, run_summary
from optimizer.scorings.reads import finished_scoring, scoring_val_scores
from optimizer.selectors import run_for_user

MAX_IMPORT_BYTES = 50 * 1024 * 1024


# How every interval on these pages is made, said once per page (templates/compare/_method.html).
CONFIDENCE = {"method": METHOD, "level": f"{LEVEL:.0%}", "min_pairs": MIN_PAIRS}


def _candidate_for(run: Run, index: int):
    candidate = run.candidates.filter(index=index).first()
    if candidate is None:
        raise Http404(f"Run {run.pk} has no candidate {index}.")
    return candidate


def _bad_request(request, message: str, *, run: Run | None = None):
    return render(request, "compare/error.html", {"message": message, "run": run}, status=400)


@require_safe
def compare(request, run_id: int):
    run = run_for_user(request.user, run_id)
    chosen = request.GET.getlist("c")
    if len(chosen) < 2:
        # No selection yet (or one candidate): let the user pick here too.
        return render(
            request,
            "compare/pick.html",
            {
                "run": run,
                "candidates": run.candidates.order_by("index").values(
                    "index", "origin", "parents", "val_score"
                ),
                "chosen": chosen,
            },
        )
    scoring, scoring_problem = finished_scoring(run, request.GET.get("scoring"))
    try:
        candidates = sel.compare_candidates(run, chosen)
        filters = sel.TaskFilters.from_query(request.GET, candidates)
        diffs = sel.component_diffs(run, candidates, request.GET.get("diff", "parent"))
        val_scores = scoring_val_scores(scoring, candidates) if scoring else None
        table = sel.task_table(run, candidates, filters, val_scores)
    except sel.CompareError as exc:
        return _bad_request(request, str(exc), run=run)
    query = request.GET.copy()
    query.pop("page", None)
    if scoring is None:  # an id that names no finished scoring: the links show the original
        query.pop("scoring", None)
    pricing = run_pricing(run.config or {}, run.external)
    for candidate_diff in diffs:
        candidate_diff.cost_label = format_cost(candidate_diff.candidate.cost, pricing)
    with shared_draws():  # the lifts over the same tasks draw their resamples once
        lift = sel.lift_breakdown(run)
        pair_lifts = sel.pair_lifts(candidates, table.filters.baseline, val_scores)
    return render(
        request,
        "compare/compare.html",
        {
            "run": run,
            "verdict_rule": judgments.thresholds_text(judgments.run_thresholds(run)),
            "candidates": candidates,
            "diffs": diffs,
            "diff": request.GET.get("diff", "parent"),
            "table": table,
            "filters": filters,
            "base_query": query.urlencode(),
            "c_query": urlencode([("c", c.index) for c in candidates]),
            "lift": lift,
            "pair_lifts": pair_lifts,
            "scoring": scoring,
            "scoring_problem": scoring_problem,
            "scoring_links": _scoring_links(run, query),
            "not_rescored": [c.index for c in candidates if c.index not in val_scores]
            if val_scores is not None
            else [],
            "confidence": CONFIDENCE,
            "diff_choices": _diff_choices(run, candidates, request.GET.get("diff", "")),
        },
    )


def _scoring_links(run: Run, query) -> list[tuple[str, str, bool]]:
    """The "Scoring: original | names" switch: (label, query string, shown) for the
    original and each finished re-scoring, every other query parameter kept."""
    shown = query.get("scoring", "")
    finished = run.scorings.filter(status=ScoringStatus.DONE).values_list("pk", "name")
    links = []
    for pk, name in [("", "original"), *((str(pk), name) for pk, name in finished)]:
        q = query.copy()
        q.pop("scoring", None)
        if pk:
            q["scoring"] = pk
        links.append((name, q.urlencode(), shown == pk))
    return links


def _diff_choices(run: Run, candidates, diff: str) -> list[int]:
    """Besides parent and seed, the prompts diffs are offered against: the compared
    candidates, the best and the one asked for (`diff=<index>` takes any index),
    not every candidate of the run (a 10,000-option list)."""
    choices = {c.index for c in candidates}
    if run.best_candidate is not None:
        choices.add(run.best_candidate.index)
    if diff.isdigit():
        choices.add(int(diff))
    return sorted(choices)


@require_safe
def compare_task(request, run_id: int):
    run = run_for_user(request.user, run_id)
    try:
        candidates = sel.compare_candidates(run, request.GET.getlist("c"))
        split = request.GET.get("split", "val")
        task, evaluations = sel.task_drilldown(run, candidates, request.GET.get("task", ""), split)
    except sel.CompareError as exc:
        return _bad_request(request, str(exc), run=run)
    return render(
        request,
        "compare/task.html",
        {
            "run": run,
            "task_key": request.GET.get("task"),
            "split": split,
            "task": task,
            "evaluations": evaluations,
            "verdict_rule": judgments.thresholds_text(judgments.run_thresholds(run)),
            "expected": json.dumps(task["expected"], indent=2, ensure_ascii=False)
            if task and task.get("expected") is not None
            else "",
            "back": reverse("compare:compare", args=[run.pk])
            + "?"
            + urlencode([("c", c.index) for c in candidates] + [("split", split)]),
        },
    )


@require_safe
def history(request, run_id: int, index: int):
    run = run_for_user(request.user, run_id)
    candidate = _candidate_for(run, index)
    ancestry, components = sel.prompt_history(run, candidate)
    return render(
        request,
        "compare/history.html",
        {
            "run": run,
            "candidate": candidate,
            "ancestry": ancestry,
            "components": components,
        },
    )


def _attachment(response: HttpResponse, filename: str) -> HttpResponse:
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_safe
def download_candidate(request, run_id: int, index: int | None, fmt: str):
    run = run_for_user(request.user, run_id)
    if index is None:
        candidate = sel.best_candidate(run)
        if candidate is None:
            raise Http404(f"Run {run.pk} has no scored candidate yet.")
    else:
        candidate = _candidate_for(run, index)
    name = f"run-{run.pk}-candidate-{candidate.index}.{fmt}"
    if fmt == "json":
        return _attachment(
            JsonResponse(
                {
                    "run": run.pk,
                    "index": candidate.index,
                    "components": candidate.components,
                    "parents": candidate.parents,
                    "origin": candidate.origin,
                    "val_score": candidate.val_score,
                },
                json_dumps_params={"indent": 2, "ensure_ascii": False},
            ),
            name,
        )
    if len(candidate.components) == 1:
        text = next(iter(candidate.components.values()))
    else:
        text = "\n\n".join(f"## {k}\n{v}" for k, v in candidate.components.items())
    return _attachment(HttpResponse(text, content_type="text/plain; charset=utf-8"), name)


@require_safe
def export_json(request, run_id: int):
    run = run_for_user(request.user, run_id)
    return run_export_download(request, run, "json")


@require_safe
def export_csv(request, run_id: int):
    run = run_for_user(request.user, run_id)
    return run_export_download(request, run, "csv")


@require_http_methods(["GET", "POST"])
def import_run(request):
    error = None
    if request.method == "POST":
        form = RunImportForm(request.POST, request.FILES, max_bytes=MAX_IMPORT_BYTES)
        upload = form.cleaned_data["file"] if form.is_valid() else None
        if upload is None:
            error = "; ".join(form.problems())
        elif upload.read(1) == b"\x80":  # a pickle: gepa's run_dir checkpoint (gepa_state.bin)
            upload.seek(0)
            try:
                run = run_replay_gepa_state(owner=request.user, raw=upload.read())
            except ExternalRunError as exc:
                error = str(exc)
            else:
                messages.success(
                    request, f"Replayed {run} with {run.candidates.count()} candidates."
                )
                return redirect(reverse("runs:detail", args=[run.pk]))
        else:
            upload.seek(0)
            streamed = upload.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"{")
            upload.seek(0)
            try:
                if streamed:  # an exported run: read one candidate at a time
                    run = run_import_stream(owner=request.user, raw=upload)
                else:  # not an object, so not an export: parsed whole to say what it is
                    run = run_import(
                        owner=request.user, data=parse_json(upload.read().decode("utf-8-sig"))
                    )
            except UnicodeDecodeError:
                error = "file: not UTF-8 text."
            except json.JSONDecodeError as exc:
                error = (
                    f"file: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})."
                )
            except JsonTooDeep as exc:
                error = (
                    f"file: {str(exc).removeprefix('value: ')}; an exported run is never that deep."
                )
            except RunImportError as exc:  # a ValueError too: before the catch-all below
                error = str(exc)
            except ValueError as exc:  # e.g. an integer literal of thousands of digits
                error = f"file: not valid JSON ({exc})."
            else:
                if run.imported_before:
                    messages.info(
                        request,
                        f"This file was imported before, as {run}: here it is (nothing new was saved).",
                    )
                else:
                    messages.success(
                        request, f"Imported {run} with {run.candidates.count()} candidates."
                    )
                picks = dict.fromkeys(
                    c.index for c in (sel.seed_candidate(run), sel.best_candidate(run)) if c
                )
                return redirect(
                    reverse("compare:compare", args=[run.pk])
                    + "?"
                    + urlencode([("c", i) for i in picks])
                )
    return render(request, "compare/import.html", {"error": error}, status=400 if error else 200)


@require_http_methods(["GET", "POST"])
def promotion(request, run_id: int):
    run = run_for_user(request.user, run_id)
    seed, best = sel.seed_candidate(run), sel.best_candidate(run)
    if request.method == "POST":
        form = PromotionForm(request.POST)
        if not form.is_valid():
            messages.error(request, "; ".join(form.problems()))
        else:
            candidate = _candidate_for(run, form.cleaned_data["candidate"])
            try:
                run_promote(
                    run=run, candidate=candidate, user=request.user
                )  # PermissionDenied → 403
            except ValueError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(
                    request, f"Candidate {candidate.index} is now the run's chosen prompt."
                )
        return redirect("compare:promotion", run_id=run.pk)
    raw = request.GET.get("margin", "")
    try:
        margin = float(raw) if raw else DEFAULT_MIN_IMPROVEMENT
        if not 0 <= margin <= 1:
            raise ValueError
    except ValueError:
        return _bad_request(request, "margin: must be a number between 0 and 1.", run=run)
    if request.GET.get("c"):
        try:
            best = _candidate_for(run, int(request.GET["c"]))
        except ValueError:
            return _bad_request(request, "c: not a candidate index.", run=run)
    report = promotion_report(seed=seed, candidate=best, margin=margin) if seed and best else None
    return render(
        request,
        "compare/promotion.html",
        {
            "run": run,
            "verdict_rule": judgments.thresholds_text(judgments.run_thresholds(run)),
            "seed": seed,
            "best": best,
            "report": report,
            "margin": margin,
            "can_promote": run.controllable_by(request.user),
            "confidence": CONFIDENCE,
        },
    )


@require_safe
def compare_runs(request):
    visible = Run.objects.visible_to(request.user)
    a_id, b_id = request.GET.get("a"), request.GET.get("b")
    if not (a_id and b_id):
        return render(
            request, "compare/runs_pick.html", {"runs": visible.select_related("task_set")[:200]}
        )
    try:
        a, b = (
            get_object_or_404(visible.select_related(*RUN_JOINS), pk=int(x)) for x in (a_id, b_id)
        )
    except ValueError:
        return _bad_request(request, "a, b: run ids must be numbers.")
    try:
        sel.check_same_task_set(a, b)
    except sel.CompareError as exc:
        return _bad_request(request, str(exc))
    pair = sel.best_vs_best(a, b, request.GET.get("page", "1"))
    best_a, best_b = pair.best_a, pair.best_b
    return render(
        request,
        "compare/runs.html",
        {
            "a": a,
            "b": b,
            "best_a": best_a,
            "best_b": best_b,
            "page": pair.page,
            "lift": pair.lift,
            "confidence": CONFIDENCE,
            "config_diff": sel.config_diff(a.config, b.config),
            "figure": sel.score_curves([a, b]),
            "prompt_diff": sel.prompt_diff(best_a, best_b) if best_a and best_b else [],
            "base_query": urlencode({"a": a.pk, "b": b.pk}),
            "spend": [run_summary(a), run_summary(b)],
            "verdict_rules": [
                (r.pk, judgments.thresholds_text(judgments.run_thresholds(r))) for r in (a, b)
            ],
        },
    )

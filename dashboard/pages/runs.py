"""Run pages: the runs list, the run page and its JSON snapshot, the candidate
page, and the control POSTs. Views check access, call one selector or service
and render; the work lives in optimizer.selectors (runs list, run read model, access),
dashboard.selectors (snapshot, candidate page) and optimizer.services."""

from __future__ import annotations

import html

from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from dashboard import selectors
from dashboard.forms import RunAnnotateForm, RunArchiveForm, RunControlForm
from dashboard.lib.storable import JsonTooDeep, parse_json, without_nul
from optimizer import selectors as run_selectors
from optimizer import services
from optimizer.config import DEMO_MODEL_NAME, RunConfigError
from optimizer.models import EXTERNAL_OBSERVE_ONLY, CandidateInjection, Run, RunStatus
from optimizer.reviewer_notes import MAX_NOTE_CHARS, notes_refusal, train_task_keys
from optimizer.runs.summary import run_client_status, run_list_row, run_summary
from optimizer.scorings.reads import scoring_run_page
from optimizer.tasksets.files import rule_text
from optimizer.val_vs_holdout import run_val_vs_holdout
from verifiers_app.models import Verifier

LIST_LIMIT = 200


def _list_filters(request) -> dict:
    """The runs list's filters and sort from the query string; anything malformed is ignored."""
    get = request.GET
    status = get.get("status", "")
    task_set = get.get("task_set", "")
    sort = get.get("sort", run_selectors.DEFAULT_RUN_SORT)
    return {
        "status": status if status in RunStatus.values else "",
        "search": without_nul(get.get("q", "")).strip()[:200],
        "task_set": int(task_set) if task_set.isdigit() else None,
        "verifier": without_nul(get.get("verifier", "")).strip()[:200],
        "model": without_nul(get.get("model", "")).strip()[:200],
        "archived": get.get("archived") == "1",
        "sort": sort
        if sort.removeprefix("-") in run_selectors.RUN_SORTS
        else run_selectors.DEFAULT_RUN_SORT,
    }


# Column headings of the runs list, each sortable (key of run_selectors.RUN_SORTS).
LIST_COLUMNS = [
    ("name", "Run", ""),
    ("status", "Status", ""),
    ("best_score", "Best score", "num"),
    ("budget", "Budget", ""),
    ("cost", "Cost", "num"),
    ("model", "Model", ""),
    ("task_set", "Task set", ""),
    ("owner", "Owner", ""),
    ("started", "Started", ""),
    ("finished", "Finished", ""),
]


def _sort_headers(request, current: str) -> list[dict]:
    """Each heading's link: the first click sorts ascending (scores and dates: descending), the next flips it."""
    headers = []
    for key, label, css in LIST_COLUMNS:
        active = current.removeprefix("-") == key
        descending_first = key in {"best_score", "started", "finished", "budget", "cost"}
        if active:
            target = key if current.startswith("-") else f"-{key}"
        else:
            target = f"-{key}" if descending_first else key
        query = request.GET.copy()
        query["sort"] = target
        headers.append(
            {
                "key": key,
                "label": label,
                "css": css,
                "href": f"?{query.urlencode()}",
                "aria_sort": ("descending" if current.startswith("-") else "ascending")
                if active
                else "none",
            }
        )
    return headers


@require_safe
def run_list(request):
    filters = _list_filters(request)
    runs = run_selectors.run_list(user=request.user, **filters)[:LIST_LIMIT]
    return render(
        request,
        "runs/list.html",
        {
            "rows": [run_list_row(run) for run in runs],
            "statuses": RunStatus.choices,
            "filters": filters,
            "choices": run_selectors.run_list_filter_choices(user=request.user),
            "headers": _sort_headers(request, filters["sort"]),
        },
    )


@require_safe
def run_list_json(request):
    """The list's rows as JSON: runs-list.js reloads them whenever its `/ws/runs/`
    socket (re)connects, then applies the pushed rows."""
    runs = run_selectors.run_list(user=request.user, **_list_filters(request))
    return JsonResponse({"runs": [run_list_row(run) for run in runs[:LIST_LIMIT]]})


@require_safe
def run_detail(request, run_id: int):
    """The run page; `?scoring=<id>` shows its candidate table and best under that re-scoring."""
    run = run_selectors.run_for_user(request.user, run_id)
    val_vs_holdout = run_val_vs_holdout(run)
    shown_scoring, scoring_table, scoring_problem = scoring_run_page(
        run, request.GET.get("scoring")
    )
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "summary": run_summary(run),
            "explain": selectors.run_explainer(run),
            "family": selectors.run_family(run, user=request.user),
            "can_control": run.controllable_by(request.user),
            "can_steer": run.steerable_by(request.user),
            "simulator_limits": run_selectors.run_simulator_limits(run),
            "val_vs_holdout": val_vs_holdout,
            "val_vs_holdout_rows": [
                ("val", "Val", val_vs_holdout["val"]),
                ("holdout", "Held-out", val_vs_holdout["holdout"]),
            ],
            "notes_refusal": notes_refusal(run),
            "external_observe_only": EXTERNAL_OBSERVE_ONLY,
            "shown_scoring": shown_scoring,
            "scoring_table": scoring_table,
            "scoring_problem": scoring_problem,
        },
    )


# The run page's JSON (2.2 MB at 10,000 candidates × 1,000 tasks: mostly numbers)
# is gzipped when the browser accepts it, ~5× smaller over the wire. Nothing secret
# in it to guess at (BREACH needs a secret beside attacker-chosen text), and
# Django's gzip adds random bytes anyway.
@gzip_page
@require_safe
def run_snapshot(request, run_id: int):
    run = run_selectors.run_for_user(request.user, run_id)
    with selectors.collector_paused():  # built and encoded without the collector's passes
        return JsonResponse(
            selectors.run_snapshot(run), json_dumps_params={"separators": (",", ":")}
        )


@gzip_page
@require_safe
def run_scores(request, run_id: int):
    """More heatmap rows for the run page: `?after=<index>` (the last it has, -1
    for none), at most `limit` (default and cap: the snapshot's scores page)."""
    run = run_selectors.run_for_user(request.user, run_id)
    after, limit = request.GET.get("after", "-1"), request.GET.get("limit", "")
    if not after.lstrip("-").isdigit() or (limit and not limit.isdigit()):
        return JsonResponse({"error": "after and limit must be whole numbers"}, status=400)
    limit = min(int(limit or selectors.SCORES_PAGE), selectors.SCORES_PAGE) or selectors.SCORES_PAGE
    return JsonResponse(selectors.run_scores_page(run, after=max(-1, int(after)), limit=limit))


@require_safe
def run_val_vs_holdout_json(request, run_id: int):
    """The run page's "Val vs held-out" panel (optimizer/val_vs_holdout.py), asked
    again when the held-out scores arrive over the websocket."""
    run = run_selectors.run_for_user(request.user, run_id)
    return JsonResponse(run_val_vs_holdout(run))


@require_safe
def run_client_json(request, run_id: int):
    """An external run's tracker: last heard from, silent or not (the run page polls it)."""
    run = run_selectors.run_for_user(request.user, run_id)
    return JsonResponse({"status": run.status, **run_client_status(run)})


@require_safe
def candidate_detail(request, run_id: int, index: int):
    run = run_selectors.run_for_user(request.user, run_id)
    detail = selectors.candidate_detail(run, index)
    if detail is None:
        raise Http404("No such candidate in this run.")
    refusal = notes_refusal(run)
    return render(
        request,
        "runs/candidate.html",
        {
            "run": run,
            **detail,
            "rows_html": _evaluation_rows_html(
                detail["rows"], notes=None if refusal is not None else train_task_keys(run)
            ),
            "inject": selectors.injection_offer(run, request.user),
            "notes_refusal": refusal,
            "notes_writable": refusal is None and run.steerable_by(request.user),
        },
    )


# A note on a task GEPA never draws into a minibatch is kept (exports, forks), but no reflection reads it.
NOT_REFLECTED = (
    "GEPA's reflections draw their minibatches from the run's train split, which this task is not "
    "in: no reflection of this run reads a note on it (a fork with other splits would)."
)


def _note_cell_html(task_key: str, *, reflected: bool) -> str:
    """The drill-down's "Note for GEPA" on one task (static/js/candidate-notes.js fills it in)."""
    key = html.escape(task_key)
    hint = (
        ""
        if reflected
        else f'<p class="muted" data-field="not-reflected">{html.escape(NOT_REFLECTED)}</p>'
    )
    return (
        f'<td class="gepa-note-cell"><details class="gepa-note" data-task-key="{key}">'
        f"<summary>Note for GEPA</summary>{hint}"
        '<ul class="task-notes"></ul>'
        f'<textarea rows="3" maxlength="{MAX_NOTE_CHARS}" aria-label="Note for GEPA on {key}" '
        'placeholder="What should the reflection know about this output?"></textarea>'
        '<div class="note-actions"><button type="button" data-action="save-note">Save note</button> '
        '<button type="button" data-action="remove-note" hidden>Remove</button> '
        '<span class="muted" data-field="note-status" role="status"></span></div></details></td>'
    )


def _evaluation_row_html(e: dict, *, notes: set[str] | None = None) -> str:
    esc = (
        html.escape
    )  # what django.utils.html.escape does, without its lazy-string wrapper (7,000 calls a page)
    checks = "".join(
        f'<li class="{esc(c["css"])}"><code>{esc(c["name"])}</code> {esc(c["score"])}{" — " + esc(c["reason"]) if c["reason"] else ""}</li>'
        for c in e["checks"]
    )
    no_checks = (
        ""
        if e["has_verifiers"]
        else f'<span class="muted">{esc(e["feedback"] or "no feedback")}</span>'
    )
    lead = ' <span class="lead-mark" title="leads this task">★</span>' if e["leads"] else ""
    judge = f'<br><span class="muted">{esc(e["judge"])}</span>' if e["judge"] else ""
    # Both judgments, each with what decided it (docs/verifier-semantics.md "Passed and verdict").
    passed = "".join(
        f'<li class="verdict-{"pass" if v["passed"] else "fail"}">{esc(v["text"])}</li>'
        for v in e["verifiers_passed"]
    )
    return (
        f'<tr data-task-key="{esc(e["task_key"])}"><td>{esc(e["task_key"])}{lead}</td><td>{esc(e["split"])}</td>'
        f'<td class="num">{esc(e["score"])}</td><td class="judgments"><span class="verdict-{esc(e["verdict"])}" data-field="verdict">verdict {esc(e["verdict"])}</span>'
        f' <span class="muted" data-field="verdict-why">({esc(e["verdict_why"])})</span><ul class="passed">{passed}</ul></td>'
        f'<td><ul class="checks">{checks}</ul>{no_checks}</td><td class="num">{esc(e["tokens"])}{judge}</td>'
        f"<td><details><summary>{esc(e['output_short'])}</summary><pre>{esc(e['output'])}</pre></details></td>"
        f"{_note_cell_html(e['task_key'], reflected=e['task_key'] in notes) if notes is not None else ''}</tr>"
    )


def _evaluation_rows_html(rows: list[dict], *, notes: set[str] | None = None) -> str:
    """The candidate page's evaluation rows, built here: through the template
    engine, 300 rows × their checks were most of the page's time. Every value is
    escaped (outputs and reasons are untrusted). `notes` (a run that takes
    reviewer notes: the keys of its train tasks, those reflections read): each
    row ends with its task's "Note for GEPA"."""
    return mark_safe("\n".join(_evaluation_row_html(e, notes=notes) for e in rows))  # noqa: S308 - every value above is escaped


@require_POST
def run_control(request, run_id: int, action: str):
    """stop / cancel / pause / resume (optionally with more budget) / fork from a candidate.
    Who steers the run stops, pauses and resumes it; more budget and a fork spend
    the owner's endpoints beyond what the owner set, so they take control."""
    run = run_selectors.run_for_user(request.user, run_id, steer=True)
    target = run
    form = RunControlForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(form.problems()))
        return redirect(reverse("runs:detail", args=[run.pk]))
    try:
        if action == "stop":
            services.run_stop(run=run)
        elif action == "cancel":
            services.run_cancel(run=run)
        elif action == "pause":
            services.run_pause(run=run, by=request.user)
        elif action == "resume":
            extra_budget = form.cleaned_data["extra_budget"] or 0
            if extra_budget:
                run_selectors.run_for_user(request.user, run_id, control=True)
            services.run_resume(run=run, extra_budget=extra_budget)
        else:
            run_selectors.run_for_user(request.user, run_id, control=True)
            index = form.cleaned_data["candidate"]
            if index is None:
                index = run.best_candidate.index if run.best_candidate is not None else 0
            target = services.run_fork(run=run, candidate_index=index, owner=request.user)
    except RunConfigError as error:
        messages.error(
            request, "; ".join(f"{field}: {problem}" for field, problem in error.problems)
        )
    except ValueError as error:  # RunStateError
        messages.error(request, str(error))
    return redirect(reverse("runs:detail", args=[target.pk]))


@require_POST
def run_annotate(request, run_id: int):
    """Tags (comma-separated) and notes from the run page's form."""
    run = run_selectors.run_for_user(request.user, run_id, control=True)
    form = RunAnnotateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(form.problems()))
        return redirect(reverse("runs:detail", args=[run.pk]))
    try:
        services.run_annotate(run=run, tags=form.tag_list(), notes=form.cleaned_data["notes"])
        messages.success(request, "Tags and notes saved.")
    except RunConfigError as error:
        messages.error(
            request, "; ".join(f"{field}: {problem}" for field, problem in error.problems)
        )
    return redirect(reverse("runs:detail", args=[run.pk]))


@require_POST
def run_archive(request, run_id: int):
    """Archive (archived=1) or bring back (archived=0) a finished run."""
    run = run_selectors.run_for_user(request.user, run_id, control=True)
    form = RunArchiveForm(request.POST)
    try:
        if not form.is_valid():
            raise ValueError("; ".join(form.problems()))
        services.run_archive(run=run, archived=form.cleaned_data["archived"])
    except ValueError as error:
        messages.error(request, str(error))
    return redirect(reverse("runs:detail", args=[run.pk]))


@require_POST
def run_delete(request, run_id: int):
    run = run_selectors.run_for_user(request.user, run_id, control=True)
    try:
        services.run_delete(run=run)
    except ValueError as error:
        messages.error(request, str(error))
        return redirect(reverse("runs:detail", args=[run.pk]))
    messages.success(request, f"Run {run_id} ({run}) was deleted.")
    return redirect(reverse("runs:list"))


LM_FIELDS = [("task_lm", "Task model"), ("reflection_lm", "Reflection model")]
# The launch form's value for "the demo simulator": the same name the API and CLI take.
DEMO_CHOICE = DEMO_MODEL_NAME
# The launch form's simulator latency: slow enough that a newcomer sees a run
# unfold (a light run on the refund tickets example takes about 40 s), where the
# API's and the CLI's default of 0 suits scripts and tests.
FORM_SIMULATED_LATENCY_MS = 800
MAX_CONFIG_BYTES = 200_000


def _config_from_body(request) -> tuple[dict | None, list[tuple[str, str]]]:
    """The posted RunConfig JSON, or a problem naming why it could not be read."""
    if len(request.body) > MAX_CONFIG_BYTES:
        return None, [("config", f"is larger than {MAX_CONFIG_BYTES} bytes")]
    try:
        data = parse_json(request.body or b"{}")
    except (
        JsonTooDeep
    ) as error:  # names the field: "task_lm.options: nested more than 100 levels deep"
        field, _, message = str(error).partition(": ")
        return None, [(field if field != "value" else "config", message)]
    except ValueError as error:
        return None, [("config", f"is not valid JSON ({error})")]
    if not isinstance(data, dict):
        return None, [("config", "must be a JSON object")]
    return data, []


def _problems_response(problems, warnings=(), status=200, **extra) -> JsonResponse:
    return JsonResponse(
        {
            "problems": [{"field": f, "message": m} for f, m in problems],
            "warnings": [w for w in warnings if w],
            **extra,
        },
        status=status,
    )


@require_http_methods(["GET", "POST"])
def run_new(request):
    """GET: the launch form. POST (JSON RunConfig): launch, or list the problems."""
    fork_of, fork_candidate = _fork_source(request)
    if request.method == "GET":
        context = selectors.launch_form_choices(user=request.user) | {
            "lm_fields": LM_FIELDS,
            "demo_choice": DEMO_CHOICE,
            "simulated_latency_ms": FORM_SIMULATED_LATENCY_MS,
            "split_rule": rule_text(),
        }
        if fork_of is not None:
            injection = _fork_injection(request, fork_of)
            context["fork_injection"] = injection
            try:
                context["prefill"] = services.run_fork_config(
                    run=fork_of, candidate_index=fork_candidate, injection=injection
                )
                verifier_ids = _fork_verifiers(request)
                if verifier_ids:  # from a re-scoring: its best under its verifiers
                    context["prefill"]["verifier_ids"] = verifier_ids
            except RunConfigError as error:
                messages.error(
                    request, "; ".join(f"{field}: {problem}" for field, problem in error.problems)
                )
            context["fork_of"], context["fork_candidate"] = fork_of, fork_candidate
        return render(request, "runs/new.html", context)
    config, problems = _config_from_body(request)
    if problems or config is None:  # no config comes with its problem
        return _problems_response(problems, status=400)
    try:
        run = services.run_launch(
            owner=request.user,
            config=config,
            forked_from=fork_of,
            forked_from_candidate=fork_candidate if fork_of is not None else None,
        )
    except RunConfigError as error:
        return _problems_response(
            error.problems,
            run_selectors.launch_warnings(user=request.user, config=config),
            status=400,
        )
    for warning in services.run_snapshot_warnings(run):  # shown on the run page the form goes to
        messages.warning(request, f"Launched with a warning: {warning}")
    return JsonResponse(
        {"run_id": run.pk, "redirect": reverse("runs:detail", args=[run.pk])}, status=201
    )


def _fork_injection(request, run: Run) -> CandidateInjection | None:
    """`&injection=<id>`: fork from a user's edited text the run refused (its components)."""
    raw = request.GET.get("injection", "")
    if not raw.isdigit():
        return None
    injection = CandidateInjection.objects.filter(run=run, pk=int(raw)).first()
    if injection is None:
        raise Http404("No such edited candidate in this run")
    return injection


def _fork_verifiers(request) -> list[str]:
    """`&verifiers=a,b`: the verifier ids a fork launches with instead of the run's
    (the ones the user can use; "launch from this best under the new verifier")."""
    raw = without_nul(request.GET.get("verifiers", ""))[:2000]
    wanted = [slug for slug in raw.split(",") if slug][:20]
    visible = Verifier.objects.visible_to(request.user)
    return [slug for slug in wanted if visible.lookup(request.user, slug) is not None]


def _fork_source(request) -> tuple[Run | None, int]:
    """`?fork=<run id>&candidate=<index>` on the launch form: the run and candidate a
    new run is forked from (the candidate defaults to the best). Only who controls
    the run forks it, as through the API: a read-only sharer gets a 404."""
    raw = request.GET.get("fork", "")
    if not raw.isdigit():
        return None, 0
    run = run_selectors.run_for_user(request.user, int(raw), control=True)
    candidate = request.GET.get("candidate", "")
    if candidate.isdigit():
        return run, int(candidate)
    return run, run.best_candidate.index if run.best_candidate is not None else 0


@require_POST
def run_dry_run(request):
    """Check a RunConfig (its endpoints are contacted; one probe call when an endpoint
    has no history here); problems name their fields; the plan says what the run will do."""
    config, problems = _config_from_body(request)
    if not problems and config is not None:  # no config comes with its problem
        problems = services.run_dry_run(owner=request.user, config=config)
    plan = (
        services.run_plan_for(owner=request.user, config=config, probe=not problems)
        if config
        else None
    )
    return _problems_response(
        problems,
        run_selectors.launch_warnings(user=request.user, config=config) if config else [],
        plan=plan,
    )


@require_POST
def run_plan(request):
    """The launch form's live summary: the plan of the config as it stands (no model is called)."""
    config, _problems = _config_from_body(request)
    plan = services.run_plan_for(owner=request.user, config=config) if config else None
    return JsonResponse({"plan": plan})

"""Verifier pages: list, detail, the editor (create / edit / import), duplicate,
delete, export and version diffs. Each view checks access, then calls one
service or selector."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard.forms import VerifierForm
from verifiers_app import selectors, services
from verifiers_app.engine import SpecError, spec_warnings
from verifiers_app.models import Verifier, VerifierVersion

NEW_SPEC = {
    "id": "",
    "name": "",
    "kind": "native",
    "passThreshold": 1.0,
    "checks": [{"id": "expectations", "type": "task_expectations", "weight": 1, "params": {}}],
}


def verifier_list(request):
    query, kind = request.GET.get("q", "").strip(), request.GET.get("kind", "")
    page = Paginator(
        selectors.verifier_list(user=request.user, query=query, kind=kind), 25
    ).get_page(request.GET.get("page"))
    return render(
        request,
        "verifiers/list.html",
        {
            "page": page,
            "query": query,
            "kind": kind,
            "kinds": selectors.verifier_kinds(user=request.user),
        },
    )


def verifier_detail(request, slug):
    verifier = selectors.verifier_for_user(request.user, slug)
    return render(
        request,
        "verifiers/detail.html",
        {
            "verifier": verifier,
            "spec_json": json.dumps(verifier.spec, indent=2, ensure_ascii=False),
            "versions": verifier.versions.select_related("created_by"),
            "can_edit": Verifier.objects.editable_by(request.user).filter(pk=verifier.pk).exists(),
        },
    )


def _posted(request) -> dict:
    """The editor's form as the services take it: the spec (JSON text or an
    uploaded file), sharing, and the test cases (a JSON list; None when the form
    did not send them: an import, a client without JavaScript). SpecError names
    the field of any problem."""
    form = VerifierForm(request.POST, request.FILES)
    if not form.is_valid():
        raise SpecError(form.problems())
    data = form.cleaned_data
    upload = data["spec_file"]
    if upload is not None:
        spec = services.spec_from_json(upload.read(services.MAX_SPEC_BYTES + 1), source=upload.name)
    else:
        spec = services.spec_from_json(data["spec"], source="JSON")
    test_cases = None
    if data["test_cases"]:
        try:
            test_cases = json.loads(data["test_cases"])
        except ValueError as error:
            raise SpecError(f"test_cases: not valid JSON ({error})") from None
    return {"spec": spec, "shared": data["shared"], "test_cases": test_cases}


def _editor(request, *, verifier: Verifier | None, spec_text: str, problems=(), status=200):
    if request.method == "POST":
        cases_text = request.POST.get("test_cases") or "[]"
    else:
        cases_text = json.dumps(verifier.test_cases if verifier else [], ensure_ascii=False)
    return render(
        request,
        "verifiers/editor.html",
        {
            "verifier": verifier,
            "spec_text": spec_text,
            "problems": problems,
            "test_cases_text": cases_text,
            "check_types": selectors.check_type_fields(),
            "shared": verifier.shared if verifier else request.POST.get("shared") == "on",
        },
        status=status,
    )


def verifier_create(request):
    if request.method == "POST":
        try:
            verifier = services.verifier_create(owner=request.user, **_posted(request))
        except SpecError as exc:
            return _editor(
                request,
                verifier=None,
                spec_text=request.POST.get("spec", ""),
                problems=exc.problems,
                status=400,
            )
        messages.success(request, f"Created verifier {verifier.slug} (version 1).")
        _warn_about(request, verifier)
        return redirect("verifiers:detail", slug=verifier.slug)
    return _editor(request, verifier=None, spec_text=json.dumps(NEW_SPEC, indent=2))


def verifier_edit(request, slug):
    verifier = selectors.verifier_for_user(request.user, slug, edit=True)
    if request.method == "POST":
        try:
            changed = services.verifier_update(
                verifier=verifier, user=request.user, **_posted(request)
            )
        except SpecError as exc:
            return _editor(
                request,
                verifier=verifier,
                spec_text=request.POST.get("spec", ""),
                problems=exc.problems,
                status=400,
            )
        if changed:
            messages.success(request, f"Saved {verifier.slug} as version {verifier.version}.")
            _warn_about(request, verifier)
        else:
            messages.info(request, "No changes: nothing new was saved.")
        return redirect("verifiers:detail", slug=verifier.slug)
    return _editor(
        request,
        verifier=verifier,
        spec_text=json.dumps(verifier.spec, indent=2, ensure_ascii=False),
    )


def _warn_about(request, verifier: Verifier) -> None:
    """What lint warns about in the saved spec (an unknown check type: skipped by scoring)."""
    for warning in spec_warnings(verifier.spec):
        messages.warning(request, f"Saved with a warning: {warning}")


@require_POST
def verifier_duplicate(request, slug):
    try:
        copy = services.verifier_duplicate(
            verifier=selectors.verifier_for_user(request.user, slug), owner=request.user
        )
    except SpecError as exc:  # e.g. the spec names a fn that is no longer registered
        messages.error(request, f"Not duplicated: {exc}.")
        return redirect("verifiers:detail", slug=slug)
    messages.success(request, f"Duplicated as {copy.slug}.")
    return redirect("verifiers:edit", slug=copy.slug)


@require_POST
def verifier_delete(request, slug):
    verifier = selectors.verifier_for_user(request.user, slug, edit=True)
    try:
        services.verifier_delete(verifier=verifier)
    except services.VerifierInUse as exc:
        messages.error(request, f"Not deleted: {exc}.")
        return redirect("verifiers:detail", slug=slug)
    messages.success(request, f"Deleted verifier {slug}.")
    return redirect("verifiers:list")


def verifier_export(request, slug):
    verifier = selectors.verifier_for_user(request.user, slug)
    response = JsonResponse(verifier.spec, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="{verifier.slug}.json"'
    return response


def verifier_diff(request, slug):
    verifier = selectors.verifier_for_user(request.user, slug)
    try:
        new = int(request.GET.get("new", verifier.version))
        old = int(request.GET.get("old", new - 1))
        lines = selectors.verifier_version_diff(verifier=verifier, old=old, new=new)
    except (ValueError, VerifierVersion.DoesNotExist) as exc:
        raise Http404(str(exc)) from None
    return render(
        request,
        "verifiers/diff.html",
        {"verifier": verifier, "old": old, "new": new, "lines": lines},
    )

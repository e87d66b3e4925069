"""Asking for a re-scoring: the specs checked as the verifier editor checks one
(or a saved verifier at a version), what cannot be re-scored refused, the
Scoring row written and queued for a worker once the transaction commits."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from dashboard.lib.storable import storage_problems
from optimizer.models import Run, RunStatus, Scoring
from optimizer.scorings.execute import scoring_scorer, val_evaluations
from optimizer.scorings.reads import MAX_SCORINGS_PER_RUN, MAX_SPECS
from verifiers_app.engine import SpecError
from verifiers_app.engine.json_types import JSONObject
from verifiers_app.models import Verifier, VerifierVersion
from verifiers_app.services import MAX_SPEC_BYTES, spec_validate


class ScoringRefused(ValueError):
    """The run cannot be re-scored now (still running, no outputs, too many scorings)."""


def _prefixed(error: SpecError, prefix: str) -> SpecError:
    return SpecError([f"{prefix}{problem}" for problem in error.problems])


def scoring_specs(spec: Any) -> list[JSONObject]:
    """An edited spec (a spec object, or a list of them) checked as the verifier
    editor checks one; SpecError naming `spec.<field>` (`spec[i].<field>`)."""
    specs = spec if isinstance(spec, list) else [spec]
    if not specs:
        raise SpecError("spec: give a verifier spec (or a list of them)")
    if len(specs) > MAX_SPECS:
        raise SpecError(f"spec: at most {MAX_SPECS} verifier specs")
    if len(repr(specs)) > MAX_SPEC_BYTES * 2:
        raise SpecError(f"spec: larger than {MAX_SPEC_BYTES // 1024} KB")
    problems: list[str] = []
    for i, one in enumerate(specs):
        prefix = f"spec[{i}]." if isinstance(spec, list) else "spec."
        try:
            spec_validate(one)
        except SpecError as error:
            problems += _prefixed(error, prefix).problems
    if problems:
        raise SpecError(problems)
    return list(specs)


def scoring_verifier_spec(
    *, user: Any, verifier_id: str, version: int | None = None
) -> tuple[JSONObject, JSONObject]:
    """(spec, source) of a saved verifier the user can see, at `version` (default:
    its current one); SpecError naming `verifier_id` or `version`."""
    verifier = Verifier.objects.visible_to(user).lookup(user, verifier_id)
    if verifier is None:
        raise SpecError(f'verifier_id: no verifier with id "{verifier_id}" that you can use')
    if version is None or version == verifier.version:
        return verifier.spec, {"id": verifier.slug, "version": verifier.version}
    stored = VerifierVersion.objects.filter(verifier=verifier, number=version).first()
    if stored is None:
        raise SpecError(
            f'version: verifier "{verifier.slug}" has versions 1 to {verifier.version}, not {version}'
        )
    return stored.spec, {"id": verifier.slug, "version": version}


def scoring_source(
    *, user: Any, verifier_id: str | None = None, version: int | None = None, spec: Any = None
) -> tuple[list[JSONObject], list[JSONObject]]:
    """(specs, source) for a scoring from exactly one of: a saved verifier (at
    `version`) or an edited spec (a spec object or a list of them). SpecError
    naming the field."""
    if (verifier_id is None) == (spec is None):
        raise SpecError("verifier_id: give either a verifier_id or a spec (not both)")
    if spec is not None:
        if version is not None:
            raise SpecError("version: only with a verifier_id")
        specs = scoring_specs(spec)
        return specs, [{"edited": True} for _ in specs]
    one, source = scoring_verifier_spec(user=user, verifier_id=str(verifier_id), version=version)
    return [one], [source]


def _default_name(run: Run, source: list[JSONObject]) -> str:
    if any(s.get("edited") for s in source):
        base = "edited spec"
    else:
        base = " + ".join(f"{s['id']} v{s['version']}" for s in source)
    taken = set(run.scorings.values_list("name", flat=True))
    name, n = base[:190], 2
    while name in taken:
        name, n = f"{base[:185]} ({n})", n + 1
    return name


def scoring_create(
    *,
    run: Run,
    user: Any,
    specs: list[JSONObject],
    source: list[JSONObject],
    name: str = "",
) -> Scoring:
    """Ask for a re-scoring of `run`'s stored val outputs with `specs` (already
    checked: scoring_specs / scoring_verifier_spec). Refused (ScoringRefused) while
    the run runs, when it stored no output, or past MAX_SCORINGS_PER_RUN; a spec
    that cannot score with the run's aggregator is a SpecError. Queued for a
    worker once the transaction commits."""
    if run.status not in (*RunStatus.finished(), RunStatus.PAUSED):
        raise ScoringRefused(
            f"run {run.pk} is {run.status}: re-score it once it has finished or is paused"
        )
    scoring_scorer(run, specs)  # the aggregator's gates must name verifiers of these specs
    problems = storage_problems(specs, "spec")
    if problems:
        raise SpecError(problems)
    name = name.strip()[:200]
    if not run.scorings.count() < MAX_SCORINGS_PER_RUN:
        raise ScoringRefused(
            f"run {run.pk} has {MAX_SCORINGS_PER_RUN} scorings already; delete the run's copy or export it"
        )
    outputs = val_evaluations(run)
    total = outputs.count()
    if not outputs.exclude(output="").exists():
        raise ScoringRefused(f"run {run.pk} stored no val outputs: there is nothing to re-score")
    try:
        with transaction.atomic():
            scoring = Scoring.objects.create(
                run=run,
                name=name or _default_name(run, source),
                specs=specs,
                source=source,
                created_by=user if getattr(user, "pk", None) else None,
                total=total,
            )
    except IntegrityError:
        raise SpecError(f'name: run {run.pk} already has a scoring named "{name}"') from None
    from optimizer.celery_tasks import enqueue_scoring

    transaction.on_commit(lambda: enqueue_scoring(scoring.pk))
    return scoring

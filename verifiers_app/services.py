"""Writes to verifiers: create, update (versioned), duplicate, delete, resolve.

Every spec goes through the engine's `validate_spec` before it is stored, so a
stored spec always compiles; problems surface as `SpecError` naming the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal, get_args

from django.db import IntegrityError, transaction

from dashboard.lib.storable import JsonTooDeep, parse_json, storage_problems
from verifiers_app.engine import SpecError, validate_spec
from verifiers_app.engine.json_types import JSONObject
from verifiers_app.models import Verifier, VerifierVersion

MAX_SPEC_BYTES = 256 * 1024
_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,100}")


class VerifierInUse(Exception):
    """The verifier is used by a run that has not finished."""


class VerifierNotFound(LookupError):
    """A verifier reference is neither a visible verifier id nor a spec file."""


def spec_from_json(text: str | bytes, *, source: str = "spec") -> object:
    """Parse spec JSON text (bounded in size); `SpecError` naming `source` and the line."""
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"{source}: larger than {MAX_SPEC_BYTES // 1024} KB")
    try:
        return parse_json(text)
    except JsonTooDeep as exc:
        raise SpecError(f"{source}: invalid JSON ({str(exc).removeprefix('value: ')})") from None
    except UnicodeDecodeError:
        raise SpecError(f"{source}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"{source}: invalid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None


def spec_validate(spec: object) -> dict:
    """The normalized spec, also checking that its id can name a verifier in a URL."""
    normalized = validate_spec(spec)
    problems = storage_problems(spec, "")
    if problems:
        raise SpecError(problems)
    if not _ID_PATTERN.fullmatch(normalized["id"]):
        raise SpecError("id: use 1-100 letters, digits, '-' or '_'")
    if normalized["id"] == "new":
        raise SpecError('id: "new" is reserved (it is the address of the new-verifier page)')
    return normalized


def _apply(verifier: Verifier, spec: object, normalized: JSONObject) -> None:
    verifier.spec = spec
    verifier.slug = normalized["id"]
    verifier.name = normalized["name"][:200]
    verifier.kind = normalized["kind"][:100]


MAX_TEST_CASES = 30
MAX_TEST_OUTPUT_CHARS = 20_000
# What a test case expects of each judgment: the verdict under the editor's
# thresholds, and the verifier's passed / failed under its passThreshold; "any"
# leaves one unchecked (docs/verifier-semantics.md "Passed and verdict").
ExpectedVerdict = Literal["pass", "borderline", "fail", "any"]
ExpectedPassed = Literal["passed", "failed", "any"]
TEST_CASE_EXPECTATIONS: tuple[str, ...] = get_args(ExpectedVerdict)
TEST_CASE_PASSED_EXPECTATIONS: tuple[str, ...] = get_args(ExpectedPassed)


def validate_test_cases(cases: object) -> list[dict]:
    """The editor's saved sample outputs, checked: a list of at most 30
    `{name, output, task, expect, expect_passed}` with `expect` a verdict (or any)
    and `expect_passed` passed, failed or any (any when absent: cases stored
    before it existed). Raises SpecError naming the field (`test_cases[2].output`)."""
    if not isinstance(cases, list):
        raise SpecError("test_cases: must be a list")
    if len(cases) > MAX_TEST_CASES:
        raise SpecError(f"test_cases: at most {MAX_TEST_CASES} test cases, got {len(cases)}")
    cleaned = []
    for i, case in enumerate(cases):
        where = f"test_cases[{i}]"
        if not isinstance(case, dict):
            raise SpecError(f"{where}: must be an object")
        name, output, task, expect, expect_passed = (
            case.get("name", ""),
            case.get("output"),
            case.get("task"),
            case.get("expect"),
            case.get("expect_passed", "any"),
        )
        if not isinstance(name, str) or len(name) > 200:
            raise SpecError(f"{where}.name: must be text of at most 200 characters")
        if not isinstance(output, str) or len(output) > MAX_TEST_OUTPUT_CHARS:
            raise SpecError(
                f"{where}.output: must be text of at most {MAX_TEST_OUTPUT_CHARS} characters"
            )
        if task is not None and not isinstance(task, dict):
            raise SpecError(f"{where}.task: must be a task object or null")
        if expect not in TEST_CASE_EXPECTATIONS:
            raise SpecError(f"{where}.expect: must be one of {', '.join(TEST_CASE_EXPECTATIONS)}")
        if expect_passed not in TEST_CASE_PASSED_EXPECTATIONS:
            raise SpecError(
                f"{where}.expect_passed: must be one of {', '.join(TEST_CASE_PASSED_EXPECTATIONS)}"
            )
        cleaned.append(
            {
                "name": name.strip() or f"case {i + 1}",
                "output": output,
                "task": task,
                "expect": expect,
                "expect_passed": expect_passed,
            }
        )
    problems = storage_problems(cleaned, "test_cases")
    if problems:
        raise SpecError(problems)
    return cleaned


@transaction.atomic
def verifier_create(
    *, owner, spec: object, shared: bool = False, test_cases: object = None
) -> Verifier:
    """Create a verifier from a spec (its `id` becomes the verifier's id) with version 1."""
    normalized = spec_validate(spec)
    cases = validate_test_cases(test_cases) if test_cases is not None else []
    taken = SpecError(
        f'id: a verifier with id "{normalized["id"]}" already exists; edit it or choose another id'
    )
    if Verifier.objects.filter(owner=owner, slug=normalized["id"]).exists():
        raise taken
    verifier = Verifier(owner=owner, shared=shared, version=1, test_cases=cases)
    _apply(verifier, spec, normalized)
    try:
        with (
            transaction.atomic()
        ):  # a savepoint: two creates of one id can both pass the check above
            verifier.save()
    except IntegrityError:
        raise taken from None
    VerifierVersion.objects.create(verifier=verifier, number=1, spec=spec, created_by=owner)
    return verifier


@transaction.atomic
def verifier_update(
    *, verifier: Verifier, spec: object, user, shared: bool | None = None, test_cases: object = None
) -> bool:
    """Save an edited spec as a new version; return False (and write nothing) when
    the spec means the same as the stored one and `shared` and the test cases are
    unchanged. Test cases are stored with the verifier, not versioned."""
    normalized = spec_validate(spec)
    if normalized["id"] != verifier.slug:
        raise SpecError(
            f'id: a verifier\'s id cannot change (it is "{verifier.slug}"); duplicate it to use a new id'
        )
    cases = validate_test_cases(test_cases) if test_cases is not None else None
    # Compare with and number after the stored row, locked: `verifier` may have been read
    # before another save (two tabs, a double submit), and version numbers must not collide.
    stored = (
        Verifier.objects.select_for_update()
        .only("version", "spec", "shared", "test_cases")
        .get(pk=verifier.pk)
    )
    verifier.version, verifier.spec, verifier.shared = stored.version, stored.spec, stored.shared
    verifier.test_cases = stored.test_cases
    spec_changed = normalized != validate_spec(verifier.spec)
    new_shared = verifier.shared if shared is None else shared
    shared_changed = new_shared != verifier.shared
    cases_changed = cases is not None and cases != verifier.test_cases
    if not (spec_changed or shared_changed or cases_changed):
        return False
    if cases_changed:
        verifier.test_cases = cases
    if shared_changed:
        verifier.shared = new_shared
    if spec_changed:
        verifier.version += 1
        _apply(verifier, spec, normalized)
        VerifierVersion.objects.create(
            verifier=verifier, number=verifier.version, spec=spec, created_by=user
        )
    verifier.save()
    return True


def verifier_upsert(*, owner, spec: object) -> tuple[Verifier, str]:
    """Create or update by the spec's id (CLI, imports, examples); returns the
    verifier and "Created", "Updated" or "Unchanged"."""
    normalized = spec_validate(spec)
    existing = Verifier.objects.filter(owner=owner, slug=normalized["id"]).first()
    if existing is None:
        # The same spec shared by someone else is used as it is, not copied.
        visible = Verifier.objects.visible_to(owner).lookup(owner, normalized["id"])
        if visible is not None and normalized == validate_spec(visible.spec):
            return visible, "Unchanged"
        return verifier_create(owner=owner, spec=spec), "Created"
    changed = verifier_update(verifier=existing, spec=spec, user=owner)
    return existing, "Updated" if changed else "Unchanged"


def verifier_duplicate(*, verifier: Verifier, owner) -> Verifier:
    """A copy owned by `owner` under a fresh id (`<id>-copy`, `<id>-copy-2`, …)."""

    def copy_id(n: int) -> str:  # the suffix always fits in the 100-character id
        suffix = "-copy" if n == 1 else f"-copy-{n}"
        return f"{verifier.slug[: 100 - len(suffix)]}{suffix}"

    n = 1
    while Verifier.objects.filter(owner=owner, slug=copy_id(n)).exists():
        n += 1
    new_id = copy_id(n)
    spec = {**verifier.spec, "id": new_id, "name": f"{verifier.name} (copy)"}
    return verifier_create(owner=owner, spec=spec)


def verifier_delete(*, verifier: Verifier) -> None:
    """Delete a verifier unless a queued or running run uses it (finished runs keep
    their frozen copy of the spec, so they are not affected)."""
    # Runs point at verifiers (Run.verifiers, related_name "runs"): asking through
    # that relation keeps this layer free of imports from optimizer, above it.
    active = verifier.runs.active().first()
    if active is not None:
        raise VerifierInUse(
            f'verifier "{verifier.slug}" is used by {active} ({active.status}); stop the run first'
        )
    verifier.delete()


def verifier_resolve(ref: str, *, owner) -> Verifier:
    """A verifier id, or a path to a spec JSON file (created or updated on the fly,
    docs/verifier-semantics.md "Native verifiers"), as accepted wherever a verifier is named."""
    path = Path(ref)
    if ref.endswith(".json") or path.is_file():
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise VerifierNotFound(f"verifier: cannot read {ref}: {exc.strerror}") from None
        return verifier_upsert(owner=owner, spec=spec_from_json(text, source=ref))[0]
    verifier = (
        Verifier.objects.visible_to(owner).lookup(owner, ref)
        if _ID_PATTERN.fullmatch(ref)
        else None
    )
    if verifier is None:
        raise VerifierNotFound(
            f'verifier: no verifier with id "{ref}" and no spec file at that path'
        )
    return verifier

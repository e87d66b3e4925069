"""Verifier specs: pydantic models, validation with field paths, normalization.

Three kinds of spec (docs/verifier-semantics.md):

- ``native`` (the default kind): ``{id, name, kind, passThreshold, checks:
  [{id, type, weight, required, params}]}``; each known check type validates
  its own params (see :mod:`.checks`); unknown types are kept (and skipped at
  scoring).
- ``in_process``: ``{id, kind, fn_name, expected?, params}`` — a fn-registry
  verifier at spec level; without ``expected`` the task's ``expected`` is used.
- ``<name of a registered verifier class>``: ``{id, kind, params}`` with
  ``params`` validated by the class's ``Config``.

Every kind also takes ``name`` (default: the id), ``description``, ``weight``
(> 0, default 1), ``required`` (default false) and ``passThreshold`` (0–1,
default 1). Unknown fields are errors, so typos surface at authoring time.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import classes, fns
from .checks import CHECK_TYPES, PARAM_ALIASES, TYPE_ALIASES, CheckType
from .errors import SpecError, validation_problems
from .json_types import JSONObject
from .quoting import quote

Model = TypeVar("Model", bound=BaseModel)

ROW_VERIFIER_ID = "row"

Weight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SpecBase(_Model):
    id: NonEmpty
    name: str | None = None
    kind: str
    description: str | None = None
    weight: Weight = 1.0
    required: bool = False
    passThreshold: Fraction = 1.0


class NativeSpec(SpecBase):
    kind: Literal["native"] = "native"
    checks: Annotated[list[Any], Field(min_length=1)]  # each one is a CheckSpec


class CheckSpec(_Model):
    id: NonEmpty | None = None
    type: NonEmpty
    weight: Weight = 1.0
    required: bool = False
    description: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class InProcessSpec(SpecBase):
    kind: Literal["in_process"]
    fn_name: NonEmpty
    expected: Any = None
    params: dict[str, Any] = Field(default_factory=dict)


class ClassSpec(SpecBase):
    params: dict[str, Any] = Field(default_factory=dict)


class RowVerifierSpec(_Model):
    """A task row's ``verifier``: ``{kind: in_process, fn_name, expected?, params}``."""

    kind: Literal["in_process"] = "in_process"
    fn_name: NonEmpty
    expected: Any = None
    params: dict[str, Any] = Field(default_factory=dict)
    weight: Weight = 1.0
    required: bool = False
    passThreshold: Fraction = 1.0


# --- error formatting ------------------------------------------------------------


def pydantic_problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """One ``"field.path: message"`` per pydantic error."""
    return [
        f"{field}: {message}"
        for field, message in validation_problems(
            exc.errors(include_url=False), prefix=prefix, root="spec"
        )
    ]


def validate_model(
    model: type[Model],
    data: Any,
    prefix: str = "",
    context: JSONObject | None = None,
) -> tuple[Model | None, list[str]]:
    """``(instance or None, problems)``."""
    try:
        return model.model_validate(data, context=context), []
    except ValidationError as exc:
        return None, pydantic_problems(exc, prefix)


# --- parsing ---------------------------------------------------------------------


def parse_spec(raw: Any, *, lenient_regex: bool = False) -> tuple[JSONObject | None, list[str]]:
    """Validate one spec; return ``(normalized spec or None, every problem)``.

    ``lenient_regex`` accepts a regex that does not compile (scoring then fails
    that check with the compile error instead of refusing the whole spec).
    """
    if not isinstance(raw, dict):
        return None, [f"spec: must be a JSON object, got {type(raw).__name__}"]
    kind = raw.get("kind", "native")
    if not isinstance(kind, str):
        return None, ["kind: must be a string"]
    if kind == "native":
        normalized, problems = _parse_native(raw, lenient_regex)
    elif kind == "in_process":
        normalized, problems = _parse_in_process(raw)
    else:
        cls = classes.get_verifier_class(kind)
        if cls is None:
            known = ", ".join(
                ['"native"', '"in_process"', *(quote(n) for n in classes.registered_verifiers())]
            )
            return None, [f"kind: unknown kind {quote(kind)}; use one of {known}"]
        normalized, problems = _parse_class(raw, kind, cls)
    if raw.get("id") == ROW_VERIFIER_ID:
        problems.insert(0, f'id: "{ROW_VERIFIER_ID}" is reserved for a task\'s row verifier')
    return (None if problems else normalized), problems


def _base(model: SpecBase) -> JSONObject:
    base: JSONObject = {
        "id": model.id,
        "name": model.name or model.id,
        "kind": model.kind,
        "weight": model.weight,
        "required": model.required,
        "passThreshold": model.passThreshold,
    }
    if model.description is not None:
        base["description"] = model.description
    return base


def _parse_native(raw: JSONObject, lenient_regex: bool) -> tuple[JSONObject | None, list[str]]:
    spec, problems = validate_model(NativeSpec, raw)
    checks_raw = raw.get("checks")
    if not isinstance(checks_raw, list):
        return None, problems
    checks: list[JSONObject] = []
    seen: set[str] = set()
    explicit_ids = [c.get("id") for c in checks_raw if isinstance(c, dict)]
    for index, check_raw in enumerate(checks_raw):
        check, check_problems = _parse_check(check_raw, f"checks[{index}]", lenient_regex)
        problems += check_problems
        if check is None:
            continue
        if check["id"] is None:  # default id: the type, made unique
            candidate, n = check["type"], 1
            while candidate in seen or candidate in explicit_ids:
                n += 1
                candidate = f"{check['type']}-{n}"
            check["id"] = candidate
        elif check["id"] in seen:
            problems.append(f"checks[{index}].id: duplicate check id {quote(check['id'])}")
        seen.add(check["id"])
        checks.append(check)
    if spec is None or problems:
        return None, problems
    return {**_base(spec), "checks": checks}, problems


def _parse_check(raw: Any, path: str, lenient_regex: bool) -> tuple[JSONObject | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"{path}: must be an object with a type"]
    raw_type = raw.get("type")
    raw = (
        {**raw, "type": TYPE_ALIASES.get(raw_type, raw_type)} if isinstance(raw_type, str) else raw
    )
    check, problems = validate_model(CheckSpec, raw, path)
    check_type = CHECK_TYPES.get(raw["type"]) if isinstance(raw.get("type"), str) else None
    params = raw.get("params", {})
    if check_type is not None and isinstance(
        params, dict
    ):  # params are checked even when the check is not
        params, param_problems = _parse_params(check_type, params, f"{path}.params", lenient_regex)
        problems += param_problems
    if check is None or problems:
        return None, problems
    normalized: JSONObject = {
        "id": check.id,
        "type": check.type,
        "weight": check.weight,
        "required": check.required,
        "params": params
        if check_type is not None
        else check.params,  # unknown types: kept as written
    }
    if check.description is not None:
        normalized["description"] = check.description
    return normalized, problems


def _parse_params(
    check_type: CheckType,
    raw: JSONObject,
    path: str,
    lenient_regex: bool,
) -> tuple[JSONObject | None, list[str]]:
    params = dict(raw)
    problems: list[str] = []
    used_aliases: dict[str, str] = {}
    for alias, canonical in PARAM_ALIASES.items():
        if alias in params and canonical in check_type.params.model_fields:
            if canonical in params:
                problems.append(
                    f"{path}.{alias}: give either {quote(canonical)} or its alias {quote(alias)}, not both"
                )
                params.pop(alias)
                continue
            params[canonical] = params.pop(alias)
            used_aliases[canonical] = alias
    model, model_problems = validate_model(
        check_type.params, params, path, {"lenient_regex": lenient_regex}
    )
    for canonical, alias in used_aliases.items():  # report the name the author wrote
        model_problems = [
            p.replace(f"{path}.{canonical}:", f"{path}.{alias}:").replace(
                f"{path}.{canonical}[", f"{path}.{alias}["
            )
            for p in model_problems
        ]
    problems += model_problems
    return (model.model_dump() if model is not None else None), problems


def _parse_in_process(raw: JSONObject) -> tuple[JSONObject | None, list[str]]:
    spec, problems = validate_model(InProcessSpec, raw)
    fn_name = raw.get("fn_name")
    if isinstance(fn_name, str) and fn_name and fn_name not in fns.registered():
        problems.append(f"fn_name: {fns.unknown_fn_message(fn_name)}")
    if spec is None or problems:
        return None, problems
    normalized: JSONObject = {**_base(spec), "fn_name": spec.fn_name, "params": spec.params}
    if "expected" in raw:
        normalized["expected"] = spec.expected
    return normalized, problems


def _parse_class(
    raw: JSONObject, kind: str, cls: type[classes.Verifier]
) -> tuple[JSONObject | None, list[str]]:
    spec, problems = validate_model(ClassSpec, raw)
    params = raw.get("params", {})
    config = None
    if isinstance(params, dict):
        config, config_problems = validate_model(cls.Config, params, "params")
        problems += config_problems
    if spec is None or config is None or problems:
        return None, problems
    return {**_base(spec), "params": config.model_dump()}, problems


def parse_row_verifier(raw: Any, prefix: str = "verifier") -> tuple[JSONObject | None, list[str]]:
    """Validate a task row's ``verifier``; ``(normalized or None, problems)``."""
    if not isinstance(raw, dict):
        return None, [f"{prefix}: must be an object with kind and fn_name"]
    row, problems = validate_model(RowVerifierSpec, raw, prefix)
    fn_name = raw.get("fn_name")
    if isinstance(fn_name, str) and fn_name and fn_name not in fns.registered():
        problems.append(f"{prefix}.fn_name: {fns.unknown_fn_message(fn_name)}")
    if row is None or problems:
        return None, problems
    normalized: JSONObject = {
        "kind": "in_process",
        "fn_name": row.fn_name,
        "params": row.params,
        "weight": row.weight,
        "required": row.required,
        "passThreshold": row.passThreshold,
    }
    if "expected" in raw:
        normalized["expected"] = row.expected
    return normalized, problems


# --- public ------------------------------------------------------------------------


def validate_spec(spec: Any) -> JSONObject:
    """The normalized spec (aliases resolved, defaults filled); :class:`SpecError`
    naming the field path when it is invalid."""
    normalized, problems = parse_spec(spec)
    if problems or normalized is None:
        raise SpecError(problems)
    return normalized


def lint_spec(spec: Any) -> list[str]:
    """Every problem of ``spec`` as ``"field.path: message"``; ``[]`` when valid.

    Exactly the problems :func:`validate_spec` raises. (An unknown check type is
    not a problem: it is skipped at scoring and noted in the feedback (docs/verifier-semantics.md "Native verifiers");
    :func:`spec_warnings` reports it.)
    """
    return parse_spec(spec)[1]


def spec_warnings(spec: Any) -> list[str]:
    """What is valid but probably not meant, as ``"field.path: message"``.

    Today: a check whose type is unknown. Scoring skips such a check (docs/verifier-semantics.md "Native verifiers"),
    so a typo like ``"json_valdi"`` would silently stop checking anything; an
    authoring tool shows this next to the field without refusing the spec.
    """
    if (
        not isinstance(spec, dict)
        or spec.get("kind", "native") != "native"
        or not isinstance(spec.get("checks"), list)
    ):
        return []
    known = [*CHECK_TYPES, *TYPE_ALIASES]
    warnings: list[str] = []
    for index, check in enumerate(spec["checks"]):
        check_type = check.get("type") if isinstance(check, dict) else None
        if not isinstance(check_type, str) or not check_type or check_type in known:
            continue
        close = difflib.get_close_matches(check_type, known, n=1)
        hint = (
            f"did you mean {quote(close[0])}? "
            if close
            else f"known types: {', '.join(CHECK_TYPES)}; "
        )
        warnings.append(
            f"checks[{index}].type: unknown check type {quote(check_type)} ({hint}scoring skips this check)"
        )
    return warnings


def spec_json_schema() -> JSONObject:
    """The JSON Schema of one verifier spec of any kind, self-contained (no
    ``$ref``), for the API's OpenAPI document. Each check's ``params`` depend on
    its type (validated by :func:`validate_spec`, which has the last word)."""
    native = inline_json_schema(NativeSpec)
    native["properties"]["checks"]["items"] = inline_json_schema(CheckSpec)
    kinds = [native, inline_json_schema(InProcessSpec), inline_json_schema(ClassSpec)]
    for schema, title in zip(
        kinds, ("NativeVerifierSpec", "InProcessVerifierSpec", "ClassVerifierSpec"), strict=True
    ):
        schema["title"] = title
    native["properties"]["checks"]["description"] = "Check types: " + ", ".join(CHECK_TYPES)
    return {
        "title": "VerifierSpec",
        "anyOf": kinds,
        "description": 'A verifier: kind "native" (weighted checks), "in_process" (a registered function) '
        "or the name of a registered verifier class; its id is the verifier's id.",
    }


def inline_json_schema(model: type[BaseModel]) -> JSONObject:
    """``model``'s JSON Schema with every ``$ref`` replaced by its definition, so
    it can be embedded in another document (an OpenAPI component) as it is."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    inlined: JSONObject = inline(schema)
    return inlined


def row_verifier_json_schema() -> JSONObject:
    """The JSON Schema of a task row's own ``verifier``."""
    return inline_json_schema(RowVerifierSpec)

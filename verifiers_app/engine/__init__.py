"""Frontier's scoring engine: deterministic verifiers, pure Python, no Django.

Usage::

    from verifiers_app.engine import score, compile_specs, SpecError

    result = score(spec, output, task)              # one-off
    scorer = compile_specs(specs, aggregator="weighted_average", thresholds=None)
    result = scorer.score(output, task=None, prompt="")   # hot loops
    result.score, result.verdict, result.passed, result.feedback, result.as_dict()

Rules: docs/verifier-semantics.md. Module map:
``specs`` (pydantic spec models, validation), ``checks`` (native check types),
``expectations`` (task mustMention / mustNotMention), ``tasks`` (task rows),
``fns`` (fn registry), ``classes`` (verifier-class registry, plugins),
``verifiers`` (compiled form), ``aggregate`` (aggregators, verdicts),
``result``, ``scoring``, ``regexes`` (time-limited regexes), ``linear_regexes``
(the patterns RE2 answers exactly, no timeout), ``quoting``,
``json_types`` (``JSONObject``, the type of a parsed JSON object).

Verifier ids in a result
------------------------
``result.verifiers`` lists the spec-level verifiers in spec order
(``scorer.verifier_ids``), then — when the task row carries a ``verifier`` —
the row verifier with id ``"row"`` (name ``"row: <fn_name>"``; ``"row"`` is
reserved, no spec may use it). Fn and class verifiers report one check: id =
the fn name (type ``"in_process"``) or the class kind (type = the kind).

Feedback format
---------------
``result.feedback`` is one line per check that scored below 1 or was skipped,
in verifier then check order: ``"<verifier id>/<check id>: <reason>"``; it is
empty exactly when every check scored 1 and none was skipped.
``result.misses`` holds the same lines minus the skipped notes;
``result.hits`` holds ``"<verifier id>/<check id>: <what passed>"`` for each
check that scored 1. Phrases inside reasons are JSON string literals (double
quotes, ``\\"`` escaped). Reasons by check:

- task_expectations: the failed entries joined by ``"; "``, each
  ``<message> (expected one of: "refund", "money back")`` — ``(expected:
  "refund")`` for a single phrase — or, for mustNotMention, ``<message>
  (found: "gift card")`` listing the phrases actually present. An entry with
  no message uses "output is missing an expected phrase" / "output contains a
  phrase it must not". A plain-string entry (``mustMention: ["refund"]``) is
  the same as ``{"text": "refund"}``.
- contains: ``output does not contain "X"``; not_contains: ``output must not
  contain "X"`` (both add `` (case-sensitive)`` when caseSensitive).
- regex: ``output does not match pattern "P"``; ``pattern "P" timed out after
  0.25 s on a 1,000,001-character output``; ``pattern "P" not run: earlier
  patterns used up the 1.0 s regex budget for one output`` (all regex checks of
  one scoring share ``REGEX_BUDGET_SECONDS``); ``invalid regular expression "P":
  <error>``.
- equals: ``output does not equal "V" (got: "<first 60 chars>…")``.
- min_length: ``output is too short: 12 characters, needs at least 50``;
  max_length: ``output is too long: 812 characters, must be at most 500``.
- json_valid: ``output is not valid JSON (<json error>)``, plus ``; output the
  bare JSON, without a code fence`` when the output starts with a fence.
- json_keys / expected_output_schema: ``missing required keys: "urgency",
  "sentiment"``, followed by `` (output is not valid JSON)`` or `` (output is a
  JSON array, not an object)`` when there is no object at all.
- unknown check type (skipped): ``unknown check type "foo" (skipped)``.
- a check that raised: ``check raised ValueError: <message>``.
- fns: exact_match ``output does not exactly equal "42" (got: "41")``;
  contains ``output does not contain "<answer>4</answer>"``; regex_match
  ``output does not match pattern "P"``; tool_calls_match e.g. ``tool "click"
  expected, got "type"`` / ``coordinate [180, 40] is more than 25 px from the
  expected [120, 40]``; a fn returning ``(score, reason)`` uses its reason;
  other fns: ``fn "name" scored 0.00 against expected "…"``.
- verifier classes: ``explain(result)`` if the class has it (format_only:
  ``wrap the reasoning in "<think>" … "</think>"``), else ``info["reason"]``,
  else ``verifier "kind" gave reward 0.50 (info: {…})``.
"""

from .aggregate import AGGREGATORS, Aggregator, Thresholds
from .classes import VerificationResult, Verifier, register_verifier
from .errors import SpecError
from .fns import register_fn
from .regexes import REGEX_BUDGET_SECONDS, REGEX_TIMEOUT_SECONDS
from .result import CheckResult, Result, VerifierResult
from .scoring import Scorer, compile_specs, score
from .specs import (
    ROW_VERIFIER_ID,
    inline_json_schema,
    lint_spec,
    row_verifier_json_schema,
    spec_json_schema,
    spec_warnings,
    validate_spec,
)
from .task_rows import validate_task

__all__ = [
    "AGGREGATORS",
    "REGEX_BUDGET_SECONDS",
    "REGEX_TIMEOUT_SECONDS",
    "ROW_VERIFIER_ID",
    "Aggregator",
    "CheckResult",
    "Result",
    "Scorer",
    "SpecError",
    "Thresholds",
    "VerificationResult",
    "Verifier",
    "VerifierResult",
    "compile_specs",
    "inline_json_schema",
    "lint_spec",
    "register_fn",
    "register_verifier",
    "row_verifier_json_schema",
    "score",
    "spec_json_schema",
    "spec_warnings",
    "validate_spec",
    "validate_task",
]

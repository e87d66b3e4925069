"""``manage.py verifiers <subcommand>``: work with verifier specs from a terminal.

    verifiers score --spec SPEC.json [--spec …] [--aggregator A] [--thresholds JSON]
                    [--task TASK.json] --output FILE|-
    verifiers lint SPEC.json [SPEC.json …]
    verifiers create SPEC.json [--owner USERNAME]

Bad input (unreadable file, bad JSON, invalid spec or task) exits with status 2
and one line on stderr naming the file and the field. ``lint`` prints every
problem and exits 1 when there is any; it also prints warnings (an unknown check
type, which scoring skips), which do not change the exit status.

Adding a subcommand: write ``add_<name>_arguments(self, parser)`` and
``handle_<name>(self, **options)`` and list the name in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.lib.storable import parse_json
from verifiers_app.engine import (
    SpecError,
    compile_specs,
    lint_spec,
    spec_warnings,
    validate_spec,
    validate_task,
)

# An invalid spec, task or file: exit 2, for every subcommand (lint included).
BAD_INPUT = 2


def bad_input(message: str) -> CommandError:
    return CommandError(message, returncode=BAD_INPUT)


def read_json(path: str) -> Any:
    """The JSON in ``path``; a one-line :class:`CommandError` when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise bad_input(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise bad_input(f"{path}: cannot be read ({exc})") from None
    try:
        return parse_json(text)
    except (
        ValueError
    ) as exc:  # JsonTooDeep too: "not valid JSON (value: nested more than 100 levels deep)"
        raise bad_input(f"{path}: not valid JSON ({exc})") from None


def specs_in(path: str, data: Any) -> list[tuple[str, Any]]:
    """``(label, spec)`` for a file holding one spec or a list of specs."""
    if isinstance(data, list):
        return [(f"{path}[{index}]: ", spec) for index, spec in enumerate(data)]
    return [(f"{path}: ", data)]


class Command(BaseCommand):
    help = "Score an output against verifier specs, or lint spec files."
    requires_system_checks: list[str] = []  # pure engine work: no models, no database

    SUBCOMMANDS = {
        "score": "score one output against one or more specs and print the result JSON",
        "lint": "report every problem in spec files, each with its field path; exit 2 if a spec is invalid "
        "(warnings, e.g. an unknown check type, leave the exit status 0)",
        "create": "create a verifier from a spec file, or update the one with its id",
    }

    def add_arguments(self, parser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        for name, help_text in self.SUBCOMMANDS.items():
            getattr(self, f"add_{name}_arguments")(subparsers.add_parser(name, help=help_text))

    def handle(self, *args, subcommand: str, **options) -> None:
        getattr(self, f"handle_{subcommand}")(**options)

    # --- score -------------------------------------------------------------------

    def add_score_arguments(self, parser) -> None:
        parser.add_argument(
            "--spec",
            action="append",
            required=True,
            metavar="FILE",
            help="verifier spec JSON (one spec or a list); repeat for several",
        )
        parser.add_argument(
            "--aggregator",
            default="weighted_average",
            help="weighted_average (default), minimum, maximum, safety_gate, all_or_nothing, "
            'or a JSON object like {"type": "safety_gate", "required": ["safety"]}',
        )
        parser.add_argument(
            "--thresholds",
            default=None,
            metavar="JSON",
            help='verdict thresholds, e.g. {"pass": 0.8, "borderline": 0.6}',
        )
        parser.add_argument(
            "--task",
            default=None,
            metavar="FILE",
            help="task row JSON (expectations, row verifier)",
        )
        parser.add_argument(
            "--output",
            required=True,
            metavar="FILE|-",
            help="the model output to score; - for stdin",
        )
        parser.add_argument(
            "--prompt", default="", help="the prompt the model saw (for verifier classes)"
        )

    def handle_score(
        self,
        *,
        spec: list[str],
        aggregator: str,
        thresholds: str | None,
        task: str | None,
        output: str,
        prompt: str,
        **_: Any,
    ) -> None:
        specs = []
        for path in spec:
            for label, raw in specs_in(path, read_json(path)):
                try:
                    specs.append(validate_spec(raw))
                except SpecError as exc:
                    raise bad_input(f"{label}{exc}") from None
        aggregator_value = self._json_or_name(aggregator, "--aggregator")
        thresholds_value = self._json_or_name(thresholds, "--thresholds") if thresholds else None
        task_value = None
        if task:
            task_value = read_json(task)
            try:
                validate_task(task_value, require_task_id=False)
            except SpecError as exc:
                raise bad_input(f"{task}: {exc}") from None
        try:
            scorer = compile_specs(specs, aggregator=aggregator_value, thresholds=thresholds_value)
            result = scorer.score(self._read_output(output), task_value, prompt)
        except SpecError as exc:
            raise bad_input(str(exc)) from None
        self.stdout.write(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))

    @staticmethod
    def _json_or_name(value: str, option: str) -> Any:
        if not value.lstrip().startswith(("{", "[")):
            return value
        try:
            return parse_json(value)
        except ValueError as exc:
            raise bad_input(f"{option}: not valid JSON ({exc})") from None

    def _read_output(self, output: str) -> str:
        if output == "-":
            return sys.stdin.read()
        try:
            return Path(output).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise bad_input(f"{output}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise bad_input(f"{output}: cannot be read ({exc})") from None

    # --- lint --------------------------------------------------------------------

    def add_lint_arguments(self, parser) -> None:
        parser.add_argument("specs", nargs="+", metavar="SPEC", help="verifier spec JSON files")

    def handle_lint(self, *, specs: list[str], **_: Any) -> None:
        problem_count = 0
        for path in specs:
            for label, raw in specs_in(path, read_json(path)):
                problems, warnings = lint_spec(raw), spec_warnings(raw)
                problem_count += len(problems)
                for problem in problems:
                    self.stdout.write(f"{label}{problem}")
                for warning in warnings:  # valid, so they do not change the exit status
                    self.stdout.write(f"{label}warning: {warning}")
                if not problems:
                    note = (
                        f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})"
                        if warnings
                        else ""
                    )
                    self.stdout.write(f"{label}ok{note}")
        if problem_count:
            raise bad_input(f"{problem_count} problem{'s' if problem_count > 1 else ''} found")

    # --- create ------------------------------------------------------------------

    def add_create_arguments(self, parser) -> None:
        parser.add_argument(
            "spec_file", metavar="SPEC", help="verifier spec JSON; its id names the verifier"
        )
        parser.add_argument(
            "--owner",
            default=None,
            metavar="USERNAME",
            help="who owns a new verifier (default: the first superuser)",
        )

    def handle_create(self, *, spec_file: str, owner: str | None, **_: Any) -> None:
        from verifiers_app.management.owner import command_owner
        from verifiers_app.services import verifier_upsert

        spec = read_json(spec_file)
        try:
            verifier, outcome = verifier_upsert(owner=command_owner(owner), spec=spec)
        except SpecError as exc:
            raise bad_input(f"{spec_file}: {exc}") from None
        threshold = validate_spec(verifier.spec)["passThreshold"]
        self.stdout.write(f"{outcome} verifier {verifier.slug} · pass_threshold {threshold}")

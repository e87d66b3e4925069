"""``manage.py verifiers score|lint``, called in-process (the exit codes and stderr of
the real command line: tests/integration/test_verifiers_cli.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

SPEC = {
    "id": "refund",
    "name": "Refund",
    "checks": [
        {"id": "expectations", "type": "task_expectations", "weight": 2},
        {"id": "no-gift-card", "type": "must_not_contain", "params": {"text": "gift card"}},
    ],
}
TASK = {
    "task_id": "t1",
    "metadata": {
        "expectations": {
            "mustMention": [{"anyOf": ["refund", "money back"], "message": "offer a refund"}]
        }
    },
}


@pytest.fixture
def files(tmp_path):
    def write(name: str, content) -> str:
        path = tmp_path / name
        path.write_text(
            content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
        )
        return str(path)

    return write


class TestScore:
    def test_it_prints_the_result_json(self, files):
        stdout = io.StringIO()
        call_command(
            "verifiers",
            "score",
            "--spec",
            files("spec.json", SPEC),
            "--task",
            files("task.json", TASK),
            "--output",
            files("out.txt", "We can give you a gift card."),
            stdout=stdout,
        )
        result = json.loads(stdout.getvalue())
        assert result["score"] == 0.0
        assert result["verdict"] == "fail"
        assert result["feedback"].splitlines() == [
            'refund/expectations: offer a refund (expected one of: "refund", "money back")',
            'refund/no-gift-card: output must not contain "gift card"',
        ]

    def test_it_takes_several_specs_an_aggregator_and_thresholds(self, files):
        other = {"id": "short", "checks": [{"type": "max_length", "params": {"value": 5}}]}
        stdout = io.StringIO()
        call_command(
            "verifiers",
            "score",
            "--spec",
            files("a.json", SPEC),
            "--spec",
            files("b.json", other),
            "--aggregator",
            "maximum",
            "--thresholds",
            '{"pass": 0.9, "borderline": 0.5}',
            "--task",
            files("task.json", TASK),
            "--output",
            files("out.txt", "A full refund."),
            stdout=stdout,
        )
        result = json.loads(stdout.getvalue())
        assert [v["id"] for v in result["verifiers"]] == ["refund", "short"]
        assert (result["score"], result["verdict"]) == (1.0, "pass")

    def test_an_invalid_task_exits_2_naming_the_field(self, files):
        task = {"verifier": {"kind": "in_process", "fn_name": "nope"}}
        with pytest.raises(CommandError) as caught:
            call_command(
                "verifiers",
                "score",
                "--spec",
                files("spec.json", SPEC),
                "--task",
                files("task.json", task),
                "--output",
                files("out.txt", "x"),
            )
        assert caught.value.returncode == 2
        assert str(caught.value).startswith(
            f'{Path(files("task.json", task))}: verifier.fn_name: unknown fn "nope"'
        )

    def test_a_missing_file_exits_2(self, files):
        with pytest.raises(CommandError) as caught:
            call_command("verifiers", "score", "--spec", "/nowhere/spec.json", "--output", "-")
        assert caught.value.returncode == 2
        assert str(caught.value) == "/nowhere/spec.json: no such file"

    def test_a_bad_aggregator_exits_2(self, files):
        with pytest.raises(CommandError) as caught:
            call_command(
                "verifiers",
                "score",
                "--spec",
                files("spec.json", SPEC),
                "--aggregator",
                "median",
                "--output",
                files("out.txt", "x"),
            )
        assert caught.value.returncode == 2
        assert str(caught.value).startswith('aggregator.type: unknown aggregator "median"')


class TestLint:
    def test_a_valid_spec_lints_clean(self, files):
        stdout = io.StringIO()
        path = files("good.json", [SPEC, {"id": "fmt", "kind": "format_only"}])
        call_command("verifiers", "lint", path, stdout=stdout)
        assert stdout.getvalue().splitlines() == [f"{path}[0]: ok", f"{path}[1]: ok"]

    def test_it_warns_about_an_unknown_check_type_without_failing(self, files):
        stdout = io.StringIO()
        path = files("typo.json", {"id": "t", "checks": [{"type": "json_valdi"}]})
        call_command("verifiers", "lint", path, stdout=stdout)
        assert stdout.getvalue().splitlines() == [
            f'{path}: warning: checks[0].type: unknown check type "json_valdi" (did you mean "json_valid"? '
            "scoring skips this check)",
            f"{path}: ok (1 warning)",
        ]

    def test_a_file_that_is_not_json_exits_2(self, files):
        path = files("broken.json", "")
        with pytest.raises(CommandError) as caught:
            call_command("verifiers", "lint", path)
        assert caught.value.returncode == 2
        assert str(caught.value).startswith(f"{path}: not valid JSON")

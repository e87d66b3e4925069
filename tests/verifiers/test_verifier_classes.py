"""Verifier classes (docs/verifier-semantics.md "Verifier classes"): registry, contract, format_only, plugins."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from verifiers_app.engine import (
    SpecError,
    VerificationResult,
    classes,
    lint_spec,
    register_verifier,
    score,
)


class LengthConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_len: int = 10
    tolerance: int = 2


@register_verifier("test_length_band")
class LengthBandVerifier:
    name: ClassVar[str] = "test_length_band"
    Config: ClassVar[type] = LengthConfig

    def __init__(self, *, target_len: int = 10, tolerance: int = 2) -> None:
        self.target_len, self.tolerance = target_len, tolerance

    calls: ClassVar[list[dict]] = []

    def verify(self, *, prompt: str, completion: str, target: dict[str, Any]) -> VerificationResult:
        self.calls.append({"prompt": prompt, "completion": completion, "target": target})
        off = abs(len(completion) - self.target_len)
        return VerificationResult(
            reward=1.0 if off <= self.tolerance else 0.0, info={"chars_off": off}
        )


class TestFormatOnly:
    SPEC = {
        "id": "fmt",
        "kind": "format_only",
        "params": {"has_think_reward": 0.5, "has_answer_reward": 0.5},
    }

    def test_it_rewards_both_tags(self):
        assert score(self.SPEC, "<think>hm</think><answer>4</answer>").score == 1.0

    def test_it_gives_half_for_one_tag_and_says_what_is_missing(self):
        result = score(self.SPEC, "<answer>4</answer>")
        assert result.score == 0.5
        assert result.feedback == 'fmt/format_only: wrap the reasoning in "<think>" … "</think>"'

    def test_its_verify_returns_the_documented_info(self):
        verifier = classes.FormatOnlyVerifier()
        result = verifier.verify(prompt="p", completion="<think></think>", target={})
        assert result == VerificationResult(
            reward=0.5, info={"has_think": True, "has_answer": False}
        )

    def test_verify_arguments_are_keyword_only(self):
        with pytest.raises(TypeError):
            classes.FormatOnlyVerifier().verify("p", "c", {})

    def test_its_params_are_validated_with_extra_forbidden(self):
        problems = lint_spec({"id": "fmt", "kind": "format_only", "params": {"has_think": 1}})
        assert problems == ["params.has_think: unknown field"]


class TestRegisteredClasses:
    def test_a_registered_class_is_selected_by_kind_and_built_from_params(self):
        result = score(
            {"id": "len", "kind": "test_length_band", "params": {"target_len": 3, "tolerance": 0}},
            "abc",
        )
        assert result.score == 1.0

    def test_it_receives_prompt_completion_and_a_task_target(self):
        score(
            {"id": "len", "kind": "test_length_band"},
            "hello",
            {"task_id": "t9", "expected": {"answer": 4}},
            prompt="say hi",
        )
        seen = LengthBandVerifier.calls
        assert seen[-1]["prompt"] == "say hi"
        assert seen[-1]["completion"] == "hello"
        assert seen[-1]["target"]["task_id"] == "t9" and seen[-1]["target"]["expected"] == {
            "answer": 4
        }

    def test_a_sub_perfect_reward_gets_a_generic_reason_with_info(self):
        result = score(
            {"id": "len", "kind": "test_length_band", "params": {"target_len": 1, "tolerance": 0}},
            "abc",
        )
        assert (
            result.feedback
            == 'len/test_length_band: verifier "test_length_band" gave reward 0.00 (info: {"chars_off": 2})'
        )

    def test_bad_class_params_name_the_field(self):
        with pytest.raises(SpecError) as caught:
            score({"id": "len", "kind": "test_length_band", "params": {"target_len": "long"}}, "x")
        assert str(caught.value).startswith("params.target_len: ")

    def test_a_class_without_a_config_cannot_register(self):
        with pytest.raises(TypeError):
            register_verifier("test_no_config")(type("NoConfig", (), {"verify": lambda self: None}))

    def test_the_built_in_kinds_cannot_be_taken_by_a_class(self):
        with pytest.raises(ValueError):
            register_verifier("native")


class FakeEntryPoint:
    def __init__(self, name: str, target: Any) -> None:
        self.name, self.value, self._target = name, f"fake:{name}", target

    def load(self):
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


class PluginVerifier:
    name: ClassVar[str] = "test_plugin"
    Config: ClassVar[type] = LengthConfig

    def __init__(self, **_: Any) -> None:
        pass

    def verify(self, *, prompt: str, completion: str, target: dict[str, Any]) -> VerificationResult:
        return VerificationResult(reward=1.0)


class TestPlugins:
    @pytest.fixture
    def entry_points(self, monkeypatch):
        installed: list[FakeEntryPoint] = []

        def fake_entry_points(*, group):
            assert group == "frontier.verifiers"
            return list(installed)

        monkeypatch.setattr(classes.metadata, "entry_points", fake_entry_points)
        monkeypatch.setattr(classes, "_plugins_loaded", False)
        yield installed
        classes._CLASSES.pop("test_plugin", None)

    def test_a_plugin_class_is_loaded_from_the_entry_point_group(self, entry_points):
        entry_points.append(FakeEntryPoint("test_plugin", PluginVerifier))
        assert score({"id": "p", "kind": "test_plugin"}, "x").score == 1.0

    def test_a_broken_plugin_is_a_warning_never_fatal(self, entry_points):
        entry_points.append(
            FakeEntryPoint("test_broken_plugin", ImportError("no module named nowhere"))
        )
        entry_points.append(FakeEntryPoint("test_plugin", PluginVerifier))
        with pytest.warns(RuntimeWarning, match="test_broken_plugin"):
            classes.load_plugins(force=True)
        assert score({"id": "p", "kind": "test_plugin"}, "x").score == 1.0

    def test_an_unknown_kind_lists_what_is_available(self, entry_points):
        problems = lint_spec({"id": "p", "kind": "nowhere"})
        assert problems == [
            'kind: unknown kind "nowhere"; use one of "native", "in_process", '
            + ", ".join(f'"{n}"' for n in classes.registered_verifiers())
        ]
        assert '"format_only"' in problems[0]

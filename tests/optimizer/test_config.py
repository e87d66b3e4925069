import pytest

from optimizer.config import RunConfigError, parse_run_config


def problems_of(data):
    with pytest.raises(RunConfigError) as caught:
        parse_run_config(data)
    return caught.value.problems


def test_a_minimal_config_gets_demo_models_and_a_light_budget():
    config = parse_run_config({"task_set_id": 3})
    assert (
        config.task_lm == config.reflection_lm == "demo"
    )  # the simulator's name, resolved at launch
    assert config.budget.preset == "light"
    assert config.frontier_type == "instance"
    assert config.candidate_selection == "pareto"


def test_the_frozen_config_round_trips_through_json():
    config = parse_run_config(
        {
            "task_set_id": 3,
            "thresholds": {"pass": 0.9, "borderline": 0.5},
            "seed_components": {"a": "x", "b": "y"},
        }
    )
    frozen = config.frozen()
    assert frozen["thresholds"] == {"pass": 0.9, "borderline": 0.5}
    assert parse_run_config(frozen) == config


def test_a_preset_budget_follows_the_documented_formula():
    config = parse_run_config(
        {"task_set_id": 1, "budget": {"preset": "medium"}, "minibatch_size": 4}
    )
    # V + 15 · (2·m + V) with V = 10, m = 4
    assert config.max_metric_calls(10) == 10 + 15 * (8 + 10)


def test_it_warns_when_the_budget_allows_fewer_than_three_proposals():
    config = parse_run_config({"task_set_id": 1, "budget": {"max_metric_calls": 40}})
    warning = config.budget_warning(10)
    assert "allow only 1 proposal" in warning
    assert "use at least 58" in warning
    assert (
        parse_run_config({"task_set_id": 1, "budget": {"max_metric_calls": 58}}).budget_warning(10)
        is None
    )


def test_it_rejects_a_budget_with_both_a_preset_and_an_exact_number():
    assert problems_of(
        {"task_set_id": 1, "budget": {"preset": "light", "max_metric_calls": 9}}
    ) == [("budget", "give exactly one of preset (light, medium, heavy) or max_metric_calls")]


def test_it_names_the_nested_field_of_a_bad_lm_config_once():
    assert problems_of({"task_set_id": 1, "task_lm": {"provider": "anthropic", "model": "m"}}) == [
        ("task_lm.provider", "Input should be 'openai' or 'demo'")
    ]


def test_it_accepts_an_endpoint_name_for_a_model():
    assert (
        parse_run_config({"task_set_id": 1, "reflection_lm": "local-llama"}).reflection_lm
        == "local-llama"
    )


def test_it_rejects_unknown_fields():
    assert problems_of({"task_set_id": 1, "budgt": 5}) == [("budgt", "unknown field")]


def test_it_rejects_thresholds_out_of_order():
    assert problems_of({"task_set_id": 1, "thresholds": {"pass": 0.5, "borderline": 0.7}}) == [
        ("thresholds", "borderline must not be above pass")
    ]


def test_it_rejects_an_empty_seed_component_by_name():
    assert problems_of({"task_set_id": 1, "seed_components": {"rules": "  "}}) == [
        ("seed_components", "component 'rules' is empty")
    ]


def test_an_llm_judge_needs_a_judge_model():
    assert problems_of({"task_set_id": 1, "verify": {"enabled": True, "judge": "llm"}}) == [
        ("verify", "judge_lm is required when judge is llm")
    ]


def test_max_verify_must_be_at_least_one():
    assert problems_of({"task_set_id": 1, "verify": {"max_verify": 0}})[0][0] == "verify.max_verify"


def test_a_holdout_must_differ_from_train_and_val():
    assert problems_of({"task_set_id": 1, "splits": {"holdout": "val"}}) == [
        ("splits", "holdout must be a different split from train and val")
    ]


def test_what_the_database_cannot_store_is_refused_naming_the_field():
    # NaN (Python's json reads it, jsonb refuses it) and NUL (no PostgreSQL text holds it).
    with pytest.raises(RunConfigError) as error:
        parse_run_config({"task_set_id": 1, "name": "a\x00b", "thresholds": {"pass": float("nan")}})
    fields = [field for field, _ in error.value.problems]
    assert fields == ["name", "thresholds.pass"]


def test_parallel_proposals_default_to_classic_gepa_and_are_bounded():
    assert parse_run_config({"task_set_id": 1}).parallel_proposals == 1
    assert parse_run_config({"task_set_id": 1, "parallel_proposals": 4}).parallel_proposals == 4
    assert [field for field, _ in problems_of({"task_set_id": 1, "parallel_proposals": 0})] == [
        "parallel_proposals"
    ]
    assert [field for field, _ in problems_of({"task_set_id": 1, "parallel_proposals": 9})] == [
        "parallel_proposals"
    ]

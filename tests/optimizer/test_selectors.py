"""The run read model: the runs list query, the summary every page, list row
and API answer is built from, the simulator flag and who may see or control a run."""

import pytest
from django.http import Http404

from optimizer import selectors
from optimizer.api import RunOut
from optimizer.config import DEMO_TASK_LM
from optimizer.models import Run, RunStatus
from optimizer.runs.summary import run_list_row, run_summary
from tests.factories import recorded_run

pytestmark = pytest.mark.django_db


def test_the_runs_list_filters_by_status_and_searches_names_task_sets_and_owners(user, other_user):
    done = recorded_run(owner=user, name="refund policy", candidates=2, val_tasks=2)
    live = recorded_run(
        owner=user, name="facility extraction", candidates=2, val_tasks=2, status=RunStatus.RUNNING
    )
    foreign = recorded_run(owner=other_user, name="refund elsewhere", candidates=2, val_tasks=2)

    assert list(selectors.run_list(user=user)) == [live, done]
    assert list(selectors.run_list(user=user, status="running")) == [live]
    assert list(selectors.run_list(user=user, search="REFUND")) == [done]
    assert list(selectors.run_list(user=user, search="alice")) == [live, done]
    foreign.shared_with.add(user)
    assert list(selectors.run_list(user=user, search="elsewhere")) == [foreign]


def test_the_demo_simulator_is_labelled_as_a_simulator(user):
    run = recorded_run(owner=user, candidates=1, val_tasks=1)
    assert run_summary(run)["model"] == {
        "label": "demo simulator",
        "is_simulator": True,
        "model": DEMO_TASK_LM.model,
    }
    run.config = {"task_lm": {"provider": "openai", "model": "gpt-4o-mini"}}
    assert run_summary(run)["model"] == {
        "label": "gpt-4o-mini",
        "is_simulator": False,
        "model": "gpt-4o-mini",
    }


def test_a_run_whose_reflection_model_is_the_simulator_is_flagged_a_simulator_on_pages_and_in_the_api(
    user,
):
    run = recorded_run(owner=user, candidates=1, val_tasks=1)
    run.config = {
        "task_lm": {"provider": "openai", "model": "gpt-4o-mini"},
        "reflection_lm": {"provider": "demo", "model": "demo-reflection"},
    }
    summary = run_summary(run)
    assert summary["model"] == {
        "label": "gpt-4o-mini",
        "is_simulator": True,
        "model": "gpt-4o-mini",
    }
    assert (
        RunOut.of(run)["simulator"] is True and run_list_row(run)["model"]["is_simulator"] is True
    )


def test_a_run_with_real_models_only_is_not_flagged_a_simulator_anywhere(user):
    run = recorded_run(owner=user, candidates=1, val_tasks=1)
    run.config = {
        "task_lm": {"provider": "openai", "model": "a"},
        "reflection_lm": {"provider": "openai", "model": "b"},
    }
    assert (
        RunOut.of(run)["simulator"] is False and run_summary(run)["model"]["is_simulator"] is False
    )


def test_the_api_shape_and_the_list_row_show_the_same_numbers_as_the_summary(user):
    run = recorded_run(owner=user, candidates=3, val_tasks=2)
    summary, api, row = run_summary(run), RunOut.of(run), run_list_row(run)
    for key in (
        "id",
        "status",
        "budget_used",
        "budget_total",
        "seed_score",
        "best_score",
        "cost",
        "pricing",
        "last_seq",
    ):
        assert api[key] == summary[key] == row[key]
    assert api["best_candidate"] == summary["best_index"] == run.best_candidate.index


def test_a_run_shared_with_a_user_is_readable_but_not_controllable_by_them(user, other_user):
    run = recorded_run(owner=other_user, candidates=1, val_tasks=1)
    with pytest.raises(Http404):
        selectors.run_for_user(user, run.pk)
    run.shared_with.add(user)
    assert selectors.run_for_user(user, run.pk) == run
    with pytest.raises(Http404):
        selectors.run_for_user(user, run.pk, control=True)
    assert selectors.run_for_user(other_user, run.pk, control=True) == run


def test_the_runs_list_leaves_archived_runs_out_unless_asked(user):
    kept = recorded_run(owner=user, name="kept", candidates=1, val_tasks=1)
    archived = recorded_run(owner=user, name="archived", candidates=1, val_tasks=1)
    archived.archived = True
    archived.save(update_fields=["archived"])
    assert list(selectors.run_list(user=user)) == [kept]
    assert list(selectors.run_list(user=user, archived=True)) == [archived]
    assert set(selectors.run_list(user=user, archived=None)) == {kept, archived}


def test_a_shared_task_set_is_readable_but_only_its_owner_may_change_it(user, other_user):
    from optimizer.tasksets.models import TaskSet

    task_set = TaskSet.objects.create(owner=other_user, name="theirs")
    with pytest.raises(Http404):
        selectors.taskset_for_user(user, task_set.pk)
    task_set.shared = True
    task_set.save(update_fields=["shared"])
    assert selectors.taskset_for_user(user, task_set.pk).task_count == 0
    with pytest.raises(Http404):
        selectors.taskset_for_user(user, task_set.pk, edit=True)
    assert selectors.taskset_for_user(other_user, task_set.pk, edit=True) == task_set


def test_simulator_limits_are_computed_only_for_a_run_that_reflects_with_the_simulator(user):
    """The run page's simulator note reads the run's frozen specs, tasks and seed
    prompt; a run whose reflection model is real learns without that limit."""
    run = recorded_run(owner=user, candidates=2, val_tasks=3)
    limits = selectors.run_simulator_limits(run)
    assert limits is not None and limits.val_tasks == 3 and 0.0 <= limits.ceiling <= 1.0
    run.config["reflection_lm"] = {"provider": "openai", "model": "gpt-x"}
    assert selectors.run_simulator_limits(run) is None
    run.config["reflection_lm"] = "demo"
    assert selectors.run_simulator_limits(run) is not None


def test_steering_rights_let_a_user_see_and_steer_a_run_but_not_control_it(user, other_user):
    from django.core.exceptions import PermissionDenied

    run = recorded_run(owner=other_user, candidates=1, val_tasks=1)
    run.shared_with.add(user)
    with pytest.raises(PermissionDenied, match="shared with you read-only"):
        selectors.run_for_user(user, run.pk, steer=True)
    run.shared_with.remove(user)
    run.steered_by.add(user)
    assert selectors.run_for_user(user, run.pk, steer=True) == run
    assert list(Run.objects.visible_to(user)) == [run]
    with pytest.raises(Http404):
        selectors.run_for_user(user, run.pk, control=True)

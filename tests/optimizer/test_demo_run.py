"""The demo run `make demo` starts on the example refund tickets."""

from __future__ import annotations

import pytest

from optimizer.demo_run import DEMO_RUN_NAME, launch_demo_run
from optimizer.examples import load_examples
from optimizer.models import Run, RunStatus

pytestmark = pytest.mark.django_db


def test_it_launches_one_simulator_run_on_the_examples_and_only_once(user):
    load_examples(user=user)
    run = launch_demo_run(user=user, launch_run=True)
    assert run.status == RunStatus.QUEUED and run.name == DEMO_RUN_NAME
    assert (
        run.config["task_lm"]["provider"] == "demo"
        and run.config["reflection_lm"]["provider"] == "demo"
    )
    assert run.config["splits"]["holdout"] == "holdout"
    assert launch_demo_run(user=user, launch_run=True) == run
    assert Run.objects.count() == 1


def test_a_failed_demo_run_is_replaced_and_no_run_is_launched_when_asked_not_to(user):
    load_examples(user=user)
    assert launch_demo_run(user=user, launch_run=False) is None
    failed = launch_demo_run(user=user, launch_run=True)
    Run.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED)
    assert launch_demo_run(user=user, launch_run=True).pk != failed.pk

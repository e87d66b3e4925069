"""`manage.py demo_setup` (what `make demo` runs after migrating)."""

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from optimizer.models import Run, RunStatus, Task, TaskSet
from verifiers_app.models import Verifier


def demo_setup(*args) -> str:
    out = StringIO()
    call_command("demo_setup", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_it_prints_a_working_demo_login_loads_the_examples_and_queues_one_demo_run():
    output = demo_setup()
    assert "Demo login: username demo · password frontier-demo" in output
    assert authenticate(username="demo", password="frontier-demo") is not None
    assert set(Verifier.objects.values_list("slug", flat=True)) >= {"refund-policy-quality", "facility-extraction-quality"}
    assert TaskSet.objects.count() == 3 and Task.objects.count() == 60
    run = Run.objects.get()
    assert run.status == RunStatus.QUEUED
    assert run.config["task_lm"]["provider"] == "demo"
    assert f"/runs/{run.pk}/" in output


@pytest.mark.django_db
def test_a_second_call_changes_nothing():
    demo_setup()
    before = (Verifier.objects.count(), TaskSet.objects.count(), Task.objects.count(), Run.objects.count())
    output = demo_setup()
    assert (Verifier.objects.count(), TaskSet.objects.count(), Task.objects.count(), Run.objects.count()) == before
    assert "already queued" in output


@pytest.mark.django_db
def test_no_run_loads_the_examples_without_launching_anything():
    demo_setup("--no-run")
    assert TaskSet.objects.count() == 3
    assert not Run.objects.exists()

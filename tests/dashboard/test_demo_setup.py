"""`manage.py demo_setup` (what `make demo` runs after migrating)."""

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from optimizer.models import Run, RunStatus
from optimizer.tasksets.models import Task, TaskSet
from verifiers_app.models import Verifier


@pytest.fixture(autouse=True)
def debug_on(settings, tmp_path):
    settings.DEBUG = True  # as `make demo` runs it (pytest-django turns DEBUG off)
    settings.DATA_DIR = tmp_path  # no embedded server is serving it


def demo_setup(*args) -> str:
    out = StringIO()
    call_command("demo_setup", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_it_prints_a_working_demo_login_loads_the_examples_and_queues_one_demo_run():
    output = demo_setup()
    assert "Demo login: username demo · password frontier-demo" in output
    assert authenticate(username="demo", password="frontier-demo") is not None
    assert set(Verifier.objects.values_list("slug", flat=True)) >= {
        "refund-policy-quality",
        "facility-extraction-quality",
    }
    assert TaskSet.objects.count() == 3 and Task.objects.count() == 60
    run = Run.objects.get()
    assert run.status == RunStatus.QUEUED
    assert run.config["task_lm"]["provider"] == "demo"
    assert (
        f"Launched the demo run (run {run.pk}, the offline simulator): it starts when the server starts."
        in output
    )


@pytest.mark.django_db
def test_a_second_call_changes_nothing():
    demo_setup()
    before = (
        Verifier.objects.count(),
        TaskSet.objects.count(),
        Task.objects.count(),
        Run.objects.count(),
    )
    output = demo_setup()
    assert (
        Verifier.objects.count(),
        TaskSet.objects.count(),
        Task.objects.count(),
        Run.objects.count(),
    ) == before
    assert f"The demo run (run {Run.objects.get().pk}) starts when the server starts." in output


@pytest.mark.django_db
def test_a_run_the_last_server_left_running_resumes_when_the_server_starts():
    """Ctrl-C leaves the demo run running; `make demo` again must not call it
    "already running" (nothing runs it until the server is up)."""
    demo_setup()
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    output = demo_setup()
    assert f"The demo run (run {run.pk}) resumes when the server starts." in output
    assert "already" not in output


@pytest.mark.django_db
def test_no_run_loads_the_examples_without_launching_anything():
    demo_setup("--no-run")
    assert TaskSet.objects.count() == 3
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_with_debug_off_it_refuses_to_create_the_demo_admin(settings):
    from django.core.management.base import CommandError

    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off.*--force"):
        demo_setup("--no-run")
    assert (
        not Verifier.objects.exists()
        and authenticate(username="demo", password="frontier-demo") is None
    )


@pytest.mark.django_db
def test_forced_with_debug_off_it_makes_a_random_password_and_prints_it_once(settings):
    import re

    settings.DEBUG = False
    output = demo_setup("--no-run", "--force")
    password = re.search(r"Demo login: username demo · password (\S+)", output).group(1)
    assert password != "frontier-demo" and len(password) >= 20
    assert authenticate(username="demo", password=password) is not None
    assert authenticate(username="demo", password="frontier-demo") is None
    again = demo_setup("--no-run", "--force")
    assert password not in again and "printed when it was created" in again

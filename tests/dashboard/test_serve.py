"""What `manage.py serve` prints before it serves (the process itself:
tests/integration/test_serve_command.py)."""

import pytest

from dashboard.management.commands.serve import RUN_LINES, _runs_to_take_up
from dashboard.server import browse_url
from optimizer.models import Run, RunStatus


def test_the_link_of_a_server_on_every_interface_is_the_loopback_address():
    assert browse_url("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert browse_url("0.0.0.0", 8000) == "http://127.0.0.1:8000/"
    assert browse_url("::", 8080) == "http://[::1]:8080/"
    assert browse_url("frontier.local", 80) == "http://frontier.local:80/"


@pytest.mark.django_db
def test_it_links_the_runs_it_takes_up_with_their_names_made_safe_for_a_terminal(user):
    """A run's name is anyone's text: its escape sequences (which would drive
    the terminal) and line breaks are not printed, and a long name is cut."""
    Run.objects.create(owner=user, status=RunStatus.COMPLETED, name="finished")
    queued = Run.objects.create(owner=user, status=RunStatus.QUEUED, name="plain")
    evil = Run.objects.create(
        owner=user,
        status=RunStatus.RUNNING,
        name="\x1b]8;;http://evil.example/\x07click\x1b[31m\nme" + "x" * 200,
    )
    lines = _runs_to_take_up("http://127.0.0.1:8123/")
    assert lines[1] == f'Run {queued.pk} "plain" starts: http://127.0.0.1:8123/runs/{queued.pk}/'
    assert lines[0].startswith(f'Run {evil.pk} "')
    assert lines[0].endswith(f'…" resumes: http://127.0.0.1:8123/runs/{evil.pk}/')
    assert len(lines) == 2 and all(c.isprintable() for c in lines[0]) and len(lines[0]) < 140
    for n in range(RUN_LINES):
        Run.objects.create(owner=user, status=RunStatus.QUEUED, name=f"more {n}")
    lines = _runs_to_take_up("http://127.0.0.1:8123/")
    assert len(lines) == RUN_LINES + 1
    assert lines[-1] == "… and 2 more: http://127.0.0.1:8123/runs/"

"""dspy.GEPA with the tracker passed through `gepa_kwargs` (examples/external/track_dspy_gepa.py)
reports to a live server. dspy pulls litellm and ~350 MB with it, so it is not a dev
dependency: the test runs with any Python that has dspy and frontier_tracker installed
(this one, or FRONTIER_DSPY_PYTHON) and is skipped, saying so, otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.account_services import api_token_create
from optimizer.models import Run, RunEvent, RunStatus

# Spawns the example with dspy; the live server uses whichever database the stage has.
pytestmark = pytest.mark.standalone

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external" / "track_dspy_gepa.py"


def _python_with_dspy() -> str | None:
    for python in (sys.executable, os.environ.get("FRONTIER_DSPY_PYTHON")):
        if (
            python
            and subprocess.run(
                [python, "-c", "import dspy, frontier_tracker"], capture_output=True, check=False
            ).returncode
            == 0
        ):
            return python
    return None


PYTHON = _python_with_dspy()


@pytest.mark.skipif(
    PYTHON is None,
    reason="dspy is not installed (pip install dspy ./clients/python, or set FRONTIER_DSPY_PYTHON)",
)
@pytest.mark.django_db(transaction=True)
def test_dspy_gepa_with_the_tracker_in_gepa_kwargs_is_watched_live(live_server, user):
    token = api_token_create(user=user, name="dspy")[1]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "FRONTIER"))
    }
    done = subprocess.run(
        [PYTHON, str(EXAMPLE), "--url", live_server.url, "--token", token],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["delivered"] and summary["dropped"] == 0
    run = Run.objects.get(pk=summary["run_id"])
    assert run.owner == user and run.kind == "external" and run.status == RunStatus.COMPLETED
    assert (
        run.seed_score == 0.5 and run.budget_used > 0
    )  # the DummyLM answers two of four questions right
    seed = run.candidates.get(index=0)
    assert set(seed.components) == {"self"}  # dspy names the component after the predictor
    assert set(seed.evaluations.values_list("task_key", flat=True)) == {
        "What is the capital of France?",
        "What is 2 + 2?",
        "What colour is a clear daytime sky?",
        "How many legs has a spider?",
    }
    rejected = [e.payload for e in RunEvent.objects.filter(run=run, type="proposal")]
    assert rejected and all(not p["accepted"] for p in rejected)
    assert rejected[0]["texts"] == {"self": "Answer with one word or number, and check it."}

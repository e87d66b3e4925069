"""`manage.py serve` (what `make demo` runs) stops quietly on Ctrl-C, even with a
run in progress on the embedded worker, and leaves that run resumable."""

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, _free_port
from tests.polling import wait_until

# Spawns `manage.py serve` on a data directory of its own: needs no service.
pytestmark = pytest.mark.standalone


def _env(data_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"}}
    return dict(env, FRONTIER_DATA_DIR=data_dir, PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="dashboard.settings")


def _manage(env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=300).stdout


RUN_STATUS = "from optimizer.models import Run; r = Run.objects.get(); print(r.status, r.budget_used)"


def _run_state(env: dict) -> tuple[str, int]:
    status, used = _manage(env, "shell", "-c", RUN_STATUS).split()[-2:]
    return status, int(used)


def test_ctrl_c_stops_the_server_with_no_traceback_and_the_demo_run_is_not_marked_failed():
    with tempfile.TemporaryDirectory(prefix="frontier-serve-") as data_dir:
        env = _env(data_dir)
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "demo_setup")  # launches the live demo run
        err_path = Path(data_dir) / "serve.err"
        with open(err_path, "w") as err:
            server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(_free_port())], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_until(lambda: (state := _run_state(env))[0] == "running" and state[1] > 0,
                       timeout=120, interval=1, what="the demo run to be spending its budget")
            server.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                server.kill()
        stderr = err_path.read_text()
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
        assert "resumes from its checkpoint when the server starts again" in stderr
        assert _run_state(env)[0] == "running"  # left for the watchdog to resume, as after a worker crash

"""Big run exports are built by a child process whose stdout the web process
relays (optimizer.downloads, optimizer.export_process). The relay itself is
tested here on small stand-in children; the real child against PostgreSQL and
SQLite under a real server in tests/integration/test_export_process.py."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import pytest
from django.db import connection

from optimizer import downloads
from optimizer.downloads import ExportProcessError, relay_export_process
from tests.factories import recorded_run


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_relay_gives_the_child_s_output_byte_for_byte_in_bounded_blocks():
    code = "import sys\nfor i in range(2000): sys.stdout.buffer.write(bytes([i % 251]) * 3001)"
    expected = b"".join(bytes([i % 251]) * 3001 for i in range(2000))
    pieces = [piece async for piece in relay_export_process(_python(code), dict(os.environ), what="test")]
    assert b"".join(pieces) == expected
    assert max(map(len, pieces)) <= downloads.PIECE_BYTES


async def test_a_client_that_goes_away_kills_the_export_process():
    code = "import os, sys\nsys.stdout.buffer.write(b'%d\\n' % os.getpid()); sys.stdout.flush()\nwhile True: sys.stdout.buffer.write(b'x' * 65536)"
    relay = relay_export_process(_python(code), dict(os.environ), what="test")
    first = await anext(relay)
    pid = int(first.split(b"\n")[0])
    assert _alive(pid)
    await relay.aclose()  # what Django's handler does when the client disconnects
    assert not _alive(pid)  # killed and reaped: no zombie, no orphan


async def test_a_cancelled_download_kills_the_export_process():
    code = ("import os, sys, time\nsys.stdout.buffer.write(b'%d\\n' % os.getpid() + b'x' * (1 << 20)); sys.stdout.flush()\n"
            "time.sleep(60)")
    relay = relay_export_process(_python(code), dict(os.environ), what="test")
    pid = int((await anext(relay)).split(b"\n")[0])

    async def consume():
        async for _ in relay:
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    task.cancel()  # Django cancels the response task on a disconnect while waiting for the next piece
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pid)


async def test_a_child_that_fails_midway_ends_the_stream_with_an_error_after_its_bytes_and_is_logged(caplog):
    code = "import sys\nsys.stdout.buffer.write(b'{\"format\": ')\nraise SystemExit(1)"
    relay = relay_export_process(_python(code), dict(os.environ), what="export of run 7 as json")
    received = []
    with caplog.at_level(logging.ERROR, logger="optimizer.downloads"), pytest.raises(ExportProcessError):
        async for piece in relay:
            received.append(piece)
    assert b"".join(received) == b'{"format": '
    assert "export of run 7 as json: the export process exited with status 1" in caplog.text


async def test_a_client_that_does_not_read_holds_the_export_process_back(tmp_path):
    done = tmp_path / "done"
    code = f"import sys\nfor _ in range(800): sys.stdout.buffer.write(b'x' * 65536)\nopen({str(done)!r}, 'w').close()"
    relay = relay_export_process(_python(code), dict(os.environ), what="test")
    await anext(relay)
    await asyncio.sleep(1.5)
    assert not done.exists()  # 50 MB: blocked on the pipe, not buffered in either process
    await relay.aclose()


@pytest.mark.django_db
def test_only_an_export_of_at_least_the_threshold_evaluations_goes_to_a_child_process(user, settings, monkeypatch):
    run = recorded_run(user, candidates=4, val_tasks=5)  # 20 evaluations
    monkeypatch.setattr(type(connection._connections["default"]), "is_in_memory_db", lambda self: False)
    settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS = 20
    settings.FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS = 21
    assert downloads._in_a_child(run, "json") and not downloads._in_a_child(run, "csv")
    settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS = 21
    settings.FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS = 0
    assert not downloads._in_a_child(run, "json") and downloads._in_a_child(run, "csv")
    settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS = -1
    assert not downloads._in_a_child(run, "json")


@pytest.mark.django_db
def test_an_export_beyond_the_most_export_processes_at_once_is_built_in_the_web_process(user, settings, monkeypatch):
    run = recorded_run(user, candidates=2, val_tasks=2)
    monkeypatch.setattr(type(connection._connections["default"]), "is_in_memory_db", lambda self: False)
    settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS = 0
    settings.FRONTIER_EXPORT_PROCESSES_MAX = 2
    monkeypatch.setattr(downloads, "_running", 1)
    assert downloads._in_a_child(run, "json")
    monkeypatch.setattr(downloads, "_running", 2)
    assert not downloads._in_a_child(run, "json")


async def test_the_relay_counts_the_export_processes_it_runs():
    code = "import sys\nsys.stdout.buffer.write(b'x' * 10)"
    relay = relay_export_process(_python(code), dict(os.environ), what="test")
    before = downloads._running
    await anext(relay)
    assert downloads._running == before + 1
    await relay.aclose()
    assert downloads._running == before
    assert [piece async for piece in relay_export_process(_python(code), dict(os.environ), what="test")] == [b"x" * 10]
    assert downloads._running == before


@pytest.mark.django_db
def test_a_child_process_is_never_asked_to_read_an_in_memory_database(user, settings):
    # The unit tests' shared-cache in-memory SQLite exists in this process only.
    run = recorded_run(user, candidates=2, val_tasks=2)
    settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS = settings.FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS = 0
    assert connection.is_in_memory_db() and not downloads._in_a_child(run, "json") and not downloads._in_a_child(run, "csv")


def test_the_child_s_command_line_holds_only_the_run_id_and_a_fixed_format_name():
    assert downloads._child_command(42, "csv")[1:] == ["-m", "optimizer.export_process", "42", "csv"]
    with pytest.raises(ValueError):
        downloads._child_command(42, "json; rm -rf /")
    with pytest.raises(ValueError):
        downloads._child_command("42 --evil", "json")

"""A pool process runs each optimization on one CPU (optimizer.celery_tasks.on_one_cpu);
the worker processes that do it are in tests/integration/test_runs_on_workers.py."""

from __future__ import annotations

import os
import threading

import pytest

from optimizer import celery_tasks
from optimizer.celery_tasks import on_one_cpu
from optimizer.runs.claims import process_lock

ALLOWED = os.sched_getaffinity(0)
pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="pinning needs two CPUs")


@pytest.fixture(autouse=True)
def cpu_locks(tmp_path, monkeypatch):
    """Locks of this test's own, so a run on this machine does not hold one."""
    monkeypatch.setattr(celery_tasks, "CPU_LOCKS", tmp_path / "cpus")
    yield tmp_path / "cpus"
    assert os.sched_getaffinity(0) == ALLOWED


def affinity_of_a_new_thread() -> set[int]:
    seen: list[set[int]] = []
    thread = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    thread.start()
    thread.join()
    return seen[0]


def test_a_run_and_the_threads_it_starts_stay_on_one_cpu_until_it_ends():
    with on_one_cpu(sample_seconds=0.01) as cpu:
        assert cpu in ALLOWED
        assert os.sched_getaffinity(0) == {cpu} == affinity_of_a_new_thread()
    assert affinity_of_a_new_thread() == ALLOWED


def test_a_cpu_another_run_holds_is_not_taken(cpu_locks):
    taken = min(ALLOWED)
    with process_lock(cpu_locks / str(taken)) as held:
        assert held
        with on_one_cpu(sample_seconds=0.01) as cpu:
            assert cpu is not None and cpu != taken


def test_with_every_cpu_held_the_run_is_not_pinned(cpu_locks):
    locks = [process_lock(cpu_locks / str(cpu)) for cpu in ALLOWED]
    held = [lock.__enter__() for lock in locks]
    try:
        assert all(held)
        with on_one_cpu(sample_seconds=0.01) as cpu:
            assert cpu is None and os.sched_getaffinity(0) == ALLOWED
    finally:
        for lock in locks:
            lock.__exit__(None, None, None)


def test_a_lock_directory_it_cannot_make_leaves_the_run_unpinned(cpu_locks):
    cpu_locks.write_text("not a directory")
    with on_one_cpu(sample_seconds=0.01) as cpu:
        assert cpu is None and os.sched_getaffinity(0) == ALLOWED


def test_a_busy_cpu_is_taken_last(monkeypatch):
    busiest = min(ALLOWED)
    others = dict.fromkeys(ALLOWED, 0.1)
    monkeypatch.setattr(celery_tasks, "cpu_busy", lambda cpus, seconds: {**others, busiest: 0.9})
    with on_one_cpu() as cpu:
        assert cpu != busiest

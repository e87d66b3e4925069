"""Celery tasks of the optimizer. Thin: the work is in optimizer.runner."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.contrib.testing.worker import test_worker_started
from celery.signals import worker_ready
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from optimizer.models import Run, RunStatus
from optimizer.runner import STALE_AFTER, execute_run

log = logging.getLogger(__name__)


@shared_task(name="optimizer.run_optimization", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_optimization(run_id: int) -> str | None:
    """Run or resume one optimization. Delivered twice, it does nothing harmful:
    a finished run, or one whose worker is alive, is skipped (runner.claim)."""
    return execute_run(run_id)


@worker_ready.connect
@test_worker_started.connect  # the embedded worker (dashboard/embedded.py) announces itself with this one
def requeue_orphaned_runs(**_kwargs) -> None:
    """A worker that starts re-queues runs whose worker died (stale heartbeat).
    In embedded mode the in-memory broker lost its queue with the old process,
    so queued runs are re-queued as well; a duplicate delivery is harmless."""
    stale = Q(status__in=[RunStatus.RUNNING, RunStatus.STOPPING]) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=timezone.now() - STALE_AFTER)
    )
    if settings.EMBEDDED:
        stale |= Q(status=RunStatus.QUEUED)
    for run_id in Run.objects.filter(stale, imported=False).values_list("pk", flat=True):
        log.info("re-queueing run %s", run_id)
        run_optimization.delay(run_id)

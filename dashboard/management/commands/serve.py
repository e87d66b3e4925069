"""`manage.py serve`: the dashboard under daphne, plus (embedded mode) a Celery
worker inside the same process, so one command runs the whole product."""

from __future__ import annotations

import logging
import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the dashboard with daphne; in embedded mode also start the in-process Celery worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="Do not start the embedded worker")

    def handle(self, *args, host, port, no_worker, **options):
        from daphne.cli import CommandLineInterface

        if settings.EMBEDDED and settings.EMBEDDED_WORKER and not no_worker:
            from dashboard.embedded import ensure_worker

            from optimizer.queued_runs import QueuedRunPoller

            worker = ensure_worker()
            # Runs queued by other processes (the CLI without --wait) start here too.
            QueuedRunPoller().start()
            self.stderr.write(f"Embedded Celery worker running ({worker.concurrency} threads, in-memory broker).")
        elif not settings.EMBEDDED:
            self.stderr.write("Distributed mode: runs execute on `celery -A dashboard worker` processes.")
        self.stderr.write(f"Serving Frontier at http://{host}:{port}/ (Ctrl-C stops it)")
        CommandLineInterface().run(["--bind", host, "--port", str(port), "dashboard.asgi:application"])
        # Daphne returns on Ctrl-C (SIGINT) or SIGTERM. A run on the embedded worker's
        # threads must not go on into interpreter shutdown: its next step would fail
        # ("cannot schedule new futures after interpreter shutdown") and mark the run
        # failed, with tracebacks on the terminal. Leave it as a worker crash leaves it
        # (running, heartbeat going stale, checkpoint on disk): the orphaned-runs
        # watchdog resumes it when the server starts again.
        if settings.EMBEDDED and settings.EMBEDDED_WORKER and not no_worker:
            self.stderr.write("Stopped. A run in progress resumes from its checkpoint when the server starts again.")
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

"""`manage.py serve`: the dashboard under uvicorn (dashboard/server.py), plus
(embedded mode) a Celery worker inside the same process, so one command runs
the whole product. Distributed mode serves the same way, without the worker."""

from __future__ import annotations

import logging
import os
import signal
import sys

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand

from dashboard.lib.site_url import record_served_url, site_url
from dashboard.server import browse_url, server_config


def pending_migrations() -> list:
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    return executor.migration_plan(executor.loader.graph.leaf_nodes())


def script_hints() -> str:
    """What a script (frontier-tracker, the API) needs to reach this server: the
    two `export` lines, printed at every start. No secret is printed: the token
    line is the command that makes one."""
    from django.contrib.auth import get_user_model

    from dashboard.cli import program

    url = site_url()  # FRONTIER_BASE_URL, else the address serve listens on
    lines = [
        "For scripts (frontier-tracker, the API):",
        f"  export FRONTIER_URL={url}",
        f"  export FRONTIER_TOKEN=$({program()} token create --user NAME)",
    ]
    if not get_user_model().objects.exists():
        lines.append(f"No user yet: create one with `{program()} createsuperuser`.")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Serve the dashboard with uvicorn; in embedded mode also start the in-process Celery worker."

    def add_arguments(self, parser):
        parser.add_argument(
            "--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)"
        )
        parser.add_argument("--port", type=int, default=8000, help="port to listen on")
        parser.add_argument(
            "--no-worker", action="store_true", help="Do not start the embedded worker"
        )
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            help="Behind a proxy: take the client's address and scheme from X-Forwarded-For/-Proto",
        )
        parser.add_argument(
            "--forwarded-allow-ips",
            default=None,
            help="Proxy addresses whose forwarded headers are trusted (uvicorn's; default "
            "$FORWARDED_ALLOW_IPS or 127.0.0.1; '*' trusts any)",
        )
        parser.add_argument("--access-log", action="store_true", help="Log every request")

    def migrate_or_warn(self) -> None:
        """A new or older database: the embedded mode's own SQLite file is brought
        up to date here (so `pip install` + `frontier serve` is all it takes); a
        database server is someone's to migrate, so serve says what to run."""
        from django.core.management import call_command

        from dashboard.cli import program

        pending = pending_migrations()
        if not pending:
            return
        if settings.DATABASE_URL:
            self.stderr.write(
                f"The database has {len(pending)} unapplied migrations: run "
                f"`{program()} migrate` (pages will fail until then)."
            )
            return
        self.stdout.write(
            f"Migrating the database at {settings.DATABASES['default']['NAME']} "
            f"({len(pending)} migrations)…"
        )
        call_command("migrate", interactive=False, verbosity=0)

    def handle(
        self,
        *args,
        host,
        port,
        no_worker,
        proxy_headers,
        forwarded_allow_ips,
        access_log,
        **options,
    ):
        # What it says is on stdout, in the terminal's normal colour (Django
        # paints a command's stderr red: that is for errors), a line at a time
        # even into a file or a pipe (a service's log), where Python would
        # otherwise hold it back in a buffer.
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        self.migrate_or_warn()
        # Static files: hashed and compressed into STATIC_ROOT (skipped when unchanged).
        from dashboard.staticfiles import collect_static_files

        collect_static_files(log=self.stdout.write)

        config = server_config(
            host=host,
            port=port,
            proxy_headers=proxy_headers,
            forwarded_allow_ips=forwarded_allow_ips,
            access_log=access_log,
        )
        url = browse_url(host, port)
        record_served_url(url)
        embedded_worker = settings.EMBEDDED and settings.EMBEDDED_WORKER and not no_worker
        if embedded_worker:
            self.stdout.write(
                f"Runs execute inside this server, {settings.EMBEDDED_WORKER_CONCURRENCY} at a time."
            )
        elif not settings.EMBEDDED:
            self.stdout.write(
                "Distributed mode: runs execute on `celery -A dashboard worker` processes."
            )
        listening = "" if url == f"http://{host}:{port}/" else f"listening on {host}; "
        self.stdout.write(f"Serving Frontier at {url} ({listening}Ctrl-C stops it)")
        self.stdout.write(script_hints())
        if embedded_worker:
            # Before the worker starts, so its "started" / "resumed" lines come after these.
            for line in _runs_to_take_up(url):
                self.stdout.write(line)
            from dashboard.embedded import ensure_worker
            from optimizer.runs.queued import QueuedRunPoller

            # Its watchdog starts the queued runs and resumes the interrupted ones at once.
            ensure_worker()
            # Runs queued by other processes (the CLI without --wait) start here too.
            poller = QueuedRunPoller()
            poller.start()
        # uvicorn handles Ctrl-C (SIGINT) and SIGTERM itself (it closes connections and
        # websockets, then returns) and raises the signal again once it has; these
        # handlers take that second delivery, so stopping is an exit, not a traceback.
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, lambda *_: None)
        uvicorn.Server(config).run()
        # A run on the embedded worker's threads must not go on into interpreter
        # shutdown: its next step would fail ("cannot schedule new futures after
        # interpreter shutdown") and mark the run failed, with tracebacks on the
        # terminal. Leave it as a worker crash leaves it (running, checkpoint on
        # disk): the watchdog of the next server resumes it as it starts
        # (optimizer.celery_tasks.release_unheld_runs).
        if embedded_worker:
            # No longer alive: `make demo` run again at once must not take this
            # server for a running one (optimizer.runs.queued.server_is_alive).
            poller.stop()
            self.stdout.write(
                "Stopped. A run in progress resumes from its checkpoint when the server starts again."
            )
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


#: At most this many runs get a line of their own when the server starts.
RUN_LINES = 5


def _runs_to_take_up(url: str) -> list[str]:
    """A line with the link of each run this server starts or resumes (the
    demo run after `make demo`), most recent first."""
    from optimizer.models import RunStatus
    from optimizer.selectors import runs_to_take_up

    runs = runs_to_take_up()
    lines = [
        f"Run {run.pk}{_quoted(run.name)} "
        f"{'starts' if run.status == RunStatus.QUEUED else 'resumes'}: {url}runs/{run.pk}/"
        for run in runs[:RUN_LINES]
    ]
    if len(runs) > RUN_LINES:
        lines.append(f"… and {len(runs) - RUN_LINES} more: {url}runs/")
    return lines


def _quoted(name: str, limit: int = 60) -> str:
    """A run's name for a terminal line: its control characters (a name is
    anyone's text, and escape sequences drive terminals) become spaces, and a
    long one is cut."""
    text = " ".join("".join(c if c.isprintable() else " " for c in name).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f' "{text}"' if text else ""

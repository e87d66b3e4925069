"""Write one run's export to stdout from a process of its own:

    python -m optimizer.export_process RUN_ID json|csv

The web process starts this for a big export (`optimizer.downloads`) and only
relays its stdout: building the JSON or CSV is Python work that, in the web
process, would share the interpreter lock with the event loop that delivers
every live viewer's websocket events. The bytes are exactly those of
`run_export_stream` / `run_export_csv_stream`. The arguments are an integer id
and a fixed format name; the database is the web process's own (the same
settings and environment, and the database name it passes in
`FRONTIER_EXPORT_DATABASE_NAME`, so a test database is the one read).

Exit status 0 once the whole export is written; 1 if it failed (the traceback
goes to stderr, the web process's log); 3 if the reader went away (a closed
pipe: the download was abandoned); 2 for bad arguments.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

FORMATS = ("json", "csv")
DATABASE_NAME_ENV = "FRONTIER_EXPORT_DATABASE_NAME"
WRITE_BUFFER_BYTES = 1024 * 1024

log = logging.getLogger("optimizer.export_process")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isascii() or not argv[0].isdigit() or argv[1] not in FORMATS:
        print("usage: python -m optimizer.export_process RUN_ID json|csv", file=sys.stderr)
        return 2
    run_id, fmt = int(argv[0]), argv[1]
    # Only the export goes to the pipe: anything else that writes to stdout (a
    # stray print, a handler) lands in stderr, the log.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=WRITE_BUFFER_BYTES)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from django.conf import settings

    if name := os.environ.get(DATABASE_NAME_ENV):
        settings.DATABASES["default"]["NAME"] = name
    import django

    django.setup()
    if settings.FRONTIER_EXPORT_PROCESS_NICENESS > 0:
        # Give way to the web process (and everyone's live events) for the CPU.
        os.nice(settings.FRONTIER_EXPORT_PROCESS_NICENESS)
    from optimizer.export import run_export_csv_stream, run_export_stream
    from optimizer.models import Run

    try:
        run = Run.objects.get(pk=run_id)
        for piece in (run_export_stream if fmt == "json" else run_export_csv_stream)(run):
            out.write(piece)
        out.flush()
    except BrokenPipeError:
        return 3
    except Exception:
        log.exception("export of run %s as %s failed", run_id, fmt)
        return 1
    finally:
        with contextlib.suppress(BrokenPipeError):
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

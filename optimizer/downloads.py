"""Large downloads (run exports, task set exports) written as they are read.

Under ASGI (daphne), Django serves a StreamingHttpResponse over a *sync*
iterator by first collecting it whole (`sync_to_async(list)`, Django 5.2
`StreamingHttpResponse.__aiter__`): a 1 GB export was built in the web
process's memory. So under ASGI the sync generator is handed over as an async
iterator that fetches one piece at a time in the request's own sync thread
(`thread_sensitive`, one thread per request: the generator's transaction and
server-side cursor stay on one connection), and the event loop serves
websockets between pieces. Under WSGI (and Django's test client) the
generator is streamed as it is.

Writing a piece is Python work that shares the GIL with the event loop that
delivers everyone's websocket events: the web process shortens the GIL's
switch interval so live viewers do not wait behind it (`dashboard.asgi`), and
a big run export (FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS evaluations for
JSON, FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS for CSV) is built by a
child process (`optimizer.export_process`, below the web process's CPU
priority) whose stdout the event loop only relays, a block at a time as the
client takes it (the pipe's backpressure bounds both sides' memory). A client
that goes away kills the child; a child that fails ends the response as an
exception in the in-process stream would (the bytes written so far, then the
connection closes without the end of the body) and is logged. Smaller
exports stay in the web process: the child's start-up (Django's, 1-2 s)
would take longer than they do.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.http import StreamingHttpResponse

from optimizer.export import run_export_csv_stream, run_export_stream
from optimizer.export_process import DATABASE_NAME_ENV
from optimizer.models import Evaluation

log = logging.getLogger(__name__)

#: An export child's pipe holds this much; the web process's reader stops
#: reading it when it holds twice this.
RELAY_BYTES = 1024 * 1024
#: The most relayed to the client before the event loop serves others.
PIECE_BYTES = 256 * 1024
PIECE_GATHER_SECONDS = 0.005
#: Where `optimizer` is imported from: the child runs there, so `python -m`
#: imports the same code.
_CODE_ROOT = str(Path(__file__).resolve().parents[1])
_CONTENT_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8"}


#: Export processes this web process is relaying now (read by the views'
#: threads to decide, written on the event loop; an estimate is enough).
_running = 0


class ExportProcessError(RuntimeError):
    """An export child that exited before writing the whole export."""


def _next_piece(pieces: Iterator[bytes | str]) -> bytes | str | None:
    return next(pieces, None)


async def _one_piece_at_a_time(pieces: Iterator[bytes | str]) -> AsyncIterator[bytes | str]:
    take = sync_to_async(_next_piece, thread_sensitive=True)
    try:
        while (piece := await take(pieces)) is not None:
            yield piece
    finally:
        # A client that went away: close the generator (its transaction) in its own thread.
        close = getattr(pieces, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


def streaming_download(
    request, pieces: Iterator[bytes] | Iterator[str], *, content_type: str, filename: str,
) -> StreamingHttpResponse:
    """An attachment response that writes `pieces` (a generator of bytes, or of text,
    which the response encodes) as it reads them."""
    content = _one_piece_at_a_time(iter(pieces)) if isinstance(request, ASGIRequest) else pieces
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _child_command(run_id: int, fmt: str) -> list[str]:
    # Only an integer and a fixed format name reach the command line.
    if fmt not in _CONTENT_TYPES:
        raise ValueError(f"no export format {fmt!r}")
    return [sys.executable, "-m", "optimizer.export_process", str(int(run_id)), fmt]


def _child_env() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE,
        # The database this process reads (under tests, the test database).
        DATABASE_NAME_ENV: str(connection.settings_dict["NAME"]),
    }


async def relay_export_process(command: list[str], env: dict[str, str], *, what: str) -> AsyncIterator[bytes]:
    """The stdout of `command` in pieces of at most PIECE_BYTES; the child is
    killed (and reaped) if the iteration stops early, and an exit status other
    than 0 raises ExportProcessError after its last bytes."""
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError, AttributeError):  # Linux: fewer, fuller reads than the default 64 KB
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, RELAY_BYTES)
    try:
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=write_end, env=env, cwd=_CODE_ROOT)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    reader = asyncio.StreamReader(limit=RELAY_BYTES, loop=loop)
    pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                           os.fdopen(read_end, "rb", buffering=0))
    log.info("%s: built by process %s", what, process.pid)
    global _running
    _running += 1
    try:
        while piece := await reader.read(PIECE_BYTES):
            yield piece
            # A read returns at once while the reader holds data, and a send to
            # the client does not wait either: without this the event loop
            # would relay megabytes in one go while viewers' events wait. A
            # short piece means the child is the slow side: let its output
            # gather (in the pipe) into fewer, bigger pieces.
            await asyncio.sleep(0 if len(piece) == PIECE_BYTES else PIECE_GATHER_SECONDS)
        status = await process.wait()
        if status != 0:
            log.error("%s: the export process exited with status %s (its log is above)", what, status)
            raise ExportProcessError(f"{what}: the export process exited with status {status}")
    finally:
        try:
            pipe.close()
            if process.returncode is None:  # the client went away (or the relay failed): stop the child
                with contextlib.suppress(ProcessLookupError):  # it exited just now
                    process.kill()
                await process.wait()
        finally:
            _running -= 1


def _in_a_child(run, fmt: str) -> bool:
    """Whether `run`'s export as `fmt` is big enough to build in a child process
    (FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS for JSON, ..._CSV_... for the
    CSV, which costs a tenth as much per evaluation), a child can read this
    process's database (not an in-memory SQLite), and fewer than
    FRONTIER_EXPORT_PROCESSES_MAX are running (each holds a Django process's
    memory, ~120 MB; beyond that an export is built in the web process)."""
    least = (settings.FRONTIER_EXPORT_PROCESS_MIN_EVALUATIONS if fmt == "json"
             else settings.FRONTIER_EXPORT_CSV_PROCESS_MIN_EVALUATIONS)
    # is_in_memory_db is SQLite's own (the vendor check first); django-stubs types the base wrapper.
    if least < 0 or (connection.vendor == "sqlite" and connection.is_in_memory_db()):  # type: ignore[attr-defined]
        return False
    if _running >= settings.FRONTIER_EXPORT_PROCESSES_MAX:
        return False
    return least == 0 or Evaluation.objects.filter(candidate__run=run)[:least].count() >= least


def run_export_download(request, run, fmt: str) -> StreamingHttpResponse:
    """`run`'s export as JSON (`run_export_stream`) or CSV (`run_export_csv_stream`),
    an attachment named run-<id>.<fmt>; under ASGI a big one is built by a child process."""
    filename = f"run-{run.pk}.{fmt}"
    if isinstance(request, ASGIRequest) and _in_a_child(run, fmt):
        content = relay_export_process(_child_command(run.pk, fmt), _child_env(), what=f"export of run {run.pk} as {fmt}")
        response = StreamingHttpResponse(content, content_type=_CONTENT_TYPES[fmt])
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    pieces = run_export_stream(run) if fmt == "json" else run_export_csv_stream(run)
    return streaming_download(request, pieces, content_type=_CONTENT_TYPES[fmt], filename=filename)

"""Large downloads (run exports, task set exports) written as they are read.

Under ASGI, Django serves a StreamingHttpResponse over a *sync* iterator by
first collecting it whole (`sync_to_async(list)`, Django 5.2
`StreamingHttpResponse.__aiter__`): a 1 GB export would be built in the web
process's memory. So under ASGI the sync generator is handed over as an async
iterator that fetches one piece at a time in the request's own sync thread
(`thread_sensitive`, one thread per request: the generator's transaction and
server-side cursor stay on one connection). A piece is sent before the next
is fetched, and the web server's `send()` waits while the client is behind
(uvicorn's flow control, dashboard/server.py): an export is built only as
fast as the client reads it, a piece or two at a time, and the event loop
serves websockets between pieces. Under WSGI (and Django's test client) the
generator is streamed as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse

from optimizer.export import run_export_csv_stream, run_export_stream

_CONTENT_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8"}


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
    request,
    pieces: Iterator[bytes] | Iterator[str],
    *,
    content_type: str,
    filename: str,
) -> StreamingHttpResponse:
    """An attachment response that writes `pieces` (a generator of bytes, or of text,
    which the response encodes) as it reads them."""
    content = _one_piece_at_a_time(iter(pieces)) if isinstance(request, ASGIRequest) else pieces
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def run_export_download(request, run, fmt: str) -> StreamingHttpResponse:
    """`run`'s export as JSON (`run_export_stream`) or CSV (`run_export_csv_stream`),
    an attachment named run-<id>.<fmt>."""
    pieces = run_export_stream(run) if fmt == "json" else run_export_csv_stream(run)
    return streaming_download(
        request, pieces, content_type=_CONTENT_TYPES[fmt], filename=f"run-{run.pk}.{fmt}"
    )

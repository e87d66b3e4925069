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
switch interval so live viewers do not wait behind it (`dashboard.asgi`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse


async def _one_piece_at_a_time(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    take = sync_to_async(next, thread_sensitive=True)
    try:
        while (piece := await take(pieces, None)) is not None:
            yield piece
    finally:
        # A client that went away: close the generator (its transaction) in its own thread.
        close = getattr(pieces, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


def streaming_download(request, pieces: Iterator[bytes], *, content_type: str, filename: str) -> StreamingHttpResponse:
    """An attachment response that writes `pieces` (a generator of bytes) as it reads them."""
    content = _one_piece_at_a_time(iter(pieces)) if isinstance(request, ASGIRequest) else pieces
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response

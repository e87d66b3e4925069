"""A local fake OpenAI-compatible server (stdlib http.server on 127.0.0.1, a
random port) for tests that drive the real ``openai`` client: the edge we
cannot reach from here, replaced at the wire and nowhere else."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = "sk-test-DO-NOT-LEAK-0123456789abcdef"
KEY_ENV = "FRONTIER_TEST_LM_KEY"


def completion(text="Hi there.", model="fake-model", prompt_tokens=11, completion_tokens=3):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message, kind="invalid_request_error", code=None):
    return {"error": {"message": message, "type": kind, "code": code}}


class FakeOpenAIServer:
    """Replies from a script: each entry is (status, json body or raw bytes, delay s).
    When the script runs out, ``default`` answers. Every request is recorded
    (path, headers, body, and ``at``: time.monotonic() when it arrived).
    ``reply_headers`` are added to every reply whose status is not 200."""

    def __init__(self):
        self.script: list[tuple[int, object, float]] = []
        self.default: tuple[int, object, float] = (200, completion(), 0.0)
        self.models = ["fake-model", "other-model"]
        self.reply_headers: dict[str, str] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _reply(self, status, body, delay):
                if delay:
                    time.sleep(delay)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for name, value in server.reply_headers.items() if status != 200 else ():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _record(self, body):
                with server.lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                            "at": time.monotonic(),
                        }
                    )
                    return server.script.pop(0) if server.script else server.default

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                status, reply, delay = self._record(body)
                self._reply(status, reply, delay)

            def do_GET(self):
                status, reply, delay = self._record(None)
                if status == 200 and self.path.endswith("/models"):
                    reply = {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "created": 0, "owned_by": "x"}
                            for m in server.models
                        ],
                    }
                self._reply(status, reply, delay)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def hung_server():
    """A TCP server on 127.0.0.1 that accepts connections and never answers
    (a model server stuck mid-request); yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_hold():
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept_and_hold, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for sock in [*held, listener]:
            sock.close()

import json
import logging

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import (
    BadRequest,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.core.signals import got_request_exception
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

from dashboard.lib.api_errors import error_body
from dashboard.lib.storable import MAX_JSON_DEPTH, JsonTooDeep, parse_json


class FrontierLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a login; the JSON API under /api/ answers 401 itself
    (session or token auth in dashboard.api) instead of redirecting to a page."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class ApiShapeMiddleware:
    """Under /api/, what a script gets wrong about the *shape* of a request gets
    a JSON 4xx that names the problem, never a redirect, an HTML page or a 500:

    - a missing or extra trailing slash is tolerated (APPEND_SLASH would answer
      `POST /api/runs` with a 500 and `GET /api/runs` with an empty 301);
    - a body that is a form or a multipart upload, not JSON, is a 415 (a JSON
      text sent with curl's default form content type is still accepted);
    - a body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413;
    - JSON nested deeper than MAX_JSON_DEPTH is a 400 naming the field
      (dashboard/lib/storable.py: past Python's recursion limit the parser raises);
    - any other error response that is not JSON (405 wrong method, 404 no such
      operation) is given the API's error body (dashboard/lib/api_errors.py).
    """

    BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path_info.startswith("/api/"):
            return self.get_response(request)
        self._tolerate_trailing_slash(request)
        try:
            refusal = self._refuse_body(request)
        except RequestDataTooBig:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            refusal = _json_error(
                413, f"body: larger than {limit} bytes", "body", f"larger than {limit} bytes"
            )
        response = refusal or self.get_response(request)
        return self._as_json(request, response)

    @staticmethod
    def _tolerate_trailing_slash(request) -> None:
        path = request.path_info
        if _resolves(request, path):
            return
        other = path[:-1] if path.endswith("/") else path + "/"
        if other != "/api" and _resolves(request, other):
            request.path = request.path[: len(request.path) - len(path)] + other
            request.path_info = other

    def _refuse_body(self, request):
        if request.method not in self.BODY_METHODS:
            return None
        header = request.META.get("CONTENT_TYPE", "").lower()
        content_type = header.split(";")[0].strip()
        if not request.body:
            return None
        too_deep = _too_deep(request.body)
        if too_deep:
            return too_deep
        if content_type == "application/json" or content_type.endswith("+json"):
            return None
        if content_type.startswith("multipart/"):
            # An empty form (what some clients send for a POST with no data) is no body at all.
            empty_form = (
                "boundary=" in header and b"content-disposition" not in request.body[:65536].lower()
            )
            return None if empty_form else _unsupported(content_type)
        try:
            json.loads(request.body)
        except ValueError:
            return _unsupported(content_type or "no Content-Type")
        return None

    @staticmethod
    def _as_json(request, response):
        if response.status_code < 400 or getattr(response, "streaming", False):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        if response.status_code == 405:
            allowed = response.get("Allow", "")
            detail = (
                f"method: {request.method} is not allowed here; use {allowed or 'another method'}"
            )
            json_response = _json_error(405, detail, "method", detail.removeprefix("method: "))
            if allowed:
                json_response["Allow"] = allowed
            return json_response
        if response.status_code == 404:
            return _json_error(
                404, f"No API operation at {request.path}", "path", "no such operation"
            )
        reason = response.reason_phrase or "Error"
        return _json_error(response.status_code, reason)


def _resolves(request, path: str) -> bool:
    try:
        resolve(path, getattr(request, "urlconf", None))
    except Resolver404:
        return False
    return True


def _too_deep(body: bytes) -> JsonResponse | None:
    """A 400 for JSON nested past the cap. Only a body with more opening
    brackets than the cap can be that deep, so most are not parsed twice."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return None
    try:
        parse_json(body, source="body")
    except JsonTooDeep as exc:
        field, _, message = str(exc).partition(": ")
        field = field.removeprefix("body.")  # fields are named as in the API's other errors
        return _json_error(400, f"{field}: {message}", field, message)
    except ValueError:  # not JSON at all: the rest of the checks (and the API) say so
        return None
    return None


def _unsupported(content_type: str) -> JsonResponse:
    detail = f"body: send JSON with Content-Type: application/json (got {content_type})"
    return _json_error(415, detail, "body", detail.removeprefix("body: "))


def _json_error(status: int, detail: str, field: str = "", message: str = "") -> JsonResponse:
    return JsonResponse(error_body(detail, [(field, message)] if field else []), status=status)


class FriendlyErrorPagesMiddleware:
    """Our own 400/403/404/500 pages in every mode, DEBUG on or off (Django shows
    its technical pages, with settings and tracebacks, whenever DEBUG is on, and
    `make demo` runs with DEBUG on). The JSON API under /api/ is left to its own
    errors (ninja and ApiShapeMiddleware: JSON bodies).

    An address that matches no URL is answered here, before the URL resolver
    raises (that 404 never reaches a middleware's process_exception); Django's
    CommonMiddleware still turns a 404 for `/runs` into a redirect to `/runs/`.
    A server error is logged with its traceback, exactly as Django logs it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info.startswith("/api/"):
            return self.get_response(request)
        try:
            resolve(request.path_info, getattr(request, "urlconf", None))
        except Resolver404:
            return error_page(request, 404, "There is no page at this address.")
        return self.get_response(request)

    def process_exception(self, request, exception):
        if request.path_info.startswith("/api/"):
            return None
        if isinstance(exception, Http404):
            return error_page(request, 404, _message(exception))
        if isinstance(exception, PermissionDenied):
            return error_page(request, 403, _message(exception))
        if isinstance(exception, BadRequest | SuspiciousOperation):
            return error_page(
                request, 400, _message(exception) if isinstance(exception, BadRequest) else ""
            )
        logging.getLogger("django.request").error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        # The test client re-raises on this signal, so tests still see the exception.
        got_request_exception.send(sender=type(self), request=request)
        return error_page(request, 500, "")


def _message(exception: Exception) -> str:
    """The message our views put in the exception (never a repr or a traceback)."""
    return str(exception.args[0]) if exception.args and isinstance(exception.args[0], str) else ""


ERROR_TITLES = {
    400: "This request could not be understood",
    403: "You may not see this page",
    404: "Page not found",
    500: "Something went wrong on our side",
}


def error_page(request, status: int, message: str):
    if request.path_info.startswith("/api/") or request.headers.get("Accept", "").startswith(
        "application/json"
    ):
        return JsonResponse(error_body(message or ERROR_TITLES[status], []), status=status)
    try:
        return render(
            request,
            f"{status}.html",
            {"message": message, "title": ERROR_TITLES[status]},
            status=status,
        )
    except Exception:  # a broken base template must not turn an error page into a traceback
        logging.getLogger("django.request").exception("Could not render %s.html", status)
        return HttpResponse(
            ERROR_TITLES[status], status=status, content_type="text/plain; charset=utf-8"
        )


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: our 403 page, with one sentence of what to do."""
    return error_page(
        request, 403, "The form expired or came from another site. Reload the page and try again."
    )


# Every page's scripts and styles are files under /static/ (no inline <script>,
# <style> or style="…"), so the policy allows nothing else; sockets and fetches
# go to this origin only, and no inline style at all: Plotly's style attributes
# go through the CSSOM (static/js/csp-style-attributes.js, loaded by base.html
# before any chart). tests/e2e/test_csp.py loads every page, hovers and clicks
# the charts, and fails on any violation.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

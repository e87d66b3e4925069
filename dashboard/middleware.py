import logging

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.signals import got_request_exception
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve


class FrontierLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a login; the JSON API under /api/ answers 401 itself
    (session or token auth in dashboard.api) instead of redirecting to a page."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class FriendlyErrorPagesMiddleware:
    """Our own 400/403/404/500 pages in every mode, DEBUG on or off (Django shows
    its technical pages, with settings and tracebacks, whenever DEBUG is on, and
    `make demo` runs with DEBUG on). The JSON API answers `{"detail": …}` instead.

    An address that matches no URL is answered here, before the URL resolver
    raises (that 404 never reaches a middleware's process_exception); Django's
    CommonMiddleware still turns a 404 for `/runs` into a redirect to `/runs/`.
    A server error is logged with its traceback, exactly as Django logs it.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            resolve(request.path_info, getattr(request, "urlconf", None))
        except Resolver404:
            return error_page(request, 404, "There is no page at this address.")
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, Http404):
            return error_page(request, 404, _message(exception))
        if isinstance(exception, PermissionDenied):
            return error_page(request, 403, _message(exception))
        if isinstance(exception, BadRequest | SuspiciousOperation):
            return error_page(request, 400, _message(exception) if isinstance(exception, BadRequest) else "")
        logging.getLogger("django.request").error(
            "Internal Server Error: %s", request.path, exc_info=exception, extra={"status_code": 500, "request": request}
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
    if request.path_info.startswith("/api/") or request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"detail": message or ERROR_TITLES[status]}, status=status)
    try:
        return render(request, f"{status}.html", {"message": message, "title": ERROR_TITLES[status]}, status=status)
    except Exception:  # a broken base template must not turn an error page into a traceback
        logging.getLogger("django.request").exception("Could not render %s.html", status)
        return HttpResponse(ERROR_TITLES[status], status=status, content_type="text/plain; charset=utf-8")


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: our 403 page, with one sentence of what to do."""
    return error_page(request, 403, "The form expired or came from another site. Reload the page and try again.")

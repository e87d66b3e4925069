"""The JSON API under /api/ (django-ninja), OpenAPI document at /api/openapi.json.

Browsers authenticate with their session (CSRF-checked); scripts send
`Authorization: Bearer <token>` with a per-user token created in the UI.
Each app contributes a router; this module only assembles them.
"""

from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer, SessionAuth

from dashboard.lib.api_errors import (
    ErrorOut,
    error_body,
    split_problem,
    validation_problems,
)
from dashboard.models import ApiToken
from dashboard.throttle import REFUSED_MESSAGE as THROTTLED_DETAIL
from dashboard.throttle import client_ip, token_throttle
from optimizer.config import LM_REF_TAGS, RunConfigError
from verifiers_app.engine import SpecError


class TokenThrottled(Exception):
    """Too many wrong tokens from this address (dashboard.throttle): a 429."""


def _retry_later(response):
    response["Retry-After"] = str(settings.LOGIN_THROTTLE_WINDOW_SECONDS)
    return response


class TokenAuth(HttpBearer):
    def authenticate(self, request, token):
        throttle = token_throttle(client_ip(request))
        if throttle.refused():
            throttle.failed()
            raise TokenThrottled()
        user = ApiToken.user_for(token)
        if user is None:
            throttle.failed()
            return None
        request.user = user
        return user


class BrowserSessionAuth(SessionAuth):
    """The session path (CSRF-checked), taken only when the request carries a
    session cookie: a script with a wrong token and no cookie gets a 401 that
    says so, not a CSRF failure."""

    def __call__(self, request):
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        return super().__call__(request)


def _docs_auth(view):
    """The docs and /api/openapi.json: for a logged-in browser or a valid token."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            anonymous = not request.user.is_authenticated and TokenAuth()(request) is None
        except TokenThrottled:
            return _retry_later(JsonResponse(error_body(THROTTLED_DETAIL), status=429))
        if anonymous:
            return JsonResponse(
                error_body(
                    "Authentication required: log in, or send Authorization: Bearer <token>"
                ),
                status=401,
            )
        return view(request, *args, **kwargs)

    return wrapper


# Answered by every operation (shape mistakes, auth, limits), so the document
# lists them once for all and a client may rely on their body: ErrorOut.
COMMON_ERRORS = {
    400: "Bad request",
    401: "Authentication required",
    403: "Forbidden: a failed CSRF check (a session request without X-CSRFToken), "
    "or steering a run shared with you read-only",
    404: "Not found",
    413: "Body too large",
    415: "Body must be JSON",
    429: "Too many requests",
}


class FrontierAPI(NinjaAPI):
    def get_openapi_schema(self, *args, **kwargs):
        schema = super().get_openapi_schema(*args, **kwargs)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.setdefault("ErrorOut", _error_schema(components))
        error_ref = {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
        }
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in COMMON_ERRORS.items():
                    if status not in responses and str(status) not in responses:
                        responses[status] = {"description": description, **error_ref}
        return schema


def _error_schema(components: dict) -> dict:
    schema = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.pop("$defs", {}))
    return schema


api = FrontierAPI(
    title="Frontier API",
    version="1",
    description=(
        "Verifiers, task sets and GEPA optimization runs. Scripts send `Authorization: Bearer <token>` "
        "(a token from the API tokens page); browsers use their session with a CSRF token. "
        'Every error is JSON: {"detail": "...", "problems": [{"field": "...", "message": "..."}]}.'
    ),
    # Token first: a request that carries a valid Bearer token is the token's
    # user and is never CSRF-checked (a cross-site page cannot set that header).
    # Only without one does the session path run, with its CSRF check.
    auth=[TokenAuth(), BrowserSessionAuth()],
    docs_decorator=_docs_auth,
    urls_namespace="api",
)


class MeOut(Schema):
    username: str
    is_admin: bool


@api.get("/me", response=MeOut, tags=["account"])
def me(request):
    """The authenticated user (a quick check that a token works)."""
    return {"username": request.user.get_username(), "is_admin": request.user.is_superuser}


def _error(request, status: int, detail: str, problems=()):
    return api.create_response(request, error_body(detail, problems), status=status)


@api.exception_handler(SpecError)
def _spec_error(request, exc: SpecError):
    # Bad specs, task rows and task files are the caller's mistake: a 400 naming every field.
    return _error(request, 400, str(exc), [split_problem(problem) for problem in exc.problems])


@api.exception_handler(RunConfigError)
def _config_error(request, exc: RunConfigError):
    return _error(request, 400, str(exc), exc.problems)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    problems = validation_problems(exc.errors, tags=LM_REF_TAGS)
    return _error(
        request, 400, "; ".join(f"{field}: {message}" for field, message in problems), problems
    )


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return _error(
        request, 401, "Authentication required: send Authorization: Bearer <token>, or log in"
    )


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    if exc.status_code == 400 and isinstance(
        exc.__cause__, ValueError
    ):  # ninja could not parse the body as JSON
        message = f"not valid JSON ({exc.__cause__})"
        return _error(request, 400, f"body: {message}", [("body", message)])
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _error(request, 404, str(exc) or "Not found")


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return _error(request, 403, str(exc) or "Forbidden")


@api.exception_handler(TokenThrottled)
def _token_throttled(request, exc):
    return _retry_later(_error(request, 429, THROTTLED_DETAIL))


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(
        request, 413, f"body: larger than {limit} bytes", [("body", f"larger than {limit} bytes")]
    )


def _mount_routers() -> None:
    # Each app owns its router module; an app that has not built its API yet
    # simply exposes an empty router.
    from optimizer.api import router as runs_router
    from optimizer.external.api import router as external_router
    from optimizer.tasksets.api import router as tasksets_router
    from optimizer.tasksets.services import TaskSetInUse
    from verifiers_app.api import router as verifiers_router
    from verifiers_app.services import VerifierInUse, VerifierNotFound

    api.add_exception_handler(TaskSetInUse, lambda request, exc: _error(request, 409, str(exc)))
    api.add_exception_handler(VerifierInUse, lambda request, exc: _error(request, 409, str(exc)))
    api.add_exception_handler(VerifierNotFound, lambda request, exc: _error(request, 404, str(exc)))
    api.add_router("/verifiers", verifiers_router, tags=["verifiers"])
    api.add_router("/tasksets", tasksets_router, tags=["task sets"])
    api.add_router("/runs", runs_router, tags=["runs"])
    api.add_router("/external", external_router, tags=["external runs"])


_mount_routers()

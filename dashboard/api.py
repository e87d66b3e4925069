"""The JSON API under /api/ (django-ninja), OpenAPI document at /api/openapi.json.

Browsers authenticate with their session (CSRF-checked); scripts send
`Authorization: Bearer <token>` with a per-user token created in the UI.
Each app contributes a router; this module only assembles them.
"""

from __future__ import annotations

from datetime import timedelta
from functools import wraps

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.utils import timezone
from ninja import NinjaAPI
from ninja.security import HttpBearer, SessionAuth

from dashboard.models import ApiToken
from verifiers_app.engine import SpecError


class TokenAuth(HttpBearer):
    def authenticate(self, request, token):
        api_token = ApiToken.objects.active().select_related("user").filter(digest=ApiToken.hash(token)).first()
        if api_token is None or not api_token.user.is_active:
            return None
        now = timezone.now()
        # Touch last_used_at at most once a minute: it is shown in the UI, not audited.
        if api_token.last_used_at is None or now - api_token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        request.user = api_token.user
        return api_token.user


def _docs_login_required(view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return JsonResponse({"detail": "Authentication required"}, status=401)
        return view(request, *args, **kwargs)

    return wrapper


api = NinjaAPI(
    title="Frontier API",
    version="1",
    description="Verifiers, task sets and GEPA optimization runs.",
    # Token first: a request that carries a valid Bearer token is the token's
    # user and is never CSRF-checked (a cross-site page cannot set that header).
    # Only without one does the session path run, with its CSRF check.
    auth=[TokenAuth(), SessionAuth()],
    docs_decorator=_docs_login_required,
    urls_namespace="api",
)


@api.get("/me", tags=["account"])
def me(request):
    """The authenticated user (a quick check that a token works)."""
    return {"username": request.user.get_username(), "is_admin": request.user.is_superuser}


@api.exception_handler(SpecError)
def _spec_error(request, exc: SpecError):
    # Bad specs, task rows and task files are the caller's mistake: a 400 naming every field.
    return api.create_response(request, {"detail": str(exc), "problems": exc.problems}, status=400)


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return api.create_response(request, {"detail": f"body: larger than {limit} bytes"}, status=413)


def _mount_routers() -> None:
    # Each app owns its router module; an app that has not built its API yet
    # simply exposes an empty router.
    from optimizer.api import router as runs_router
    from optimizer.external_api import router as external_router
    from optimizer.taskset_api import router as tasksets_router
    from verifiers_app.api import router as verifiers_router

    from verifiers_app.services import VerifierInUse, VerifierNotFound

    api.add_exception_handler(VerifierInUse, lambda request, exc: api.create_response(request, {"detail": str(exc)}, status=409))
    api.add_exception_handler(VerifierNotFound, lambda request, exc: api.create_response(request, {"detail": str(exc)}, status=404))
    api.add_router("/verifiers", verifiers_router, tags=["verifiers"])
    api.add_router("/tasksets", tasksets_router, tags=["task sets"])
    api.add_router("/runs", runs_router, tags=["runs"])
    api.add_router("/external", external_router, tags=["external runs"])


_mount_routers()

"""Who opens a websocket: a script with `Authorization: Bearer <token>` on the
handshake, or a browser with its session.

Browsers cannot set that header on a websocket, so a token handshake is never a
cross-site page acting with someone's cookies: it skips the Origin check. The
session path keeps it (AllowedHostsOriginValidator), as before. A wrong token is
refused outright rather than falling back to the session.
"""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier

from dashboard.models import ApiToken
from dashboard.throttle import token_throttle


def bearer_token(scope) -> str | None:
    """The token of an `Authorization: Bearer …` header in an ASGI scope, or None."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _token_user(token: str, ip: str):
    """The token's user; None for a wrong token or while the address is
    throttled for guessing (dashboard.throttle, shared with the API)."""
    throttle = token_throttle(ip)
    if throttle.refused():
        throttle.failed()
        return None
    user = ApiToken.user_for(token)
    if user is None:
        throttle.failed()
    return user


class TokenOrSessionAuth:
    def __init__(self, inner):
        self.inner = inner
        self.session_path = AllowedHostsOriginValidator(AuthMiddlewareStack(inner))

    async def __call__(self, scope, receive, send):
        token = bearer_token(scope)
        if token is None:
            return await self.session_path(scope, receive, send)
        user = await database_sync_to_async(_token_user)(token, (scope.get("client") or ("",))[0])
        if user is None:
            return await WebsocketDenier()(scope, receive, send)
        return await self.inner(dict(scope, user=user), receive, send)

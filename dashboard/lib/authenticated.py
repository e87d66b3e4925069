"""The request a view behind authentication receives, as type checkers see it.

Django types `request.user` as a user or `AnonymousUser`; behind the API's auth
(a token or a session) and `login_required` it is always a logged-in `User`.
A view annotated with :class:`AuthenticatedHttpRequest` says so, and mypy then
lets it pass `request.user` to services and selectors that take a `User`
(the pattern django-stubs documents)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class AuthenticatedHttpRequest(HttpRequest):
    """Never instantiated: Django hands the view its own request object."""

    user: User

"""The login pages (site and admin) with attempts throttled (dashboard.throttle)."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from dashboard.throttle import REFUSED_MESSAGE, client_ip, login_throttle


class ThrottledLoginMixin(AuthenticationForm):
    """Refuses every attempt while the account or the client's IP is throttled
    (before the password is even checked), and counts each failure."""

    def clean(self):
        throttle = login_throttle(client_ip(self.request), self.data.get("username"))
        if throttle.refused():
            throttle.failed()
            raise ValidationError(REFUSED_MESSAGE, code="throttled")
        try:
            return super().clean()
        except ValidationError:
            throttle.failed()
            raise

    @property
    def throttled(self) -> bool:
        return any(error.code == "throttled" for error in self.errors.as_data().get("__all__", []))


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    template_name = "accounts/login.html"

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response

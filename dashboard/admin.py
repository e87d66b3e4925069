from django.contrib import admin

from dashboard.models import ApiToken
from dashboard.pages.login import ThrottledAdminAuthenticationForm

# The admin's login counts against the same throttle as the site's (dashboard.throttle).
admin.site.login_form = ThrottledAdminAuthenticationForm


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "digest", "created_at", "last_used_at"]

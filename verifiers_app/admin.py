from django.contrib import admin

from verifiers_app.models import Verifier, VerifierVersion


class VerifierVersionInline(admin.TabularInline):
    model = VerifierVersion
    extra = 0
    readonly_fields = ["number", "spec", "created_by", "created_at"]


@admin.register(Verifier)
class VerifierAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "kind",
        "owner",
        "shared",
        "version",
        "updated_at",
        "last_used_at",
    ]
    list_filter = ["kind", "shared"]
    search_fields = ["slug", "name"]
    inlines = [VerifierVersionInline]


@admin.register(VerifierVersion)
class VerifierVersionAdmin(admin.ModelAdmin):
    list_display = ["verifier", "number", "created_by", "created_at"]

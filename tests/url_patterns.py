"""Every named URL pattern of the URLconf, for the sweeps that must cover each
page without a list to keep up to date (tests/test_authz_sweep.py, tests/e2e/test_csp.py)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver


def url_patterns(patterns=None, namespace=""):
    """(view name, pattern) for every named URL pattern, with its namespace."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}".strip(":") if entry.namespace else namespace
            yield from url_patterns(entry.url_patterns, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            yield (f"{namespace}:{entry.name}".strip(":"), entry)


def argument_names(pattern: URLPattern) -> list[str]:
    route = pattern.pattern
    names = list(getattr(route, "converters", {}) or {})
    return names or list(route.regex.groupindex)

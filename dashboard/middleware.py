from django.contrib.auth.middleware import LoginRequiredMiddleware


class FrontierLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a login; the JSON API under /api/ answers 401 itself
    (session or token auth in dashboard.api) instead of redirecting to a page."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


# Every page's scripts and styles are files under /static/ (no inline <script>,
# <style> or style="…"), so the policy allows nothing else; sockets and fetches
# go to this origin only. tests/e2e/test_csp.py loads every page and fails on
# any violation.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    # Plotly draws its SVG with setAttribute("style", …) (d3): style attributes
    # only; <style> elements stay forbidden, and our templates use none.
    "style-src-attr 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# django-ninja's interactive docs page loads Swagger UI with an inline script: it
# gets no policy (it is behind the login and shows no user data).
CSP_EXEMPT_PREFIXES = ("/api/docs",)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path_info.startswith(CSP_EXEMPT_PREFIXES):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

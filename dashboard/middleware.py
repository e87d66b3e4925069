from django.contrib.auth.middleware import LoginRequiredMiddleware


class FrontierLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a login; the JSON API under /api/ answers 401 itself
    (session or token auth in dashboard.api) instead of redirecting to a page."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)

from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect
from django.templatetags.static import static

from optimizer.models import Run


def home(request):
    """The first page: the newest active run the user can see (after `make demo`,
    the live demo run), otherwise the runs list."""
    live = (
        Run.objects.visible_to(request.user)
        .active()
        .order_by("-created_at")
        .values_list("pk", flat=True)
        .first()
    )
    if live is not None:
        return redirect("runs:detail", run_id=live)
    return redirect("runs:list")


@login_not_required
def favicon(request):
    """`/favicon.ico`, which browsers ask for on pages that name no icon (the API
    docs): the site's icon, instead of a 404 in every console."""
    return redirect(static("img/favicon.svg"))

from django.shortcuts import redirect

from optimizer.models import Run


def home(request):
    """The first page: the newest active run the user can see (after `make demo`,
    the live demo run), otherwise the runs list."""
    live = Run.objects.visible_to(request.user).active().order_by("-created_at").values_list("pk", flat=True).first()
    if live is not None:
        return redirect("runs:detail", run_id=live)
    return redirect("runs:list")

from django.shortcuts import render

from optimizer.models import Run


def run_list(request):
    runs = Run.objects.visible_to(request.user).select_related("task_set", "owner")[:200]
    return render(request, "runs/list.html", {"runs": runs})

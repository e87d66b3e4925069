from django.db.models import Count
from django.shortcuts import render

from optimizer.models import TaskSet


def taskset_list(request):
    task_sets = TaskSet.objects.visible_to(request.user).select_related("owner").annotate(task_count=Count("tasks"))
    return render(request, "tasksets/list.html", {"task_sets": task_sets})

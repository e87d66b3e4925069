from django.urls import path

from dashboard.pages import tasksets as taskset_views

app_name = "tasksets"
urlpatterns = [
    path("", taskset_views.taskset_list, name="list"),
    path("import/", taskset_views.taskset_import_view, name="import"),
    path("import/preview/", taskset_views.taskset_import_preview, name="import_preview"),
    path("import/confirm/", taskset_views.taskset_import_confirm, name="import_confirm"),
    path("<int:pk>/export.jsonl", taskset_views.taskset_export, name="export"),
    path("<int:pk>/duplicate/", taskset_views.taskset_duplicate_view, name="duplicate"),
    path("<int:pk>/delete/", taskset_views.taskset_delete_view, name="delete"),
    path("<int:pk>/", taskset_views.taskset_detail, name="detail"),
    path("<int:pk>/split/", taskset_views.taskset_split_view, name="split"),
    path("<int:pk>/assign/", taskset_views.taskset_assign_view, name="assign"),
    path("<int:pk>/tasks/<int:task_pk>/", taskset_views.task_detail, name="task"),
]

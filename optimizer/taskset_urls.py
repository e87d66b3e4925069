from django.urls import path

from optimizer import taskset_views

app_name = "tasksets"
urlpatterns = [
    path("", taskset_views.taskset_list, name="list"),
    path("import/", taskset_views.taskset_import_view, name="import"),
    path("<int:pk>/", taskset_views.taskset_detail, name="detail"),
    path("<int:pk>/split/", taskset_views.taskset_split_view, name="split"),
    path("<int:pk>/assign/", taskset_views.taskset_assign_view, name="assign"),
    path("<int:pk>/tasks/<int:task_pk>/", taskset_views.task_detail, name="task"),
]

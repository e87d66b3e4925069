from django.urls import path

from optimizer import taskset_views

app_name = "tasksets"
urlpatterns = [
    path("", taskset_views.taskset_list, name="list"),
]

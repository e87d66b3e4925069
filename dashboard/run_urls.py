from django.urls import path

from dashboard import run_views

app_name = "runs"
urlpatterns = [
    path("", run_views.run_list, name="list"),
]

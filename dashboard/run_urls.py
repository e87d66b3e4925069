from django.urls import path, re_path

from dashboard import run_views

app_name = "runs"
urlpatterns = [
    path("", run_views.run_list, name="list"),
    path("list.json", run_views.run_list_json, name="list_json"),
    path("new/", run_views.run_new, name="new"),
    path("new/dry-run/", run_views.run_dry_run, name="dry_run"),
    path("new/plan/", run_views.run_plan, name="plan"),
    path("<int:run_id>/", run_views.run_detail, name="detail"),
    path("<int:run_id>/snapshot.json", run_views.run_snapshot, name="snapshot"),
    path("<int:run_id>/scores.json", run_views.run_scores, name="scores"),
    path("<int:run_id>/client.json", run_views.run_client_json, name="client"),
    path("<int:run_id>/candidates/<int:index>/", run_views.candidate_detail, name="candidate"),
    # Spelled out so /runs/<id>/compare/ (the compare namespace) is never shadowed.
    re_path(r"^(?P<run_id>\d+)/(?P<action>stop|cancel|resume|fork)/$", run_views.run_control, name="control"),
    path("<int:run_id>/annotate/", run_views.run_annotate, name="annotate"),
    path("<int:run_id>/archive/", run_views.run_archive, name="archive"),
    path("<int:run_id>/delete/", run_views.run_delete, name="delete"),
]

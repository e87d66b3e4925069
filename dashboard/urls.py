"""Every URL of the site, in one place: each page area's routes under its
namespace (`runs:`, `compare:`, `verifiers:`, `tasksets:`, `account:`), views
from dashboard/pages/<area>.py, and the JSON API under /api/."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from dashboard.api import api
from dashboard.pages import accounts, compare, home, runs, scorings, tasksets, verifiers
from dashboard.pages.login import LoginView

run_patterns = [
    path("", runs.run_list, name="list"),
    path("list.json", runs.run_list_json, name="list_json"),
    path("new/", runs.run_new, name="new"),
    path("new/dry-run/", runs.run_dry_run, name="dry_run"),
    path("new/plan/", runs.run_plan, name="plan"),
    path("<int:run_id>/", runs.run_detail, name="detail"),
    path("<int:run_id>/snapshot.json", runs.run_snapshot, name="snapshot"),
    path("<int:run_id>/scores.json", runs.run_scores, name="scores"),
    path("<int:run_id>/val-vs-holdout.json", runs.run_val_vs_holdout_json, name="val_vs_holdout"),
    path("<int:run_id>/client.json", runs.run_client_json, name="client"),
    path("<int:run_id>/candidates/<int:index>/", runs.candidate_detail, name="candidate"),
    # Spelled out so /runs/<id>/compare/ (the compare namespace) is never shadowed.
    re_path(
        r"^(?P<run_id>\d+)/(?P<action>stop|cancel|pause|resume|fork)/$",
        runs.run_control,
        name="control",
    ),
    path("<int:run_id>/annotate/", runs.run_annotate, name="annotate"),
    path("<int:run_id>/scorings/new/", scorings.scoring_new, name="scoring_new"),
    path("<int:run_id>/scorings/<int:scoring_id>/", scorings.scoring_detail, name="scoring"),
    path("<int:run_id>/scorings/<int:scoring_id>.json", scorings.scoring_json, name="scoring_json"),
    path(
        "<int:run_id>/scorings/<int:scoring_id>/fork/", scorings.scoring_fork, name="scoring_fork"
    ),
    path("<int:run_id>/archive/", runs.run_archive, name="archive"),
    path("<int:run_id>/delete/", runs.run_delete, name="delete"),
]

compare_patterns = [
    path("compare/", compare.compare_runs, name="runs"),
    path("import/", compare.import_run, name="import"),
    path("<int:run_id>/compare/", compare.compare, name="compare"),
    path("<int:run_id>/compare/task/", compare.compare_task, name="task"),
    path("<int:run_id>/candidates/<int:index>/history/", compare.history, name="history"),
    path(
        "<int:run_id>/candidates/<int:index>/download.txt",
        compare.download_candidate,
        {"fmt": "txt"},
        name="download_txt",
    ),
    path(
        "<int:run_id>/candidates/<int:index>/download.json",
        compare.download_candidate,
        {"fmt": "json"},
        name="download_json",
    ),
    # The best candidate at the time of the click (it changes while a run goes).
    path(
        "<int:run_id>/best/download.txt",
        compare.download_candidate,
        {"fmt": "txt", "index": None},
        name="download_best_txt",
    ),
    path(
        "<int:run_id>/best/download.json",
        compare.download_candidate,
        {"fmt": "json", "index": None},
        name="download_best_json",
    ),
    path("<int:run_id>/export.json", compare.export_json, name="export_json"),
    path("<int:run_id>/export.csv", compare.export_csv, name="export_csv"),
    path("<int:run_id>/promotion/", compare.promotion, name="promotion"),
]

verifier_patterns = [
    path("", verifiers.verifier_list, name="list"),
    path("new/", verifiers.verifier_create, name="create"),
    path("<slug:slug>/", verifiers.verifier_detail, name="detail"),
    path("<slug:slug>/edit/", verifiers.verifier_edit, name="edit"),
    path("<slug:slug>/duplicate/", verifiers.verifier_duplicate, name="duplicate"),
    path("<slug:slug>/delete/", verifiers.verifier_delete, name="delete"),
    path("<slug:slug>/export.json", verifiers.verifier_export, name="export"),
    path("<slug:slug>/diff/", verifiers.verifier_diff, name="diff"),
]

taskset_patterns = [
    path("", tasksets.taskset_list, name="list"),
    path("import/", tasksets.taskset_import_view, name="import"),
    path("import/preview/", tasksets.taskset_import_preview, name="import_preview"),
    path("import/confirm/", tasksets.taskset_import_confirm, name="import_confirm"),
    path("<int:pk>/export.jsonl", tasksets.taskset_export, name="export"),
    path("<int:pk>/duplicate/", tasksets.taskset_duplicate_view, name="duplicate"),
    path("<int:pk>/delete/", tasksets.taskset_delete_view, name="delete"),
    path("<int:pk>/", tasksets.taskset_detail, name="detail"),
    path("<int:pk>/split/", tasksets.taskset_split_view, name="split"),
    path("<int:pk>/assign/", tasksets.taskset_assign_view, name="assign"),
    path("<int:pk>/tasks/<int:task_pk>/", tasksets.task_detail, name="task"),
]

account_patterns = [
    path("tokens/", accounts.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", accounts.token_revoke, name="revoke"),
]

urlpatterns = [
    path("", home.home, name="home"),
    path("favicon.ico", home.favicon, name="favicon"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("runs/", include((run_patterns, "runs"))),
    path("runs/", include((compare_patterns, "compare"))),
    path("verifiers/", include((verifier_patterns, "verifiers"))),
    path("tasksets/", include((taskset_patterns, "tasksets"))),
    path("account/", include((account_patterns, "account"))),
]

from django.urls import path

from dashboard.pages import compare as compare_views

app_name = "compare"
urlpatterns = [
    path("compare/", compare_views.compare_runs, name="runs"),
    path("import/", compare_views.import_run, name="import"),
    path("<int:run_id>/compare/", compare_views.compare, name="compare"),
    path("<int:run_id>/compare/task/", compare_views.compare_task, name="task"),
    path("<int:run_id>/candidates/<int:index>/history/", compare_views.history, name="history"),
    path("<int:run_id>/candidates/<int:index>/download.txt", compare_views.download_candidate, {"fmt": "txt"}, name="download_txt"),
    path("<int:run_id>/candidates/<int:index>/download.json", compare_views.download_candidate, {"fmt": "json"}, name="download_json"),
    # The best candidate at the time of the click (it changes while a run goes).
    path("<int:run_id>/best/download.txt", compare_views.download_candidate, {"fmt": "txt", "index": None}, name="download_best_txt"),
    path("<int:run_id>/best/download.json", compare_views.download_candidate, {"fmt": "json", "index": None}, name="download_best_json"),
    path("<int:run_id>/export.json", compare_views.export_json, name="export_json"),
    path("<int:run_id>/export.csv", compare_views.export_csv, name="export_csv"),
    path("<int:run_id>/promotion/", compare_views.promotion, name="promotion"),
]

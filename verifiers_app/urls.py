from django.urls import path

from dashboard.pages import verifiers as views

app_name = "verifiers"
urlpatterns = [
    path("", views.verifier_list, name="list"),
    path("new/", views.verifier_create, name="create"),
    path("<slug:slug>/", views.verifier_detail, name="detail"),
    path("<slug:slug>/edit/", views.verifier_edit, name="edit"),
    path("<slug:slug>/duplicate/", views.verifier_duplicate, name="duplicate"),
    path("<slug:slug>/delete/", views.verifier_delete, name="delete"),
    path("<slug:slug>/export.json", views.verifier_export, name="export"),
    path("<slug:slug>/diff/", views.verifier_diff, name="diff"),
]

from django.urls import path

from verifiers_app import views

app_name = "verifiers"
urlpatterns = [
    path("", views.verifier_list, name="list"),
]

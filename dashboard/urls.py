from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from dashboard.pages import home as views
from dashboard.pages.login import LoginView
from dashboard.api import api

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("runs/", include("dashboard.run_urls")),
    path("runs/", include("dashboard.compare_urls")),
    path("verifiers/", include("verifiers_app.urls")),
    path("tasksets/", include("optimizer.taskset_urls")),
    path("account/", include("dashboard.account_urls")),
]

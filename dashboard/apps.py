from django.apps import AppConfig
from django.contrib.staticfiles.apps import StaticFilesConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Frontier dashboard"


class FrontierStaticFilesConfig(StaticFilesConfig):
    """django.contrib.staticfiles, with the plotly bundle's build recipe
    (static/vendor/plotly-build: a lock file and a build script, sources of
    static/vendor/plotly-frontier.min.js) left out of collectstatic."""

    ignore_patterns = [*StaticFilesConfig.ignore_patterns, "plotly-build"]

from django.apps import AppConfig


class OptimizerConfig(AppConfig):
    name = "optimizer"
    verbose_name = "Optimization runs and task sets"

    def ready(self):
        from optimizer import signals  # noqa: F401 - connects the sharing receiver

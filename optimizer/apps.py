from django.apps import AppConfig


class OptimizerConfig(AppConfig):
    name = "optimizer"
    verbose_name = "Optimization runs and task sets"

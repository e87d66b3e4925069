from django.apps import AppConfig


class VerifiersAppConfig(AppConfig):
    name = "verifiers_app"
    verbose_name = "Verifiers"

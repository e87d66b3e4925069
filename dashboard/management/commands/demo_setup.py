"""`manage.py demo_setup`: what `make demo` needs besides migrations — a demo
login (printed), the example verifiers and task sets, and a live demo run.
Idempotent: a second call changes nothing that is already there."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from optimizer.demo import launch_demo_run
from optimizer.examples import load_examples

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "frontier-demo"  # noqa: S105 - a local demo login, printed on purpose


class Command(BaseCommand):
    help = "Create the demo login, load the examples and launch a demo run (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--no-run", action="store_true", help="Do not launch a demo run")

    def handle(self, *args, no_run, **options):
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        load_examples(user=user, stdout=self.stdout)
        launch_demo_run(user=user, launch_run=not no_run, stdout=self.stdout)
        self.stdout.write(self.style.SUCCESS(f"Demo login: username {DEMO_USERNAME} · password {DEMO_PASSWORD}"))

"""`manage.py demo_setup`: what `make demo` needs besides migrations — a demo
login (printed), the example verifiers and task sets, and a live demo run.
Idempotent: a second call changes nothing that is already there.

The demo login is an admin with a known password, fine on a laptop and not on a
server: with DEBUG off the command refuses unless given --force, and then the
password is random, printed once when the login is created."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from optimizer.demo_run import launch_demo_run
from optimizer.examples import load_examples

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "frontier-demo"  # noqa: S105 - a local demo login, printed on purpose


class Command(BaseCommand):
    help = "Create the demo login, load the examples and launch a demo run (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--no-run", action="store_true", help="Do not launch a demo run")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Run even with DEBUG off (the demo admin then gets a random password, printed once)",
        )

    def handle(self, *args, no_run, force, **options):
        if not settings.DEBUG and not force:
            raise CommandError(
                "DEBUG is off: this looks like a server, and demo_setup creates an admin login. "
                "Pass --force to do it anyway (the password is then random and printed once)."
            )
        password = DEMO_PASSWORD if settings.DEBUG else secrets.token_urlsafe(18)
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        load_examples(user=user, stdout=self.stdout)
        launch_demo_run(user=user, launch_run=not no_run, stdout=self.stdout)
        if created or (settings.DEBUG and user.check_password(DEMO_PASSWORD)):
            self.stdout.write(
                self.style.SUCCESS(f"Demo login: username {DEMO_USERNAME} · password {password}")
            )
        else:
            self.stdout.write(
                f"Demo login: username {DEMO_USERNAME} (its password was printed when it was created)"
            )

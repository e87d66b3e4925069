"""`frontier token create --user NAME`: an API token for a script, printed alone
on stdout so `export FRONTIER_TOKEN=$(frontier token create --user NAME)` works.
The same token the *API tokens* page creates (dashboard.account_services)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard.account_services import api_token_create

BAD_INPUT = 2


class Command(BaseCommand):
    help = "Create an API token for scripts (the tracker, the API): printed once, on stdout."

    def add_arguments(self, parser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        create = subparsers.add_parser(
            "create", help="create a token for a user and print it (it is shown only this once)"
        )
        create.add_argument("--user", required=True, metavar="NAME", help="the user's login name")
        create.add_argument(
            "--name",
            default="command line",
            metavar="LABEL",
            help="what the token is for, as the API tokens page lists it",
        )

    def handle(self, *args, subcommand: str, user: str, name: str, **options) -> None:
        User = get_user_model()
        try:
            owner = User.objects.get(username=user)
        except User.DoesNotExist:
            raise CommandError(
                f"--user: no user named {user!r} (create one with `createsuperuser`)",
                returncode=BAD_INPUT,
            ) from None
        if not owner.is_active:
            raise CommandError(f"--user: {user!r} is not active", returncode=BAD_INPUT)
        try:
            _, token = api_token_create(user=owner, name=name)
        except ValueError as error:
            raise CommandError(f"--{error}", returncode=BAD_INPUT) from None
        self.stdout.write(token)

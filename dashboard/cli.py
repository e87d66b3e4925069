"""The `frontier` command (pyproject.toml's console script): Django's management
commands under one name, as `python manage.py …` runs them in a checkout, plus
`frontier worker`, a Celery worker for the distributed mode.

    frontier serve                 # embedded mode: migrates a new database first
    frontier migrate
    frontier worker --loglevel INFO --concurrency 2   # = celery -A dashboard worker …
    frontier optimize …  /  frontier tasks …  /  frontier verifiers …
    frontier token create --user NAME
"""

from __future__ import annotations

import os
import sys


def program() -> str:
    """How the user called Frontier, to name it in messages: `frontier` or `python manage.py`."""
    return "frontier" if os.path.basename(sys.argv[0]) == "frontier" else "python manage.py"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    if args[:1] == ["worker"]:
        from celery.bin.celery import main as celery_main

        sys.argv = ["frontier", "-A", "dashboard", "worker", *args[1:]]
        celery_main()
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(["frontier", *args])


if __name__ == "__main__":
    main()

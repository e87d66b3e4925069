"""The Celery app. Configured from Django settings (CELERY_* names).

Embedded mode: broker `memory://`, and `dashboard.embedded` starts a worker on
threads inside the server process. Distributed mode: REDIS_URL is the broker and
`celery -A dashboard worker` runs anywhere.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task modules are named celery_tasks.py (tasks.py would read as "task sets"/"task rows").
app.autodiscover_tasks(related_name="celery_tasks")

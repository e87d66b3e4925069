"""The worker's frequent writes (heartbeat, budget, usage and cost, the event
counter) move from the wide run row to a narrow RunProgress row, one per run;
existing values are copied over (and back when migrating backwards)."""

import django.db.models.deletion
from django.db import migrations, models

COPY = """
INSERT INTO optimizer_runprogress (run_id, heartbeat_at, budget_used, usage, cost, last_seq)
SELECT id, heartbeat_at, budget_used, usage, cost, last_seq FROM optimizer_run
"""

COPY_BACK = """
UPDATE optimizer_run SET
    heartbeat_at = (SELECT p.heartbeat_at FROM optimizer_runprogress p WHERE p.run_id = optimizer_run.id),
    budget_used = COALESCE((SELECT p.budget_used FROM optimizer_runprogress p WHERE p.run_id = optimizer_run.id), 0),
    usage = COALESCE((SELECT p.usage FROM optimizer_runprogress p WHERE p.run_id = optimizer_run.id), usage),
    cost = COALESCE((SELECT p.cost FROM optimizer_runprogress p WHERE p.run_id = optimizer_run.id), 0),
    last_seq = COALESCE((SELECT p.last_seq FROM optimizer_runprogress p WHERE p.run_id = optimizer_run.id), 0)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("optimizer", "0009_i16a_backfill_val_summary"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunProgress",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="progress",
                        serialize=False,
                        to="optimizer.run",
                    ),
                ),
                (
                    "heartbeat_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="Last sign of life of the worker executing the run (stale = the worker died)",
                        null=True,
                    ),
                ),
                ("budget_used", models.PositiveIntegerField(default=0)),
                (
                    "usage",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="Model calls, tokens and cost per role (task, reflection, judge) and in total",
                    ),
                ),
                (
                    "cost",
                    models.FloatField(
                        default=0, help_text="Money spent on model calls, at the endpoints' prices"
                    ),
                ),
                (
                    "last_seq",
                    models.PositiveIntegerField(
                        default=0, help_text="Highest RunEvent.seq written"
                    ),
                ),
            ],
        ),
        migrations.RunSQL(COPY, COPY_BACK),
        migrations.RemoveConstraint(
            model_name="run",
            name="run_budget_used_non_negative",
        ),
        migrations.RemoveField(model_name="run", name="budget_used"),
        migrations.RemoveField(model_name="run", name="cost"),
        migrations.RemoveField(model_name="run", name="heartbeat_at"),
        migrations.RemoveField(model_name="run", name="last_seq"),
        migrations.RemoveField(model_name="run", name="usage"),
        migrations.AddConstraint(
            model_name="runprogress",
            constraint=models.CheckConstraint(
                condition=models.Q(("budget_used__gte", 0)),
                name="run_progress_budget_used_non_negative",
            ),
        ),
    ]

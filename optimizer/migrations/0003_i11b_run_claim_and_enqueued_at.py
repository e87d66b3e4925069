from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("optimizer", "0002_run_heartbeat_and_cancel"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="claim",
            field=models.CharField(
                blank=True,
                help_text="Token of the worker that holds the run: every write of the runner is conditional on it (one run, one runner)",
                max_length=32,
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="enqueued_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the run was last handed to the broker; set back when that failed, so a watchdog sends it again soon",
                null=True,
            ),
        ),
    ]

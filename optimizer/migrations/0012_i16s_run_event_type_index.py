"""An index for the run page's stream tails: the newest events of one type of a run
(errors are rare: without it the page walked the run's whole log to find none)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("optimizer", "0011_i16s_rejected_proposal"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="runevent",
            index=models.Index(fields=["run", "type", "seq"], name="run_event_run_type_seq"),
        ),
    ]

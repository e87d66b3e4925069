"""The score chart's numbers of each rejected proposal get a narrow row of their
own (RejectedProposal), written with the proposal event from now on; the rows
of the runs recorded before are filled in here from their events."""

import django.db.models.deletion
from django.db import migrations, models

from optimizer.models import rejected_mark_fields


def backfill(apps, schema_editor):
    RunEvent = apps.get_model("optimizer", "RunEvent")
    RejectedProposal = apps.get_model("optimizer", "RejectedProposal")
    proposals = (
        RunEvent.objects.filter(type="proposal", payload__accepted=False)
        .order_by()
        .values_list("run_id", "seq", "type", "payload")
    )
    marks = []
    for run_id, seq, type, payload in proposals.iterator(
        chunk_size=2000
    ):  # bounded memory on a big database
        fields = rejected_mark_fields(type, payload)
        if fields is not None:
            marks.append(RejectedProposal(run_id=run_id, seq=seq, **fields))
        if len(marks) >= 2000:
            RejectedProposal.objects.bulk_create(marks)
            marks.clear()
    RejectedProposal.objects.bulk_create(marks)


class Migration(migrations.Migration):
    dependencies = [
        ("optimizer", "0010_i16n_run_progress"),
    ]

    operations = [
        migrations.CreateModel(
            name="RejectedProposal",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.PositiveIntegerField(help_text="The proposal event's seq")),
                ("metric_calls", models.IntegerField(null=True)),
                ("parent", models.IntegerField(null=True)),
                (
                    "before",
                    models.FloatField(help_text="The parent's minibatch score sum", null=True),
                ),
                (
                    "after",
                    models.FloatField(help_text="The rewrite's minibatch score sum", null=True),
                ),
                ("minibatch_size", models.PositiveIntegerField(default=0)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rejected_proposals",
                        to="optimizer.run",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "seq"), name="rejected_proposal_unique_seq"
                    )
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]

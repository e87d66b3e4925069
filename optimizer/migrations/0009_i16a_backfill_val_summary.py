"""Fill Candidate.val_task_scores / val_summary for candidates recorded before
0008 (the recorder fills them from now on)."""

from django.db import migrations


def backfill(apps, schema_editor):
    from optimizer.val_summary import fill_val_summaries

    Candidate = apps.get_model("optimizer", "Candidate")
    Evaluation = apps.get_model("optimizer", "Evaluation")
    missing = (
        Candidate.objects.filter(val_summary__isnull=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    fill_val_summaries(
        missing.iterator(chunk_size=2000), candidate_model=Candidate, evaluation_model=Evaluation
    )


class Migration(migrations.Migration):
    dependencies = [
        ("optimizer", "0008_i16a_candidate_val_summary"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]

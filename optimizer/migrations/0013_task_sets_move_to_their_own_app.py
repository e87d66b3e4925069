import django.db.models.deletion
from django.db import migrations, models


def content_types_to(app_label):
    """Keep the content types (and so permissions and admin history) of TaskSet
    and Task: their rows change app instead of being replaced."""

    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        source = "tasksets" if app_label == "optimizer" else "optimizer"
        for model in ("taskset", "task"):
            if not ContentType.objects.filter(app_label=app_label, model=model).exists():
                ContentType.objects.filter(app_label=source, model=model).update(
                    app_label=app_label
                )

    return move


class Migration(migrations.Migration):
    """TaskSet and Task now live in the tasksets app (its 0001 takes them over,
    tables unchanged): the runs' foreign keys point there, and this app stops
    holding the models, without touching the database."""

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("optimizer", "0012_i16s_run_event_type_index"),
        ("tasksets", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="evaluation",
                    name="task",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="evaluations",
                        to="tasksets.task",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="task_set",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="runs",
                        to="tasksets.taskset",
                    ),
                ),
                migrations.DeleteModel(name="Task"),
                migrations.DeleteModel(name="TaskSet"),
            ],
        ),
        migrations.RunPython(content_types_to("tasksets"), content_types_to("optimizer")),
    ]

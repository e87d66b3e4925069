import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Task sets moved here from the optimizer app: the tables stay as they are
    (optimizer_taskset, optimizer_task, their constraints and index), only
    Django's record of which app holds the models changes."""

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("optimizer", "0012_i16s_run_event_type_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="TaskSet",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("description", models.TextField(blank=True)),
                        ("shared", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "owner",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="task_sets",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "optimizer_taskset",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="Task",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("task_id", models.CharField(max_length=200)),
                        ("position", models.PositiveIntegerField(default=0)),
                        ("input", models.TextField()),
                        ("expected", models.JSONField(blank=True, null=True)),
                        ("params", models.JSONField(blank=True, default=dict)),
                        ("metadata", models.JSONField(blank=True, default=dict)),
                        (
                            "verifier",
                            models.JSONField(
                                blank=True,
                                help_text="Row verifier {kind: in_process, fn_name, expected, params}",
                                null=True,
                            ),
                        ),
                        (
                            "split",
                            models.CharField(
                                choices=[
                                    ("train", "train"),
                                    ("val", "val"),
                                    ("holdout", "holdout"),
                                ],
                                default="train",
                                max_length=10,
                            ),
                        ),
                        (
                            "task_set",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="tasks",
                                to="tasksets.taskset",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "optimizer_task",
                        "ordering": ["task_set", "position", "id"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="taskset",
                    constraint=models.UniqueConstraint(
                        fields=("owner", "name"), name="taskset_unique_name_per_owner"
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        fields=["task_set", "split"], name="optimizer_t_task_se_78cedc_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="task",
                    constraint=models.UniqueConstraint(
                        fields=("task_set", "task_id"), name="task_unique_id_in_set"
                    ),
                ),
            ],
        ),
    ]

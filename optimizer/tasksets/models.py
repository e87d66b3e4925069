"""Task sets and their tasks (docs/architecture.md "Data model")."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from dashboard.lib.sharing import SharedQuerySet
from verifiers_app.engine.json_types import JSONObject


class TaskSet(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_sets"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SharedQuerySet["TaskSet"].as_manager()

    class Meta:
        db_table = "optimizer_taskset"  # the table of the app they were first created in
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="taskset_unique_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name


class Split(models.TextChoices):
    TRAIN = "train", "train"
    VAL = "val", "val"
    HOLDOUT = "holdout", "holdout"


class Task(models.Model):
    """One task row (docs/verifier-semantics.md "Row verifiers"): input, gold `expected`, `params`, `metadata`
    (expectations, expectedOutputSchema) and an optional row verifier."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)
    input = models.TextField()
    expected = models.JSONField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    verifier = models.JSONField(
        null=True,
        blank=True,
        help_text="Row verifier {kind: in_process, fn_name, expected, params}",
    )
    split = models.CharField(max_length=10, choices=Split.choices, default=Split.TRAIN)

    class Meta:
        db_table = "optimizer_task"
        ordering = ["task_set", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "task_id"], name="task_unique_id_in_set")
        ]
        indexes = [
            models.Index(fields=["task_set", "split"], name="optimizer_t_task_se_78cedc_idx")
        ]

    def __str__(self) -> str:
        return self.task_id

    def as_row(self) -> JSONObject:
        """The task-row dict the scoring engine reads (`verifiers_app.engine.score(task=…)`)."""
        row: JSONObject = {
            "task_id": self.task_id,
            "input": self.input,
            "expected": self.expected,
            "params": self.params or {},
            "metadata": self.metadata or {},
        }
        if self.verifier:
            row["verifier"] = self.verifier
        return row

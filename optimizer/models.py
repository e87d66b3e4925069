"""Runs and everything a run records (docs/architecture.md "Data model"); task sets
are optimizer/tasksets."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from optimizer.tasksets.models import Split, Task, TaskSet
from verifiers_app.engine.json_types import JSONObject

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class ModelEndpoint(models.Model):
    """A model endpoint a run can choose, managed in the admin. The API key is
    never stored: `api_key_env` names the environment variable that holds it."""

    class Provider(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        DEMO = "demo", "Demo simulator (offline)"

    name = models.SlugField(max_length=100, unique=True)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.OPENAI)
    base_url = models.URLField(blank=True)
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Name of the environment variable holding the key"
    )
    options = models.JSONField(
        default=dict, blank=True, help_text="temperature, max_tokens, timeout, max_retries …"
    )
    price_in_per_million = models.FloatField(
        default=0,
        validators=[MinValueValidator(0)],
        help_text="Price of 1M input (prompt) tokens; 0 = free (the demo simulator is always free)",
    )
    price_out_per_million = models.FloatField(
        default=0,
        validators=[MinValueValidator(0)],
        help_text="Price of 1M output (completion) tokens",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_provider_display()}: {self.model})"

    def clean(self) -> None:
        from optimizer.config import DEMO_MODEL_NAME

        if self.name == DEMO_MODEL_NAME:
            raise ValidationError(
                {"name": f'"{DEMO_MODEL_NAME}" names the offline simulator; choose another name'}
            )


class UserRunLimits(models.Model):
    """An administrator's limits for one user's runs; an empty field means the
    site default from settings (optimizer/runs/limits.py, docs/configuration.md "Limits")."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_limits"
    )
    max_metric_calls = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Largest budget of one run, continuations included (empty: site default)",
    )
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True, help_text="Largest `concurrency` of one run (empty: site default)"
    )
    max_active_runs = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Runs queued, running or stopping at once (empty: site default)",
    )

    class Meta:
        verbose_name = "user run limits"
        verbose_name_plural = "user run limits"

    def __str__(self) -> str:
        return f"run limits of {self.user}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    STOPPING = "stopping", "stopping"
    STOPPED = "stopped", "stopped"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    # An external run whose tracker went silent for FRONTIER_EXTERNAL_SILENT_SECONDS.
    ABANDONED = "abandoned", "abandoned"
    # Checkpointed between two iterations and holding no worker: not finished (a
    # resume continues it where it was), and not active (no worker, no run limit).
    PAUSED = "paused", "paused"

    @classmethod
    def active(cls) -> list[str]:
        return [cls.QUEUED, cls.RUNNING, cls.STOPPING]

    @classmethod
    def finished(cls) -> list[str]:
        return [cls.STOPPED, cls.COMPLETED, cls.FAILED, cls.ABANDONED]

    @classmethod
    def steerable(cls) -> list[str]:
        """The statuses in which a native run takes a human-written candidate:
        it has not ended and is not ending (a paused run takes it when it resumes)."""
        return [cls.QUEUED, cls.RUNNING, cls.PAUSED]


class RunKind(models.TextChoices):
    NATIVE = "native", "native"
    EXTERNAL = "external", "external"


# Why an external run offers no steering, said the same way wherever one is refused.
EXTERNAL_OBSERVE_ONLY = (
    "an external run's callbacks are observe-only: gepa runs in its owner's process, so "
    "Frontier can watch and stop it but not pause it, add a candidate to it or change "
    "what its reflection reads"
)


class RunQuerySet(models.QuerySet["Run"]):
    def visible_to(self, user: User) -> Self:
        """Runs a user may see: their own and those shared with them, read-only or
        with steering rights (admins see all)."""
        if user.is_superuser:
            return self
        return self.filter(Q(owner=user) | Q(shared_with=user) | Q(steered_by=user)).distinct()

    def active(self) -> Self:
        return self.filter(status__in=RunStatus.active())


class Run(models.Model):
    """One optimization run. `config` and `verifier_specs` are frozen at launch, so
    a later edit of a verifier or a task never changes a past run."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    shared_with = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="runs_shared_with_me"
    )
    steered_by = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="runs_i_steer",
        help_text="Shared with steering rights: they see the run and may stop, pause, resume it, "
        "add candidates and write reviewer notes (not fork, edit or delete it)",
    )
    name = models.CharField(max_length=200, blank=True)
    task_set = models.ForeignKey(
        TaskSet, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    verifiers = models.ManyToManyField("verifiers_app.Verifier", blank=True, related_name="runs")
    config = models.JSONField(default=dict)
    verifier_specs = models.JSONField(default=list)
    tasks_snapshot = models.JSONField(
        default=list, blank=True, help_text="Frozen task rows used by the run"
    )
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    phase = models.CharField(max_length=100, blank=True)
    stop_requested = models.BooleanField(default=False)
    cancel_requested = models.BooleanField(
        default=False, help_text="Abort now, without finishing the iteration"
    )
    pause_requested = models.BooleanField(
        default=False,
        help_text="Pause at the next iteration boundary: checkpoint, release the worker, keep the place",
    )
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who asked for the pause in effect (none: the command line)",
    )
    claim = models.CharField(
        max_length=32,
        blank=True,
        help_text="Token of the worker that holds the run: every write of the runner is conditional on it (one run, one runner)",
    )
    enqueued_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the run was last handed to the broker; set back when that failed, so a watchdog sends it again soon",
    )
    budget_total = models.PositiveIntegerField(default=0)
    seed_score = models.FloatField(null=True, blank=True)
    best_score = models.FloatField(null=True, blank=True)
    stop_reason = models.CharField(
        max_length=100, blank=True, help_text="Why the run ended (budget reached, …)"
    )
    best_candidate = models.ForeignKey(
        "Candidate", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    chosen_candidate = models.ForeignKey(
        "Candidate", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    error = models.TextField(blank=True)
    imported = models.BooleanField(
        default=False, help_text="Created from an exported run, not executed here"
    )
    # The user's own bookkeeping (runs list chores): never read by the optimizer.
    tags = models.JSONField(
        default=list, blank=True, help_text="Short labels, e.g. ['baseline', 'gpt-4o']"
    )
    notes = models.TextField(blank=True)
    archived = models.BooleanField(
        default=False, help_text="Hidden from the runs list unless asked for"
    )
    forked_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="forks"
    )
    forked_from_candidate = models.PositiveIntegerField(
        null=True, blank=True, help_text="The parent run's candidate it was seeded from"
    )
    # An external run is driven by the user's own process (the frontier_tracker
    # client) and reaches us through /api/external/; nothing here executes it.
    kind = models.CharField(max_length=10, choices=RunKind.choices, default=RunKind.NATIVE)
    external = models.JSONField(
        default=dict,
        blank=True,
        help_text="Where an external run runs: host, gepa and client versions",
    )
    # Not stored: set on the run an import returns when the same file was imported
    # before (optimizer.export.run_import_stream), for the page to say so.
    imported_before = False
    external_key = models.CharField(
        max_length=64,
        blank=True,
        help_text="The tracker's own id of the run (opening twice gives one run)",
    )
    external_batch = models.PositiveIntegerField(
        default=0, help_text="Last event batch applied (resent batches are ignored)"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "external_key"],
                condition=~Q(external_key=""),
                name="run_unique_external_key_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return self.name or f"Run {self.pk}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            return super().save(*args, **kwargs)
        with transaction.atomic(
            savepoint=False
        ):  # every run has its progress row from its first moment
            super().save(*args, **kwargs)
            RunProgress.objects.create(run=self)

    # What the worker writes all the time lives on the narrow RunProgress row;
    # read through these (select_related("progress") keeps a read one query).
    @property
    def heartbeat_at(self) -> datetime | None:
        return self.progress.heartbeat_at

    @property
    def budget_used(self) -> int:
        return self.progress.budget_used

    @property
    def usage(self) -> JSONObject:
        return self.progress.usage

    @property
    def cost(self) -> float:
        return self.progress.cost

    @property
    def last_seq(self) -> int:
        return self.progress.last_seq

    @property
    def is_external(self) -> bool:
        return self.kind == RunKind.EXTERNAL

    def controllable_by(self, user: User) -> bool:
        """Only the owner (or an admin) forks, edits or deletes a run: a fork spends
        the run's frozen endpoints (the owner's) outside the run's budget."""
        return bool(user.is_superuser or self.owner_id == user.pk)

    def steerable_by(self, user: User) -> bool:
        """Who controls the run, and whom it is shared with steering rights, steers
        it within the budget its owner set: stop, pause, resume, add a candidate,
        write reviewer notes. Plain sharing is read-only."""
        return self.controllable_by(user) or self.steered_by.filter(pk=user.pk).exists()


# The RunProgress columns: what RunClaim.update and run_progress route to the narrow row.
PROGRESS_FIELDS = frozenset({"heartbeat_at", "budget_used", "usage", "cost", "last_seq"})


class RunProgress(models.Model):
    """The few fields of a run its worker writes all the time: the heartbeat every
    few seconds, the budget, tokens and cost after every evaluation, the event
    counter with every event batch. A narrow row of its own, because in
    PostgreSQL an UPDATE of one column writes a whole new version of the row:
    on the wide run row (config, frozen tasks, specs: kilobytes) those writes
    made the runs table grow by megabytes per thousand metric calls. The claim
    token stays on the run (optimizer/runs/claims.py: one source of truth)."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="progress"
    )
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life of the worker executing the run (stale = the worker died)",
    )
    budget_used = models.PositiveIntegerField(default=0)
    usage = models.JSONField(
        default=dict,
        blank=True,
        help_text="Model calls, tokens and cost per role (task, reflection, judge) and in total",
    )
    cost = models.FloatField(
        default=0, help_text="Money spent on model calls, at the endpoints' prices"
    )
    last_seq = models.PositiveIntegerField(default=0, help_text="Highest RunEvent.seq written")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(budget_used__gte=0), name="run_progress_budget_used_non_negative"
            )
        ]

    def __str__(self) -> str:
        return f"progress of run {self.run_id}"


def run_progress(run_id: int) -> models.QuerySet[RunProgress]:
    """The run's progress row as a queryset, to update (no claim: services, imports, external runs)."""
    return RunProgress.objects.filter(run_id=run_id)


class Origin(models.TextChoices):
    SEED = "seed", "seed"
    REFLECTION = "reflection", "reflection"
    MERGE = "merge", "merge"
    IMPORTED = "imported", "imported"
    # Written by a user (CandidateInjection) and evaluated on the val set like any other.
    HUMAN = "human", "human"


class Candidate(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="candidates")
    index = models.PositiveIntegerField(help_text="GEPA's candidate index")
    components = models.JSONField(default=dict)
    parents = models.JSONField(default=list, help_text="Indices of parent candidates")
    origin = models.CharField(max_length=12, choices=Origin.choices, default=Origin.REFLECTION)
    iteration = models.IntegerField(default=0)
    metric_calls = models.PositiveIntegerField(
        default=0, help_text="Metric calls used when it was born"
    )
    val_score = models.FloatField(null=True, blank=True)
    objective_scores = models.JSONField(default=dict, blank=True)
    on_front = models.BooleanField(default=False)
    reflection = models.TextField(
        blank=True, help_text="The reflection's reasoning, when available"
    )
    usage = models.JSONField(
        default=dict,
        blank=True,
        help_text="What finding it cost: the iteration that proposed and scored it, per role",
    )
    cost = models.FloatField(default=0)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who wrote it (origin human); null for the engine's candidates",
    )
    # What the run page draws, stored when the val evaluation is recorded
    # (optimizer/val_summary.py); null for a candidate not summarised yet.
    val_task_scores = models.JSONField(null=True, blank=True, help_text="Val task key → score")
    val_summary = models.JSONField(
        null=True,
        blank=True,
        help_text="Means of the answered val tasks (prompt/output tokens, latency) and verdict counts",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="candidate_unique_index_in_run")
        ]

    def __str__(self) -> str:
        return f"candidate {self.index} of run {self.run_id}"


class InjectionStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPLIED = "applied", "applied"
    REFUSED = "refused", "refused"


class CandidateInjection(models.Model):
    """A candidate a user wrote (edited from one of the run's candidates) to add to
    a running, queued or paused native run. Stored first, as `pending`: the runner
    evaluates it on the val set at its next iteration boundary and adds it to gepa's
    pool, and marks it `applied` in the transaction that records its Candidate
    (exactly once, even across a worker crash); a run that ends first marks it
    `refused` with the reason (optimizer/runs/injections.py)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="injections")
    components = models.JSONField(help_text="Component name → text, every component of the run")
    edited_from = models.PositiveIntegerField(
        null=True, blank=True, help_text="The candidate index it was edited from (null: the seed)"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=10, choices=InjectionStatus.choices, default=InjectionStatus.PENDING
    )
    reason = models.CharField(max_length=300, blank=True, help_text="Why it was refused")
    candidate_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="The candidate it became, once applied"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "created_at", "pk"]
        indexes = [models.Index(fields=["run", "status"], name="injection_run_status")]
        constraints = [
            models.CheckConstraint(
                condition=~Q(status="applied") | Q(candidate_index__isnull=False),
                name="injection_applied_has_candidate",
            )
        ]

    def __str__(self) -> str:
        return f"injection {self.pk} into run {self.run_id} ({self.status})"

    @property
    def parent(self) -> int:
        """The candidate it was edited from (the seed when none was named)."""
        return self.edited_from if self.edited_from is not None else 0


class Evaluation(models.Model):
    """One candidate on one task: output, score, verdict and the check breakdown."""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="evaluations")
    # The candidate's run, stored again so a run's evaluations are found (and
    # read in the CSV export's order) by one index led by the run, without a
    # join to its candidates: the evaluation_csv_order index of migration
    # 0023 serves as this key's index too. Every writer sets it to candidate.run.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="evaluations", db_index=False
    )
    task = models.ForeignKey(
        Task, on_delete=models.SET_NULL, null=True, blank=True, related_name="evaluations"
    )
    task_key = models.CharField(
        max_length=200, help_text="The task's task_id (kept if the task is deleted)"
    )
    split = models.CharField(max_length=10, choices=Split.choices, default=Split.VAL)
    output = models.TextField(blank=True)
    score = models.FloatField()
    verdict = models.CharField(max_length=12)
    passed = models.BooleanField(default=False)
    result = models.JSONField(default=dict, help_text="The engine's result (verifiers and checks)")
    feedback = models.TextField(blank=True)
    attempts = models.JSONField(default=list, blank=True, help_text="verify= loop attempts")
    latency_ms = models.FloatField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    judge_tokens_in = models.PositiveIntegerField(default=0)
    judge_tokens_out = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0, help_text="Task model and judge calls of this evaluation")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["candidate", "task_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "task_key", "split"], name="evaluation_unique_per_task"
            ),
            models.CheckConstraint(
                condition=Q(score__gte=0) & Q(score__lte=1), name="evaluation_score_in_unit_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.candidate} on {self.task_key}"


class RunEvent(models.Model):
    """The append-only event log of a run: the source of truth for replay."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=50)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="run_event_unique_seq"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="run_event_seq_positive"),
        ]
        # The run page's stream tails (the last proposals, trials, errors): the newest
        # events of one type without walking the run's whole log (errors are rare).
        indexes = [models.Index(fields=["run", "type", "seq"], name="run_event_run_type_seq")]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.type}"

    def as_message(self) -> JSONObject:
        """The websocket message shape: {"seq", "type", "data"}."""
        return {"seq": self.seq, "type": self.type, "data": self.payload}


class RejectedProposal(models.Model):
    """The few numbers the run page's score chart draws for a rejected proposal
    (a faint mark: where in the budget, from which parent, the minibatch score
    sums and size), stored when its proposal event is written (store_rejected_marks)
    so the page reads narrow rows instead of re-reading every rejected
    proposal's whole payload (texts, reasoning, minibatch: a compressed
    kilobyte to unpack per mark; 20,000 marks on a 10,000-candidate run) on
    every load. The event stays the source of truth; a migration filled these
    rows in for the runs recorded before."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rejected_proposals")
    seq = models.PositiveIntegerField(help_text="The proposal event's seq")
    metric_calls = models.IntegerField(null=True)
    parent = models.IntegerField(null=True)
    before = models.FloatField(null=True, help_text="The parent's minibatch score sum")
    after = models.FloatField(null=True, help_text="The rewrite's minibatch score sum")
    minibatch_size = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="rejected_proposal_unique_seq")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} rejected proposal"


def rejected_mark_fields(type: str, payload: Any) -> JSONObject | None:
    """A RejectedProposal's numbers from a proposal event's payload, None unless
    it is a rejected proposal (`accepted` exactly false). An int or float (or a
    numeric string) is read as a number, anything else as None (a client may
    send anything); the minibatch counts when it is a list."""
    from optimizer.runs.event_types import PROPOSAL

    if type != PROPOSAL or not isinstance(payload, dict) or payload.get("accepted") is not False:
        return None
    minibatch = payload.get("minibatch")
    return {
        "metric_calls": _number(payload.get("metric_calls"), int),
        "parent": _number(payload.get("parent"), int),
        "before": _number(payload.get("before"), float),
        "after": _number(payload.get("after"), float),
        "minibatch_size": len(minibatch) if isinstance(minibatch, list) else 0,
    }


def _number(value: object, kind: type[int] | type[float]) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = kind(value)
    except (ValueError, OverflowError):
        return None
    # The columns' ranges: a 32-bit integer, a finite float.
    if kind is int and not -(2**31) <= number < 2**31:
        return None
    return number if kind is int or math.isfinite(number) else None


def store_rejected_marks(events: Iterable[RunEvent]) -> None:
    """Write the RejectedProposal rows of these just-written RunEvents (one INSERT, none without a rejected proposal)."""
    marks = [
        RejectedProposal(run_id=e.run_id, seq=e.seq, **fields)
        for e in events
        if (fields := rejected_mark_fields(e.type, e.payload)) is not None
    ]
    if marks:
        RejectedProposal.objects.bulk_create(marks, batch_size=500)


class ReviewerNote(models.Model):
    """A reviewer's note on one task of a run, which GEPA's reflection reads
    beside the verifiers' feedback whenever that task is in its minibatch
    (optimizer/runs/adapter.py, `make_reflective_dataset`). Only a native run
    executed here takes notes: an external run's reflection is its owner's
    process, and an imported run keeps the notes it came with."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="reviewer_notes")
    task_key = models.CharField(
        max_length=200, help_text="The task's task_id in the run's frozen snapshot"
    )
    text = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="reviewer_notes",
    )
    author_name = models.CharField(
        max_length=150, help_text="Who wrote it (kept when the user is gone, or from an import)"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "task_key", "created_at", "pk"]
        indexes = [models.Index(fields=["run", "task_key"], name="reviewer_note_run_task")]
        constraints = [
            models.CheckConstraint(condition=~Q(text=""), name="reviewer_note_text_not_empty"),
        ]

    def __str__(self) -> str:
        return f"note on {self.task_key} of run {self.run_id}"

    def as_dict(self) -> JSONObject:
        """The note as the API, its events and the export show it."""
        return {
            "id": self.pk,
            "task_key": self.task_key,
            "text": self.text,
            "author": self.author_name,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class ScoringStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class Scoring(models.Model):
    """A named re-scoring of a run's stored val outputs with other verifier specs
    (optimizer/scorings.py): no model is called, and the run's own scores — the
    Evaluation and Candidate rows, "the original" — are never touched. Its
    results are one ScoringCandidate per candidate and the `summary` written
    when it finishes."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scorings")
    name = models.CharField(max_length=200)
    specs = models.JSONField(help_text="The verifier specs it scores with, frozen when asked for")
    source = models.JSONField(
        default=list,
        blank=True,
        help_text="Where each spec came from: {id, version} of a saved verifier, or {edited: true}",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(
        max_length=10, choices=ScoringStatus.choices, default=ScoringStatus.QUEUED
    )
    done = models.PositiveIntegerField(default=0, help_text="Outputs scored so far")
    total = models.PositiveIntegerField(default=0, help_text="Outputs to score")
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Written with `done` while a worker scores it: a running scoring whose "
        "heartbeat is older than RUN_STALE_SECONDS lost its worker and is queued again",
    )
    error = models.TextField(blank=True)
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="scoring_unique_name_per_run"),
            models.CheckConstraint(
                condition=Q(done__lte=models.F("total")) | Q(total=0),
                name="scoring_done_within_total",
            ),
        ]

    def __str__(self) -> str:
        return f"scoring {self.name!r} of run {self.run_id}"


class ScoringCandidate(models.Model):
    """One candidate under one Scoring: its val score and per-task scores, its
    place in the ranking (and in the original's), and which of its outputs were
    cut for size before they were stored (scored as stored: a verifier reading
    their end may judge them differently than the full answer)."""

    scoring = models.ForeignKey(Scoring, on_delete=models.CASCADE, related_name="candidates")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="+")
    index = models.PositiveIntegerField(help_text="The candidate's index in the run")
    val_score = models.FloatField(null=True, blank=True)
    original_score = models.FloatField(null=True, blank=True)
    task_scores = models.JSONField(default=dict, help_text="Val task key → score")
    rank = models.PositiveIntegerField(null=True, blank=True, help_text="1 = best")
    original_rank = models.PositiveIntegerField(null=True, blank=True)
    on_front = models.BooleanField(default=False)
    cut_tasks = models.JSONField(
        default=list, blank=True, help_text="Val tasks whose stored output was cut for size"
    )
    kept = models.PositiveIntegerField(
        default=0,
        help_text="Val tasks with no stored output (the model failed, or an external client sent none): their original score is kept",
    )

    class Meta:
        ordering = ["scoring", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["scoring", "index"], name="scoring_candidate_unique_index"
            )
        ]

    def __str__(self) -> str:
        return f"candidate {self.index} under {self.scoring}"

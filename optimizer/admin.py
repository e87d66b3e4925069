from django.contrib import admin

from optimizer.models import (
    Candidate,
    CandidateInjection,
    Evaluation,
    ModelEndpoint,
    RejectedProposal,
    ReviewerNote,
    Run,
    RunEvent,
    RunProgress,
    Scoring,
    ScoringCandidate,
    UserRunLimits,
)


@admin.register(UserRunLimits)
class UserRunLimitsAdmin(admin.ModelAdmin):
    list_display = ["user", "max_metric_calls", "max_concurrency", "max_active_runs"]
    search_fields = ["user__username"]
    autocomplete_fields = ["user"]


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "provider",
        "model",
        "base_url",
        "api_key_env",
        "price_in_per_million",
        "price_out_per_million",
    ]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "owner",
        "status",
        "best_score",
        "budget_used",
        "budget_total",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["owner", "progress"]


@admin.register(RunProgress)
class RunProgressAdmin(admin.ModelAdmin):
    list_display = ["run", "heartbeat_at", "budget_used", "cost", "last_seq"]
    list_select_related = ["run"]


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ["run", "index", "origin", "val_score", "on_front"]


@admin.register(CandidateInjection)
class CandidateInjectionAdmin(admin.ModelAdmin):
    list_display = ["run", "id", "status", "edited_from", "author", "candidate_index", "created_at"]
    list_filter = ["status"]
    list_select_related = ["run", "author"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["candidate", "task_key", "split", "score", "verdict"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "type", "created_at"]
    list_filter = ["type"]


@admin.register(RejectedProposal)
class RejectedProposalAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "metric_calls", "parent", "before", "after", "minibatch_size"]
    list_select_related = ["run"]


@admin.register(ReviewerNote)
class ReviewerNoteAdmin(admin.ModelAdmin):
    list_display = ["run", "task_key", "author_name", "updated_at"]
    list_select_related = ["run"]
    search_fields = ["task_key", "author_name", "text"]


@admin.register(Scoring)
class ScoringAdmin(admin.ModelAdmin):
    list_display = ["run", "name", "status", "done", "total", "created_by", "created_at"]
    list_filter = ["status"]
    list_select_related = ["run", "created_by"]
    raw_id_fields = ["run", "created_by"]


@admin.register(ScoringCandidate)
class ScoringCandidateAdmin(admin.ModelAdmin):
    list_display = ["scoring", "index", "val_score", "original_score", "rank", "original_rank"]
    list_select_related = ["scoring"]
    raw_id_fields = ["scoring", "candidate"]

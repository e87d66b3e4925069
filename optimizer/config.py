"""The configuration of one optimization run, frozen into `Run.config` at launch.

`RunConfig` is what the launch form, the API and `manage.py optimize run` build;
`run_launch` resolves endpoint names into full `LMConfig`s and stores
`config.model_dump(mode="json", by_alias=True)`, so the runner never depends on
anything that can change after launch.

Budget presets are derived from the validation-set size V and the minibatch size
m. One GEPA proposal costs 2·m metric calls (parent and child on the same
minibatch) plus V when the child is accepted and scored on the valset; the seed's
own valset evaluation costs V once. A preset buys a number of proposals P:

    max_metric_calls = V + P · (2·m + V)     with P = 5 (light), 15 (medium), 40 (heavy)

so every proposal could be accepted within the budget. `budget_warning()` speaks up
when an exact budget buys fewer than MIN_PROPOSALS proposals by that formula.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from dashboard.lib.api_errors import split_problem, validation_problems
from dashboard.lib.storable import storage_problems
from optimizer.lm.config import LMConfig

PRESET_PROPOSALS = {"light": 5, "medium": 15, "heavy": 40}
MIN_PROPOSALS = 3
MAX_COMPONENT_CHARS = 20_000
MAX_COMPONENTS = 20
MAX_METRIC_CALLS = 10_000_000
MAX_PARALLEL_PROPOSALS = 8  # a run's whole budget, continuations included

# "demo" names the offline simulator everywhere a model is chosen (form, API, CLI);
# no model endpoint may take that name.
DEMO_MODEL_NAME = "demo"
DEMO_TASK_LM = LMConfig(provider="demo", model="demo-task")
DEMO_REFLECTION_LM = LMConfig(provider="demo", model="demo-reflection")
DEMO_MODEL_LABEL = "demo simulator"  # how pages name it


def lm_is_simulator(lm) -> bool:
    """Whether a frozen LM config (a dict, or a model name an imported run kept
    unresolved) is the offline demo simulator."""
    if isinstance(lm, str):
        return lm == DEMO_MODEL_NAME
    return isinstance(lm, dict) and lm.get("provider") == "demo"


DEFAULT_SEED_COMPONENTS = {
    "instructions": "You are a helpful assistant. Answer the user's request."
}

# An LM is a full config or the name of a ModelEndpoint (resolved at launch). The
# discriminator keeps errors about a config dict from also saying "not a string".
LM_REF_TAGS = ("config", "endpoint")
LMRef = Annotated[
    Annotated[LMConfig, Tag("config")] | Annotated[str, Tag("endpoint")],
    Discriminator(lambda value: "endpoint" if isinstance(value, str) else "config"),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Splits(_Strict):
    train: str = Field(
        default="train", min_length=1, description="Split GEPA draws reflection minibatches from."
    )
    val: str = Field(
        default="val", min_length=1, description="Split every accepted candidate is scored on."
    )
    holdout: str | None = Field(
        default=None,
        description="Split scored at the end for the seed and the best; empty: the set's "
        '"holdout" split when it has tasks and evaluate_holdout is on.',
    )

    @model_validator(mode="after")
    def _holdout_is_separate(self) -> Splits:
        if self.holdout and self.holdout in (self.train, self.val):
            raise ValueError("holdout must be a different split from train and val")
        return self


class Thresholds(_Strict):
    pass_: float = Field(default=0.8, alias="pass", ge=0.0, le=1.0)
    borderline: float = Field(default=0.6, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.borderline > self.pass_:
            raise ValueError("borderline must not be above pass")
        return self

    def as_engine(self) -> dict[str, float]:
        return {"pass": self.pass_, "borderline": self.borderline}


class Budget(_Strict):
    """Either a preset or an exact number of metric calls (one task scored once = one call),
    and optionally a cap on money (task, reflection and judge calls at the endpoints' prices).
    Both are hard caps: the run stops before an iteration that cannot fit (optimizer/runs/budget.py)."""

    preset: Literal["light", "medium", "heavy"] | None = None
    max_metric_calls: int | None = Field(default=None, ge=1, le=MAX_METRIC_CALLS)
    max_cost: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="Stop before spending more than this on model calls (endpoint price units).",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        if (self.preset is None) == (self.max_metric_calls is None):
            raise ValueError(
                "give exactly one of preset (light, medium, heavy) or max_metric_calls"
            )
        return self

    def metric_calls(self, *, valset_size: int, minibatch_size: int) -> int:
        if self.max_metric_calls is not None:
            return self.max_metric_calls
        if self.preset is None:  # _exactly_one refuses a budget with neither
            raise ValueError(
                "give exactly one of preset (light, medium, heavy) or max_metric_calls"
            )
        return valset_size + PRESET_PROPOSALS[self.preset] * proposal_cost(
            valset_size, minibatch_size
        )


def proposal_cost(valset_size: int, minibatch_size: int) -> int:
    """Metric calls of one accepted proposal: parent and child on a minibatch, then the valset."""
    return 2 * minibatch_size + valset_size


MERGE_SUBSAMPLE = 5  # gepa 0.1.4 MergeProposer's num_subsample_ids


def iteration_cost(valset_size: int, minibatch_size: int, *, use_merge: bool = False) -> int:
    """The most metric calls one gepa iteration can spend: an accepted reflection
    (2·m + V) or, with merge, an accepted merge (its val subsample + V)."""
    merge = min(MERGE_SUBSAMPLE, valset_size) + valset_size if use_merge else 0
    return max(proposal_cost(valset_size, minibatch_size), merge)


class EarlyStop(_Strict):
    """Stop when there is nothing left to win (both off by default)."""

    at_perfect_score: bool = Field(
        default=False, description="Stop once a candidate scores 1.0 on the valset."
    )
    after_iterations_without_improvement: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Stop after this many iterations without a better val score.",
    )


class VerifyLoop(_Strict):
    """docs/verifier-semantics.md "The verify loop": a judge may reject an answer; the task is re-asked with its verdict."""

    enabled: bool = False
    judge: Literal["verifiers", "llm"] = "verifiers"
    judge_lm: LMRef | None = Field(default=None, description="Required when judge is llm.")
    judge_prompt: str = Field(
        default='You are a strict reviewer. Reply "approved" if the answer fully satisfies the task, '
        'otherwise "rejected: <short reason>".',
        max_length=MAX_COMPONENT_CHARS,
    )
    max_verify: int = Field(default=3, ge=1, le=10)

    @model_validator(mode="after")
    def _llm_judge_needs_a_model(self) -> VerifyLoop:
        if self.enabled and self.judge == "llm" and self.judge_lm is None:
            raise ValueError("judge_lm is required when judge is llm")
        return self


def resolved_lm(lm: LMRef | None) -> LMConfig:
    """The config of a launched run's LM. Launch resolves every endpoint name
    into its config (optimizer.services), so a name (or None) here is a bug; it
    raises the TypeError coerce_config gives for anything but a config."""
    if not isinstance(lm, LMConfig):
        raise TypeError(f"LM config must be an LMConfig or a dict, not {type(lm).__name__}")
    return lm


class RunConfig(_Strict):
    name: str = Field(default="", max_length=200)
    task_set_id: int = Field(ge=1)
    splits: Splits = Field(default_factory=Splits)
    verifier_ids: list[str] = Field(
        default_factory=list, max_length=50, description="Verifier slugs."
    )
    aggregator: str | dict[str, Any] = "weighted_average"
    thresholds: Thresholds = Field(default_factory=Thresholds)
    task_lm: LMRef = Field(
        default=DEMO_MODEL_NAME,
        description='The model that answers the tasks: "demo" (the offline simulator), the name of a '
        "model endpoint, or (administrators only) a full LM config.",
    )
    reflection_lm: LMRef = Field(
        default=DEMO_MODEL_NAME,
        description='The model GEPA reflects with to propose new prompts: "demo", an endpoint name or an LM config.',
    )
    seed_components: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SEED_COMPONENTS))
    budget: Budget = Field(
        default_factory=lambda: Budget(preset="light"), description='Default: the "light" preset.'
    )
    candidate_selection: Literal["pareto", "current_best", "epsilon_greedy", "top_k_pareto"] = (
        "pareto"
    )
    frontier_type: Literal["instance", "objective", "hybrid", "cartesian"] = "instance"
    minibatch_size: int = Field(default=3, ge=1, le=100)
    use_merge: bool = False
    max_merge_invocations: int = Field(default=5, ge=0, le=1000)
    module_selector: Literal["round_robin", "all"] = "round_robin"
    concurrency: int = Field(default=4, ge=1, le=64)
    parallel_proposals: int = Field(
        default=1,
        ge=1,
        le=MAX_PARALLEL_PROPOSALS,
        description="Proposals per iteration, each from its own parent and minibatch, evaluated together "
        "(gepa's IndependentSampling); 1 is classic GEPA.",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    evaluate_holdout: bool = Field(
        default=True,
        description="Evaluate the seed and the best candidate on the held-out split at the end "
        "(splits.holdout, or the set's holdout split): 2 × its tasks, apart from the metric-call "
        "budget. Off: no held-out evaluation.",
    )
    verify: VerifyLoop = Field(default_factory=VerifyLoop)
    early_stop: EarlyStop = Field(default_factory=EarlyStop)

    @field_validator("verifier_ids")
    @classmethod
    def _unique_slugs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("lists a verifier twice")
        if any(not slug.strip() for slug in value):
            raise ValueError("contains an empty verifier id")
        return value

    @field_validator("task_lm", "reflection_lm")
    @classmethod
    def _endpoint_name_not_empty(cls, value: LMRef) -> LMRef:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be an LM config or the name of a model endpoint")
        return value

    @field_validator("seed_components")
    @classmethod
    def _components(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("needs at least one named component")
        if len(value) > MAX_COMPONENTS:
            raise ValueError(f"has more than {MAX_COMPONENTS} components")
        for name, text in value.items():
            if not name.strip() or len(name) > 100:
                raise ValueError("component names must be 1 to 100 characters")
            if not text.strip():
                raise ValueError(f"component {name!r} is empty")
            if len(text) > MAX_COMPONENT_CHARS:
                raise ValueError(
                    f"component {name!r} is longer than {MAX_COMPONENT_CHARS} characters"
                )
        return value

    def max_metric_calls(self, valset_size: int) -> int:
        return self.budget.metric_calls(valset_size=valset_size, minibatch_size=self.minibatch_size)

    def iteration_cost(self, valset_size: int) -> int:
        """The worst case of one iteration: each of its parallel proposals accepted."""
        return self.parallel_proposals * iteration_cost(
            valset_size, self.minibatch_size, use_merge=self.use_merge
        )

    def budget_warning(self, valset_size: int) -> str | None:
        """A sentence when the budget buys fewer than MIN_PROPOSALS proposals, else None."""
        cost = proposal_cost(valset_size, self.minibatch_size)
        proposals = (self.max_metric_calls(valset_size) - valset_size) // cost
        if proposals >= MIN_PROPOSALS:
            return None
        return (
            f"budget: {self.max_metric_calls(valset_size)} metric calls allow only {max(proposals, 0)} "
            f"proposal(s) on a valset of {valset_size} (about {cost} calls each after the seed's {valset_size}); "
            f"use at least {valset_size + MIN_PROPOSALS * cost} for {MIN_PROPOSALS}."
        )

    def frozen(self) -> dict[str, Any]:
        """The JSON stored in Run.config."""
        return self.model_dump(mode="json", by_alias=True)


class RunConfigError(ValueError):
    """Invalid run configuration; `problems` is a list of (field path, message)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


def parse_run_config(data: dict[str, Any] | RunConfig) -> RunConfig:
    """Validate a config dict; raises RunConfigError whose messages name each field."""
    # What PostgreSQL cannot store (NUL characters, NaN) is named here, not met as a
    # database error on save; a RunConfig the API already validated is checked too.
    raw = data.frozen() if isinstance(data, RunConfig) else data
    unstorable = storage_problems(raw, "") if isinstance(raw, dict) else []
    if unstorable:
        raise RunConfigError([split_problem(problem) for problem in unstorable])
    if isinstance(data, RunConfig):
        return data
    try:
        return RunConfig.model_validate(data)
    except ValidationError as error:
        raise RunConfigError(config_problems(error)) from None


def config_problems(error: ValidationError) -> list[tuple[str, str]]:
    # An LMRef adds its union tag ("config" or "endpoint") to the path; drop it.
    return validation_problems(error.errors(), tags=LM_REF_TAGS)

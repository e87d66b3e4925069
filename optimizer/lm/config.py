"""Configuration of one language-model endpoint (task model or reflection model).

The API key itself is never part of the configuration: ``api_key_env`` names the
environment variable that holds it, so configs can be frozen into a Run, stored
and shown in the browser without leaking anything.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verifiers_app.engine.errors import validation_problems

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

DEMO_LABEL = "demo simulator (offline, not a real model)"


class LMConfig(BaseModel):
    # hide_input_in_errors: a key pasted into the wrong field must not be echoed
    # back inside a validation message (those reach logs and the browser).
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    provider: Literal["openai", "demo"] = Field(
        description='"openai" for any OpenAI-compatible endpoint; "demo" for the offline simulator.'
    )
    model: str = Field(min_length=1, max_length=200, description="Model name sent to the endpoint.")
    base_url: str | None = Field(
        default=None,
        max_length=2000,
        description="Endpoint root, e.g. http://localhost:11434/v1 (None = api.openai.com).",
    )
    api_key_env: str | None = Field(
        default=None,
        description="NAME of the environment variable holding the API key (never the key itself).",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)
    # The defaults bound one call to about 2 x 20 s: a hung endpoint fails a run
    # within a minute (docs/models.md "Faults"); raise `timeout` for a model that is just slow.
    timeout: float = Field(default=20.0, gt=0, le=3600, description="Seconds per HTTP attempt.")
    max_retries: int = Field(default=1, ge=0, le=20, description="Retries after the first attempt.")
    retry_initial_delay: float = Field(
        default=0.5,
        ge=0.0,
        le=60.0,
        description="First backoff delay in seconds; doubles per retry (capped at 16x), minus up to 25% jitter.",
    )
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    price_in_per_million: float = Field(
        default=0.0,
        ge=0.0,
        le=100_000.0,
        description="Price of 1M input tokens (0 = free; the demo simulator is always free).",
    )
    price_out_per_million: float = Field(
        default=0.0, ge=0.0, le=100_000.0, description="Price of 1M output tokens."
    )
    simulated_latency_ms: float = Field(
        default=0.0,
        ge=0.0,
        le=10_000.0,
        description="demo only: sleep this long per call so live charts move.",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL such as http://localhost:11434/v1")
        if parts.username or parts.password:
            raise ValueError(
                "must not contain credentials; put the key in the variable named by api_key_env"
            )
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env_is_a_name(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        if not ENV_VAR_NAME.match(value):
            raise ValueError(
                "must be the name of an environment variable (e.g. OPENAI_API_KEY), not the key itself"
            )
        return value

    @property
    def label(self) -> str:
        """Human label, safe to show anywhere (no credentials)."""
        if self.provider == "demo":
            return DEMO_LABEL
        host = urlsplit(self.base_url).netloc if self.base_url else "api.openai.com"
        return f"{self.model} @ {host}"


def format_config_error(error: ValidationError) -> str:
    """One readable sentence for the first problem of a ValidationError."""
    field, message = validation_problems(error.errors(), root="config", dotted=True)[0]
    return f"LM config field {field!r}: {message}"


def coerce_config(config: LMConfig | dict) -> LMConfig:
    """Accept a config object or a plain dict (as frozen into a Run)."""
    if isinstance(config, LMConfig):
        return config
    if not isinstance(config, dict):
        raise TypeError(f"LM config must be an LMConfig or a dict, not {type(config).__name__}")
    return LMConfig.model_validate(config)

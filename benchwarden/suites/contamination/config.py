"""The contamination suite's configuration: what a run asks for, validated in one place.

`ContaminationConfig.validate()` is what both the CLI and the Python API call before
anything is written (`run_contamination` calls it), so a bad value is refused the same
way from either, with one line naming the option to fix.

Invariants:
- Pure: no network, file or clock; validation raises `ConfigurationError` (exit 2).
- A stored run's config round-trips (`to_json_dict` / `config_from_run`), so `--resume`
  sends exactly what the original run would have.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchwarden.core import secrets as credentials
from benchwarden.core.errors import ConfigurationError
from benchwarden.core.records import Run
from benchwarden.core.run_config import config_as
from benchwarden.core.secrets import refuse_url_credentials
from benchwarden.suites.contamination.presets import (
    MAX_TOP_LOGPROBS,
    PRESETS,
    check_extra_body,
    default_top_logprobs,
)
from benchwarden.suites.contamination.probes import MAX_PROBES, SCENARIOS
from benchwarden.targets.openai_client import (
    DEFAULT_CHUNKS_PER_TOKEN,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_RETRY_429_MAX_WAIT,
    DEFAULT_STALL_TIMEOUT,
    normalise_base_url,
)

MAX_CONCURRENCY = 512
DEFAULT_NEAR_TIE_NATS = 0.5
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ContaminationConfig:
    url: str
    model: str | None = None
    api_key_env: str | None = None
    concurrency: tuple[int, ...] = (2, 4, 8)
    probes: int = 4
    max_tokens: int = 256
    min_completion_tokens: int = 16
    seed: int | None = None  # None: one is drawn and recorded
    scenario: str = "shared-prefix"
    repeat: int = 1
    request_timeout: float = 300.0
    preset: str = "none"
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    # Bounds on a hostile server (ChatClient's; 0 turns the stall timeout and 429 retries
    # off). Stored with the run, so a resumed run keeps them.
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_chunks_per_token: float = DEFAULT_CHUNKS_PER_TOKEN
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    retry_429_max_wait: float = DEFAULT_RETRY_429_MAX_WAIT
    # Top candidates per token to ask for (None: the preset's default, 0: no logprobs).
    logprobs: int | None = None
    # A divergence whose reference margin is below this many nats is a near-tie flip.
    near_tie_nats: float = DEFAULT_NEAR_TIE_NATS
    # --bisect LO-HI: find the smallest diverging concurrency instead of fixed rungs.
    bisect: tuple[int, int] | None = None

    def top_logprobs(self) -> int:
        """How many top candidates per token the run asks for (0: no logprobs)."""
        return default_top_logprobs(self.preset) if self.logprobs is None else self.logprobs
    # True: send `model` even when the server does not list it (targets.models)
    any_model: bool = False

    def client_bounds(self) -> dict[str, Any]:  # (field names: CLIENT_BOUNDS)
        """The ChatClient keyword arguments these bounds become."""
        return {"max_reply_bytes": self.max_reply_bytes,
                "max_chunks_per_token": self.max_chunks_per_token,
                "stall_timeout": self.stall_timeout or None,
                "retry_429_max_wait": self.retry_429_max_wait}

    def _validate_client_bounds(self) -> None:
        if isinstance(self.max_reply_bytes, bool) or not isinstance(self.max_reply_bytes, int) \
                or self.max_reply_bytes < 1024:
            raise ConfigurationError(f"--max-reply-bytes must be at least 1 KiB, "
                                     f"not {self.max_reply_bytes}")
        # finite as well: an infinite bound is no bound, and the run's start, which
        # records it, cannot hold one in JSON
        if not (self.max_chunks_per_token >= 1 and math.isfinite(self.max_chunks_per_token)):
            raise ConfigurationError(
                "--max-chunks-per-token must be at least 1 (a real server sends "
                f"one chunk per token or fewer), not {self.max_chunks_per_token:g}")
        if not (self.stall_timeout >= 0 and math.isfinite(self.stall_timeout)):
            raise ConfigurationError("--stall-timeout must be a number of seconds (0 turns it off)")
        if not (self.retry_429_max_wait >= 0 and math.isfinite(self.retry_429_max_wait)):
            raise ConfigurationError(
                "--retry-429-max-wait must be a number of seconds (0: never retry)")

    def validate(self) -> None:
        """Raise ConfigurationError (a ValueError) with one line naming what to fix."""
        refuse_url_credentials(self.url)
        try:
            normalise_base_url(self.url)
        except ValueError as error:  # the client's own check: a usage error, not a crash
            raise ConfigurationError(f"--url: {error}") from None
        if not 2 <= self.probes <= MAX_PROBES:
            raise ConfigurationError(
                f"--probes must be between 2 and {MAX_PROBES}, not {self.probes}")
        if not self.concurrency:
            raise ConfigurationError("--concurrency needs at least one level, e.g. 2,4,8")
        for level in self.concurrency:
            if not 2 <= level <= MAX_CONCURRENCY:
                raise ConfigurationError(f"--concurrency levels must be between 2 and "
                                         f"{MAX_CONCURRENCY}, not {level}")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ConfigurationError(f"--concurrency lists a level twice: "
                                     f"{','.join(map(str, self.concurrency))}")
        if self.max_tokens < 2:
            raise ConfigurationError(f"--max-tokens must be at least 2, not {self.max_tokens}")
        if self.min_completion_tokens < 1:
            raise ConfigurationError("--min-completion-tokens must be at least 1")
        if self.min_completion_tokens >= self.max_tokens:
            raise ConfigurationError(
                f"--min-completion-tokens {self.min_completion_tokens} must be below "
                f"--max-tokens {self.max_tokens}: otherwise every reply is unmeasured")
        if not 1 <= self.repeat <= 1000:
            raise ConfigurationError(f"--repeat must be between 1 and 1000, not {self.repeat}")
        if not (self.request_timeout > 0 and math.isfinite(self.request_timeout)):
            raise ConfigurationError("--request-timeout must be a positive number of seconds")
        if self.scenario not in SCENARIOS:
            raise ConfigurationError(f"unknown scenario {self.scenario!r}; choose one of "
                                     f"{', '.join(SCENARIOS)}")
        if self.preset not in PRESETS:
            raise ConfigurationError(
                f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ConfigurationError("--seed must be a non-negative integer below 2**63 (the "
                                     "store keeps it as a 64-bit integer)")
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ConfigurationError("--api-key-env takes the NAME of an environment variable that "
                                     "holds the key, not the key itself")
        if self.model is not None and not self.model.strip():
            raise ConfigurationError("--model must not be empty")
        if self.model is not None and credentials.looks_like_credential_value(self.model):
            raise ConfigurationError("--model looks like a credential (it would be sent and "
                                     "stored as the model name); pass keys with --api-key-env")
        check_extra_body(self.extra_body)
        self._validate_client_bounds()
        self._validate_divergence_options()

    def _validate_divergence_options(self) -> None:
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise ConfigurationError(f"--logprobs must be between 0 (off) and "
                                     f"{MAX_TOP_LOGPROBS}, not {self.logprobs}")
        if not 0 <= self.near_tie_nats < 100:  # also refuses NaN
            raise ConfigurationError(
                f"--near-tie-nats must be a non-negative number of nats, not {self.near_tie_nats}")
        if self.bisect is not None:
            low, high = self.bisect
            if not 2 <= low < high <= MAX_CONCURRENCY:
                raise ConfigurationError(
                    f"--bisect needs LO-HI with 2 <= LO < HI <= {MAX_CONCURRENCY}, "
                    f"not {low}-{high}")
            if self.repeat != 1:
                raise ConfigurationError("--bisect runs each rung once: drop --repeat")

    def to_json_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["concurrency"] = list(self.concurrency)
        data["extra_body"] = dict(self.extra_body)
        data["bisect"] = None if self.bisect is None else list(self.bisect)
        return data


CLIENT_BOUNDS = ("max_reply_bytes", "max_chunks_per_token", "stall_timeout", "retry_429_max_wait")


def config_from_run(run: Run, location: Any = "the store") -> ContaminationConfig:
    """The configuration a stored run was made with (for `--resume`): its fields read
    from the run's configuration (`to_json_dict`'s keys; one it lacks takes the default),
    each of its type. One of another shape (edited, or written by another tool) is a
    `CorruptStore` naming the run and the field (`core.run_config.config_as`), not a
    crash of whatever reads it next."""
    return config_as(location, run, ContaminationConfig, "contamination")

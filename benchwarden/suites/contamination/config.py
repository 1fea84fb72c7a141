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
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from benchwarden.core import secrets as credentials
from benchwarden.core.errors import ConfigurationError
from benchwarden.core.records import Run
from benchwarden.core.secrets import refuse_url_credentials
from benchwarden.suites.contamination.presets import PRESETS, check_extra_body
from benchwarden.suites.contamination.probes import MAX_PROBES, SCENARIOS
from benchwarden.targets.openai_client import (
    DEFAULT_CHUNKS_PER_TOKEN,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_RETRY_429_MAX_WAIT,
    DEFAULT_STALL_TIMEOUT,
    normalise_base_url,
)

MAX_CONCURRENCY = 512
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
        if not self.max_chunks_per_token >= 1:
            raise ConfigurationError(
                "--max-chunks-per-token must be at least 1 (a real server sends "
                f"one chunk per token or fewer), not {self.max_chunks_per_token:g}")
        if not self.stall_timeout >= 0:
            raise ConfigurationError("--stall-timeout must be a number of seconds (0 turns it off)")
        if not self.retry_429_max_wait >= 0:
            raise ConfigurationError(
                "--retry-429-max-wait must be a number of seconds (0: never retry)")

    def validate(self) -> None:
        """Raise ConfigurationError (a ValueError) with one line naming what to fix."""
        refuse_url_credentials(self.url)
        normalise_base_url(self.url)
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
        if not self.request_timeout > 0:
            raise ConfigurationError("--request-timeout must be a positive number of seconds")
        if self.scenario not in SCENARIOS:
            raise ConfigurationError(f"unknown scenario {self.scenario!r}; choose one of "
                                     f"{', '.join(SCENARIOS)}")
        if self.preset not in PRESETS:
            raise ConfigurationError(
                f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.seed is not None and self.seed < 0:
            raise ConfigurationError("--seed must be a non-negative integer")
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

    def to_json_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["concurrency"] = list(self.concurrency)
        data["extra_body"] = dict(self.extra_body)
        return data


CLIENT_BOUNDS = ("max_reply_bytes", "max_chunks_per_token", "stall_timeout", "retry_429_max_wait")


def config_from_run(run: Run) -> ContaminationConfig:
    """The configuration a stored run was made with (for `--resume`)."""
    stored = run.config
    names = {f.name for f in dataclasses.fields(ContaminationConfig)}
    values = {name: stored[name] for name in names if name in stored}
    values["concurrency"] = tuple(values.get("concurrency", ()))
    return ContaminationConfig(**values)

"""The retrieval suite's configuration: run settings and seeds, validated in one place.

`RunSettings.validate()` and `validate_seeds()` are what the CLI and the Python API
(`driver.run_strategy`) both call before anything is written, so a bad value is refused
the same way from either, with one line naming the option to fix.

Invariants: pure (no network, file or clock); errors are `ConfigurationError` (exit 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from benchwarden.core.errors import ConfigurationError
from benchwarden.suites.retrieval.sandbox import ISOLATION_MODES, SandboxLimits


@dataclass(frozen=True)
class RunSettings:
    limit: int = 10
    budget_chars: int = 2000
    sandbox: bool = False
    sandbox_limits: SandboxLimits = field(default_factory=SandboxLimits)
    isolation: str = "bwrap"
    hidden: tuple[str, ...] = ()  # paths a sandboxed strategy must not see (ledger, store)

    def validate(self) -> None:
        """Raise ConfigurationError (one line) for settings no run can use; the CLI and
        the Python API (`run_strategy`) both call this."""
        if self.limit < 0 or self.budget_chars < 0:
            raise ConfigurationError("--limit and --budget-chars must be non-negative")
        if self.isolation not in ISOLATION_MODES:
            raise ConfigurationError(f"--isolation must be one of {', '.join(ISOLATION_MODES)}, "
                                     f"not {self.isolation!r}")
        limits = self.sandbox_limits
        if min(limits.wall_seconds, limits.cpu_seconds, limits.memory_mb, limits.open_files,
               limits.file_size_mb) <= 0:
            raise ConfigurationError("sandbox limits must be positive")

    def to_json_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "budget_chars": self.budget_chars, "sandbox": self.sandbox,
                "sandbox_limits": self.sandbox_limits.to_json_dict() if self.sandbox else None,
                "isolation": self.isolation if self.sandbox else None,
                "hidden": list(self.hidden) if self.sandbox else None}


class StoredSettings(msgspec.Struct):
    """A run's `settings` as the run start holds them (`RunSettings.to_json_dict`: the
    sandbox's parts are null when it was off), read back for a report or `--resume`."""

    limit: int = 10
    budget_chars: int = 2000
    sandbox: bool = False
    sandbox_limits: SandboxLimits | None = None
    isolation: str | None = None
    hidden: list[str] | None = None

    def run_settings(self) -> RunSettings:
        """The settings a resumed run goes on with."""
        return RunSettings(limit=self.limit, budget_chars=self.budget_chars,
                           sandbox=self.sandbox,
                           sandbox_limits=self.sandbox_limits or SandboxLimits(),
                           isolation=self.isolation or "bwrap",
                           hidden=tuple(self.hidden or ()))


class StoredStrategy(msgspec.Struct):
    """A run's `strategy` as the run start holds it (`StrategySpec.describe`)."""

    builtin: bool = False
    name: str | None = None
    path: str | None = None
    object: str | None = None
    source_sha256: str | None = None


class StoredConfig(msgspec.Struct):
    """What the suite reads back of a run's configuration (`core.run_config.config_as`
    refuses one of another shape in one line); other keys are not read."""

    strategy: StoredStrategy = msgspec.field(default_factory=StoredStrategy)
    settings: StoredSettings = msgspec.field(default_factory=StoredSettings)
    ladder: str | None = None


def validate_seeds(seeds: Sequence[int]) -> None:
    """At least one seed, each a non-negative integer, none twice (ConfigurationError)."""
    if not seeds:
        raise ConfigurationError("no seeds given (use e.g. --seeds 1-6 or --seeds 1,2,3)")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigurationError(f"seed {seed!r}: seeds are non-negative integers")
    repeated = sorted(seed for seed, count in Counter(seeds).items() if count > 1)
    if repeated:
        raise ConfigurationError(f"seed {repeated[0]} is listed twice")

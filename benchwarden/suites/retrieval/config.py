"""The retrieval suite's configuration: run settings and seeds, validated in one place.

`RunSettings.validate()` and `validate_seeds()` are what the CLI and the Python API
(`driver.run_strategy`) both call before anything is written, so a bad value is refused
the same way from either, with one line naming the option to fix.

Invariants: pure (no network, file or clock); errors are `ConfigurationError` (exit 2).
"""

from __future__ import annotations

import math
import resource
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from benchwarden.core.errors import ConfigurationError
from benchwarden.suites.retrieval.sandbox import ISOLATION_MODES, SandboxLimits

MAX_SEEDS = 10_000
"""More seeds than this in one run is a typo (and a ladder's loop deriving them)."""
LARGEST_SEED = 2**63 - 1
"""The store keeps a seed as a signed 64-bit integer (SQLite's INTEGER)."""
_MEBIBYTE = 1024 * 1024


def _limit_problem(limits: SandboxLimits) -> str | None:
    """Why no sandbox can be built with `limits`, or None. Each is a finite positive
    number the operating system's resource limits can hold: NaN slipped past `<= 0`
    and was refused only when the run's start was stored (exit 4, after a ladder had
    written its genesis), and a limit past what setrlimit takes failed every child at
    start, recorded as the champion's failure in the ledger."""
    named = {"--wall-seconds": limits.wall_seconds, "--cpu-seconds": limits.cpu_seconds,
             "--memory-mb": limits.memory_mb, "--open-files": limits.open_files,
             "--file-size-mb": limits.file_size_mb}
    for option, value in named.items():
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value <= 0:
            return f"sandbox limits must be positive finite numbers: {option} is {value!r}"
    for option, value in (("--memory-mb", limits.memory_mb),
                          ("--file-size-mb", limits.file_size_mb)):
        if value * _MEBIBYTE > LARGEST_SEED:
            return f"{option} {value!r} is more than the operating system can limit to"
    if limits.cpu_seconds > LARGEST_SEED:
        return f"--cpu-seconds {limits.cpu_seconds!r} is more than the operating system " \
               "can limit to"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and limits.open_files > hard:
        return (f"--open-files {limits.open_files!r} is above this system's hard limit of "
                f"{hard} open files")
    return None


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
        problem = _limit_problem(self.sandbox_limits)
        if problem:
            raise ConfigurationError(problem)

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
        if seed > LARGEST_SEED:
            raise ConfigurationError(f"seed {seed}: seeds are at most {LARGEST_SEED} (the "
                                     "store keeps each as a 64-bit integer)")
    repeated = sorted(seed for seed, count in Counter(seeds).items() if count > 1)
    if repeated:
        raise ConfigurationError(f"seed {repeated[0]} is listed twice")

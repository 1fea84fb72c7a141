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

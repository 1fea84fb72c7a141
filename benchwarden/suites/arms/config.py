"""The arms suite's run configuration, validated in one place.

`validate_run()` is what both the CLI and the Python API (`driver.run_arms`) call before
anything is written; `select()` turns `a,b` or `all` into names the suite knows. The
task suite itself (tasks, arms, environment) is `tasks.Suite`, loaded by `tasks.load_suite`.

Invariants: pure apart from asking whether the isolation asked for can work here
(`check_isolation_mode`); errors are `ConfigurationError` (exit 2) naming what to fix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchwarden.core import formatting as fmt
from benchwarden.core.errors import ConfigurationError
from benchwarden.core.sandbox import check_isolation_mode

if TYPE_CHECKING:
    from benchwarden.suites.arms.agents import Limits


def select(names: str, known: Sequence[str], what: str) -> list[str]:
    """Parse `a,b` or `all` against the suite's names; unknown names are an error."""
    if names.strip() == "all":
        return list(known)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    knowing = set(known)  # a wide suite's names: asked once per name chosen
    unknown = [n for n in chosen if n not in knowing]
    if unknown or not chosen:
        # one line, however many names the suite has
        raise ConfigurationError(f"unknown {what} {fmt.names(unknown, 10) or '(none given)'}; "
                                 f"known: {fmt.names(known, 20)} (or all)")
    return list(dict.fromkeys(chosen))


MAX_TRIALS = 10_000
"""Samples per cell past which a number is a typo: `--trials 99999999999` built its plan
of trials in memory until a MemoryError ("unexpected MemoryError", exit 1)."""


def validate_run(trials: int, limits: Limits, isolation: str) -> None:
    """ConfigurationError (one line) for a run no trial can make: the same check from the
    CLI and from the Python API (`run_arms`). IsolationUnavailable (also a
    ConfigurationError) when the isolation asked for cannot work on this machine."""
    if trials < 1 or limits.turn_cap < 1:
        raise ConfigurationError("--trials and --turn-cap must be at least 1")
    if trials > MAX_TRIALS:
        raise ConfigurationError(f"--trials {trials}: at most {MAX_TRIALS} samples per cell")
    # finite as well: an infinite limit is none, and the run's start, which records it,
    # cannot hold one in JSON (it was refused there, exit 4, instead of here)
    if not (0 < limits.wall_clock < math.inf and 0 < limits.command_timeout < math.inf):
        raise ConfigurationError("--wall-clock and --command-timeout must be positive "
                                 "finite numbers of seconds")
    check_isolation_mode(isolation)

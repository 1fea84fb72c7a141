"""The errors benchwarden raises on purpose, and the exit code each one means.

    BenchwardenError                 exit 1   anything else we raise knowingly
    ├── ConfigurationError           exit 2   what the user typed or configured is wrong
    │   └── IsolationUnavailable     exit 2   the sandbox tool (bwrap) is missing or broken
    ├── TargetUnreachableError       exit 2   the server under test did not answer
    ├── EnvironmentFailure           exit 4   the OS or a database refused: disk full,
    │   └── (StoreError and kin)              permissions, a lock held, a damaged store
    └── RunInterrupted               exit 130 a signal stopped a run (it is resumable)

Exit codes are one table for every command (`EXIT_CODES`); the ladder adds 3 (held)
as a verdict, not an error. `ConfigurationError` is also a `ValueError`, so code that
validated with `ValueError` before keeps working while callers move to the hierarchy.

Invariant: every message is one line a person can act on (newlines are folded).
"""

from __future__ import annotations

from benchwarden.core.verdicts import one_line

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_HELD = 3
EXIT_ENVIRONMENT = 4
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "pass, or the command did what was asked",
    EXIT_FAIL: "a gating verdict failed (contamination, verify), or a run error",
    EXIT_USAGE: "usage or configuration error, or the server under test is unreachable",
    EXIT_HELD: "ladder: the champion held (the challenger did not win)",
    EXIT_ENVIRONMENT: "the OS or the store refused: path, permissions, disk, lock, damage",
    EXIT_INTERRUPTED: "interrupted by a signal (SIGINT, SIGTERM, SIGHUP); the run is resumable",
}


class BenchwardenError(Exception):
    """Base of the errors benchwarden raises on purpose (one-line message)."""

    exit_code = EXIT_FAIL

    def __init__(self, message: object = "") -> None:
        super().__init__(one_line(str(message)))


class ConfigurationError(BenchwardenError, ValueError):
    """Fix what you typed or configured."""

    exit_code = EXIT_USAGE


class IsolationUnavailable(ConfigurationError):
    """The OS-level sandbox cannot be built here (bwrap missing or refused)."""


class TargetUnreachableError(BenchwardenError):
    """The server under test did not answer its first request."""

    exit_code = EXIT_USAGE


class EnvironmentFailure(BenchwardenError):
    """The operating system or a database refused (not the user's input, not a verdict)."""

    exit_code = EXIT_ENVIRONMENT


class RunInterrupted(BenchwardenError):
    """A signal stopped a run; what was measured is kept and the run can be resumed."""

    exit_code = EXIT_INTERRUPTED


__all__ = ["EXIT_CODES", "EXIT_ENVIRONMENT", "EXIT_FAIL", "EXIT_HELD", "EXIT_INTERRUPTED",
           "EXIT_OK", "EXIT_USAGE", "BenchwardenError", "ConfigurationError",
           "EnvironmentFailure", "IsolationUnavailable", "RunInterrupted",
           "TargetUnreachableError"]

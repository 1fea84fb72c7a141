"""benchwarden: benchmarks of LLM systems whose numbers can be trusted.

Three suites (contamination, arms, retrieval) share one core: records in an
append-only, hash-chained store; verdicts that always carry a reason; statistics
that always carry their uncertainty.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchwarden")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

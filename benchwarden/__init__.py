"""benchwarden: benchmarks of LLM systems whose numbers can be trusted.

Suites (contamination, arms, retrieval, and any registered under the entry-point group
`benchwarden.suites`) share one core: records in an append-only, hash-chained store;
verdicts that always carry a reason; statistics that always carry their uncertainty.

The public API is exactly `__all__` (listed with one line each in docs/api.md; a test
keeps the two equal). Everything else may move between releases. Importing this package
is cheap: no suite and no statistics library is imported until used.
"""

from benchwarden.core.errors import (
                                     EXIT_CODES,
                                     BenchwardenError,
                                     ConfigurationError,
                                     EnvironmentFailure,
                                     IsolationUnavailable,
                                     RunInterrupted,
                                     TargetUnreachableError,
)
from benchwarden.core.records import Record, Run, RunEnd, TokenComponents, TokenWeights
from benchwarden.core.store import Store, StoreError, open_store
from benchwarden.core.suite import (
                                     Suite,
                                     SuiteUnavailable,
                                     UnknownSuite,
                                     get_suite,
                                     registered_suites,
                                     render_report_html,
                                     write_report_html,
)
from benchwarden.core.verdicts import Verdict
from benchwarden.core.version import __version__

__all__ = [
    "BenchwardenError",
    "ConfigurationError",
    "EXIT_CODES",
    "EnvironmentFailure",
    "IsolationUnavailable",
    "Record",
    "Run",
    "RunEnd",
    "RunInterrupted",
    "Store",
    "StoreError",
    "Suite",
    "SuiteUnavailable",
    "TargetUnreachableError",
    "TokenComponents",
    "TokenWeights",
    "UnknownSuite",
    "Verdict",
    "__version__",
    "get_suite",
    "open_store",
    "registered_suites",
    "render_report_html",
    "write_report_html",
]

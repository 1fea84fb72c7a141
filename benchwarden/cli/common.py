"""What the generic commands (runs, show, verify, export, report, sign, engine, demo)
share. The options and helpers themselves live in `benchwarden.core.commandline`, so
suite commands get them without importing `cli/`; this module re-exports them for the
commands here.

Exit codes are the one table in `core.errors`, applied to every command by `cli.main`.
"""

from __future__ import annotations

from benchwarden.core.commandline import (
    ConfigError,
    StoreFailure,
    config_errors,
    executor_option,
    executor_or_exit,
    html_option,
    isolation_option,
    json_report_option,
    open_store_or_exit,
    print_traceback,
    refuse_url_with_credentials,
    release_executor,
    require_isolation,
    store_option,
    traceback_option,
    write_html_report,
)
from benchwarden.core.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "ConfigError", "StoreFailure",
           "config_errors", "executor_option", "executor_or_exit", "html_option",
           "isolation_option", "json_report_option", "open_store_or_exit", "print_traceback",
           "refuse_url_with_credentials", "release_executor", "require_isolation",
           "store_option", "traceback_option", "write_html_report"]

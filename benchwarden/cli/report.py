"""`benchwarden report RUN|--latest --html PATH`: a past run as one self-contained page.

The report is recomputed from the store alone by the run's suite, found through the
registry (`core.suite.get_suite(run.suite)`: no suite is named here), drawn by that
suite's `render_html`, and written atomically. No server is contacted.

The Python API for writing a page is `benchwarden.core.suite.write_report_html` (a
suite's own `--html` option uses the same function through `core.commandline`).
"""

from __future__ import annotations

from collections.abc import Mapping

import click

from benchwarden.cli.common import ConfigError, config_errors, open_store_or_exit, store_option
from benchwarden.core.reports import as_json
from benchwarden.core.store import StoreError
from benchwarden.core.suite import SuiteUnavailable, get_suite, write_report_html


@click.command()
@click.argument("run_id", required=False)
@click.option("--latest", is_flag=True, help="The most recent run in the store.")
@store_option
@click.option("--html", "html_path", required=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="Write the self-contained HTML report here.")
@config_errors
def report(run_id: str | None, latest: bool, store_location: str, html_path: str) -> None:
    """Write a run's report as one HTML file that needs no network to view."""
    if not run_id and not latest:
        raise ConfigError("give a RUN id (see `benchwarden runs`) or --latest")
    if run_id and latest:
        raise ConfigError("give either a RUN id or --latest, not both")
    with open_store_or_exit(store_location, create=False) as store:
        info = store.latest_run() if latest else store.run_info(run_id or "")
        # its id and suite only: the report reads the run again, and a wide suite's run
        # holds its task list three times (kept here, twice at once)
        run_id, suite_name = info.run.run_id, info.run.suite
        del info
        try:
            suite = get_suite(suite_name)
            data = suite.enrich(store, suite.build_report(store, run_id))
        except (StoreError, SuiteUnavailable):
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None
    try:
        written = write_report_html(html_path, data)
    except SuiteUnavailable:
        raise
    except ValueError as error:
        raise ConfigError(str(error)) from None
    except OSError as error:
        raise ConfigError(f"cannot write {html_path}: {error.strerror or error}") from None
    # the verdict alone made builtins (the whole report made builtins was a copy of it)
    block = data.get("verdict") if isinstance(data, Mapping) else getattr(data, "verdict", None)
    verdict = as_json(block) if block is not None else {}
    click.echo(f"{suite_name} run {run_id}"
               + (f" ({verdict.get('kind')})" if verdict else "")
               + f": report written to {written}")

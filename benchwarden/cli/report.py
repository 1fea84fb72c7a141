"""`benchwarden report RUN|--latest --html PATH`: a past run as one self-contained page.

The report is recomputed from the store alone (the suite's `build_report`), drawn by the
suite's `html.render_html`, and written atomically. No server is contacted.

`render_report_html(report)` and `write_report_html(path, report)` are the Python API a
suite's run command calls for its own `--html` option (after `enrich_for_html(store,
report)`, which adds what only the page shows, such as arms' per-trial transcripts).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from benchwarden.cli.common import ConfigError, config_errors, open_store_or_exit, store_option
from benchwarden.core.files import write_text_atomically
from benchwarden.core.reports import as_json
from benchwarden.core.store import Store, StoreError
from benchwarden.suites import SUITE_REPORTS, report_module


def html_module(suite: str) -> ModuleType:
    """The module with the suite's `render_html` (its `html` module, else its `report`)."""
    if suite not in SUITE_REPORTS:
        raise ValueError(f"report of unknown suite {suite!r}; known: {', '.join(sorted(SUITE_REPORTS))}")
    package = SUITE_REPORTS[suite].rsplit(".", 1)[0]
    try:
        return importlib.import_module(f"{package}.html")
    except ModuleNotFoundError as error:
        if error.name != f"{package}.html":
            raise
    module = report_module(suite)  # a third-party suite may keep it in `report`
    if not hasattr(module, "render_html"):
        raise ValueError(f"suite {suite} has no HTML report")
    return module


def _suite_of(report: Any) -> str:
    """The suite a report (typed, or its JSON) belongs to."""
    return str(as_json(report).get("suite", ""))


def enrich_for_html(store: Store, report: Any) -> Any:
    """The report plus what only the page shows (e.g. arms' per-trial transcripts), read
    from the store by the suite's optional `enrich(store, report)`."""
    module = html_module(_suite_of(report))
    enrich = getattr(module, "enrich", None)
    return enrich(store, report) if enrich is not None else report


def render_report_html(report: Any) -> str:
    """The HTML page of a suite's report, typed or JSON (the suite is read from the report)."""
    return html_module(_suite_of(report)).render_html(report)


def write_report_html(path: str | Path, report: Any) -> Path:
    """Render and write atomically (temp file then rename): never a half-written page."""
    markup = render_report_html(report)
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"--html {path} is a folder; give a file name such as report.html")
    return write_text_atomically(target, markup, mode=0o644)


@click.command()
@click.argument("run_id", required=False)
@click.option("--latest", is_flag=True, help="The most recent run in the store.")
@store_option
@click.option("--html", "html_path", required=True, type=click.Path(dir_okay=False),
              help="Write the self-contained HTML report here.")
@config_errors
def report(run_id: str | None, latest: bool, store_location: str, html_path: str) -> None:
    """Write a run's report as one HTML file that needs no network to view."""
    if not run_id and not latest:
        raise ConfigError("give a RUN id (see `benchwarden runs`) or --latest")
    if run_id and latest:
        raise ConfigError("give either a RUN id or --latest, not both")
    with open_store_or_exit(store_location, create=False) as store:
        info = store.latest_run() if latest else store.run_info(run_id or "")
        try:
            module = report_module(info.run.suite)
            data = module.build_report(store, info.run.run_id)
            data = enrich_for_html(store, data)
        except StoreError:
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None
    try:
        written = write_report_html(html_path, data)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    except OSError as error:
        raise ConfigError(f"cannot write {html_path}: {error.strerror or error}") from None
    verdict = as_json(data).get("verdict") or {}
    click.echo(f"{info.run.suite} run {info.run.run_id}"
               + (f" ({verdict.get('kind')})" if verdict else "")
               + f": report written to {written}")

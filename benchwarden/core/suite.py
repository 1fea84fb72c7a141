"""What a suite is (the `Suite` protocol) and where suites are found (one registry).

A suite is any object registered under the entry-point group `benchwarden.suites`:
the built-in suites are registered in `pyproject.toml` exactly as a third-party
package would register its own, so the CLI, `show` and `report` know no suite by name.

Invariants:
- Lazy: the registry reads entry-point *names* from package metadata without importing
  any suite; a suite object is imported when used, and a suite's heavy modules (its
  driver, statistics, scipy) only when one of its methods needs them. So `benchwarden
  runs` and `--help` stay cheap (tests/cli/test_import_cost.py).
- Loud: a suite whose import fails is still a registered name; using it raises
  `SuiteUnavailable`, one line naming the import error, never a silent absence.
- One renderer: `render_report_html` / `write_report_html` are what both a run's own
  `--html` and `benchwarden report --html` use, so a run's page and a later page agree.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from benchwarden.core.errors import BenchwardenError, ConfigurationError
from benchwarden.core.files import write_text_atomically
from benchwarden.core.reports import as_json

if TYPE_CHECKING:  # for annotations only: click and rich are not needed to list suites
    import click
    from rich.console import Console

    from benchwarden.core.store import Store

ENTRY_POINT_GROUP = "benchwarden.suites"
_ABSENT = object()


class SuiteUnavailable(BenchwardenError):
    """A registered suite could not be imported (a missing optional dependency, a broken
    third-party package): one line naming the suite and the import error (exit 1)."""


class UnknownSuite(ConfigurationError):
    """No suite of that name is registered (exit 2)."""


@runtime_checkable
class Suite(Protocol):
    """A benchmark suite as the CLI and the Python API see it.

    `report_type` is the class of the suite's typed report (a `msgspec.Struct` with a
    `from_json(data)` classmethod for the built-in suites; `dict` for a suite whose report
    is plain JSON): `decode_report` turns any report file of the suite back into it.

    `command_names` are the top-level commands the suite adds (usually just its name;
    retrieval also adds `ladder`); `command(name)` returns one of them (the first when
    `name` is None); a suite may also offer `command_summary(name)`, the line `--help`
    shows without importing the command. `build_report` recomputes the typed report
    from the store alone; the views only format it. `enrich(store, report)` adds what
    only the HTML page shows (arms' transcripts) and returns the report unchanged where
    there is nothing to add.
    """

    name: str
    bench_version: str
    summary: str
    command_names: tuple[str, ...]

    @property
    def report_type(self) -> type: ...

    def command(self, name: str | None = None) -> click.Command: ...

    def build_report(self, store: Store, run_id: str) -> Any: ...

    def render_terminal(self, report: Any, console: Console) -> None: ...

    def render_html(self, report: Any) -> str: ...

    def enrich(self, store: Store, report: Any) -> Any: ...


def _attribute(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


@dataclass(frozen=True)
class ModuleSuite:
    """A `Suite` whose parts are named by module path and imported on first use.

    The conventional suite layout (docs/decisions/0005-suite-shape.md) is `command.py`,
    `report.py` (`build_report`, `render_terminal`) and `html.py` (`render_html`,
    optionally `enrich`); `package` plus these defaults is all a copied suite needs.
    """

    name: str
    bench_version: str
    summary: str
    package: str
    commands: dict[str, str] = field(default_factory=dict)  # command name -> "module:attr"
    summaries: dict[str, str] = field(default_factory=dict)  # command name -> one line
    report_module: str = "report"
    html_module: str = "html"
    # "module:Class" (module relative to `package`) of the typed report; empty: plain dict
    report_class: str = ""

    @property
    def command_names(self) -> tuple[str, ...]:
        return tuple(self.commands) or (self.name,)

    def command_summary(self, name: str) -> str:
        """The one line `benchwarden --help` shows for command `name`, known without
        importing the command (the suite's summary for its main command)."""
        return self.summaries.get(name, self.summary)

    def _module(self, relative: str) -> ModuleType:
        return importlib.import_module(f"{self.package}.{relative}")

    def command(self, name: str | None = None) -> click.Command:
        name = name or self.command_names[0]
        target = self.commands.get(name) or f"{self.package}.command:{name}"
        return _attribute(target)  # type: ignore[no-any-return]

    @property
    def report_type(self) -> type:
        """The typed report's class, imported on first use (`dict` when none is named)."""
        if not self.report_class:
            return dict
        module, _, name = self.report_class.partition(":")
        return getattr(self._module(module), name)  # type: ignore[no-any-return]

    @property
    def keeps_digests(self) -> bool:
        """Whether the suite's `build_report` takes `digests`: it can read a run from its
        digests, and be told not to (`show --from-records`)."""
        build = self._module(self.report_module).build_report
        return "digests" in inspect.signature(build).parameters

    def build_report(self, store: Store, run_id: str, *, from_records: bool = False) -> Any:
        """The run's report; `from_records`: every record read, none of the digests a
        run keeps (a suite's `build_report` that takes `digests`), so the report is
        recounted in full (a suite without digests reads its records either way)."""
        build = self._module(self.report_module).build_report
        if from_records and self.keeps_digests:
            return build(store, run_id, digests=False)
        return build(store, run_id)

    def render_terminal(self, report: Any, console: Console) -> None:
        self._module(self.report_module).render_terminal(report, console)

    def _html(self) -> ModuleType:
        try:
            return self._module(self.html_module)
        except ModuleNotFoundError as error:
            if error.name != f"{self.package}.{self.html_module}":
                raise
        return self._module(self.report_module)  # a small suite may keep its page there

    def render_html(self, report: Any) -> str:
        module = self._html()
        if not hasattr(module, "render_html"):
            raise ConfigurationError(f"suite {self.name} has no HTML report")
        return str(module.render_html(report))

    def enrich(self, store: Store, report: Any) -> Any:
        enrich = getattr(self._html(), "enrich", None)
        return enrich(store, report) if enrich is not None else report


def build_report_from_records(suite: Suite, store: Store, run_id: str) -> tuple[Any, bool]:
    """The run's report read from every record, and whether the suite could be told to:
    a `ModuleSuite` always can (its `build_report` reads every record unless it takes
    `digests`); another suite object only when its `build_report` takes `from_records`.
    When it cannot, the report is built as always and False says so, so the caller tells
    the user rather than pass off a digest read as a recount."""
    if isinstance(suite, ModuleSuite):
        return suite.build_report(store, run_id, from_records=True), True
    try:
        parameters = inspect.signature(suite.build_report).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to inspect
        parameters = {}  # type: ignore[assignment]
    if "from_records" in parameters:
        return suite.build_report(store, run_id, from_records=True), True  # type: ignore[call-arg]
    return suite.build_report(store, run_id), False


def suite_entry_points() -> dict[str, EntryPoint]:
    """Registered suite name -> its entry point, read from package metadata (no import).
    When two distributions register the same name, the first found wins."""
    found: dict[str, EntryPoint] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, entry_point)
    return found


def registered_suites() -> list[str]:
    """The names of every registered suite, sorted, without importing any of them."""
    return sorted(suite_entry_points())


def _import_problem(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def get_suite(name: str, *, registered: Mapping[str, EntryPoint] | None = None) -> Suite:
    """The registered suite `name`, imported now.

    `registered`: the registry a caller already read with `suite_entry_points()`; read
    here when not given. Why: the CLI walks every suite to resolve one command, and
    reading the metadata of every installed distribution again for each suite made four
    reads where one does (about 11 ms of CPU per command with 170 distributions).
    Raises `UnknownSuite` when no suite of that name is registered and `SuiteUnavailable`
    (one line naming the import error) when it is registered but cannot be imported."""
    if registered is None:
        registered = suite_entry_points()
    entry_point = registered.get(name)
    if entry_point is None:
        known = ", ".join(sorted(registered)) or "none"
        raise UnknownSuite(f"unknown suite {name!r}; registered suites: {known}")
    try:
        loaded = entry_point.load()
    except Exception as error:  # noqa: BLE001 - any import failure is reported, not hidden
        raise SuiteUnavailable(f"suite {name} ({entry_point.value}) cannot be imported: "
                               f"{_import_problem(error)}") from error
    missing = missing_suite_members(loaded)
    if missing:
        raise SuiteUnavailable(f"suite {name} ({entry_point.value}) is not a Suite: it lacks "
                               f"{', '.join(missing)}")
    return loaded  # type: ignore[no-any-return]


SUITE_MEMBERS = ("name", "bench_version", "summary", "command_names", "report_type", "command",
                 "build_report", "render_terminal", "render_html", "enrich")


def missing_suite_members(candidate: object) -> list[str]:
    """The `Suite` members `candidate` lacks, looked up statically: `isinstance(x, Suite)`
    would evaluate a lazy property such as `report_type` on Python 3.11 and import the
    suite's report module just to list it."""
    return [member for member in SUITE_MEMBERS
            if inspect.getattr_static(candidate, member, _ABSENT) is _ABSENT]


def _suite_of(report: Any) -> str:
    """The suite a report (typed, or its JSON) belongs to, read from its `suite` alone (a
    typed report made into JSON to read one field took a second at 17,700 seeds)."""
    if isinstance(report, msgspec.Struct) and isinstance(getattr(report, "suite", None), str):
        return str(report.suite)  # type: ignore[attr-defined]
    if isinstance(report, Mapping):
        return str(report.get("suite", ""))
    return str(as_json(report).get("suite", ""))


def decode_report(report: Any) -> Any:
    """A report as its suite's typed report: a JSON object (a report file read back) is
    decoded by the `report_type` of the suite it names; a typed report is returned as is.
    A report of no registered suite is `UnknownSuite`; one its type refuses is a
    `ConfigurationError` naming the suite."""
    suite = get_suite(_suite_of(report))
    report_type = suite.report_type
    if isinstance(report, report_type):
        return report
    if report_type is dict:
        return dict(as_json(report))
    try:
        return report_type.from_json(as_json(report))  # type: ignore[attr-defined]
    except (ValueError, TypeError, KeyError) as error:
        raise ConfigurationError(f"not a {suite.name} report this version reads: "
                                 f"{type(error).__name__}: {error}") from None


def enrich_for_html(store: Store, report: Any) -> Any:
    """The report plus what only the page shows, read from the store by its suite."""
    return get_suite(_suite_of(report)).enrich(store, decode_report(report))


def render_report_html(report: Any) -> str:
    """The HTML page of a suite's report, typed or JSON (the suite is read from the report
    and a JSON report is decoded by its `report_type` first)."""
    return get_suite(_suite_of(report)).render_html(decode_report(report))


def write_report_html(path: str | Path, report: Any) -> Path:
    """Render and write atomically (temp file then rename): never a half-written page."""
    markup = render_report_html(report)
    target = Path(path).expanduser()
    if target.is_dir():
        raise ConfigurationError(f"--html {path} is a folder; give a file name such as "
                                 "report.html")
    return write_text_atomically(target, markup, mode=0o644)


__all__ = ["ENTRY_POINT_GROUP", "ModuleSuite", "Suite", "SuiteUnavailable", "UnknownSuite",
           "decode_report", "enrich_for_html", "get_suite", "registered_suites", "render_report_htm"
                                                                                 "l",
           "suite_entry_points", "write_report_html"]

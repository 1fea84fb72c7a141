"""The suite registry: built-in suites come from the entry-point group like any other;
a fourth suite registered by a (temporary) installed distribution appears in `--help`,
runs, and is found by `benchwarden report`; a suite that cannot be imported is listed and
says why in one line."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli, run_command
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from benchwarden.core.store import open_store
from benchwarden.core.suite import (
    ENTRY_POINT_GROUP,
    Suite,
    SuiteUnavailable,
    UnknownSuite,
    get_suite,
    registered_suites,
)

ROOT = Path(__file__).resolve().parents[2]

FOURTH_SUITE = '''
"""A fourth suite, as a third party would write it: nothing from benchwarden.cli."""
import click
from benchwarden.core.commandline import store_option
from benchwarden.core.suite import ModuleSuite

suite = ModuleSuite(name="echoes", bench_version="7", summary="Says what it heard.",
                    package="echoes_suite", report_module="views", html_module="views")
'''
FOURTH_COMMAND = '''
import click
from benchwarden.core.commandline import store_option

@click.command()
@click.option("--word", default="hello", show_default=True, help="What to echo.")
@store_option
def echoes(word, store_location):
    """Echo a word (a fourth suite registered through an entry point)."""
    click.echo(f"echo: {word}")
'''
FOURTH_VIEWS = '''
def build_report(store, run_id):
    info = store.run_info(run_id)
    return {"suite": "echoes", "bench_version": info.run.bench_version, "run_id": run_id}

def render_terminal(report, console):
    console.print(f"echoes report of {report['run_id']}")

def render_html(report):
    return f"<!doctype html><title>echoes</title><p>echoes run {report['run_id']}</p>"
'''


def _install_fake_distribution(folder: Path, entries: dict[str, str]) -> None:
    """A minimal installed distribution (a dist-info folder) that registers `entries`
    under the suites group: exactly what `pip install` of a third-party suite leaves."""
    dist_info = folder / "echoes_suite-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: echoes-suite\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    package = folder / "echoes_suite"
    package.mkdir()
    (package / "__init__.py").write_text(FOURTH_SUITE)
    (package / "command.py").write_text(FOURTH_COMMAND)
    (package / "views.py").write_text(FOURTH_VIEWS)
    (folder / "broken_suite.py").write_text("import a_module_that_does_not_exist_anywhere\n")


@pytest.fixture
def fourth_suite(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    _install_fake_distribution(folder, {"echoes": "echoes_suite:suite",
                                        "broken": "broken_suite:suite"})
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    yield folder
    for name in [name for name in sys.modules if name.startswith(("echoes_suite", "broken_suite"))]:
        del sys.modules[name]


def test_the_built_in_suites_are_registered_through_the_entry_point_group():
    assert {"arms", "contamination", "retrieval"} <= set(registered_suites())
    for name in ("arms", "contamination", "retrieval"):
        suite = get_suite(name)
        assert isinstance(suite, Suite)
        assert suite.name == name and suite.summary and suite.bench_version


def test_registered_bench_versions_equal_the_ones_runs_are_stamped_with():
    from benchwarden.suites.arms.tracker.suite import BENCH_VERSION as ARMS
    from benchwarden.suites.contamination.scoring import BENCH_VERSION as CONTAMINATION
    from benchwarden.suites.retrieval.scoring import BENCH_VERSION as RETRIEVAL

    assert get_suite("contamination").bench_version == CONTAMINATION
    assert get_suite("arms").bench_version == ARMS
    assert get_suite("retrieval").bench_version == RETRIEVAL


def test_an_unknown_suite_is_a_configuration_error_naming_the_registered_ones():
    with pytest.raises(UnknownSuite, match="registered suites: .*contamination"):
        get_suite("no-such-suite")


def test_a_fourth_suite_appears_in_help_and_runs(fourth_suite):
    assert "echoes" in registered_suites()
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "echoes" in result.output and "Says what it heard." in result.output
    result = CliRunner().invoke(cli, ["echoes", "--word", "ping"])
    assert result.exit_code == 0, result.output
    assert "echo: ping" in result.output


def test_report_and_show_find_a_fourth_suite_through_the_registry(fourth_suite, tmp_path):
    store_path = tmp_path / "store.sqlite"
    with open_store(store_path) as store:
        store.begin_run(stamp_run(suite="echoes", bench_version="7", config={}, run_id="echo-1"))
        store.finish_run(RunEnd("echo-1", 3.0, "completed"))
    page = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["report", "echo-1", "--store", str(store_path),
                                      "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "echoes run echo-1" in page.read_text()
    result = CliRunner().invoke(cli, ["show", "echo-1", "--store", str(store_path)])
    assert result.exit_code == 0, result.output
    assert "echoes report of echo-1" in result.output


def test_a_suite_that_cannot_be_imported_is_listed_and_says_why_in_one_line(fourth_suite, capsys):
    result = CliRunner().invoke(cli, ["--help"])
    assert "broken" in result.output and "(unavailable)" in result.output
    with pytest.raises(SuiteUnavailable, match="a_module_that_does_not_exist_anywhere"):
        get_suite("broken")
    for arguments in (["broken"], ["broken", "--anything", "x"], ["broken", "--help"]):
        code = run_command(cli, arguments, "benchwarden")
        err = capsys.readouterr().err
        assert code == 1
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("benchwarden: error: suite broken")
        assert "ModuleNotFoundError" in lines[0]
        assert "a_module_that_does_not_exist_anywhere" in lines[0]
    # the other suites still work
    assert run_command(cli, ["runs", "--help"], "benchwarden") == 0


def test_the_real_process_lists_a_registered_fourth_suite(fourth_suite):
    """The same through `python -m benchwarden`: entry points read from package metadata."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(fourth_suite), environment.get("PYTHONPATH"), str(ROOT)]))
    done = subprocess.run([sys.executable, "-m", "benchwarden", "echoes", "--word", "real"],
                          capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "echo: real" in done.stdout
    done = subprocess.run([sys.executable, "-m", "benchwarden", "broken"],
                          capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot be imported" in done.stderr


def test_help_lists_the_suites_without_importing_their_commands(tmp_path):
    """`benchwarden --help` imports each registered suite's package (its `suite` object)
    and nothing else of it: no command, driver, scoring or report module. Read from
    `sys.modules` at exit (`-X importtime` loses lines written while the CLI scrubs its
    output, so it cannot see what a command imports)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [environment.get("PYTHONPATH"),
                                                              str(ROOT)]))
    listing = tmp_path / "modules.txt"
    write_listing = f"open({str(listing)!r}, 'w').write('\\n'.join(sys.modules))"
    program = ("import atexit, sys\n"
               f"atexit.register(lambda: {write_listing})\n"
               "from benchwarden.cli.main import main\n"
               "main(['--help'])\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=environment, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    modules = set(listing.read_text().split())
    assert "benchwarden.cli.main" in modules and "benchwarden.suites.retrieval" in modules
    deeper = sorted(name for name in modules
                    if name.startswith("benchwarden.suites.") and name.count(".") > 2)
    assert deeper == []
    assert "Score retrieval strategies" in done.stdout and "King of the hill" in done.stdout
    # the probe does see a command's modules once the command is really loaded
    done = subprocess.run([sys.executable, "-c", program.replace("['--help']",
                                                                 "['ladder', '--help']")],
                          capture_output=True, text=True, env=environment, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "benchwarden.suites.retrieval.ladder_command" in listing.read_text().split()


def test_each_summary_is_the_first_words_of_its_commands_help():
    """The line `--help` shows without importing a command is the command's own."""
    for name in ("arms", "contamination", "retrieval"):
        suite = get_suite(name)
        for command_name in suite.command_names:
            command = suite.command(command_name)
            own = " ".join((command.help or "").split())
            assert own.startswith(suite.command_summary(command_name)), (name, command_name)


def test_with_no_suite_registered_a_suite_command_says_how_to_register_them(monkeypatch, capsys):
    """A source tree used without `pip install` has no entry points: the command says so
    in one line instead of click's "no such command"."""
    import benchwarden.cli.main as main_module

    monkeypatch.setattr(main_module, "suite_entry_points", lambda: {})
    assert run_command(cli, ["contamination", "--url", "http://x"], "benchwarden") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no suite is registered" in err[0] and "pip install" in err[0]


def test_resolving_a_suite_command_reads_the_installed_metadata_once(monkeypatch):
    """Finding `retrieval` walks every registered suite; each used to read the metadata
    of every installed distribution again (four reads per command, the largest part of
    the CLI's own start-up before a command runs). One read now, whichever suite adds it,
    and the same suites are found."""
    import benchwarden.cli.main as main_module
    import benchwarden.core.suite as suite_module

    reads: list[str] = []
    real = suite_module.entry_points

    def counting(**selection):
        reads.append(selection.get("group", ""))
        return real(**selection)

    monkeypatch.setattr(suite_module, "entry_points", counting)
    for name in ("contamination", "arms", "retrieval"):
        reads.clear()
        command = main_module.suite_command(name)
        assert command is not None and command.name == name
        assert reads == [ENTRY_POINT_GROUP], (name, reads)
    reads.clear()
    assert main_module.suite_command("no-such-command") is None
    assert reads == [ENTRY_POINT_GROUP]


def test_a_registry_given_to_get_suite_is_the_one_it_looks_in(fourth_suite):
    from benchwarden.core.suite import suite_entry_points

    registered = suite_entry_points()
    assert get_suite("echoes", registered=registered).name == "echoes"
    without = {name: point for name, point in registered.items() if name != "echoes"}
    with pytest.raises(UnknownSuite, match="registered suites: "):
        get_suite("echoes", registered=without)


class _PlainSuite:
    """A suite object that is not a `ModuleSuite` (a third party's own class); it counts
    how it was asked for its report."""

    name = "plain"
    bench_version = "1"
    summary = "A plain suite object."
    command_names = ("plain",)
    report_type = dict

    def __init__(self, *, takes_from_records: bool) -> None:
        self.calls: list[dict] = []
        if takes_from_records:
            self.build_report = self._build_with_keyword  # type: ignore[method-assign]

    def build_report(self, store, run_id):
        self.calls.append({})
        return {"suite": "plain", "run_id": run_id, "read": "as always"}

    def _build_with_keyword(self, store, run_id, *, from_records=False):
        self.calls.append({"from_records": from_records})
        return {"suite": "plain", "run_id": run_id,
                "read": "every record" if from_records else "as always"}

    def render_terminal(self, report, console):
        console.print(f"plain report of {report['run_id']}: {report['read']}")


@pytest.mark.parametrize("takes_from_records", [True, False])
def test_show_from_records_tells_a_suite_object_that_can_be_told_and_says_so_when_it_cannot(
        tmp_path, monkeypatch, takes_from_records):
    """`show --from-records` on a suite object of a third party's own class: one whose
    `build_report` takes `from_records` is asked for a recount; one that does not is built
    as always, and standard error says so in one line (never a digest read passed off as
    a recount). `build_report_from_records` says which happened."""
    import benchwarden.cli.store as store_cli
    from benchwarden.core.suite import build_report_from_records

    suite = _PlainSuite(takes_from_records=takes_from_records)
    monkeypatch.setattr(store_cli, "get_suite", lambda name: suite)
    store_path = tmp_path / "store.sqlite"
    with open_store(store_path) as store:
        store.begin_run(stamp_run(suite="plain", bench_version="1", config={}, run_id="p-1"))
        store.finish_run(RunEnd("p-1", 1.0, "completed"))
        report, recounted = build_report_from_records(suite, store, "p-1")
    assert recounted is takes_from_records
    assert report["read"] == ("every record" if takes_from_records else "as always")
    suite.calls.clear()
    result = CliRunner().invoke(cli, ["show", "p-1", "--from-records", "--store", str(store_path)])
    assert result.exit_code == 0, result.output
    assert suite.calls == ([{"from_records": True}] if takes_from_records else [{}])
    note = "cannot be told to read every record"
    if takes_from_records:
        assert "plain report of p-1: every record" in result.stdout
        assert note not in result.stderr
    else:
        assert "plain report of p-1: as always" in result.stdout
        assert [line for line in result.stderr.splitlines() if note in line] == [
            "note: suite plain cannot be told to read every record (its build_report takes "
            "no from_records): its report is built as it always is"]
    # without the flag, neither kind is asked for a recount nor warned about
    suite.calls.clear()
    result = CliRunner().invoke(cli, ["show", "p-1", "--store", str(store_path)])
    assert result.exit_code == 0 and note not in result.stderr
    assert suite.calls == ([{"from_records": False}] if takes_from_records else [{}])


def test_a_module_suite_reads_every_record_when_told_and_digests_otherwise(fourth_suite):
    """A `ModuleSuite` passes `digests=False` only to a `build_report` that takes it."""
    from benchwarden.core.suite import build_report_from_records

    echoes = get_suite("echoes")
    assert echoes.keeps_digests is False  # type: ignore[attr-defined]
    retrieval = get_suite("retrieval")
    assert retrieval.keeps_digests is True  # type: ignore[attr-defined]
    seen: list[dict] = []
    views = importlib.import_module("echoes_suite.views")

    def build(store, run_id, *, digests=True):
        seen.append({"digests": digests})
        return {"suite": "echoes", "run_id": run_id}

    views.build_report = build
    assert echoes.keeps_digests is True  # type: ignore[attr-defined]
    report, recounted = build_report_from_records(echoes, None, "e-1")  # type: ignore[arg-type]
    assert recounted and report["run_id"] == "e-1" and seen == [{"digests": False}]
    echoes.build_report(None, "e-1")  # type: ignore[arg-type]
    assert seen[-1] == {"digests": True}

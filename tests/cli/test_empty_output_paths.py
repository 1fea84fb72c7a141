"""`--json ""` or `--html ""` (a shell variable that was never set) is a usage error
naming the option, before anything runs or is written: it was read as "no file", so a
run went ahead and the report the user asked for was silently never written (exit 0)."""

from __future__ import annotations

import pytest

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE


@pytest.mark.parametrize("args, option", [
    (["retrieval", "run", "--strategy", "substring", "--seeds", "1", "--json", ""], "--json"),
    (["retrieval", "run", "--strategy", "substring", "--seeds", "1", "--html", ""], "--html"),
    (["show", "--latest", "--json", ""], "--json"),
    (["arms", "report", "--json", ""], "--json"),
])
def test_an_empty_output_file_is_refused_before_anything_runs(args, option, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code = run_command(cli, [*args, "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: ") and option in line and "empty" in line, line
    assert not store.exists()


@pytest.mark.parametrize("option", ["--run", "--suite"])
def test_export_refuses_an_empty_filter_rather_than_exporting_everything(option, tmp_path,
                                                                        capsys):
    out = tmp_path / "out.jsonl"
    code = run_command(cli, ["export", option, "", "--out", str(out), "--store",
                             str(tmp_path / "s.sqlite")], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and option in line and "empty" in line, line
    assert not out.exists()

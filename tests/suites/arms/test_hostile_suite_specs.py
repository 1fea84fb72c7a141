"""`arms run --suite package.module:attribute` names the user's code, which runs when it
is imported: a module that fails to import (a syntax error, an exception, `sys.exit`)
or a factory that raises is one line naming the suite and the failure, exit 2 (what the
user configured), never "unexpected ..." exit 1 nor the exit code the module asked for,
and nothing is written to the store."""

from __future__ import annotations

import itertools

import pytest

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE

_names = itertools.count()

HOSTILE_MODULES = {
    "raises at import": ("raise RuntimeError('suite boom')\n", "S", "RuntimeError: suite boom"),
    "syntax error": ("def (\n", "S", "SyntaxError"),
    "sys.exit at import": ("import sys\nsys.exit(3)\n", "S", "SystemExit: 3"),
    "factory raises": ("def make():\n    raise RuntimeError('factory boom')\n", "make",
                       "RuntimeError: factory boom"),
    "factory needs arguments": ("def make(x):\n    return x\n", "make", "TypeError"),
    "factory exits": ("import sys\ndef make():\n    sys.exit(3)\n", "make", "SystemExit: 3"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_MODULES))
def test_a_suite_module_that_fails_is_one_line_exit_2(case, tmp_path, monkeypatch, capsys):
    source, attribute, words = HOSTILE_MODULES[case]
    module = f"hostile_arms_suite_{next(_names)}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.sqlite"
    code = run_command(cli, ["arms", "run", "--suite", f"{module}:{attribute}", "--arm", "all",
                             "--task", "all", "--driver", "command", "--command", "true",
                             "--isolation", "none", "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: suite "), line
    assert "\n" not in line and "unexpected" not in line, line
    assert f"{module}:{attribute}" in line and words in line, line
    assert not store.exists()


def test_a_library_function_that_needs_arguments_is_not_a_suite(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code = run_command(cli, ["arms", "run", "--suite", "json:loads", "--arm", "all", "--task",
                             "all", "--driver", "command", "--command", "true",
                             "--isolation", "none", "--store", str(store)], "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "json.loads()" in line and "unexpected" not in line, line


@pytest.mark.parametrize("command", [["arms", "report"], ["arms", "compare", "a", "b"]])
@pytest.mark.parametrize("floor", ["0", "-1"])
def test_a_floor_below_one_sample_is_a_usage_error(command, floor, tmp_path, capsys):
    # a floor of 0 called a cell with no samples covered; it was accepted, exit 0
    code = run_command(cli, [*command, "--floor", floor, "--store", str(tmp_path / "s.sqlite")],
                       "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "--floor" in line, line

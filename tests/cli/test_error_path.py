"""One error path: click's own usage errors and benchwarden's errors end in the same
place (`cli.main.run_command`), as the same one line `benchwarden: error: ...`, with a
code from the one table (`core.errors.EXIT_CODES`). Run in memory on the real root
group."""

from __future__ import annotations

import pytest

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_CODES, EXIT_ENVIRONMENT, EXIT_USAGE

CLICK_USAGE = {
    "unknown option": (["runs", "--bogus"], "--bogus"),
    "unknown command": (["nosuch"], "nosuch"),
    "not a number": (["contamination", "--url", "http://h", "--probes", "many"], "--probes"),
    "out of range": (["contamination", "--url", "http://h", "--probes", "1"], "--probes"),
    "bad choice": (["arms", "run", "--driver", "telepathy", "--arm", "a", "--task", "t"],
                   "--driver"),
    "missing option": (["report", "--latest"], "--html"),
    "no value": (["runs", "--store"], "--store"),
    "bad levels": (["demo", "--concurrency", "1,2"], "--concurrency"),
}
OURS = {
    "configuration": (["show"], "--latest", EXIT_USAGE),
    "no store": (["runs", "--store", "{tmp}/missing.sqlite"], "no store", EXIT_USAGE),
    "store is a folder": (["runs", "--store", "{tmp}"], "", EXIT_ENVIRONMENT),
    "seeds": (["retrieval", "compare", "--champion", "substring", "--challenger", "fts5",
               "--seeds", "1", "--store", "{tmp}/s.sqlite"], "2 seeds", EXIT_USAGE),
}


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    code = run_command(cli, args, "benchwarden")
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_one_line(err: str, *words: str) -> None:
    line = err.strip()
    assert line.startswith("benchwarden: error: "), err
    assert "\n" not in line and "Usage:" not in line and "Traceback" not in line, err
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("case", sorted(CLICK_USAGE))
def test_click_usage_errors_are_one_line_exit_2_naming_the_help(case, capsys):
    args, word = CLICK_USAGE[case]
    code, out, err = _run(args, capsys)
    assert code == EXIT_USAGE, (case, err)
    _assert_one_line(err, word, "--help`")
    assert out == ""


@pytest.mark.parametrize("case", sorted(OURS))
def test_benchwarden_errors_take_the_same_path(case, capsys, tmp_path):
    args, word, expected = OURS[case]
    code, _, err = _run([arg.replace("{tmp}", str(tmp_path)) for arg in args], capsys)
    assert code == expected and code in EXIT_CODES, (case, err)
    _assert_one_line(err, word)


def test_a_group_without_its_subcommand_shows_its_help(capsys):
    code, out, err = _run(["retrieval"], capsys)
    assert code in (0, EXIT_USAGE)  # click < 8.2 shows it and exits 0, later clicks 2
    assert "compare" in err + out and "benchwarden: error" not in err + out

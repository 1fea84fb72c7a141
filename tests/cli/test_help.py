"""The whole click tree, walked: every command and every option has help text, and an
option name means the same everywhere: the same metavar (what you type) and the same
help words (--store, --json, --html, --isolation, --executor, --model, --api-key-env ...).

Where one name still means two things, `HELP_MAY_DIFFER` / `METAVAR_MAY_DIFFER` say why;
a new divergence fails until it is harmonised (define the option once in
`benchwarden.core.commandline`) or explained here."""

from __future__ import annotations

from collections import defaultdict

import click
import pytest

from benchwarden.cli.main import cli

# option -> why its help words differ between commands (each reason names the commands)
HELP_MAY_DIFFER: dict[str, str] = {
    "--traceback": "the root's prints benchwarden's traceback; retrieval/ladder's the strategy's",
    "--json": "a FILE, but a flag in `engine status`, `retrieval gen`; demo has a default",
    "--html": "`report --html` is required (the page is what it makes); elsewhere an extra output",
    "--store": "ladder's defaults to the store inside the ladder folder",
    "--url": "contamination's is required unless --resume; arms' only for the openai driver",
    "--resume": "contamination continues requests with stored options; retrieval finishes seeds",
    "--seed": "a corpus seed (retrieval gen), canaries (contamination, demo), the model (arms)",
    "--seeds": "a list like 1-6 (retrieval) but a count (ladder challenge)",
    "--suite": "arms' task suite (tracker) vs the benchwarden suite of runs/export",
    "--challenger": "retrieval compare also takes a report.json; the ladder needs code",
    "--max-tokens": "per request (contamination, demo) vs per model call of an agent (arms)",
    "--floor": "arms report: cells covered; arms compare: tasks paired",
}
METAVAR_MAY_DIFFER: dict[str, str] = {
    "--json": "a FILE, or a flag (engine status, retrieval gen)",
    "--seeds": "a list (TEXT) in retrieval, a count (INTEGER) in the ladder",
}


def walk(command: click.Command, path: tuple[str, ...] = ()):
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command, info_name=path[-1] if path else "benchwarden")
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, (
                f"`benchwarden {' '.join(path + (name,))}` is listed but not found"
            )
            yield from walk(sub, path + (name,))


def options(tree=None):
    for path, command in tree or walk(cli):
        context = click.Context(command, info_name=path[-1] if path else "benchwarden")
        for parameter in command.params:
            if isinstance(parameter, click.Option) and not parameter.hidden:
                metavar = "FLAG" if parameter.is_flag else parameter.make_metavar(context)
                yield (
                    " ".join(path),
                    parameter.opts[0],
                    metavar,
                    " ".join((parameter.help or "").split()),
                )


def divergences(rows, allowed_help, allowed_metavar) -> list[str]:
    uses = defaultdict(list)
    for command, name, metavar, help_text in rows:
        uses[name].append((command, metavar, help_text))
    problems = []
    for name, found in sorted(uses.items()):
        if len({metavar for _, metavar, _ in found}) > 1 and name not in allowed_metavar:
            problems.append(
                f"{name} has metavars {sorted({m for _, m, _ in found})} in "
                f"{', '.join(command or 'benchwarden' for command, _, _ in found)}"
            )
        if len({text for _, _, text in found}) > 1 and name not in allowed_help:
            problems.append(
                f"{name} has different help in "
                f"{', '.join(command or 'benchwarden' for command, _, _ in found)}"
            )
    return problems


TREE = list(walk(cli))


def test_the_walk_reaches_every_level():
    paths = {path for path, _ in TREE}
    assert {
        (),
        ("runs",),
        ("arms", "run"),
        ("retrieval", "compare"),
        ("ladder", "challenge"),
        ("contamination",),
        ("engine", "start"),
    } <= paths


@pytest.mark.parametrize(
    "path, command", TREE, ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_has_help(path, command):
    assert (command.help or "").strip(), f"`benchwarden {' '.join(path)}` has no help text"


def test_every_option_has_help():
    missing = [
        f"benchwarden {command} {name}" for command, name, _, text in options(TREE) if not text
    ]
    assert missing == []


def test_an_option_has_the_same_metavar_and_words_everywhere():
    assert divergences(list(options(TREE)), HELP_MAY_DIFFER, METAVAR_MAY_DIFFER) == []


def test_the_exceptions_are_still_needed():
    """An explained divergence that no longer diverges is dropped from the lists."""
    quiet_help = divergences(list(options(TREE)), {}, METAVAR_MAY_DIFFER)
    quiet_metavar = divergences(list(options(TREE)), HELP_MAY_DIFFER, {})
    stale = [
        name
        for name in HELP_MAY_DIFFER
        if not any(p.startswith(f"{name} has different help") for p in quiet_help)
    ]
    stale += [
        name
        for name in METAVAR_MAY_DIFFER
        if not any(p.startswith(f"{name} has metavars") for p in quiet_metavar)
    ]
    assert stale == []


@pytest.mark.parametrize(
    "name", ["--store", "--html", "--isolation", "--executor", "--json", "--model", "--api-key-env",
             "--any-model", "--concurrency", "--probes", "--min-completion-tokens"]
)
def test_the_shared_options_keep_one_wording_where_they_are_shared(name):
    """The options defined once in core.commandline: every command that takes them from
    there shows the same metavar and words (the exceptions above are the other spellings)."""
    from benchwarden.core import commandline

    rows = [row for row in options(TREE) if row[1] == name]
    assert len(rows) >= 2, f"{name} is used in fewer than two commands"
    shared_help = {
        "--store": commandline.STORE_HELP,
        "--html": commandline.HTML_HELP,
        "--isolation": commandline.ISOLATION_HELP,
        "--executor": commandline.EXECUTOR_HELP,
        "--json": commandline.JSON_REPORT_HELP,
        "--any-model": commandline.ANY_MODEL_HELP,
    }.get(name)
    if shared_help is not None:
        assert sum(1 for row in rows if row[3] == shared_help) >= 2


def test_the_check_sees_a_divergence():
    rows = [("a", "--store", "PATH", "Where."), ("b", "--store", "TEXT", "Where else.")]
    problems = divergences(rows, {}, {})
    assert len(problems) == 2 and all("--store" in p for p in problems)
    assert divergences(rows, {"--store": "why"}, {"--store": "why"}) == []

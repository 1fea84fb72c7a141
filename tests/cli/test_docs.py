"""Every command has help text, and every top-level command is documented in the README."""

from pathlib import Path

import click
import pytest

from benchwarden.cli.main import GENERIC_COMMANDS, cli
from benchwarden.core.suite import get_suite, registered_suites

COMMANDS = sorted({*GENERIC_COMMANDS, *(name for suite in registered_suites()
                                        for name in get_suite(suite).command_names)})

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _walk(command: click.Command, path: tuple[str, ...]):
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            yield from _walk(command.get_command(context, name), path + (name,))


def test_every_registered_command_loads():
    context = click.Context(cli)
    assert sorted(cli.list_commands(context)) == sorted(COMMANDS)


@pytest.mark.parametrize(
    "path, command", list(_walk(cli, ())), ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_has_help(path, command):
    assert (command.help or "").strip(), f"`benchwarden {' '.join(path)}` has no help text"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_top_level_command_is_in_the_readme(name):
    assert f"benchwarden {name}" in README

"""The `benchwarden` command: a lazy group, so one suite's missing optional
dependency never breaks another suite's commands.

Each entry maps a command name to the module attribute that defines it.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

import benchwarden

COMMANDS: dict[str, str] = {
    "contamination": "benchwarden.cli.contamination:contamination",
    "demo": "benchwarden.cli.demo:demo",
    "engine": "benchwarden.cli.engine:engine",
    "runs": "benchwarden.cli.store:runs",
    "show": "benchwarden.cli.store:show",
    "verify": "benchwarden.cli.verify:verify",
    "export": "benchwarden.cli.export:export",
    "arms": "benchwarden.cli.arms:arms",
    "retrieval": "benchwarden.cli.retrieval:retrieval",
    "ladder": "benchwarden.cli.ladder:ladder",
    "report": "benchwarden.cli.report:report",
    "sign": "benchwarden.cli.sign:sign",
    "store": "benchwarden.cli.store:store_group",
}


def _load(target: str) -> click.Command | None:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("benchwarden"):
            return None  # a command group not built yet
        raise
    return getattr(module, attribute)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, target in COMMANDS.items() if _load(target) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        return _load(target) if target else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(benchwarden.__version__, prog_name="benchwarden")
def cli() -> None:
    """Benchmarks of LLM systems whose numbers can be trusted."""


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="benchwarden")


if __name__ == "__main__":
    main()

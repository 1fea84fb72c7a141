"""docs/retrieval.md shows the worked example verbatim, and every retrieval and ladder
command it names exists and has help text."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from benchwarden.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "retrieval.md"
EXAMPLE = Path(__file__).with_name("strategy_files") / "entity_first.py"


def test_worked_example_in_the_docs_is_the_tested_file():
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- worked-example:start -->\n```python\n(.*?)```\n"
                      r"<!-- worked-example:end -->", text, re.DOTALL)
    assert block, "worked example markers missing from docs/retrieval.md"
    assert block.group(1) == EXAMPLE.read_text(encoding="utf-8")


def test_every_documented_command_exists_and_has_help():
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"benchwarden (retrieval|ladder) ([a-z]+)", text))
    assert {("retrieval", "gen"), ("retrieval", "run"), ("retrieval", "compare"),
            ("ladder", "challenge"), ("ladder", "show")} <= named
    runner = CliRunner()
    for group, command in named:
        result = runner.invoke(cli, [group, command, "--help"])
        assert result.exit_code == 0, (group, command, result.output)
        assert len(result.output.splitlines()) > 3

"""A strategy file run in-process (no --sandbox) that calls sys.exit() while imported,
constructed, indexing or packing ends its own run with a one-line reason, like any
other error of its: it must not end the harness with an exit code of its choosing (a
3 would read as the ladder's "held"), and the run is recorded with its failure."""

from __future__ import annotations

import pytest

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_FAIL
from benchwarden.suites.retrieval.driver import RunSettings, SeedTask, score_one_seed
from benchwarden.suites.retrieval.strategies import parse_strategy

EXITING = {
    "at import": ("import sys\nsys.exit(3)\nclass S: pass\n", "SystemExit: 3"),
    "in __init__": ("import sys\nclass S:\n    def __init__(self): sys.exit(3)\n",
                    "sys.exit(3)"),
    "in index()": ("import sys\nclass S:\n    def index(self, s): sys.exit(3)\n"
                   "    def pack(self, q, l, b): return []\n", "sys.exit(3)"),
    "in pack()": ("import sys\nclass S:\n    def index(self, s): pass\n"
                  "    def pack(self, q, l, b): sys.exit('bye')\n", "sys.exit('bye')"),
}


@pytest.mark.parametrize("case", sorted(EXITING))
def test_sys_exit_in_a_strategy_fails_its_seed_with_a_reason(case, tmp_path):
    source, words = EXITING[case]
    path = tmp_path / "exiting.py"
    path.write_text(source)
    result = score_one_seed(SeedTask(parse_strategy(f"{path}:S"), 1, RunSettings()))
    assert result.cases == []
    assert result.failure is not None and words in result.failure["reason"], result.failure


def test_the_cli_records_the_run_and_exits_1_not_the_strategy_s_code(tmp_path, capsys):
    path = tmp_path / "exiting.py"
    path.write_text(EXITING["at import"][0])
    store = tmp_path / "s.sqlite"
    code = run_command(cli, ["retrieval", "run", "--strategy", f"{path}:S", "--seeds", "1",
                             "--store", str(store)], "benchwarden")
    captured = capsys.readouterr()
    assert code == EXIT_FAIL, captured.err
    assert "SystemExit: 3" in captured.out + captured.err
    assert "recorded in" in captured.out + captured.err and store.exists()

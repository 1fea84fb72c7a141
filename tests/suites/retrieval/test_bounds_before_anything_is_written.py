"""Numbers no run can use are refused as usage errors (exit 2) before a ladder folder,
its genesis or a store is written: a seed past the store's 64-bit integers ("unexpected
OverflowError" from `retrieval compare`), a ladder asked for billions of seeds (it hung
deriving them), a NaN or infinite sandbox limit (refused only when the run's start was
stored, exit 4, after the genesis), a limit past what setrlimit takes (every child
failed at start and the ledger recorded the champion as failed)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_USAGE, ConfigurationError
from benchwarden.suites.retrieval.config import LARGEST_SEED, RunSettings, validate_seeds
from benchwarden.suites.retrieval.sandbox import SandboxLimits


def _refused(args: list[str], capsys, *words: str) -> None:
    code = run_command(cli, args, "benchwarden")
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: ") and "\n" not in line, line
    assert "unexpected" not in line, line
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("command", [
    ["retrieval", "run", "--strategy", "substring", "--seeds"],
    ["retrieval", "compare", "--champion", "substring", "--challenger", "fts5", "--seeds"],
])
def test_a_seed_past_64_bits_is_refused(command, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    _refused([*command, f"{2**63},{2**63 + 1}", "--store", str(store)], capsys,
             str(LARGEST_SEED))
    assert not store.exists()


@given(seed=st.integers(min_value=LARGEST_SEED + 1))
def test_validate_seeds_refuses_what_the_store_cannot_hold(seed):
    with pytest.raises(ConfigurationError, match="at most"):
        validate_seeds([seed])
    validate_seeds([LARGEST_SEED])


LADDER = ["ladder", "challenge", "--challenger", "substring", "--isolation", "none",
          "--base", "abc", "--date", "2026-01-01"]


@pytest.mark.parametrize("options, words", [
    (["--seeds", "99999999999"], ["--seeds", "10000"]),
    (["--wall-seconds", "nan"], ["--wall-seconds", "nan"]),
    (["--wall-seconds", "inf"], ["--wall-seconds", "inf"]),
    (["--memory-mb", str(2**60)], ["--memory-mb"]),
    (["--file-size-mb", str(2**60)], ["--file-size-mb"]),
    (["--cpu-seconds", "0"], ["--cpu-seconds"]),
])
def test_a_ladder_refuses_unusable_numbers_before_writing(options, words, tmp_path, capsys):
    folder = tmp_path / "ladder"
    _refused([*LADDER, "--ladder", str(folder), *options], capsys, *words)
    assert not folder.exists()


@given(value=st.floats(allow_nan=True, allow_infinity=True),
       field=st.sampled_from(["wall_seconds", "cpu_seconds", "memory_mb", "open_files",
                              "file_size_mb"]))
def test_any_limit_is_usable_or_refused_in_one_line(value, field):
    limits = SandboxLimits(**{field: value})
    settings = RunSettings(sandbox=True, sandbox_limits=limits)
    try:
        settings.validate()
    except ConfigurationError as error:
        assert "\n" not in str(error)
        return
    assert math.isfinite(value) and value > 0
    limits.rlimits()  # what the sandbox hands setrlimit is built without error


def _strategy_file(tmp_path, object_length: int) -> str:
    """A strategy file whose class has a name `object_length` characters long."""
    name = ("S" + "x" * object_length)[:object_length]
    path = tmp_path / "s.py"
    path.write_text(f"class {name}:\n    def index(self, sessions): pass\n"
                    "    def pack(self, question, limit, budget_chars): return []\n")
    return f"{path}:{name}"


@pytest.mark.parametrize("command", [
    ["retrieval", "run", "--seeds", "1", "--strategy"],
    ["retrieval", "compare", "--champion", "substring", "--seeds", "1-2", "--challenger"],
    [*LADDER, "--ladder", "LADDER", "--challenger"],
], ids=["run", "compare", "ladder"])
def test_a_strategy_name_past_the_page_s_limit_is_refused_before_writing(command, tmp_path,
                                                                        capsys):
    """A class name of 20,000 characters (the CLI took it, and the page repeated it at
    every row) is refused in one line, exit 2, before a store or a ladder is made."""
    store, folder = tmp_path / "s.sqlite", tmp_path / "ladder"
    args = [str(folder) if arg == "LADDER" else arg for arg in command]
    _refused([*args, _strategy_file(tmp_path, 20_000), "--store", str(store)], capsys,
             "20,002 characters", "at most 256")
    assert not store.exists() and not folder.exists()

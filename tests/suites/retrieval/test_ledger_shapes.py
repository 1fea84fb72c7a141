"""A ledger line of another shape, under a valid hash: the chain's hash is public, so a
line can be linked correctly and still not be what `benchwarden ladder` writes (a list,
a champion that is a number, a decision with no challenger). Reading it is one line
naming the ledger line and the field, exit 2, never "unexpected KeyError/TypeError";
a ledger of the right shape still reads."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.cli.main import cli, run_command
from benchwarden.core.chain import GENESIS_HASH
from benchwarden.core.errors import EXIT_OK, EXIT_USAGE
from benchwarden.core.records import canonical_json
from benchwarden.suites.retrieval.ladder import Ladder, LedgerError, entry_hash, leaderboard

GENESIS: dict[str, Any] = {
    "kind": "genesis", "at": 1.0, "bench_version": "3",
    "champion": {"builtin": True, "name": "bm25", "object": None, "path": None,
                 "source_sha256": None}}
SIDE: dict[str, Any] = {"builtin": True, "name": "substring", "object": None, "path": None,
                        "source_sha256": None, "run_id": "r", "composite": [0.4, 0.5],
                        "composite_guarded": [0.3, 0.35], "scored_seeds": [1, 2],
                        "failure": None}
DECISION: dict[str, Any] = {
    "kind": "decision", "at": 2.0, "base": "abc", "date": "2026-01-01", "seeds": [1, 2],
    "decide_on": "composite", "bench_version": "3", "outcome": "dethroned",
    "champion": {**SIDE, "name": "bm25"}, "challenger": SIDE,
    "verdict": {"mean_diff": 0.1, "se": 0.01, "band": 0.02, "dethroned": True, "n": 2},
    "reason": "r", "promoted": {"builtin": True, "name": "substring"}}


def write_ledger(folder: Path, bodies: list[Any]) -> Path:
    """A ledger whose lines are `bodies`, each object linked and hashed as `append` does."""
    folder.mkdir(parents=True, exist_ok=True)
    previous = GENESIS_HASH
    lines = []
    for sequence, body in enumerate(bodies):
        if not isinstance(body, dict):
            lines.append(canonical_json(body))
            continue
        entry = {**body, "seq": sequence, "prev_hash": previous}
        entry["hash"] = previous = entry_hash(previous, entry)
        lines.append(canonical_json(entry))
    (folder / "ledger.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    return folder


def show(folder: Path, capsys) -> tuple[int, str]:
    code = run_command(cli, ["ladder", "show", "--ladder", str(folder)], "benchwarden")
    return code, capsys.readouterr().err.strip()


def test_a_ledger_of_the_right_shape_reads(tmp_path, capsys):
    folder = write_ledger(tmp_path / "ladder", [GENESIS, DECISION])
    code, err = show(folder, capsys)
    assert code == EXIT_OK, err
    assert [reign["champion"] for reign in leaderboard(Ladder(folder).entries())] == [
        "bm25", "substring"]


def _without(entry: dict[str, Any], *path: str) -> dict[str, Any]:
    changed = copy.deepcopy(entry)
    place = changed
    for key in path[:-1]:
        place = place[key]
    del place[path[-1]]
    return changed


def _with(entry: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    changed = copy.deepcopy(entry)
    place = changed
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return changed


SHAPES = {
    "a number": ([5], "line 1", "not an object"),
    "a list": ([[1, 2]], "line 1", "not an object"),
    "null": ([None], "line 1", "not an object"),
    "an empty object": ([{}], "first line", "genesis"),
    "a decision first": ([DECISION], "first line", "genesis"),
    "champion a number": ([_with(GENESIS, 5, "champion")], "line 1", "$.champion"),
    "champion without a name": ([_without(GENESIS, "champion", "name")], "line 1", "`name`"),
    "decision without a challenger": ([GENESIS, _without(DECISION, "challenger")], "line 2",
                                      "`challenger`"),
    "challenger a number": ([GENESIS, _with(DECISION, 5, "challenger")], "line 2",
                            "$.challenger"),
    "scores not numbers": ([GENESIS, _with(DECISION, ["x"], "challenger", "composite")],
                           "line 2", "$.challenger.composite"),
    "decided on another score": ([GENESIS, _with(DECISION, "speed", "decide_on")], "line 2",
                                 "$.decide_on"),
    "dethroned, nobody promoted": ([GENESIS, _without(DECISION, "promoted")], "line 2",
                                   "no promoted champion"),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_line_of_another_shape_is_one_line_naming_it(case, tmp_path, capsys):
    bodies, line, words = SHAPES[case]
    folder = write_ledger(tmp_path / "ladder", bodies)
    code, err = show(folder, capsys)
    assert code == EXIT_USAGE, err
    assert err.startswith("benchwarden: error: ") and "\n" not in err, err
    assert "unexpected" not in err and line in err and words in err, err


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=3),
    max_leaves=8)
FIELDS = [("champion",), ("champion", "name"), ("champion", "builtin"), ("at",),
          ("challenger",), ("challenger", "composite"), ("challenger", "name"),
          ("challenger", "failure"), ("verdict",), ("verdict", "mean_diff"), ("date",),
          ("promoted",), ("promoted", "name"), ("outcome",), ("decide_on",), ("kind",)]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES, in_genesis=st.booleans())
def test_any_value_in_any_field_reads_or_is_refused_in_one_line(tmp_path_factory, field,
                                                                 value, in_genesis):
    folder = tmp_path_factory.mktemp("ladder")
    genesis, decision = GENESIS, DECISION
    if in_genesis and field[0] in GENESIS:
        genesis = _with(GENESIS, value, *field)
    elif not in_genesis and (len(field) == 1 or isinstance(DECISION.get(field[0]), dict)):
        decision = _with(DECISION, value, *field)
    write_ledger(folder, [genesis, decision])
    board = Ladder(folder)
    try:
        entries = board.entries()
    except LedgerError as error:
        assert "\n" not in str(error) and "line" in str(error)
        return
    try:  # what reads is usable by every reader, or refused as not the ladder's
        leaderboard(entries)
        board.champion()
    except LedgerError as error:
        assert "\n" not in str(error) and "genesis" in str(error)
        return
    code = run_command(cli, ["ladder", "show", "--ladder", str(folder)], "benchwarden")
    assert code == EXIT_OK

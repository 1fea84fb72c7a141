"""`retrieval compare` reads a report.json given for either side; one edited or made by
hand (a seed block without `composite`, a seed that is text, a block that is a number,
a guard that is null) is one line naming the side and the block, exit 2, never
"unexpected KeyError/AttributeError/TypeError"."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.cli.main import cli, run_command
from benchwarden.core.errors import EXIT_OK, EXIT_USAGE


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "r.json"
    code = run_command(cli, ["retrieval", "run", "--strategy", "substring", "--seeds", "1-2",
                             "--store", str(folder / "s.sqlite"), "--json", str(path)],
                       "benchwarden")
    assert code in (0, 1)
    return json.loads(path.read_text())


def _compare(tmp_path, champion: dict, challenger: dict) -> int:
    paths = []
    for name, body in (("champion", champion), ("challenger", challenger)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(body))
        paths.append(str(path))
    return run_command(cli, ["retrieval", "compare", "--champion", paths[0], "--challenger",
                             paths[1], "--store", str(tmp_path / "c.sqlite")], "benchwarden")


@pytest.mark.parametrize("change, words", [
    (lambda block: {k: v for k, v in block.items() if k != "composite"}, "`composite`"),
    (lambda block: {**block, "seed": "x"}, "$.seed"),
    (lambda block: 5, "seed block 1"),
    (lambda block: {**block, "guards": 5}, "$.guards"),
])
def test_a_seed_block_of_another_shape_is_named(report, change, words, tmp_path, capsys):
    edited = copy.deepcopy(report)
    edited["seeds"][0] = change(edited["seeds"][0])
    code = _compare(tmp_path, edited, report)
    line = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, line
    assert line.startswith("benchwarden: error: champion") and words in line, line
    assert "unexpected" not in line and "\n" not in line, line


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=2),
    max_leaves=5)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["seed", "composite", "composite_guarded", "guards",
                              "category_means", "failed_cases", "cases", "guards.efficiency",
                              "guards.canary_tripped", "guards.consistency_per_template",
                              "guards.disagreements_per_template", "category_means.temporal"]),
       value=JSON_VALUES)
def test_any_value_in_a_seed_block_compares_or_is_one_line(report, field, value,
                                                          tmp_path_factory, capsys):
    edited = copy.deepcopy(report)
    place = edited["seeds"][0]
    *parents, last = field.split(".")
    for name in parents:
        place = place[name]
    place[last] = value
    code = _compare(tmp_path_factory.mktemp("compare"), edited, report)
    err = capsys.readouterr().err
    assert "unexpected" not in err, err
    assert code == EXIT_OK or (code == EXIT_USAGE and err.startswith("benchwarden: error: ")
                               and err.count("\n") == 1), err

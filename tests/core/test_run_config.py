"""`core.run_config.config_as`: a run's configuration read in the shape a reader needs,
and every other shape refused as the store's fault, in one line naming the run."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Run
from benchwarden.core.run_config import config_as
from benchwarden.core.store import CorruptStore


class Limits(msgspec.Struct):
    budget: int = 2000
    share: float = 0.5


class Shape(msgspec.Struct):
    scope: str
    levels: list[int] = msgspec.field(default_factory=list)
    limits: Limits = msgspec.field(default_factory=Limits)
    note: str | None = None


def run_with(config: dict) -> Run:
    return stamp_run(suite="demo", bench_version="1", config=config, run_id="run-7")


names = st.text(max_size=8)
sound = st.fixed_dictionaries(
    {"scope": names},
    optional={"levels": st.lists(st.integers(-10**9, 10**9), max_size=5),
              "limits": st.fixed_dictionaries({}, optional={
                  "budget": st.integers(0, 10**6),
                  "share": st.one_of(st.integers(0, 9), st.floats(allow_nan=False))}),
              "note": st.one_of(st.none(), names),
              "unread": st.one_of(st.integers(), names, st.lists(st.integers()))})


@given(sound)
def test_a_config_of_the_shape_is_read_with_defaults_for_what_it_lacks(config):
    read = config_as("s.sqlite", run_with(config), Shape, "demo run")
    assert read.scope == config["scope"]
    assert read.levels == config.get("levels", [])
    assert read.limits.budget == config.get("limits", {}).get("budget", 2000)
    assert read.limits.share == config.get("limits", {}).get("share", 0.5)
    assert read.note == config.get("note")


@pytest.mark.parametrize(("config", "where"), [
    ({}, "missing required field `scope`"),
    ({"scope": 5}, "at `$.scope`"),
    ({"scope": "s", "levels": 3}, "at `$.levels`"),
    ({"scope": "s", "levels": [1, "2"]}, "at `$.levels[1]`"),
    ({"scope": "s", "limits": {"budget": "2000"}}, "at `$.limits.budget`"),
    ({"scope": "s", "limits": {"budget": 1.5}}, "at `$.limits.budget`"),
    ({"scope": "s", "limits": []}, "at `$.limits`"),
    ({"scope": "s", "note": ["x"]}, "at `$.note`"),
])
def test_a_config_of_another_shape_is_the_stores_fault_naming_the_run(config, where):
    with pytest.raises(CorruptStore) as refused:
        config_as("s.sqlite", run_with(config), Shape, "demo run")
    line = str(refused.value)
    assert line.startswith("store s.sqlite: run run-7: its configuration is not what "
                           "`demo run` writes (")
    assert where in line and "benchwarden verify --store" in line
    assert "\n" not in line

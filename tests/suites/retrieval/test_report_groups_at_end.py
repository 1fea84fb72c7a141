"""The run's groups kept in its end (`driver.GROUPS_FIELD`): the driver counts each arm
and seed of the run when it ends, and a report reads them instead of walking the address
index while the run's record count has not moved. Whatever the run end holds (the
driver's groups, stale ones, groups that lie or do not parse), the report's numbers are
those of a whole read; groups that lie about where the records are are walked again and
`warnings` says so."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core.records import Record, RunEnd
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval import report as retrieval_report
from benchwarden.suites.retrieval.config import RunSettings
from benchwarden.suites.retrieval.driver import (
    FAILURE_TASK,
    GROUPS_FIELD,
    groups_at_end,
    parse_strategy,
    run_strategy,
    seed_records,
)
from benchwarden.suites.retrieval.scoring import SeedGroups
from tests.suites.retrieval.test_report_digests import BUDGET, RUN, _begin, _cases, _numbers
from tests.suites.retrieval.test_report_scale import case_payload

SCORES = {1: [1.0, 0.5, 0.0], 2: [0.0, 0.0, 1.0, 1.0], 3: [1.0], 4: [0.5, 0.5]}


def _read(location: Any, run_id: str = RUN) -> tuple[Any, Any, int]:
    """The run's report, the whole read's, and how often the first walked the address
    index for the run's groups."""
    with open_store(location, create=False) as store:
        walks: list[int] = []
        walk = store.record_groups

        def counted(*args: Any, **kwargs: Any) -> Any:
            walks.append(1)
            return walk(*args, **kwargs)

        store.record_groups = counted  # type: ignore[method-assign]
        built = retrieval_report.build_report(store, run_id)
        store.record_groups = walk  # type: ignore[method-assign]
        whole = retrieval_report.build_report(store, run_id, digests=False)
    assert _numbers(built) == _numbers(whole)
    return built, whole, len(walks)


def _store(path: Any, *, end_groups: Any = "driver", failure: int | None = None,
           after_end: list[Record] = ()) -> dict[str, Any]:
    """Seeds of `SCORES` by `seed_records` (a failure record on seed `failure`), ended
    with `end_groups` in the run end (`"driver"`: what the driver keeps, None: none),
    then `after_end` appended. Returns the groups the driver would keep."""
    with open_store(path) as store:
        _begin(store, list(SCORES))
        for seed, scores in SCORES.items():
            records = seed_records(RUN, "s", seed, _cases(seed, scores), BUDGET)
            if seed == failure:
                records.append(Record(suite="retrieval", scope=RUN, arm="s", task=FAILURE_TASK,
                                      trial=seed, run_id=RUN, outcome="error", started_at=9.0,
                                      ended_at=9.0, payload={"seed": seed, "reason": "boom"}))
            store.append(records)
        kept = groups_at_end(store, RUN)
        assert kept is not None
        truth = msgspec.to_builtins(kept)
        summary: dict[str, Any] = {}
        if end_groups == "driver":
            summary[GROUPS_FIELD] = truth
        elif end_groups is not None:
            summary[GROUPS_FIELD] = end_groups
        store.finish_run(RunEnd(RUN, 10.0, "completed", summary))
        if after_end:
            store.append(list(after_end))
    return truth


def test_the_driver_keeps_the_run_s_groups_and_a_report_reads_them_without_a_walk(tmp_path):
    """A real run (substring, three seeds): its end holds the groups `record_groups`
    walks, and its report, built without walking the index, is the whole read's."""
    path = tmp_path / "run.sqlite"
    with open_store(path) as store:
        run_id = run_strategy(store, parse_strategy("substring"), [3, 1, 2],
                              RunSettings(sandbox=False))
    with open_store(path, create=False) as store:
        end = store.run_info(run_id).end
        assert end is not None
        kept = msgspec.convert(end.summary[GROUPS_FIELD], SeedGroups)
        assert kept.groups() == store.record_groups("retrieval", run_id)
        assert kept.seed == [1, 2, 3] and kept.arms == ["substring"]
    built, whole, walks = _read(path, run_id)
    assert walks == 0 and built.warnings == whole.warnings == []


def test_a_failed_seed_s_group_is_kept_and_its_failure_still_found(location):
    _store(location, failure=2)
    built, _, walks = _read(location)
    assert walks == 0 and built.failure == {"seed": 2, "reason": "boom"}


def _case(seed: int, index: int, *, run_id: str = RUN, scope: str = RUN) -> Record:
    return Record(suite="retrieval", scope=scope, arm="s", task=f"c{index:02d}", trial=seed,
                  run_id=run_id, outcome="fail", started_at=1.0, ended_at=2.0,
                  payload=case_payload(seed, index, 0.0, False))


@pytest.mark.parametrize("where", ["a case of the run after its end",
                                   "a failure record of the run after its end"])
def test_records_of_the_run_after_its_end_make_the_kept_groups_stale(location, where):
    """The run's count has moved: the kept groups are not read, the index is walked, and
    the report is the whole read's (the seed its record joined read from its records)."""
    extra = (_case(1, 9) if where.startswith("a case") else
             Record(suite="retrieval", scope=RUN, arm="s", task=FAILURE_TASK, trial=1,
                    run_id=RUN, outcome="error", started_at=9.0, ended_at=9.0,
                    payload={"seed": 1, "reason": "late"}))
    _store(location, after_end=[extra])
    _, _, walks = _read(location)
    assert walks == 1


@pytest.mark.parametrize("seed", [1, 4])
def test_another_run_s_record_in_the_scope_after_the_end_changes_nothing(location, seed):
    """A record another run wrote into this run's scope after its end, in a seed the
    listing reaches (1) or does not (4): the run's count has not moved, the kept groups
    are read, and the report is the whole read's (which reads the run's own records)."""
    _store(location, after_end=[_case(seed, 9, run_id="another-run")])
    built, _, walks = _read(location)
    assert walks == 0 and built.warnings == []


@st.composite
def lies(draw, truth: dict[str, Any]) -> Any:
    """Groups a writer other than the driver could keep in a run end: the driver's with
    columns edited (counts moved between groups, last records pointed elsewhere, groups
    dropped, added or doubled, arms renamed), or something that is not groups at all."""
    kind = draw(st.sampled_from(["edit", "junk"]))
    if kind == "junk":
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=5),
                              st.lists(st.integers(), max_size=3),
                              st.dictionaries(st.sampled_from(list(truth)),
                                              st.integers(-3, 3), max_size=3)))
    lie = {key: list(value) if isinstance(value, list) else value
           for key, value in truth.items()}
    groups = len(lie["seed"])
    for _ in range(draw(st.integers(1, 4))):
        edit = draw(st.sampled_from(["move", "point", "drop", "add", "double", "arm",
                                     "records", "seed"]))
        at = draw(st.integers(0, max(len(lie["seed"]) - 1, 0)))
        if not lie["seed"]:
            break
        if edit == "move" and groups > 1:
            other = draw(st.integers(0, len(lie["seed"]) - 1))
            amount = draw(st.integers(1, 3))
            lie["count"][at] += amount
            lie["count"][other] -= amount
        elif edit == "point":
            lie["last"][at] = draw(st.integers(0, 40))
        elif edit == "drop":
            for column in ("arm", "seed", "count", "last"):
                del lie[column][at]
        elif edit == "add":
            lie["arm"].append(0)
            lie["seed"].append(draw(st.integers(5, 9)))
            lie["count"].append(draw(st.integers(1, 3)))
            lie["last"].append(draw(st.integers(0, 40)))
        elif edit == "double":
            for column in ("arm", "seed", "count", "last"):
                lie[column].append(lie[column][at])
        elif edit == "arm":
            lie["arms"] = [draw(st.sampled_from(["s", "t"])) for _ in lie["arms"]]
        elif edit == "records":
            lie["records"] += draw(st.integers(-2, 2))
        elif edit == "seed":
            lie["seed"][at] = draw(st.integers(1, 9))
    return lie


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), failure=st.sampled_from([None, 3]), cap=st.integers(0, 8))
def test_whatever_groups_a_run_end_keeps_the_report_is_the_whole_read_s(
        tmp_path_factory, monkeypatch, data, failure, cap):
    """Groups that lie (counts moved so they still total the run's records, last records
    pointed at other records, seeds hidden or invented) or do not parse: the report's
    numbers are the whole read's. Groups that hide records are walked again, said in
    `warnings`."""
    monkeypatch.setattr(retrieval_report, "FAILED_CASES_LISTED", cap)
    folder = tmp_path_factory.mktemp("groups")
    truth = _store(folder / "truth.sqlite", failure=failure)
    lie = data.draw(lies(truth))
    path = folder / "lie.sqlite"
    _store(path, end_groups=lie, failure=failure)
    built, _, _ = _read(path)
    kept = None
    if isinstance(lie, dict):
        try:
            kept = msgspec.convert(lie, SeedGroups).groups()
        except msgspec.ValidationError:
            kept = None
    hidden = [line for line in built.warnings if "the address index was walked" in line]
    if kept is None or sum(count for count, _ in kept.values()) != truth["records"]:
        assert hidden == []  # not read at all: nothing to say
    if lie == truth:
        assert built.warnings == []


def test_a_run_end_that_hides_a_seed_is_walked_again_and_said(location):
    """Seed 4's count moved onto seed 1 and seed 4 dropped: the counts still total the
    run's records, but the reading accounts for fewer: the index is walked, seed 4 is
    reported, and `warnings` names what the kept groups accounted for."""
    with open_store(location) as store:
        _begin(store, list(SCORES))
        for seed, scores in SCORES.items():
            store.append(seed_records(RUN, "s", seed, _cases(seed, scores), BUDGET))
        kept = groups_at_end(store, RUN)
        assert kept is not None
        lie_source = msgspec.to_builtins(kept)
        hidden = lie_source["seed"].index(4)
        moved = lie_source["count"][hidden]
        lie_source["count"][lie_source["seed"].index(1)] += moved
        for column in ("arm", "seed", "count", "last"):
            del lie_source[column][hidden]
        store.finish_run(RunEnd(RUN, 10.0, "completed", {GROUPS_FIELD: lie_source}))
    built, _, walks = _read(location)
    assert walks == 1
    assert [block["seed"] for block in built.to_json()["seeds"]] == [1, 2, 3, 4]
    records = sum(len(scores) for scores in SCORES.values())
    assert built.warnings == [f"the run's end keeps seed groups that account for "
                              f"{records - moved} of its {records} records: the address "
                              "index was walked for them"]


def test_seed_groups_read_back_what_they_were_made_of():
    groups = {("b", 2): (3, 17), ("a", 2): (1, 9), ("a", 1): (4, 8)}
    kept = SeedGroups.of(groups)
    assert kept.records == 8 and kept.arms == ["a", "b"] and kept.seed == [1, 2, 2]
    assert kept.groups() == groups
    assert msgspec.convert(msgspec.to_builtins(kept), SeedGroups).groups() == groups
    for name, value in (("count", [4, 1, 0]), ("arm", [0, 2, 1]), ("seed", [1, 2]),
                        ("records", 9), ("arms", ["a", "a"]),
                        ("arm", [0, 0, 0])):  # ("a", 2) twice
        assert msgspec.structs.replace(kept, **{name: value}).groups() is None


def test_a_run_with_another_run_s_records_in_its_scope_at_its_end_keeps_no_groups(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        _begin(store, [1])
        store.append(seed_records(RUN, "s", 1, _cases(1, [1.0]), BUDGET))
        store.append([_case(1, 5, run_id="another-run")])
        assert groups_at_end(store, RUN) is None


@pytest.mark.parametrize("kept", ["the driver's", "lying"])
def test_a_failure_record_before_a_seed_s_digest_is_found_from_kept_groups(location, kept):
    """Kept groups are read without looking the failure records up over the index (the
    driver writes a seed's failure record last, where no digest is). A failure record a
    hand-written store put before seed 1's digest is still found: with the driver's
    groups the digest miscounts its group (said in `warnings`) and the seed is read from
    its records; with groups that lie to make the digest fit, the reading comes a record
    short and the index is walked again."""
    with open_store(location) as store:
        _begin(store, list(SCORES))
        for seed, scores in SCORES.items():
            records = seed_records(RUN, "s", seed, _cases(seed, scores), BUDGET)
            if seed == 1:
                records.insert(0, Record(suite="retrieval", scope=RUN, arm="s",
                                         task=FAILURE_TASK, trial=1, run_id=RUN,
                                         outcome="error", started_at=9.0, ended_at=9.0,
                                         payload={"seed": 1, "reason": "early"}))
            store.append(records)
        groups = msgspec.to_builtins(groups_at_end(store, RUN))
        if kept == "lying":
            groups["count"][groups["seed"].index(1)] -= 1
            groups["count"][groups["seed"].index(2)] += 1
        store.finish_run(RunEnd(RUN, 10.0, "completed", {GROUPS_FIELD: groups}))
    built, _, walks = _read(location)
    assert built.failure == {"seed": 1, "reason": "early"}
    if kept == "lying":
        assert walks == 1
        assert any("the address index was walked" in line for line in built.warnings)
    else:
        assert walks == 0
        assert built.warnings == ["seed 1's digest counts 3 cases but the store holds 4 "
                                  "records of it: the seed is read from its records"]

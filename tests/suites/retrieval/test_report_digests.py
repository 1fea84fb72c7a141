"""Seed digests: the driver keeps each seed's scores on its last record, and a report reads
them in place of the seed's records, recounting only the seeds whose failed cases it
lists. Whatever the store holds, the report is the one a whole read gives; a digest that
miscounts or disagrees with its records is named in `warnings`."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core.records import Record, Run, RunEnd, canonical_json
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval import report as retrieval_report
from benchwarden.suites.retrieval.config import RunSettings
from benchwarden.suites.retrieval.driver import (
    DIGEST_FIELD,
    FAILURE_TASK,
    parse_strategy,
    run_strategy,
    seed_records,
)
from benchwarden.suites.retrieval.scoring import CaseOutcome, SeedDigest, score_seed
from tests.suites.retrieval.test_report_scale import case_payload, expected_seeds

RUN = "retrieval-digests"
BUDGET = 2000


def _cases(seed: int, scores: list[float]) -> list[tuple[str, dict[str, Any], float, float]]:
    return [(f"c{index:02d}", case_payload(seed, index, score, False), 1.0, 2.0)
            for index, score in enumerate(scores)]


def _begin(store: Any, seeds: list[int]) -> None:
    store.begin_run(Run(run_id=RUN, suite="retrieval", bench_version="3",
                        config={"strategy": {"name": "s"},
                                "settings": {"limit": 10, "budget_chars": BUDGET}},
                        seeds=tuple(sorted(seeds)), target={"strategy": "s"},
                        package_version="0.1.0", git_sha=None, host={}, started_at=1.0))


def _without_digest(records: list[Record]) -> list[Record]:
    return [replace(record, payload={key: value for key, value in record.payload.items()
                                     if key != DIGEST_FIELD}) for record in records]


def _reports(store: Any) -> tuple[Any, Any]:
    return (retrieval_report.build_report(store, RUN),
            retrieval_report.build_report(store, RUN, digests=False))


def _numbers(report: Any) -> dict[str, Any]:
    plain = report.to_json()
    return {key: plain.get(key) for key in ("seeds", "summary", "failure", "verdict")}


@st.composite
def digest_runs(draw):
    seeds = draw(st.lists(st.integers(1, 60), min_size=1, max_size=7, unique=True))
    cases = draw(st.integers(1, 5))
    scores = {seed: [draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in range(cases)]
              for seed in seeds}
    order = draw(st.permutations(seeds))
    plain = {seed for seed in seeds if draw(st.integers(0, 3)) == 0}  # written before digests
    failure = draw(st.one_of(st.none(), st.integers(61, 63)))
    return order, scores, plain, failure


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=digest_runs(), cap=st.integers(0, 12))
def test_a_report_read_from_digests_is_the_whole_read_s_and_reads_only_listed_seeds(
        tmp_path_factory, monkeypatch, drawn, cap):
    """Seeds written by the driver's `seed_records` (some without a digest, as an older
    version wrote them; a failed seed; any order; any listing cap): the report read from
    digests is the report of a whole read, and reads no case record of a digested seed
    the listing does not reach."""
    order, scores, plain, failure = drawn
    monkeypatch.setattr(retrieval_report, "FAILED_CASES_LISTED", cap)
    path = tmp_path_factory.mktemp("digests") / "store.sqlite"
    written: list[Record] = []
    with open_store(path) as store:
        _begin(store, [*order, *([failure] if failure else [])])
        for seed in order:
            records = seed_records(RUN, "s", seed, _cases(seed, scores[seed]), BUDGET)
            if seed in plain:
                records = _without_digest(records)
            store.append(records)
            written += records
        if failure is not None:
            store.append([Record(suite="retrieval", scope=RUN, arm="s", task=FAILURE_TASK,
                                 trial=failure, run_id=RUN, outcome="error", started_at=9.0,
                                 ended_at=9.0, payload={"seed": failure, "reason": "boom"})])
        store.finish_run(RunEnd(RUN, 10.0, "completed", {}))

    with open_store(path, create=False) as store:
        cases_read: list[int] = []
        reading = store.iter_record_summaries

        def counting(*args: Any, **kwargs: Any) -> Any:
            for summary in reading(*args, **kwargs):
                if kwargs.get("payload_fields") == retrieval_report.CASE_FIELDS:
                    cases_read.append(summary.trial)
                yield summary

        monkeypatch.setattr(store, "iter_record_summaries", counting)
        built = retrieval_report.build_report(store, RUN)
        read_from_digests = list(cases_read)
        whole = retrieval_report.build_report(store, RUN, digests=False)

    assert _numbers(built) == _numbers(whole)
    assert built.warnings == [] and whole.warnings == []
    wanted = expected_seeds(written, cap)
    assert built.to_json()["seeds"] == msgspec.to_builtins(
        msgspec.convert(wanted, list[retrieval_report.SeedBlock]))
    if failure is not None:
        assert built.failure == {"seed": failure, "reason": "boom"}
    # a digested seed is read only when the listing reaches it and it has failed cases
    reached, before = set(), 0
    for block in wanted:
        failed = len(block["failed_cases"]) + block["failed_cases_left_out"]
        if before < cap and failed:
            reached.add(block["seed"])
        before += failed
    digested_read = {seed for seed in read_from_digests if seed not in plain | {failure}}
    assert digested_read <= reached
    assert plain - {failure} <= set(read_from_digests)


def _two_seed_store(path: Any, lie: dict[str, Any] | None = None, *,
                    extra: Record | None = None) -> None:
    """Seeds 1 and 2 by `seed_records`; `lie`: fields of seed 1's digest changed as a
    writer other than the driver could; `extra`: one more record appended after them."""
    with open_store(path) as store:
        _begin(store, [1, 2])
        for seed in (1, 2):
            records = seed_records(RUN, "s", seed, _cases(seed, [1.0, 0.5, 0.0]), BUDGET)
            if lie and seed == 1:
                digest = dict(records[-1].payload[DIGEST_FIELD], **lie)
                records[-1] = replace(records[-1],
                                      payload={**records[-1].payload, DIGEST_FIELD: digest})
            store.append(records)
        if extra is not None:
            store.append([extra])
        store.finish_run(RunEnd(RUN, 10.0, "completed", {}))


@pytest.mark.parametrize("lie", [{"composite": 0.99}, {"failed_cases": 1},
                                 {"category_means": [["single_session", 0.25]]},
                                 {"efficiency": 0.5}])
def test_a_listed_seed_whose_digest_disagrees_makes_the_report_read_from_records(location, lie):
    _two_seed_store(location, lie)
    with open_store(location, create=False) as store:
        built, whole = _reports(store)
    assert _numbers(built) == _numbers(whole)
    assert built.warnings == ["seed 1 read from its records differs from its digest: the "
                              "report is read from the records alone"]
    # read from every record, every digest is recounted, and the same one named
    assert whole.warnings == ["seed 1 read from its records differs from its digest"]


def test_a_digest_that_does_not_count_its_seed_s_records_is_not_used(location):
    _two_seed_store(location, {"cases": 4})
    with open_store(location, create=False) as store:
        built, whole = _reports(store)
    assert _numbers(built) == _numbers(whole)
    assert built.warnings == ["seed 1's digest counts 4 cases but the store holds 3 records "
                              "of it: the seed is read from its records"]


@pytest.mark.parametrize("where", ["a case after the digest", "a failure record",
                                   "a case of the run in another scope", "another arm"])
def test_records_beyond_a_digest_make_its_seed_read_from_them(location, where):
    """A record written after a seed's digest (its last record holds none then), a
    failure record in its group, a record of the run outside its scope, a second arm
    on the seed: the seed (or the run) is read from its records, the report unchanged."""
    payload = case_payload(1, 9, 0.0, False)
    extra = {
        "a case after the digest": Record(suite="retrieval", scope=RUN, arm="s", task="c09",
                                          trial=1, run_id=RUN, outcome="fail", started_at=1.0,
                                          ended_at=2.0, payload=payload),
        "a failure record": Record(suite="retrieval", scope=RUN, arm="s", task=FAILURE_TASK,
                                   trial=2, run_id=RUN, outcome="error", started_at=1.0,
                                   ended_at=2.0, payload={"seed": 2, "reason": "late"}),
        "a case of the run in another scope": Record(
            suite="retrieval", scope="elsewhere", arm="s", task="c09", trial=2, run_id=RUN,
            outcome="fail", started_at=1.0, ended_at=2.0, payload=payload),
        "another arm": Record(suite="retrieval", scope=RUN, arm="t", task="c09", trial=2,
                              run_id=RUN, outcome="fail", started_at=1.0, ended_at=2.0,
                              payload=payload),
    }[where]
    _two_seed_store(location, extra=extra)
    with open_store(location, create=False) as store:
        built, whole = _reports(store)
    assert _numbers(built) == _numbers(whole)
    assert built.warnings == []
    if where != "a failure record":
        assert sum(block.cases or 0 for block in built.seeds) == 7


outcome_lists = st.lists(st.tuples(
    st.sampled_from(["single_session", "multi_session", "abstention", "zeta", "alpha"]),
    st.floats(0, 1), st.integers(0, 5000), st.booleans(),
    st.lists(st.tuples(st.sampled_from(["zz", "reordered", "aa", "synonym"]),
                       st.floats(0, 1), st.integers(0, 5000), st.booleans()),
             max_size=3, unique_by=lambda pack: pack[0])), max_size=8)


@settings(max_examples=200, deadline=None)
@given(outcome_lists, st.integers(1, 4000))
def test_a_digest_gives_its_seed_s_block_back_through_the_store_s_json(drawn, budget):
    """Keys sorted by the store, the block comes back exactly: the same values, in the
    same order (category and template order are what the report's JSON shows)."""
    from benchwarden.suites.retrieval.scoring import PackMeasure

    outcomes = [CaseOutcome(7, f"c{index}", category, f"q{index}",
                            PackMeasure(score, used, canary),
                            tuple(PackMeasure(p_score, p_used, p_canary, template=template)
                                  for template, p_score, p_used, p_canary in paraphrases))
                for index, (category, score, used, canary, paraphrases) in enumerate(drawn)]
    block = score_seed(7, outcomes, budget)
    stored = msgspec.json.decode(canonical_json(msgspec.to_builtins(SeedDigest.of(block))),
                                 type=SeedDigest)
    wanted = {key: value for key, value in block.items() if key != "failed_cases"}
    assert json.dumps(stored.block()) == json.dumps(wanted)
    assert stored.failed_cases == len(block["failed_cases"])


def test_the_driver_keeps_each_seed_s_digest_on_its_last_record(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        run_id = run_strategy(store, parse_strategy("bm25"), [1, 2], RunSettings())
        records = store.records(run_id=run_id)
        built = retrieval_report.build_report(store, run_id)
        whole = retrieval_report.build_report(store, run_id, digests=False)
    for seed in (1, 2):
        mine = [record for record in records if record.trial == seed]
        assert [DIGEST_FIELD in record.payload for record in mine] == \
            [False] * (len(mine) - 1) + [True]
        outcomes = [CaseOutcome.from_payload(seed, record.task, record.payload)
                    for record in mine]
        assert msgspec.convert(mine[-1].payload[DIGEST_FIELD], SeedDigest) == \
            SeedDigest.of(score_seed(seed, outcomes, RunSettings().budget_chars))
    assert _numbers(built) == _numbers(whole) and built.warnings == []


def test_a_failure_record_among_a_seed_s_records_is_read_whatever_its_digest_counts(tmp_path):
    """A failure record written inside a seed's batch, under a digest that counts it as a
    case (no driver writes either; no failed case, so no recount would find it): the seed
    is read from its records and the report names the failure, as a whole read does."""
    with open_store(tmp_path / "s.sqlite") as store:
        _begin(store, [1])
        records = seed_records(RUN, "s", 1, _cases(1, [1.0, 1.0, 1.0]), BUDGET)
        failure = Record(suite="retrieval", scope=RUN, arm="s", task=FAILURE_TASK, trial=1,
                         run_id=RUN, outcome="error", started_at=1.0, ended_at=2.0,
                         payload={"seed": 1, "reason": "inside"})
        digest = dict(records[-1].payload[DIGEST_FIELD], cases=4)
        records[-1] = replace(records[-1], payload={**records[-1].payload, DIGEST_FIELD: digest})
        store.append([*records[:-1], failure, records[-1]])
        store.finish_run(RunEnd(RUN, 10.0, "completed", {}))
    with open_store(tmp_path / "s.sqlite", create=False) as store:
        built, whole = _reports(store)
    assert _numbers(built) == _numbers(whole)
    assert built.failure == {"seed": 1, "reason": "inside"} and built.seeds[0].cases == 3
    assert built.warnings == []


def test_the_terminal_and_the_page_say_what_the_reading_found(tmp_path):
    from rich.console import Console

    from benchwarden.suites.retrieval import html as retrieval_html

    _two_seed_store(tmp_path / "s.sqlite", {"composite": 0.99})
    with open_store(tmp_path / "s.sqlite", create=False) as store:
        built = retrieval_report.build_report(store, RUN)
    console = Console(record=True, width=200)
    retrieval_report.render_terminal(built, console)
    assert "seed 1 read from its records differs from its digest" in console.export_text()
    page = retrieval_html.render_html(built)
    assert "seed 1 read from its records differs from its digest" in page


def test_read_from_records_every_digest_is_recounted_even_one_no_listing_reaches(
        tmp_path, monkeypatch):
    """A digest that lies about a seed the listing does not reach (counting its records
    right) is what a report read from digests takes as it is; `show --from-records`
    (`digests=False`) reads every record, reports the records' numbers and names it."""
    from click.testing import CliRunner

    from benchwarden.cli.main import cli

    monkeypatch.setattr(retrieval_report, "FAILED_CASES_LISTED", 0)
    _two_seed_store(tmp_path / "s.sqlite", {"composite": 0.99})
    with open_store(tmp_path / "s.sqlite", create=False) as store:
        trusted, whole = _reports(store)
    assert trusted.seeds[0].composite == 0.99 and trusted.warnings == []
    assert whole.seeds[0].composite != 0.99
    assert whole.warnings == ["seed 1 read from its records differs from its digest"]
    for flag, composite in (([], 0.99), (["--from-records"], whole.seeds[0].composite)):
        done = CliRunner().invoke(cli, ["show", RUN, *flag, "--store", str(tmp_path / "s.sqlite"),
                                        "--json", str(tmp_path / "r.json")])
        assert done.exit_code == 0, done.output
        written = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        assert written["seeds"][0]["composite"] == composite
        assert ("seed 1 read from its records differs from its digest" in done.output) == \
            bool(flag)


_scores = st.none() | st.floats(0.0, 1.0)
_digests = st.builds(
    SeedDigest, seed=st.integers(1, 10_000), cases=st.integers(1, 60),
    failed_cases=st.integers(0, 60),
    category_means=st.lists(st.tuples(st.sampled_from(["fact", "temporal", "abstention"]),
                                      _scores), unique_by=lambda pair: pair[0]),
    composite=st.floats(0.0, 1.0), composite_guarded=st.floats(0.0, 1.0),
    efficiency=st.floats(0.5, 1.0), consistency=st.floats(0.0, 1.0),
    canary=st.sampled_from([0.5, 1.0]), canary_tripped=st.booleans(),
    canary_leak_rate=st.floats(0.0, 1.0),
    consistency_per_template=st.lists(st.tuples(st.sampled_from(["reordered", "synonym"]),
                                                _scores), unique_by=lambda pair: pair[0]),
    disagreements_per_template=st.lists(
        st.tuples(st.sampled_from(["reordered", "synonym"]), st.integers(0, 9),
                  st.integers(0, 9)), unique_by=lambda triple: triple[0]),
    mean_used_chars=st.none() | st.floats(0.0, 5000.0), packs=st.integers(0, 300))


@settings(max_examples=200, deadline=None)
@given(_digests, st.integers(0, 60))
def test_a_digested_seed_s_typed_block_is_its_block_read_as_one(digest, left_out):
    """`_digest_block` builds a seed's typed block straight from its digest; its twin,
    `SeedDigest.block()` read into `SeedBlock` (the path of a seed whose failed cases
    are listed), must give the same block field for field."""
    plain = {**digest.block(), "failed_cases": [], "failed_cases_left_out": left_out}
    assert retrieval_report._digest_block(digest, left_out) == msgspec.convert(
        plain, retrieval_report.SeedBlock)

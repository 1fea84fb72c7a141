"""The same strategy on the same seeds records byte-identical payloads and builds the
same report whichever executor scored it: in this process, a local process pool
(`local:2`), or a real local Ray cluster."""

from __future__ import annotations

import importlib.util

import msgspec
import pytest

from benchwarden.core.errors import ConfigurationError
from benchwarden.core.executors import LocalExecutor, make_executor
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.config import RunSettings
from benchwarden.suites.retrieval.driver import run_strategy, start_seeds
from benchwarden.suites.retrieval.report import build_report
from benchwarden.suites.retrieval.strategies import libraries_to_preload, parse_strategy
from tests.conftest import require

SEEDS = [1, 2, 3, 4, 5]


def scored(tmp_path, executor_spec: str, strategy: str = "bm25",
           start_early: bool = False) -> tuple[list[bytes], bytes]:
    """Every record's graded content as canonical JSON, and the report's seeds and
    summary, for one run through `executor_spec` (wall-clock fields left out).
    `start_early`: the seeds submitted before the store is opened, as the command does."""
    spec = parse_strategy(strategy)
    executor = None
    if executor_spec != "in-process":
        executor = make_executor(executor_spec, preload=libraries_to_preload(spec))
    try:
        started = start_seeds(spec, SEEDS, RunSettings(), executor) if start_early else None
        with open_store(tmp_path / f"{executor_spec.replace(':', '-')}.sqlite") as store:
            run_id = run_strategy(store, spec, SEEDS, RunSettings(), executor=executor,
                                  started=started)
            records = sorted(
                msgspec.json.encode({"task": record.task, "trial": record.trial,
                                     "outcome": record.outcome, "payload": record.payload},
                                    order="sorted")
                for record in store.records(run_id=run_id))
            report = build_report(store, run_id)
    finally:
        if executor is not None:
            executor.close()
    return records, msgspec.json.encode([report.seeds, report.summary], order="sorted")


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    return scored(tmp_path_factory.mktemp("in-process"), "in-process")


def test_a_local_pool_records_exactly_what_one_process_records(tmp_path, in_process):
    records, report = scored(tmp_path, "local:2")
    assert len(records) == len(in_process[0]) > len(SEEDS)
    assert records == in_process[0]
    assert report == in_process[1]


def test_seeds_started_before_the_store_opens_record_exactly_what_one_process_records(
        tmp_path, in_process):
    """What `retrieval run --executor local:2` does: the pool scores while the store is
    opened and the run's start recorded."""
    records, report = scored(tmp_path, "local:2", start_early=True)
    assert records == in_process[0]
    assert report == in_process[1]


@pytest.mark.ray
def test_a_ray_cluster_records_exactly_what_one_process_records(tmp_path, in_process):
    require(importlib.util.find_spec("ray") is not None, "Ray", "pip install -e '.[ray]'")
    records, report = scored(tmp_path, "ray")
    assert records == in_process[0]
    assert report == in_process[1]


def test_started_seeds_are_refused_for_another_run_before_anything_is_written(tmp_path):
    spec = parse_strategy("substring")
    with LocalExecutor(2) as executor, open_store(tmp_path / "store.sqlite") as store:
        started = start_seeds(spec, [1, 2], RunSettings(), executor)
        for other in ((parse_strategy("fts5"), [1, 2], RunSettings()),
                      (spec, [1, 3], RunSettings()),
                      (spec, [1, 2], RunSettings(limit=5))):
            with pytest.raises(ValueError, match="not this run's"):
                run_strategy(store, *other, executor=executor, started=started)
        assert store.runs() == []  # refused before the run's start was recorded


@pytest.mark.parametrize("settings, executor_spec, message", [
    (RunSettings(sandbox=True), "local:2", "sandboxed run"),
    (RunSettings(), None, "needs an executor"),
])
def test_start_seeds_refuses_what_it_cannot_start_early(settings, executor_spec, message):
    executor = make_executor(executor_spec) if executor_spec else None
    try:
        with pytest.raises(ValueError, match=message):
            start_seeds(parse_strategy("substring"), [1], settings, executor)
    finally:
        if executor is not None:
            executor.close()


def test_start_seeds_refuses_bad_seeds_before_submitting_any(tmp_path):
    with LocalExecutor(2) as executor:
        with pytest.raises(ConfigurationError):
            start_seeds(parse_strategy("substring"), [1, 1], RunSettings(), executor)
        with pytest.raises(ConfigurationError):
            start_seeds(parse_strategy("substring"), [1], RunSettings(limit=-1), executor)

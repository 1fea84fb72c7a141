"""The same strategy on the same seeds records byte-identical payloads and builds the
same report whichever executor scored it: in this process, a local process pool
(`local:2`), or a real local Ray cluster."""

from __future__ import annotations

import importlib.util

import msgspec
import pytest

from benchwarden.core.executors import make_executor
from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.config import RunSettings
from benchwarden.suites.retrieval.driver import run_strategy
from benchwarden.suites.retrieval.report import build_report
from benchwarden.suites.retrieval.strategies import libraries_to_preload, parse_strategy
from tests.conftest import require

SEEDS = [1, 2, 3, 4, 5]


def scored(tmp_path, executor_spec: str, strategy: str = "bm25") -> tuple[list[bytes], bytes]:
    """Every record's graded content as canonical JSON, and the report's seeds and
    summary, for one run through `executor_spec` (wall-clock fields left out)."""
    spec = parse_strategy(strategy)
    executor = None
    if executor_spec != "in-process":
        executor = make_executor(executor_spec, preload=libraries_to_preload(spec))
    try:
        with open_store(tmp_path / f"{executor_spec.replace(':', '-')}.sqlite") as store:
            run_id = run_strategy(store, spec, SEEDS, RunSettings(), executor=executor)
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


@pytest.mark.ray
def test_a_ray_cluster_records_exactly_what_one_process_records(tmp_path, in_process):
    require(importlib.util.find_spec("ray") is not None, "Ray", "pip install -e '.[ray]'")
    records, report = scored(tmp_path, "ray")
    assert records == in_process[0]
    assert report == in_process[1]

"""The typed contamination report: built once, equal to a rebuild, its rung facts derived
the same way for every bench version."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination import report as report_module
from benchwarden.suites.contamination.driver import ContaminationConfig, run_contamination
from benchwarden.suites.contamination.fidelity import RungFidelity
from benchwarden.suites.contamination.report import ContaminationReport, build_report
from benchwarden.suites.contamination.terminal import rung_line
from tests.fakes import FakeOpenAIServer


def test_a_run_builds_its_report_once_and_it_equals_a_rebuild(tmp_path, monkeypatch):
    built = []
    original = report_module.build_report

    def counting(store, run_id, **options):
        built.append(run_id)
        return original(store, run_id, **options)

    monkeypatch.setattr(report_module, "build_report", counting)
    with FakeOpenAIServer("leak") as server, SQLiteStore(tmp_path / "s.sqlite") as store:
        config = ContaminationConfig(url=server.url, probes=2, concurrency=(2, 3),
                                     max_tokens=64, seed=5)
        returned = run_contamination(config, store, progress=False)
        rebuilt = build_report(store, returned.run.id)
    assert len(built) == 1
    assert isinstance(returned, ContaminationReport)
    assert returned == rebuilt  # the end given afterwards is the end the store holds
    assert returned.run.status == "completed" and returned.run.duration_s is not None
    assert [rung.concurrency for rung in returned.rungs] == [2, 3]
    assert {cell.level for cell in returned.cells if cell.leg == "c3"} == {3}
    assert returned.verdict.kind == "fail"


counts = st.integers(min_value=0, max_value=600)


@given(level=st.integers(min_value=2, max_value=512), sent=counts, peak=counts,
       skew=st.none() | st.floats(min_value=0, max_value=1e5, allow_nan=False))
def test_a_bench_version_1_rung_reads_as_the_fidelity_would_describe_it(level, sent, peak, skew):
    peak = min(peak, sent)
    old = {"label": f"c{level}", "concurrency": level, "repeat": 1, "slots": sent,
           "peak_in_flight": peak, "launch_skew_ms": skew, "observed_parallelism": peak}
    (rung,) = ContaminationReport.from_json({"rungs": [old]}).rungs
    fit = RungFidelity(f"c{level}", level, 1, sent, peak, skew)
    assert (rung.requests_sent, rung.description, rung.state, rung.reading) == \
        (sent, fit.describe(), fit.state, fit.reading())
    assert rung.requests_failed is None  # version 1 did not count failures
    expected_style = {"unmeasured": "red", "below_label": "yellow"}.get(fit.state, "")
    assert rung_line(rung).style == expected_style


SOUND_CONFIG = {"scope": "odd-run", "probe_set": [{"index": 0, "canary": "c-1", "topic": "t"}],
                "concurrency": [2, 4], "repeat": 1, "min_completion_tokens": 8,
                "request_bodies": [{"model": "m"}], "near_tie_nats": 0.5, "bisect": None}


@pytest.mark.parametrize(("change", "where"), [
    ({"concurrency": ["2"]}, "at `$.concurrency[0]`"),
    ({"repeat": "1"}, "at `$.repeat`"),
    ({"probe_set": [{"canary": 5}]}, "at `$.probe_set[0].canary`"),
    ({"probe_set": "c-1"}, "at `$.probe_set`"),
    ({"request_bodies": [3]}, "at `$.request_bodies[0]`"),
    ({"bisect": [2]}, "at `$.bisect`"),
    ({"near_tie_nats": "0.5"}, "at `$.near_tie_nats`"),
    ({"min_completion_tokens": None}, "at `$.min_completion_tokens`"),
])
def test_a_run_config_of_another_shape_is_named_not_a_crash(change, where):
    """The report reads its run's configuration back (levels, repeats, canaries,
    bodies): one of another shape (edited, or written by another tool) is the store's
    fault, said in one line naming the run."""
    from benchwarden.core.provenance import stamp_run
    from benchwarden.core.store import CorruptStore

    with SQLiteStore(":memory:") as store:
        store.begin_run(stamp_run(suite="contamination", bench_version="1",
                                  config={**SOUND_CONFIG, **change}, run_id="odd-run"))
        with pytest.raises(CorruptStore) as refused:
            build_report(store, "odd-run")
    assert "run odd-run: its configuration is not what `contamination` writes" \
        in str(refused.value)
    assert where in str(refused.value)


def test_the_sound_config_of_that_test_is_read():
    """The configuration the test above spoils is itself read without complaint (so each
    refusal there is the change's)."""
    from benchwarden.core.provenance import stamp_run

    with SQLiteStore(":memory:") as store:
        store.begin_run(stamp_run(suite="contamination", bench_version="1",
                                  config=dict(SOUND_CONFIG), run_id="odd-run"))
        report = build_report(store, "odd-run")
    assert report.run is not None and report.run.id == "odd-run"

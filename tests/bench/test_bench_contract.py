"""The bench scripts' shared contract: every script takes `--json FILE`, and figures are
written in the one shape `bench/run.py` merges (value, baseline, ratio, unit)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_figures_are_written_in_the_shape_run_py_merges(tmp_path, capsys):
    figures = load("_figures")
    path = tmp_path / "f.json"
    figures.emit("demo", [figures.Figure("speed", 30.0, 10.0, "records/s"),
                          figures.Figure("nothing", 5.0, 0.0, "s"),
                          figures.Figure("missing", None, 2.0, "s")], str(path))
    written = json.loads(path.read_text())
    assert written == {
        "demo.speed": {"value": 30.0, "baseline": 10.0, "ratio": 3.0, "unit": "records/s"},
        "demo.nothing": {"value": 5.0, "baseline": 0.0, "ratio": None, "unit": "s"},
        "demo.missing": {"value": None, "baseline": 2.0, "ratio": None, "unit": "s"},
    }
    assert "demo.speed" in capsys.readouterr().out
    with pytest.raises(ValueError):
        figures.emit("demo", [figures.Figure("x", 1, 1, "s"), figures.Figure("x", 2, 1, "s")])


def test_run_py_finds_the_bench_scripts_and_not_the_helpers():
    names = {path.name for path in load("run").bench_scripts()}
    assert {"store_append.py", "scale_growth.py", "retrieval_executor.py"} <= names
    assert not names & {"run.py", "scale_store.py", "_figures.py"}


@pytest.mark.parametrize("script", [path.name for path in sorted(BENCH.glob("*.py"))
                                    if path.name not in ("run.py", "scale_store.py")
                                    and not path.name.startswith("_")])
def test_every_bench_script_takes_json(script):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(BENCH.parent), environment.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True,
                          text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--json" in done.stdout


def test_synthetic_records_have_the_issue_s_shape_and_unique_addresses():
    store = load("scale_store")
    import random

    records = [store.synthetic_record(index, "run", random.Random(1)) for index in range(1200)]
    assert len({(r.arm, r.task, r.trial) for r in records}) == 1200
    assert {r.arm for r in records} == set(store.ARMS) and len({r.task for r in records}) == 200
    assert all(len(r.payload["transcript"]) == 5 and r.payload["final_report"] for r in records)
    assert store.parse_size("100k") == 100_000 and store.size_label(1_000_000) == "1M"
    with pytest.raises(ValueError):
        store.parse_size("lots")


def test_a_store_of_short_runs_holds_every_record_in_runs_of_that_length(tmp_path):
    """`many_runs.py`'s stores: the same records as the usual store, cut into runs of
    `run_size` (the last one shorter), every run ended, cached under their own name."""
    scale_store = load("scale_store")
    from benchwarden.core.store import open_store

    path = tmp_path / "short.sqlite"
    scale_store.build(path, 47, quiet=True, run_size=10)
    with open_store(path, create=False) as store:
        runs = store.runs("arms")
        assert [info.record_count for info in runs] == [10, 10, 10, 10, 7]
        assert all(info.end is not None and info.end.status == "completed" for info in runs)
        assert len({record.run_id for record in store.iter_records()}) == 5
    assert scale_store.cached_name(1_000_000, run_size=20).startswith("arms-1M-runs-of-20.v")
    assert "runs-of" not in scale_store.cached_name(1_000_000)


def test_a_store_of_many_arms_holds_every_arm_and_the_usual_store_is_unchanged(tmp_path):
    """`many_arms.py`'s stores: N arms (the usual three first, so `arms compare cli http`
    still names two), every (arm, task, trial) once, cached under their own name; with
    three arms the records are the usual store's, draw for draw."""
    scale_store = load("scale_store")
    import random

    from benchwarden.core.store import open_store

    arms = scale_store.arm_names(7)
    assert arms[:3] == scale_store.ARMS and len(set(arms)) == 7
    path = tmp_path / "many.sqlite"
    scale_store.build(path, 7 * 200 * 2 + 5, quiet=True, arm_count=7)
    with open_store(path, create=False) as store:
        records = list(store.iter_records())
        config = store.runs("arms")[0].run.config
    assert config["arms"] == list(arms) and config["trials"] == 3
    assert {r.arm for r in records} == set(arms)
    assert len({(r.arm, r.task, r.trial) for r in records}) == len(records) == 2805
    usual = [scale_store.synthetic_record(index, "run", random.Random(1)) for index in range(60)]
    three = [scale_store.synthetic_record(index, "run", random.Random(1), arms=scale_store.ARMS)
             for index in range(60)]
    assert usual == three
    assert scale_store.cached_name(100_000, arm_count=50).startswith("arms-100k-50-arms.v")
    assert "arms.v" not in scale_store.cached_name(100_000).removeprefix("arms-")

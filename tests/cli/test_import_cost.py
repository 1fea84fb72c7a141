"""Commands that compute no statistics never import scipy (it costs about a second):
checked with `python -X importtime`, which names every module a process imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, RunEnd, TokenComponents
from benchwarden.core.store import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def imported_modules(*arguments: str, cwd, program: tuple[str, ...] = ("-m", "benchwarden"),
                     exit_code: int = 0) -> set[str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [environment.get("PYTHONPATH"), ROOT]))
    done = subprocess.run([sys.executable, "-X", "importtime", *program, *arguments],
                          capture_output=True, text=True, env=environment, timeout=120, cwd=cwd)
    assert done.returncode == exit_code, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "python -X importtime printed nothing: the check would be empty"
    return {line.rsplit("|", 1)[1].strip() for line in lines}


def scipy_modules(modules: set[str]) -> set[str]:
    return {name for name in modules if name == "scipy" or name.startswith("scipy.")}


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store.sqlite"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([Record(suite="demo", scope="run-1", arm="a", task=str(task), trial=1,
                             run_id="run-1", outcome="ok", started_at=1.0, ended_at=2.0,
                             tokens=TokenComponents(1, 2, 3, 4), payload={"task": task})
                      for task in range(3)])
        store.finish_run(RunEnd("run-1", 3.0, "completed"))
    return path


@pytest.mark.parametrize("arguments", [
    ["--help"], ["runs", "--help"], ["show", "--help"], ["verify", "--help"],
    ["export", "--help"], ["arms", "--help"], ["retrieval", "--help"],
    ["runs", "--store", "{store}"], ["verify", "--store", "{store}"],
    ["export", "--store", "{store}", "--out", "{folder}/out.jsonl"],
    ["export", "--store", "{store}", "--out", "{folder}/out.csv"],
    ["export", "--store", "{store}", "--out", "{folder}/out.parquet"],
], ids=lambda arguments: " ".join(arguments).replace("{store}", "S").replace("{folder}/", ""))
def test_a_command_without_statistics_never_imports_scipy(tmp_path, store_path, arguments):
    filled = [part.format(store=store_path, folder=tmp_path) for part in arguments]
    modules = imported_modules(*filled, cwd=tmp_path)
    assert "benchwarden.cli.main" in modules  # the command really ran in that process
    assert not scipy_modules(modules)


def test_contamination_start_up_imports_neither_scipy_nor_numpy(tmp_path):
    """Up to its first request (here refused: nothing listens on port 9, exit 2)."""
    modules = imported_modules("contamination", "--url", "http://127.0.0.1:9/v1",
                               "--store", str(tmp_path / "store.sqlite"), cwd=tmp_path,
                               exit_code=2)
    assert "benchwarden.suites.contamination.driver" in modules
    assert not scipy_modules(modules) and "numpy" not in modules


def test_a_retrieval_run_reports_its_intervals_without_scipy(tmp_path):
    """A strategy that needs no scipy (fts5) scored, recorded and reported with its t
    intervals: the quantile comes from the table, so scipy is never imported."""
    modules = imported_modules("retrieval", "run", "--strategy", "fts5", "--seeds", "1-3",
                               "--store", str(tmp_path / "store.sqlite"), cwd=tmp_path)
    assert "benchwarden.suites.retrieval.report" in modules
    assert not scipy_modules(modules)


def test_the_check_sees_scipy_when_statistics_are_computed(tmp_path):
    """The same probe does see scipy once an interval is computed, so the check above
    can fail."""
    modules = imported_modules(cwd=tmp_path, program=(
        "-c", "from benchwarden.core.stats import wilson_interval; wilson_interval(3, 10)"))
    assert scipy_modules(modules)


def test_a_bm25_retrieval_run_imports_no_scipy(tmp_path):
    """bm25s imports scipy.sparse only for its scipy index builder; the strategy uses
    the NumPy one and imports bm25s with scipy.sparse hidden, so a bm25 run (one
    process, and a `local:2` pool whose parent preloads bm25s) never imports scipy."""
    for executor in ("local", "local:2"):
        modules = imported_modules("retrieval", "run", "--strategy", "bm25", "--seeds", "1-2",
                                   "--executor", executor,
                                   "--store", str(tmp_path / f"{executor}.sqlite"), cwd=tmp_path)
        assert "bm25s" in modules and "benchwarden.suites.retrieval.report" in modules
        # importtime also names the refused `import scipy.sparse` (a few microseconds);
        # any real scipy module needs the `scipy` package imported first
        assert "scipy" not in modules, executor
        assert "numpy.f2py" not in modules  # what scipy's array-API layer used to pull in


MODULES_PROBE = '''
import json, os, sys

class Probe:
    """Writes the modules its worker process holds (inherited at the fork, or imported
    since by the strategy's own code, which imports none of the ones checked)."""

    def index(self, sessions):
        path = os.path.join(os.environ["PROBE_FOLDER"], f"{os.getpid()}.json")
        with open(path, "w") as out:
            json.dump(sorted(name for name, module in sys.modules.items() if module), out)

    def pack(self, question, limit, budget_chars):
        return []
'''


def test_a_local_pool_forks_before_the_parent_imports_its_report(tmp_path, monkeypatch):
    """`retrieval run --executor local:2` forks its workers, and hands them the seeds,
    before the parent imports what only it needs (the report and its views, rich's
    progress bar): that import runs while the workers score. The probe strategy's
    workers see the modules the parent held when it forked."""
    (tmp_path / "probe.py").write_text(MODULES_PROBE)
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.setenv("PROBE_FOLDER", str(folder))
    parent = imported_modules("retrieval", "run", "--strategy", "probe.py:Probe", "--seeds",
                              "1-4", "--executor", "local:2",
                              "--store", str(tmp_path / "store.sqlite"), cwd=tmp_path)
    after_the_fork = {"benchwarden.suites.retrieval.report", "benchwarden.core.progress",
                      "rich.progress"}
    assert after_the_fork <= parent  # the parent does import them, for the report
    seen = [set(json.loads(path.read_text())) for path in folder.glob("*.json")]
    assert seen, "no worker ran the probe"
    for worker in seen:
        assert "benchwarden.suites.retrieval.driver" in worker  # inherited, as it should
        assert not after_the_fork & worker

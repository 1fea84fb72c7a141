"""Executors: one (index, result) per item, failures returned as values, the same
results whichever executor runs them (in-process loop, process pool, real Ray cluster)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core.executors import (
    LocalExecutor,
    RayExecutor,
    TaskFailure,
    make_executor,
    run_all,
)
from tests.conftest import require


# Module-level so the process pool can pickle them by reference.
def square_or_refuse(value: int) -> int:
    if value < 0:
        raise ValueError(f"negative input {value}\nsecond line")
    return value * value


def slow_inverse_delay(value: int) -> tuple[int, int]:
    """Later items finish first, so completion order differs from input order."""
    time.sleep(0.02 * (6 - value % 6))
    return value, os.getpid()


def die_on_three(value: int) -> int:
    if value == 3:
        os._exit(17)  # the worker process vanishes without raising
    return value


def leave_a_mark(path: str) -> str:
    Path(path).write_text(str(os.getpid()))
    return path


def expected(values: list[int]) -> list[object]:
    return [square_or_refuse(v) if v >= 0 else "failure" for v in values]


def normalised(results: list[object]) -> list[object]:
    return ["failure" if isinstance(r, TaskFailure) else r for r in results]


# -- in process ------------------------------------------------------------------------

def test_in_process_loop_yields_every_index_once_in_order():
    pairs = list(LocalExecutor(1).map_unordered(square_or_refuse, [3, 1, 2]))
    assert pairs == [(0, 9), (1, 1), (2, 4)]


def test_a_failing_task_comes_back_as_a_one_line_failure():
    results = run_all(LocalExecutor(1), square_or_refuse, [2, -5, 4])
    assert results[0] == 4 and results[2] == 16
    failure = results[1]
    assert isinstance(failure, TaskFailure) and failure.index == 1
    assert failure.message.startswith("ValueError: negative input -5 second line")
    assert "\n" not in failure.message


def test_failure_messages_are_capped():
    def enormous(_: int) -> int:
        raise RuntimeError("x" * 10_000)

    [(_, failure)] = list(LocalExecutor(1).map_unordered(enormous, [0]))
    assert isinstance(failure, TaskFailure) and len(failure.message) <= 300


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-3, 50), max_size=30))
def test_run_all_restores_input_order(values):
    assert normalised(run_all(LocalExecutor(1), square_or_refuse, values)) == expected(values)


# -- process pool ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool():
    with LocalExecutor(2, max_in_flight=3) as executor:
        yield executor


def test_process_pool_maps_indices_whatever_the_completion_order(pool):
    values = list(range(12))
    pairs = list(pool.map_unordered(slow_inverse_delay, values))
    assert sorted(index for index, _ in pairs) == values
    assert all(result[0] == values[index] for index, result in pairs)
    assert all(result[1] != os.getpid() for _, result in pairs)  # ran in worker processes


def test_process_pool_returns_failures_and_equals_the_loop(pool):
    values = [4, -1, 7, 0, -9, 3]
    assert normalised(run_all(pool, square_or_refuse, values)) == expected(values)
    assert normalised(run_all(pool, square_or_refuse, values)) == \
        normalised(run_all(LocalExecutor(1), square_or_refuse, values))


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.integers(-3, 50), max_size=12))
def test_process_pool_agrees_with_the_loop_on_any_input(pool, values):
    assert normalised(run_all(pool, square_or_refuse, values)) == expected(values)


def wait_for(condition, seconds: float = 60.0) -> bool:
    """Polls `condition` (no wall time asserted: only that it happens at all)."""
    give_up = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.01)
    return True


def test_a_pool_starts_the_first_tasks_when_asked_not_when_a_result_is_read(tmp_path):
    """The caller can open a store or import its report while the workers score."""
    marks = [str(tmp_path / f"mark-{number}") for number in range(3)]
    with LocalExecutor(2, max_in_flight=2) as executor:
        results = executor.map_unordered(leave_a_mark, marks)
        # nothing read yet: the first two (the limit in flight) run all the same
        assert wait_for(lambda: all(Path(mark).exists() for mark in marks[:2]))
        assert not Path(marks[2]).exists()  # the rest waits for room, as before
        assert sorted(result for _, result in results) == marks
        assert all(Path(mark).read_text() != str(os.getpid()) for mark in marks)


def test_the_in_process_loop_still_runs_only_as_it_is_read(tmp_path):
    marks = [str(tmp_path / f"mark-{number}") for number in range(2)]
    results = LocalExecutor(1).map_unordered(leave_a_mark, marks)
    assert not any(Path(mark).exists() for mark in marks)
    assert next(results) == (0, marks[0]) and not Path(marks[1]).exists()


def test_closing_without_waiting_lets_the_workers_end_on_their_own(tmp_path):
    executor = LocalExecutor(2)
    assert [result for _, result in sorted(executor.map_unordered(square_or_refuse,
                                                                  [1, 2, 3]))] == [1, 4, 9]
    assert executor._pool is not None
    workers = list(executor._pool._processes.values())  # type: ignore[union-attr]
    executor.close(wait=False)  # returns without joining them
    assert executor._pool is None
    assert wait_for(lambda: not any(worker.is_alive() for worker in workers))
    executor.close()  # then closing (or abandoning) again is a no-op
    executor.abandon()


def test_a_dead_worker_fails_its_tasks_without_ending_the_map():
    with LocalExecutor(2) as executor:
        results = run_all(executor, die_on_three, list(range(6)))
    assert isinstance(results[3], TaskFailure)
    assert len(results) == 6 and all(r == i or isinstance(r, TaskFailure)
                                     for i, r in enumerate(results))


# -- how the pool starts ------------------------------------------------------------------

def _run_python(tmp_path, source: str) -> str:
    """Run `source` in a fresh interpreter (this one may have threads of its own) with
    the test's import path; return its stdout."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(source))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path), *filter(None, [environment.get("PYTHONPATH")]),
         os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=environment, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


WARM_MODULE = """
import os
with open(os.path.join(os.path.dirname(__file__), "imports.log"), "a") as log:
    log.write(f"{os.getpid()}\\n")

def work(value):
    return value * 2, os.getpid()
"""


def test_a_single_threaded_process_forks_warm_workers_that_import_nothing_again(tmp_path):
    """The pool forks its workers when it is made: they run the tasks (other pids) and
    use the modules the parent had imported without importing them again."""
    (tmp_path / "warm_module.py").write_text(WARM_MODULE)
    output = _run_python(tmp_path, """
        import os
        import warm_module
        from benchwarden.core.executors import LocalExecutor, run_all

        with LocalExecutor(2) as executor:
            print(executor.start_method)
            results = run_all(executor, warm_module.work, list(range(8)))
        print(sorted(value for value, _ in results))
        print(len({pid for _, pid in results} - {os.getpid()}) >= 1,
              all(pid != os.getpid() for _, pid in results))
    """)
    method, values, workers = output.split("\n")[:3]
    assert method == "fork"
    assert values == str([2 * value for value in range(8)])
    assert workers == "True True"
    # imported once, by the parent: no worker paid the import again
    assert len((tmp_path / "imports.log").read_text().split()) == 1


def test_forked_workers_keep_the_inherited_objects_out_of_collection_and_the_parent_not(
        tmp_path):
    """Frozen around the fork: a worker's collections skip what it inherited; the parent
    is unfrozen again and collects as before."""
    (tmp_path / "warm_module.py").write_text(WARM_MODULE + """
def frozen_count(_):
    import gc
    return gc.get_freeze_count()
""")
    output = _run_python(tmp_path, """
        import gc
        import warm_module
        from benchwarden.core.executors import LocalExecutor, run_all

        print(gc.get_freeze_count())
        with LocalExecutor(2) as executor:
            print(executor.start_method, gc.get_freeze_count())
            counts = run_all(executor, warm_module.frozen_count, [1, 2, 3, 4])
        print(min(counts) > 1000)
    """)
    assert output.split("\n")[:3] == ["0", "fork 0", "True"]


def test_preloaded_modules_are_imported_once_in_the_parent_before_the_fork(tmp_path):
    (tmp_path / "warm_module.py").write_text(WARM_MODULE)
    output = _run_python(tmp_path, """
        import sys
        from benchwarden.core.executors import make_executor, run_all

        def uses_the_module(value):
            import warm_module  # what a strategy's index() does on its first seed
            return warm_module.work(value)

        if __name__ == "__main__":
            executor = make_executor("local:2", preload=["warm_module"])
            print("warm_module" in sys.modules)
            print(sorted(value for value, _ in run_all(executor, uses_the_module, [1, 2, 3])))
            executor.close()
    """)
    assert output.split("\n")[:2] == ["True", "[2, 4, 6]"]
    assert len((tmp_path / "imports.log").read_text().split()) == 1  # the parent's only


def test_a_preload_that_cannot_be_imported_is_a_one_line_usage_error():
    with pytest.raises(ValueError) as caught:
        make_executor("local:2", preload=["no_such_module_anywhere"])
    assert "no_such_module_anywhere" in str(caught.value) and "\n" not in str(caught.value)


def test_a_process_with_other_threads_never_forks_and_still_gets_every_result(tmp_path):
    (tmp_path / "warm_module.py").write_text(WARM_MODULE)
    output = _run_python(tmp_path, """
        import threading
        import warm_module
        from benchwarden.core.executors import LocalExecutor, run_all

        if __name__ == "__main__":  # a forkserver worker imports this script again
            gate = threading.Event()
            helper = threading.Thread(target=gate.wait)
            helper.start()
            try:
                with LocalExecutor(2) as executor:
                    print(executor.start_method)
                    results = run_all(executor, warm_module.work, list(range(6)))
                print(sorted(value for value, _ in results))
            finally:
                gate.set()
                helper.join()
    """)
    method, values = output.split("\n")[:2]
    assert method in ("forkserver", "spawn")
    assert values == str([2 * value for value in range(6)])


def test_the_start_method_follows_the_thread_count():
    import threading

    from benchwarden.core.executors import pool_start_method

    gate = threading.Event()
    helper = threading.Thread(target=gate.wait)
    helper.start()
    try:
        assert pool_start_method() != "fork"
    finally:
        gate.set()
        helper.join()


def test_a_pool_the_os_refuses_is_one_line_environment_failure(monkeypatch):
    import errno

    import benchwarden.core.executors as executors
    from benchwarden.core.errors import EXIT_ENVIRONMENT, EnvironmentFailure

    def refuse(*args, **kwargs):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(executors.futures, "ProcessPoolExecutor", refuse)
    with pytest.raises(EnvironmentFailure) as caught:
        LocalExecutor(2)
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert str(caught.value) == ("cannot start 2 worker processes "
                                 f"({executors.pool_start_method()}): "
                                 "Resource temporarily unavailable")


# -- choosing an executor by name --------------------------------------------------------

@pytest.mark.parametrize("spec, workers", [("local", 1), ("local:3", 3), ("", 1),
                                           ("local:auto", os.cpu_count() or 1)])
def test_make_executor_reads_local_specs(spec, workers):
    executor = make_executor(spec)
    assert isinstance(executor, LocalExecutor) and executor.workers == workers
    executor.close()


@pytest.mark.parametrize("spec", ["local:0", "local:-2", "local:two", "threads", "ray:",
                                  # a superscript two is a digit to str.isdigit, not to int()
                                  "local:\u00b2",
                                  # thousands of processes: refused, not forked for minutes
                                  "local:99999"])
def test_make_executor_refuses_unknown_specs_in_one_line(spec):
    with pytest.raises(ValueError) as caught:
        make_executor(spec)
    assert "\n" not in str(caught.value) and spec in str(caught.value)


# -- a real local Ray cluster ------------------------------------------------------------

@pytest.fixture(scope="module")
def on_ray():
    """One local two-CPU cluster for the module, started (and stopped) by the executor."""
    # not imported before the executor: it sets Ray's loopback switch first
    require(importlib.util.find_spec("ray") is not None, "Ray", "pip install -e '.[ray]'")
    executor = RayExecutor(num_cpus=2)
    import ray

    yield executor
    executor.close()
    assert not ray.is_initialized()


@pytest.mark.ray
def test_a_cluster_started_here_stays_on_loopback(on_ray):
    import ray

    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}


@pytest.mark.ray
def test_ray_maps_indices_whatever_the_completion_order(on_ray):
    values = list(range(12))
    pairs = list(on_ray.map_unordered(slow_inverse_delay, values))
    assert sorted(index for index, _ in pairs) == values
    assert all(result[0] == values[index] for index, result in pairs)
    assert all(result[1] != os.getpid() for _, result in pairs)  # ran in Ray workers


@pytest.mark.ray
def test_ray_results_equal_the_local_executors(on_ray):
    values = [5, -2, 0, 11, -7, 3, 8, 1]
    on_cluster = normalised(run_all(on_ray, square_or_refuse, values))
    assert on_cluster == expected(values)
    assert on_cluster == normalised(run_all(LocalExecutor(1), square_or_refuse, values))
    failures = [r for r in run_all(on_ray, square_or_refuse, values) if isinstance(r, TaskFailure)]
    assert [f.index for f in failures] == [1, 4]
    assert failures[0].message.startswith("ValueError: negative input -2")


@pytest.mark.ray
def test_ray_runs_closures_and_survives_a_dead_worker(on_ray):
    offset = 100
    assert run_all(on_ray, lambda value: value + offset, [1, 2]) == [101, 102]
    results = run_all(on_ray, die_on_three, list(range(5)))
    assert isinstance(results[3], TaskFailure)
    assert [r for i, r in enumerate(results) if i != 3] == [0, 1, 2, 4]


@pytest.mark.ray
def test_joining_a_running_session_leaves_it_running(on_ray):
    import ray

    joined = make_executor("ray")
    assert isinstance(joined, RayExecutor)
    assert run_all(joined, square_or_refuse, [6]) == [36]
    joined.close()
    assert ray.is_initialized()

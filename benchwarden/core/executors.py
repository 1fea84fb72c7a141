"""Where independent pieces of work run: in this process, a local process pool, or a
Ray cluster. Suites fan trials (arms) and seeds (retrieval) out through `Executor` and
never learn which one they were given.

Invariants:
- `map_unordered` yields exactly one `(index, result)` per item, as each completes;
  `index` is the item's position in the input, so callers can restore order.
- A task that raises never ends the map: its result is a `TaskFailure` carrying the
  index and a one-line message, which the caller records like any other outcome.
- Work is submitted with a bounded number of tasks in flight, so a long list of items
  does not flood the pool (or the cluster's object store) before anything finishes.
  A local pool submits the first of them when `map_unordered` is called, so its workers
  are busy while the caller prepares to read (the in-process loop runs as it is read).
- An executor that started a pool or a cluster stops it in `close()`; one that joined
  an existing Ray session leaves it running.

Functions and items must be picklable for the process pool (module-level functions);
Ray uses cloudpickle, so closures work there too.

The process pool is started once, when the executor is made: its workers are forked
from this process while it has a single thread, so they start in milliseconds with
every module already imported here (no per-worker interpreter start, no second scipy
import). A process that already runs other threads (a progress bar, an event loop in a
thread, Ray) could leave a fork child holding a lock copied mid-use, so there the pool
falls back to the forkserver, which is slower to start but never copies a thread.
Around that fork the parent's objects are frozen out of the garbage collector
(`gc.freeze`, then `gc.unfreeze` in the parent, as Python's documentation advises for
fork without exec): each worker keeps them frozen, so its collections never walk the
inherited modules (numpy, scipy, the strategy's library) or touch their pages.
"""

from __future__ import annotations

import concurrent.futures as futures
import gc
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from benchwarden.core.errors import EnvironmentFailure
from benchwarden.core.verdicts import one_line

T = TypeVar("T")
R = TypeVar("R")

_MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class TaskFailure:
    """A task that raised (or whose worker died) instead of returning."""

    index: int
    message: str  # one line, at most 300 characters: "ValueError: bad input"


def _one_line(text: str) -> str:
    return one_line(text, _MESSAGE_LIMIT)


def describe_exception(error: BaseException) -> str:
    """`Type: message` on one line, with the innermost frame for a quick look."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return _one_line(f"{type(error).__name__}: {error}{where}")


class Executor(Protocol):
    def map_unordered(self, function: Callable[[T], R],
                      items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailure]]:
        """Run `function(item)` for every item; yield `(index, result)` as each ends."""
        ...

    def close(self, *, wait: bool = True) -> None:
        """Stop. `wait=False`: once every result was read, let the workers end on
        their own (joined when this process exits) instead of waiting for them."""
        ...


def run_all(executor: Executor, function: Callable[[T], R],
            items: Sequence[T]) -> list[R | TaskFailure]:
    """Every result, in input order (for callers that need them all at once)."""
    results: list[Any] = [None] * len(items)
    for index, result in executor.map_unordered(function, items):
        results[index] = result
    return results


def _guarded(function: Callable[[T], R], index: int, item: T) -> R | TaskFailure:
    """Runs where the task runs, so the exception is caught before it is pickled."""
    try:
        return function(item)
    except Exception as error:  # recorded as the task's outcome, never re-raised
        return TaskFailure(index, describe_exception(error))


def _ready() -> None:
    """A no-op task: submitting it makes the pool fork its workers right away."""


def _worker_signals() -> None:
    """In each worker: the parent decides what a signal means. A forked worker would
    otherwise inherit the CLI's handlers, turn `terminate()` into a KeyboardInterrupt
    that the pool reports as a task result, and live on (the parent then waits for it
    forever at exit). So SIGTERM and SIGHUP kill a worker, and Ctrl-C, which a terminal
    sends to the whole process group, is left to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def pool_start_method() -> str:
    """`fork` while this process has one thread (cheap, and safe: no lock can be copied
    mid-use), else `forkserver` (or `spawn` where there is none)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


class LocalExecutor:
    """On this machine: a plain loop (`workers=1`) or a pool of worker processes,
    started here (see the module's notes on why now)."""

    def __init__(self, workers: int = 1, *, max_in_flight: int | None = None,
                 preload: Sequence[str] = ()) -> None:
        """`preload`: modules the tasks will import (a strategy's library, say), imported
        here first so forked workers inherit them instead of each importing them."""
        if workers < 1:
            raise ValueError(f"local executor needs at least one worker, got {workers}")
        self.workers = workers
        self.max_in_flight = max_in_flight or 2 * workers
        self._pool: futures.ProcessPoolExecutor | None = None
        self.start_method: str | None = None
        if workers > 1:
            for name in preload:
                try:
                    importlib.import_module(name)
                except ImportError as error:
                    raise ValueError(f"cannot preload {name!r} for the workers: {error}") from None
            self._get_pool()

    def __repr__(self) -> str:
        return f"LocalExecutor(workers={self.workers})"

    def _get_pool(self) -> futures.ProcessPoolExecutor:
        if self._pool is None:
            self.start_method = pool_start_method()
            # a caller that froze objects itself keeps them frozen (unfreeze is all or none)
            freezing = self.start_method == "fork" and gc.get_freeze_count() == 0
            try:
                pool = futures.ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context(self.start_method),
                    initializer=_worker_signals)
                # With fork, the first submit forks every worker before the pool's own
                # management thread starts: do it now, while this process is single-threaded.
                if freezing:
                    gc.freeze()  # the workers inherit everything here as never-collected
                pool.submit(_ready)
            except OSError as error:  # process or memory limits
                raise EnvironmentFailure(
                    f"cannot start {self.workers} worker processes ({self.start_method}): "
                    f"{error.strerror or error}") from None
            finally:
                if freezing:
                    gc.unfreeze()  # this process collects as before
            self._pool = pool
        return self._pool

    def map_unordered(self, function: Callable[[T], R],
                      items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailure]]:
        """With a pool, the first tasks are submitted by this call, not by the first
        read: the workers start on them while the caller does what it must before it
        reads a result (open a store, record a run's start, import its report)."""
        if self.workers == 1:
            return self._in_this_process(function, items)
        pool = self._get_pool()
        pending: dict[futures.Future[Any], int] = {}
        failed: dict[int, TaskFailure] = {}
        upcoming = iter(enumerate(items))

        def fill() -> None:
            for index, item in upcoming:
                try:
                    pending[pool.submit(_guarded, function, index, item)] = index
                except Exception as error:  # e.g. a pool broken by a dead worker
                    failed[index] = TaskFailure(index, describe_exception(error))
                if len(pending) >= self.max_in_flight:
                    return

        fill()
        return self._collect(pending, failed, fill)

    @staticmethod
    def _in_this_process(function: Callable[[T], R],
                         items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailure]]:
        for index, item in enumerate(items):
            yield index, _guarded(function, index, item)

    @staticmethod
    def _collect(pending: dict[futures.Future[Any], int], failed: dict[int, TaskFailure],
                 fill: Callable[[], None]) -> Iterator[tuple[int, Any]]:
        while pending or failed:
            while failed:
                yield failed.popitem()
            if not pending:
                fill()
                continue
            done, _ = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                try:
                    yield index, future.result()
                except Exception as error:  # unpicklable result, worker killed, ...
                    yield index, TaskFailure(index, describe_exception(error))
            fill()

    def close(self, *, wait: bool = True) -> None:
        """`wait=False` is for a caller that has read every result: the workers are
        told to stop and end while this process goes on (writing its report, say);
        Python joins them when the process exits. Queued tasks are cancelled either way."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None

    def abandon(self) -> None:
        """Stop now, after a signal: queued tasks are cancelled and running ones ended
        with their workers (`close` would wait for them, up to a trial's wall clock)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        for worker in workers:
            worker.join(5)
            if worker.is_alive():
                worker.kill()
                worker.join(5)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LOOPBACK_ONLY_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class RayExecutor:
    """On a Ray cluster: a local one started here (`address=None`), an existing one
    (`"auto"`), or a remote one through Ray Client (`"ray://host:10001"`).

    When this process already has a Ray session, the executor joins it and leaves it
    running on `close()`. On a remote cluster, task code must be importable there
    (install the package on the cluster, or start Ray with a `runtime_env`).
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None, *,
                 cpus_per_task: float = 1, max_in_flight: int | None = None) -> None:
        if address is None:
            # A cluster started here is this one machine: keep it on loopback. Ray
            # otherwise registers the host's interface address and talks to itself
            # through it; this switch (read when Ray is imported) makes it use 127.0.0.1.
            os.environ.setdefault(LOOPBACK_ONLY_VARIABLE, "0")
        try:
            import ray
        except ImportError:
            raise ValueError("the Ray executor needs Ray: pip install 'benchwarden[ray]'") from None
        self._ray = ray
        self.address = address
        self._owns_session = not ray.is_initialized()
        if self._owns_session:
            options: dict[str, Any] = {}
            if address is None:
                # Workers of a cluster started here see what this process can import
                # (suite modules, a user's strategy file), not only installed packages.
                search_path = [entry or os.getcwd() for entry in sys.path]
                options["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(search_path)}}
                options["num_cpus"] = num_cpus
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False, **options)
            except Exception as error:
                raise ValueError(
                    f"cannot start or join the Ray cluster {address or '(local)'}: "
                    f"{_one_line(str(error))}") from None
        self._remote: Any = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_guarded)
        # ray ships cluster_resources without annotations; its result is a plain dict
        total = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        self.max_in_flight = max_in_flight or max(2, 2 * int(total / max(cpus_per_task, 0.01)))

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r})"

    def map_unordered(self, function: Callable[[T], R],
                      items: Sequence[T]) -> Iterator[tuple[int, R | TaskFailure]]:
        ray = self._ray
        shared_function = ray.put(function)  # shipped to the object store once
        pending: dict[Any, int] = {}
        upcoming = iter(enumerate(items))

        def fill() -> None:
            for index, item in upcoming:
                pending[self._remote.remote(shared_function, index, item)] = index
                if len(pending) >= self.max_in_flight:
                    return

        fill()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for reference in done:
                index = pending.pop(reference)
                try:
                    yield index, ray.get(reference)
                except Exception as error:  # the worker died, or the result did not travel
                    first_line = str(error).splitlines()[0] if str(error) else ""
                    yield index, TaskFailure(index, _one_line(
                        f"{type(error).__name__}: {first_line}"))
            fill()

    def close(self, *, wait: bool = True) -> None:
        """A cluster started here is shut down (`wait` changes nothing: Ray's shutdown
        is one call); one this process joined is left running."""
        if self._owns_session and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_session = False

    def abandon(self) -> None:
        """After a signal: a cluster started here is shut down with its workers; tasks
        already sent to a cluster this process joined run on there."""
        self.close()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MAX_LOCAL_WORKERS = 256
"""The most worker processes `local:N` starts on one machine."""


def make_executor(spec: str, *, preload: Sequence[str] = ()) -> Executor:
    """An executor from its command-line name.

    `local` (one in-process loop), `local:N` (N worker processes), `local:auto` (one per
    CPU), `ray` (a local Ray cluster), `ray:auto` (join the cluster this machine belongs
    to), `ray://host:port` (a remote cluster through Ray Client). `preload` names modules
    a local pool imports before it forks (see `LocalExecutor`); Ray ignores it.
    """
    text = spec.strip()
    if text in ("", "local"):
        return LocalExecutor(1)
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if count == "auto":
            return LocalExecutor(os.cpu_count() or 1, preload=preload)
        # ASCII digits only: str.isdigit() also takes '²', which int() then refuses
        if not (count.isascii() and count.isdigit()) or int(count) < 1:
            raise ValueError(f"executor {spec!r}: worker count must be a positive whole number")
        if int(count) > MAX_LOCAL_WORKERS:
            # local:99999 started forking that many processes and ran for minutes before
            # anything was said; past this many, a typo is likelier than a plan
            raise ValueError(f"executor {spec!r}: at most {MAX_LOCAL_WORKERS} local worker "
                             "processes (local:auto is one per CPU; ray spreads further)")
        return LocalExecutor(int(count), preload=preload)
    if text == "ray":
        return RayExecutor()
    if text == "ray:auto":
        return RayExecutor(address="auto")
    if text.startswith("ray://"):
        return RayExecutor(address=text)
    raise ValueError(
        f"unknown executor {spec!r}; use local, local:N, local:auto, ray, ray:auto or ray://host:port")

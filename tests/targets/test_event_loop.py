"""The loop the client runs on: uvloop when installed, asyncio's own on request or when
it is not; `run` keeps `asyncio.run`'s behaviour (result, exception, Ctrl-C)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator

import pytest

from benchwarden.core.errors import ConfigurationError
from benchwarden.targets import event_loop


@contextlib.contextmanager
def python_sigint_handler() -> Iterator[None]:
    """Python's own SIGINT handler for the duration, whatever was inherited (a background
    `make test` inherits SIGINT ignored), then the previous one back."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def running_loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_is_the_default_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv(event_loop.EVENT_LOOP_VARIABLE, raising=False)
    assert event_loop.event_loop_name() == "uvloop"
    assert event_loop.run(running_loop_module()).startswith("uvloop")


def test_the_variable_asks_for_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_VARIABLE, " AsyncIO ")
    assert event_loop.event_loop_name() == "asyncio"
    assert event_loop.run(running_loop_module()).startswith("asyncio")


def test_without_uvloop_the_client_runs_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.EVENT_LOOP_VARIABLE, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails
    assert event_loop.event_loop_name() == "asyncio"
    assert event_loop.run(running_loop_module()).startswith("asyncio")


def test_asking_for_uvloop_without_it_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_VARIABLE, "uvloop")
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(ConfigurationError, match="uvloop is not installed") as caught:
        event_loop.run(running_loop_module())
    assert "\n" not in str(caught.value)


def test_an_unknown_loop_name_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_VARIABLE, "trio")
    with pytest.raises(ConfigurationError, match="'trio' is not one of uvloop, asyncio"):
        event_loop.run(running_loop_module())


@pytest.mark.usefixtures("on_both_loops")
def test_results_and_exceptions_pass_through() -> None:
    async def fails() -> None:
        raise LookupError("from inside")

    assert event_loop.run(asyncio.sleep(0, result=42)) == 42
    with pytest.raises(LookupError, match="from inside"):
        event_loop.run(fails())


@pytest.mark.usefixtures("on_both_loops")
def test_a_sigint_cancels_the_main_task_so_it_can_clean_up() -> None:
    cleaned_up: list[bool] = []

    async def interrupted() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)
        finally:
            cleaned_up.append(True)

    with python_sigint_handler(), pytest.raises(KeyboardInterrupt):
        event_loop.run(interrupted())
    assert cleaned_up == [True]


@pytest.mark.usefixtures("on_both_loops")
def test_a_second_interrupt_while_stopping_is_raised_by_the_loop_not_the_handler() -> None:
    """The first interrupt cancels the main task; the run is still stopping (its cleanup
    awaits) when the second comes. The handler itself must return: raised inside it,
    the interrupt would land in whatever Python runs at that instant, and uvloop runs
    some inside C callbacks that print and drop it. The loop raises it instead, and it
    ends the run."""
    handler_returned: list[bool] = []
    cleaned_up: list[bool] = []

    async def stopping_slowly() -> None:
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler)
        try:
            handler(signal.SIGINT, None)  # the first: the main task is cancelled
            await asyncio.sleep(30)
        finally:
            handler(signal.SIGINT, None)  # the second, while cleaning up
            handler_returned.append(True)
            try:
                await asyncio.sleep(30)  # a cleanup that would otherwise take long
            finally:
                cleaned_up.append(True)

    with python_sigint_handler():
        with pytest.raises(KeyboardInterrupt):
            event_loop.run(stopping_slowly())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert handler_returned == [True] and cleaned_up == [True]


@pytest.mark.usefixtures("on_both_loops")
@pytest.mark.parametrize("earlier", [0, 1], ids=["first interrupt", "second interrupt"])
def test_an_interrupt_while_the_runner_closes_its_loop_is_raised_after_it_closed(
        earlier: int) -> None:
    """The run is over (the main coroutine returned) and the runner is cancelling what
    is left when an interrupt comes (the first, or one after an interrupt the run
    already stopped for). Raised inside the loop's shutdown it left the loop marked
    running ("Cannot close a running event loop", exit 1 with no end recorded) or printed
    a traceback; it is held until the loop is closed, then raised, so it is not lost."""
    loops: list[asyncio.AbstractEventLoop] = []
    signalled: list[bool] = []

    async def left_running() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:  # the runner cancels it as it closes the loop
            os.kill(os.getpid(), signal.SIGINT)
            signalled.append(True)
            await asyncio.sleep(0.05)  # the shutdown goes on after the signal
            raise

    async def returns_early() -> str:
        loops.append(asyncio.get_running_loop())
        asyncio.get_running_loop().create_task(left_running())
        await asyncio.sleep(0)
        if earlier:
            handler = signal.getsignal(signal.SIGINT)
            assert callable(handler)
            handler(signal.SIGINT, None)  # the run stops for this one ...
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                return "stopped"  # ... and ends cleanly (it swallows the cancel)
        return "done"

    with python_sigint_handler():
        with pytest.raises(KeyboardInterrupt):
            event_loop.run(returns_early())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signalled == [True]
    assert loops and loops[0].is_closed()


@pytest.mark.usefixtures("on_both_loops")
def test_with_no_interrupt_the_result_comes_back_and_the_handler_is_put_back() -> None:
    with python_sigint_handler():
        assert event_loop.run(asyncio.sleep(0, result="kept")) == "kept"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

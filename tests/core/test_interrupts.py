"""core/interrupts.py in-process: a signal becomes an interrupt, except one that lands
while an interrupt is already being handled (a driver recording its run end before it
can hold signals back), which is noted and not raised again. The handlers are the
module's own, installed here, so the dispositions this process inherited do not matter."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from benchwarden.core.interrupts import (
    asyncio_handles_sigint,
    exit_code_decided,
    installed_handlers,
    last_signal_name,
)


def _deliver(signum: int) -> None:
    """Send `signum` to this process and give its handler the chance to run."""
    os.kill(os.getpid(), signum)
    for _ in range(1000):  # Python runs a handler between bytecodes of the main thread
        pass


def test_a_sigterm_outside_a_stop_interrupts():
    with installed_handlers(), pytest.raises(KeyboardInterrupt):
        _deliver(signal.SIGTERM)
        for _ in range(100_000):
            pass
    assert last_signal_name() == "SIGTERM"


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGHUP])
def test_a_second_signal_while_an_interrupt_is_handled_is_noted_not_raised(second):
    recorded = []
    with installed_handlers():
        try:
            raise KeyboardInterrupt  # the first signal's interrupt, being handled below
        except KeyboardInterrupt:
            _deliver(second)  # lands before the run end could hold signals back
            recorded.append("run end")
        assert recorded == ["run end"]
        assert last_signal_name() == signal.Signals(second).name
        with pytest.raises(KeyboardInterrupt):  # once handled, a signal interrupts again
            _deliver(second)
            for _ in range(100_000):
                pass


def test_a_signal_in_a_finally_of_a_stop_is_noted_not_raised():
    recorded = []
    with installed_handlers():
        with pytest.raises(KeyboardInterrupt):
            try:
                raise KeyboardInterrupt
            finally:
                _deliver(signal.SIGTERM)
                recorded.append("cleaned up")
    assert recorded == ["cleaned up"]


def test_a_second_sigint_while_an_interrupt_is_handled_is_noted_not_raised():
    """Ctrl-C twice: the second lands in the driver's `except` before it can hold signals
    back; it must not cut the run end short."""
    recorded = []
    with installed_handlers():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            _deliver(signal.SIGINT)
            recorded.append("run end")
        assert recorded == ["run end"] and last_signal_name() == "SIGINT"
        with pytest.raises(KeyboardInterrupt):  # outside a stop, Ctrl-C interrupts
            _deliver(signal.SIGINT)
            for _ in range(100_000):
                pass


def _interrupts_soon() -> None:
    for _ in range(100_000):
        pass


@pytest.mark.parametrize("how", ["cause", "context", "deeper", "context beside a cause"])
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_an_error_raised_in_handling_an_interrupt_is_handled_is_noted(how,
                                                                                      second):
    """click turns a `KeyboardInterrupt` into `Abort` (its cause), a suite into
    `RunInterrupted` (`from None`: its context): the program is stopping all the same,
    and a second signal landing while that error is printed must not escape it."""
    recorded = []
    with installed_handlers():
        try:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as interrupt:
                if how == "cause":
                    raise RuntimeError("aborted") from interrupt
                if how == "context":
                    raise RuntimeError("stopped") from None
                if how == "context beside a cause":  # the interrupt is its context only
                    raise RuntimeError("stopped") from ValueError("the clean-up failed")
                try:
                    raise ValueError("the clean-up failed too")
                except ValueError as failure:
                    raise LookupError("and so did its report") from failure
        except (RuntimeError, LookupError):
            _deliver(second)
            recorded.append("said")
        assert recorded == ["said"]
        assert last_signal_name() == signal.Signals(second).name


def test_a_signal_while_an_error_of_another_kind_is_handled_still_interrupts():
    with installed_handlers(), pytest.raises(KeyboardInterrupt):
        try:
            raise RuntimeError("no interrupt in sight")
        except RuntimeError:
            _deliver(signal.SIGINT)
            _interrupts_soon()


def test_an_exception_chain_that_loops_ends_the_look_for_an_interrupt():
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    with installed_handlers(), pytest.raises(KeyboardInterrupt):
        try:
            raise first
        except RuntimeError:
            _deliver(signal.SIGINT)
            _interrupts_soon()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_after_the_exit_code_is_decided_is_noted_until_the_handlers_go(signum):
    with installed_handlers():
        exit_code_decided()
        _deliver(signum)
        _interrupts_soon()  # nothing raised: the exit code stands
        assert last_signal_name() == signal.Signals(signum).name
    # the next invocation (tests run the CLI in-process) starts undecided
    with installed_handlers(), pytest.raises(KeyboardInterrupt):
        _deliver(signum)
        _interrupts_soon()


def test_asyncio_gets_pythons_own_handler_inside_and_ours_comes_back_after():
    seen_inside = []

    async def look() -> None:
        seen_inside.append(signal.getsignal(signal.SIGINT))

    with installed_handlers():
        ours = signal.getsignal(signal.SIGINT)
        assert ours is not signal.default_int_handler  # asyncio would take it over
        with asyncio_handles_sigint():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            asyncio.run(look())
        assert signal.getsignal(signal.SIGINT) is ours
    # asyncio.run replaced Python's handler with its own graceful one while it ran
    assert seen_inside and seen_inside[0] not in (ours, signal.default_int_handler)


def test_a_sigint_inside_asyncio_cancels_the_main_task_then_a_later_one_is_held():
    """The whole path a driver takes: Ctrl-C cancels the main task (its cleanup runs),
    the interrupt reaches the driver's `except`, and a second Ctrl-C there is noted."""
    cleaned_up, recorded = [], []

    async def interrupted() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)
        finally:
            cleaned_up.append(True)

    with installed_handlers():
        try:
            with asyncio_handles_sigint():
                asyncio.run(interrupted())
        except KeyboardInterrupt:
            _deliver(signal.SIGINT)  # after asyncio put a handler back: ours, not Python's
            recorded.append("run end")
    assert cleaned_up == [True] and recorded == ["run end"]


def test_without_the_modules_handlers_asyncio_handles_sigint_changes_nothing():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with asyncio_handles_sigint():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)

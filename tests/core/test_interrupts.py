"""core/interrupts.py in-process: a signal becomes an interrupt, except one that lands
while an interrupt is already being handled (a driver recording its run end before it
can hold signals back), which is noted and not raised again. The handlers are the
module's own, installed here, so the dispositions this process inherited do not matter."""

from __future__ import annotations

import os
import signal

import pytest

from benchwarden.core.interrupts import installed_handlers, last_signal_name


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

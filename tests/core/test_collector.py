"""The cycle collector paused for a block (core/collector.py): off inside, back as it
was after, whatever the block did, and nested blocks change nothing."""

from __future__ import annotations

import gc

import pytest

from benchwarden.core.collector import paused_cycle_collector


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after():
    gc.enable()
    with paused_cycle_collector():
        assert not gc.isenabled()
        with paused_cycle_collector():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer one's pause alone
    assert gc.isenabled()


def test_the_collector_is_on_again_after_a_block_that_raised():
    gc.enable()
    with pytest.raises(RuntimeError), paused_cycle_collector():
        raise RuntimeError("the report failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with paused_cycle_collector():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_reference_counting_still_frees_inside_the_block():
    import weakref

    class Held:
        pass

    with paused_cycle_collector():
        held = Held()
        watched = weakref.ref(held)
        del held
        assert watched() is None

"""Python's cycle collector paused while a report builds its tables.

Why: a report of a suite of thousands of tasks makes hundreds of thousands of objects
that live until it is written (a group's key and totals, the per-task unions, their
tuples). Each allocation burst sets off the cycle collector, and every full collection
walks all of them: at 10,000 tasks (62,000 groups) eight full collections cost half a
second of a four-second `arms report`, and collected nothing that reference counting
would not have freed. Reference counting is untouched: an object no longer referred to
is freed at once, so memory stays what it was, but for reference cycles made inside the
block (a report makes next to none), which the collector frees once it runs again.

Invariants: the collector is enabled again on leaving the outermost block, whether the
block ended or raised, and only if it was enabled on entering; a block inside another
changes nothing; the collector's thresholds are never changed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_cycle_collector() -> Iterator[None]:
    """The block runs with the cycle collector off (see the module docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()

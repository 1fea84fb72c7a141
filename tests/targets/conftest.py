"""Fixtures for the client tests.

`on_both_loops`: the test runs once on asyncio's own event loop and once on uvloop (the
loop the CLI runs the client on when it is installed, benchwarden/targets/event_loop.py):
the tests' `asyncio.run` calls go through `event_loop.run` with the loop chosen.
"""

from __future__ import annotations

import asyncio

import pytest

from benchwarden.targets import event_loop
from tests.conftest import require


@pytest.fixture(params=["asyncio", "uvloop"])
def on_both_loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            require(False, "uvloop", "pip install uvloop")
    monkeypatch.setenv(event_loop.EVENT_LOOP_VARIABLE, request.param)
    monkeypatch.setattr(asyncio, "run", event_loop.run)
    return request.param

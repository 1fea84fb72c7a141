"""Fixtures shared by the engine tests: a throw-away cache layout."""

from __future__ import annotations

import pytest

from benchwarden.targets import engine as eng


@pytest.fixture
def layout(tmp_path) -> eng.EngineLayout:
    return eng.EngineLayout(tmp_path / "engine")


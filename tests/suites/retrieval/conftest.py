"""Fixtures the retrieval report tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """A fresh store's location: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield tmp_path / "s.sqlite"
        return
    from tests.conftest import fresh_postgres_database

    with fresh_postgres_database("bw_test_retrieval_reports") as url:
        yield url

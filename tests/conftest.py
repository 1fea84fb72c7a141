"""Shared test plumbing.

Tests that need a real service (PostgreSQL, Chromium, the llama.cpp engine, Ray) ask
for it through `require`: on a developer's machine a missing service skips the test
with the command that provides it; under CI (CI=true) a missing service FAILS the
test, so CI can never pass by skipping the real parts.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

OUTPUT_DIR = Path(__file__).resolve().parent.parent / "test-output"

# Property tests explore new random examples on a developer's machine; under CI they
# replay a fixed sequence, so CI's verdict on a commit never depends on the dice. Wall
# time is never asserted (no deadline). `HYPOTHESIS_PROFILE=thorough` digs deeper.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("thorough", deadline=None, max_examples=2000)
ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if ON_CI else "dev"))


def require(condition: bool, what: str, how: str) -> None:
    if condition:
        return
    message = f"{what} is not available ({how})"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must provide {message}", pytrace=False)
    pytest.skip(message)


def bwrap_or_skip() -> None:
    """Skip (fail under CI) unless bubblewrap can build a sandbox on this machine."""
    from benchwarden.core.errors import IsolationUnavailable
    from benchwarden.core.sandbox import require_bubblewrap

    try:
        require_bubblewrap()
    except IsolationUnavailable as error:
        require(False, "bubblewrap", str(error))


@pytest.fixture
def output_dir(request) -> Path:
    """A folder under test-output/ kept after the run, for artefacts a person looks at."""
    folder = OUTPUT_DIR / request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No test touches the user's ~/.benchwarden; the engine cache stays shared."""
    monkeypatch.setenv("BENCHWARDEN_HOME", str(tmp_path / "bw-home"))
    monkeypatch.delenv("BENCHWARDEN_STORE", raising=False)


@contextmanager
def running_real_engine(tmp_path_factory, **options):
    """The cached llama.cpp engine, started for a test module and always stopped.

    `options` go to `start_engine` (slots, context, threads, extra_args, ...)."""
    from benchwarden.targets import engine

    install = engine.installed_engine()
    require(install is not None, "the llama.cpp engine in the cache",
            "run `make engine` or `benchwarden engine build`")
    log = tmp_path_factory.mktemp("engine") / "server.log"
    with engine.start_engine(install, log_path=log, die_with_parent=True, **options) as running:
        yield running


@contextmanager
def fresh_postgres_database(prefix: str = "bw_test"):
    """A new database on the test PostgreSQL server, dropped afterwards; yields its URL."""
    url = os.environ.get("BENCHWARDEN_TEST_POSTGRES_URL", "")
    require(bool(url), "PostgreSQL (BENCHWARDEN_TEST_POSTGRES_URL)",
            "run `bash scripts/test-services.sh start` and source .test-services.env")
    import secrets

    import psycopg

    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

"""`--model` that the server does not list is refused before anything is written,
unless `--any-model` (contamination, and arms' openai driver). The servers are fakes
from tests/fakes: a real engine lists its one model and cannot list none or fail its
listing on demand; the plain fake lists `fake-model` only, as a real engine would."""

from __future__ import annotations

import json

import pytest

from benchwarden.core.store import open_store
from tests.cli.test_store_commands import assert_one_line_error, bw, fingerprint, small_store
from tests.fakes import FakeOpenAIServer
from tests.fakes.fault_servers import ModelListingServer
from tests.suites.contamination.helpers import contamination_args


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store" / "store.sqlite"
    path.parent.mkdir()
    small_store(path)
    return path


def test_contamination_refuses_an_unlisted_model_and_writes_nothing(store):
    before = fingerprint(store.parent)
    with FakeOpenAIServer("clean") as server:
        refused = bw(*contamination_args(server.url, store), "--model", "fake-modle")
        assert server.chat_requests == 0
    message = assert_one_line_error(refused, 2, "fake-modle", "fake-model", "--any-model")
    assert "not a model" in message
    assert fingerprint(store.parent) == before


def test_contamination_with_any_model_sends_the_model_as_given(store, tmp_path):
    report = tmp_path / "report.json"
    with FakeOpenAIServer("clean") as server:
        ran = bw(*contamination_args(server.url, store, report), "--model", "unlisted-one",
                 "--any-model")
        assert server.chat_requests > 0
    assert ran.returncode == 0, ran.stderr
    assert json.loads(report.read_text())["run"]["target"]["model"] == "unlisted-one"


def test_contamination_against_a_server_listing_nothing_says_so(store):
    before = fingerprint(store.parent)
    with ModelListingServer([]) as server:
        unnamed = bw(*contamination_args(server.url, store))
        named = bw(*contamination_args(server.url, store), "--model", "mine")
    assert_one_line_error(unnamed, 2, "lists no models", "--model")
    assert_one_line_error(named, 2, "lists no models", "--any-model")
    assert fingerprint(store.parent) == before


ARMS_RUN = ["arms", "run", "--driver", "openai", "--arm", "all", "--task", "all",
            "--trials", "1", "--isolation", "none"]


def test_arms_refuses_an_unlisted_model_before_the_store_exists(tmp_path):
    store = tmp_path / "arms.sqlite"
    with FakeOpenAIServer("clean") as server:
        refused = bw(*ARMS_RUN, "--url", server.url, "--model", "gpt-nope", "--store", str(store))
        assert server.chat_requests == 0
    assert_one_line_error(refused, 2, "gpt-nope", "fake-model", "--any-model")
    assert not store.exists()


def test_arms_says_a_broken_listing_and_suggests_any_model(tmp_path):
    store = tmp_path / "arms.sqlite"
    with ModelListingServer(["x"], status=500) as server:
        refused = bw(*ARMS_RUN, "--url", server.url, "--model", "x", "--store", str(store))
    assert_one_line_error(refused, 2, "cannot list the models", "--any-model")
    assert not store.exists()


def test_any_model_belongs_to_the_openai_driver(tmp_path):
    refused = bw("arms", "run", "--driver", "command", "--command", "true", "--arm", "all",
                 "--task", "all", "--any-model", "--store", str(tmp_path / "s.sqlite"))
    assert_one_line_error(refused, 2, "--any-model")


def test_the_listed_model_is_recorded_when_none_is_named(store):
    with FakeOpenAIServer("clean") as server:
        ran = bw(*contamination_args(server.url, store))
    assert ran.returncode == 0, ran.stderr
    with open_store(store) as opened:
        latest = opened.latest_run()
    assert latest.run.target["model"] == "fake-model"

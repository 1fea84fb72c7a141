"""The driver's pure parts: configuration checks, presets and request bodies, the plan
of slots, and what a record holds."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import canonical_json
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination.driver import (
    CANCEL_AFTER_DELTAS,
    ContaminationConfig,
    Plan,
    config_from_run,
    make_record,
    run_contamination,
)
from benchwarden.suites.contamination.presets import PRESETS, request_body
from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import failed, good, invoke

URL = "http://127.0.0.1:8000"


def test_defaults_are_valid_and_match_the_spec():
    config = ContaminationConfig(url=URL)
    config.validate()
    assert (config.concurrency, config.probes, config.max_tokens,
            config.min_completion_tokens, config.request_timeout) == ((2, 4, 8), 4, 256, 16, 300.0)


@pytest.mark.parametrize("changes, message", [
    ({"min_completion_tokens": 256}, "must be below --max-tokens 256"),
    ({"min_completion_tokens": 300}, "must be below --max-tokens 256"),
    ({"probes": 1}, "--probes"),
    ({"concurrency": (2, 1)}, "not 1"),
    ({"concurrency": (2, 513)}, "not 513"),
    ({"concurrency": ()}, "at least one level"),
    ({"concurrency": (4, 4)}, "twice"),
    ({"repeat": 0}, "--repeat"),
    ({"request_timeout": 0}, "--request-timeout"),
    ({"scenario": "x"}, "unknown scenario"),
    ({"preset": "x"}, "unknown preset"),
    ({"url": "localhost:8000"}, "must look like http://HOST:PORT"),
    ({"extra_body": {"stream": False}}, "may not set stream"),
    ({"api_key_env": "sk-abc123"}, "NAME of an environment variable"),
])
def test_bad_configuration_is_refused_in_one_line(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        ContaminationConfig(**{"url": URL, **changes}).validate()
    assert "\n" not in str(error.value)


def test_floor_just_below_max_tokens_is_accepted():
    ContaminationConfig(url=URL, max_tokens=17, min_completion_tokens=16).validate()


@pytest.mark.parametrize("preset", list(PRESETS))
def test_body_layers_base_then_preset_then_extras(preset):
    body = request_body(model="m", prompt="p", max_tokens=9, preset=preset,
                        extra={"seed": 3, "temperature": 0.0})
    assert body["messages"] == [{"role": "user", "content": "p"}]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["seed"] == 3 and body["max_tokens"] == 9
    for name, value in PRESETS[preset].items():
        assert body[name] == value


def test_tgi_preset_never_sends_presence_penalty_or_top_p():
    body = request_body(model="m", prompt="p", max_tokens=9, preset="tgi", extra={})
    assert "presence_penalty" not in body and "top_p" not in body


def test_plan_slots_and_cancellations():
    shared = Plan("r", "r", ({},) * 4, (2, 8), 1, "shared-prefix")
    assert [shared.slots(level) for level in (2, 4, 8)] == [4, 4, 8]
    assert all(shared.cancel_after(slot) is None for slot in range(8))
    assert shared.total_requests() == 4 * 4 + 4 + 8
    cancel = Plan("r", "r", ({},) * 4, (2,), 2, "cancel")
    assert cancel.slots(2) == 8
    cut = [slot for slot in range(8) if cancel.cancel_after(slot) == CANCEL_AFTER_DELTAS]
    assert cut == [4, 6]  # half the ballast; scored slots are never cut


def test_record_holds_the_outcome_and_never_raises_on_failure():
    plan = Plan("run-2", "run-1", ({},) * 2, (2,), 1, "shared-prefix")
    record = make_record(plan, "run-2", "c2", "ballast-3", 1, 1, 3,
                         good(1, start=5.0, end=6.0), None)
    assert (record.scope, record.run_id, record.outcome, record.tokens.output) == (
        "run-1", "run-2", "ok", 32)
    assert record.payload["slot"] == 3
    assert record.payload["outcome"]["reply"]["completion_tokens"] == 32
    assert (record.started_at, record.ended_at) == (5.0, 6.0)
    broken = make_record(plan, "run-2", "ref_a", "0", 1, 0, 0, failed("boom", at=4.0), None)
    assert broken.outcome == "error" and broken.ended_at == 4.0
    json.dumps(broken.to_json_dict())


def test_stored_configuration_round_trips_for_resume(tmp_path):
    with FakeOpenAIServer() as server, SQLiteStore(tmp_path / "s.sqlite") as store:
        config = ContaminationConfig(url=server.url + "/v1", probes=2, concurrency=(3,),
                                     max_tokens=40, seed=9, extra_body={"seed": 1})
        report = run_contamination(config, store, progress=False).to_json()
        stored = config_from_run(store.run_info(report["run"]["id"]).run)
    assert stored.concurrency == (3,) and stored.seed == 9 and stored.extra_body == {"seed": 1}
    assert stored.url == server.url and stored.model == "fake-model"


def test_progress_bar_shows_leg_and_requests(tmp_path):
    output = io.StringIO()
    console = Console(file=output, force_terminal=True, width=120)
    with FakeOpenAIServer() as server, SQLiteStore(tmp_path / "s.sqlite") as store:
        run_contamination(ContaminationConfig(url=server.url, probes=2, concurrency=(2,),
                                              max_tokens=40, seed=1),
                          store, progress=True, console=console)
    text = output.getvalue()
    # 2 probes × (prime, ref_a, ref_b, post) + one rung of 2 slots
    assert "requests" in text and "10/10" in text and "post" in text


def test_a_credential_in_extra_body_is_refused_before_anything_is_sent(tmp_path):
    from tests.suites.contamination.helpers import contamination_args
    with FakeOpenAIServer() as server:
        result = invoke(contamination_args(server.url, tmp_path / "s.sqlite", None,
                                           "--extra-body", '{"api_key": "hunter2"}'))
        assert server.chat_requests == 0
    assert result.exit_code == 2 and "looks like a credential" in result.output


@pytest.mark.parametrize(("field", "value", "where"), [
    ("concurrency", ["x", 4], "at `$.concurrency[0]`"),
    ("repeat", "2", "at `$.repeat`"),
    ("bisect", [1, 2, 3], "at `$.bisect`"),
    ("near_tie_nats", "0.5", "at `$.near_tie_nats`"),
    ("request_timeout", [], "at `$.request_timeout`"),
])
def test_a_stored_config_of_another_shape_is_refused_for_resume_naming_the_run(field, value,
                                                                                where):
    """`--resume` reads the stored run's configuration back field by field: one of
    another shape (edited, or written by another tool) is the store's fault in one
    line, not a TypeError from whatever compares it next."""
    from benchwarden.core.store import CorruptStore

    stored = {**ContaminationConfig(url="http://127.0.0.1:9").to_json_dict(), field: value}
    run = stamp_run(suite="contamination", bench_version="1", config=stored, run_id="odd-run")
    with pytest.raises(CorruptStore) as refused:
        config_from_run(run, "s.sqlite")
    assert str(refused.value).startswith(
        "store s.sqlite: run odd-run: its configuration is not what `contamination` writes")
    assert where in str(refused.value)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=6),
              st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
configs = st.builds(
    ContaminationConfig, url=st.just("http://127.0.0.1:9/v1"),
    model=st.one_of(st.none(), st.text(min_size=1, max_size=10)),
    api_key_env=st.one_of(st.none(), st.just("KEY_VAR")),
    concurrency=st.lists(st.integers(1, 512), min_size=1, max_size=5).map(tuple),
    probes=st.integers(1, 16), max_tokens=st.integers(1, 4096),
    min_completion_tokens=st.integers(0, 64), seed=st.one_of(st.none(), st.integers(0, 2**32)),
    repeat=st.integers(1, 9), request_timeout=st.floats(0.5, 1e4),
    extra_body=st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=3),
    stall_timeout=st.one_of(st.just(0.0), st.floats(0.1, 600)),
    logprobs=st.one_of(st.none(), st.integers(0, 20)),
    near_tie_nats=st.floats(0, 99),
    bisect=st.one_of(st.none(), st.tuples(st.integers(1, 64), st.integers(65, 512))))


@given(configs)
def test_every_stored_configuration_reads_back_as_it_was_for_resume(config):
    """A run start stores `to_json_dict`; `--resume` reads it back (`config_from_run`,
    typed field by field): the same configuration, after the store's JSON round trip."""
    import msgspec

    stored = msgspec.json.decode(canonical_json(config.to_json_dict()))
    run = stamp_run(suite="contamination", bench_version="1", config=stored, run_id="r")
    assert config_from_run(run) == config

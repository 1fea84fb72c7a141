"""`Store.iter_record_summaries` with `payload_types`: the named payload fields decoded
straight into the reader's own types (parts it does not read kept as `msgspec.Raw`),
the other fields as plain JSON values, and a record whose fields do not fit read exactly
as if no types were given: never dropped, never a crash, a body that is no record at all
still `CorruptStore`. Both backends; the odd payloads are drawn by hypothesis."""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import CorruptStore, SQLiteStore, Store
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    backend,
    postgres,
    postgres_database,
)


class Point(msgspec.Struct, frozen=True):
    """A reader's own type: one field read, one kept as its raw JSON bytes."""

    x: int
    rest: msgspec.Raw = msgspec.Raw(b"null")


FIELDS = ("point", "label", "absent")
TYPES = {"point": Point, "label": str}


def record(task: str, **payload: Any) -> Record:
    return Record(suite="demo", scope="s", arm="a", task=task, trial=1, run_id="run-1",
                  outcome="pass", started_at=1.0, ended_at=2.0,
                  tokens=TokenComponents(1, 2, 3, 4, None), payload=payload)


def _begun(store: Store) -> Store:
    store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
    return store


def _expected(plain: dict[str, Any]) -> dict[str, Any] | None:
    """What the typed read yields for a record whose plain payload is `plain`: every
    typed field decoded from its JSON, or None when one does not fit (the fallback)."""
    typed = dict(plain)
    for name, kind in TYPES.items():
        if name in plain:
            try:
                typed[name] = msgspec.json.decode(msgspec.json.encode(plain[name]), type=kind)
            except msgspec.ValidationError:
                return None
    return typed


def test_typed_fields_are_decoded_into_their_types_and_the_rest_stays_plain(backend):  # noqa: F811
    with backend.open() as store:
        _begun(store).append([
            record("t1", point={"x": 3, "rest": {"text": "long " * 100, "n": [1, 2]}},
                   label="a", transcript=["bulk"] * 50),
            record("t2", point={"x": 4}, other={"nested": [1]}),
            record("t3", point={"x": "not an int", "rest": 1}, label="b"),  # does not fit
            record("t4", label=7)])  # does not fit either
        plain = list(store.iter_record_summaries(suite="demo", payload_fields=FIELDS))
        typed = list(store.iter_record_summaries(suite="demo", payload_fields=FIELDS,
                                                 payload_types=TYPES, batch=3))
    assert [s.payload for s in plain] == [
        {"point": {"x": 3, "rest": {"text": "long " * 100, "n": [1, 2]}}, "label": "a"},
        {"point": {"x": 4}}, {"point": {"x": "not an int", "rest": 1}, "label": "b"},
        {"label": 7}]
    first, second, third, fourth = typed
    assert isinstance(first.payload["point"], Point) and first.payload["point"].x == 3
    assert msgspec.json.decode(first.payload["point"].rest) == {"text": "long " * 100,
                                                                "n": [1, 2]}
    assert first.payload["label"] == "a" and "absent" not in first.payload
    assert second.payload == {"point": Point(4)}
    assert bytes(second.payload["point"].rest) == b"null"
    # the records that do not fit are read as the untyped reader reads them, whole
    assert third == plain[2] and fourth == plain[3]
    # and everything but the typed fields is what the untyped reader yields
    for with_types, without in zip(typed, plain, strict=True):
        assert msgspec.structs.replace(with_types, payload={}) == \
            msgspec.structs.replace(without, payload={})


def test_no_types_reads_plain_json_values_as_before(backend):  # noqa: F811
    with backend.open() as store:
        _begun(store).append([record("t1", point={"x": 1}, label=None)])
        (summary,) = store.iter_record_summaries(suite="demo", payload_fields=FIELDS,
                                                 payload_types={})
    assert summary.payload == {"point": {"x": 1}, "label": None}


def test_a_body_that_is_no_record_is_corrupt_with_types_or_without(tmp_path):
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        _begun(store).append([record("t1", point={"x": 1}), record("t2", point={"x": 2})])
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER entries_refuse_update")
    raw.execute("UPDATE entries SET body = CAST('{\"arm\": 7' AS BLOB) "
                "WHERE seq = (SELECT MAX(seq) FROM entries WHERE kind = 'record')")
    raw.commit()
    raw.close()
    with SQLiteStore(path, create=False) as store:
        for types in (None, TYPES):
            with pytest.raises(CorruptStore, match="is not a readable record"):
                list(store.iter_record_summaries(suite="demo", payload_fields=FIELDS,
                                                 payload_types=types))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8)
points = st.fixed_dictionaries({"x": st.integers(min_value=-2**63, max_value=2**63 - 1)},
                               optional={"rest": json_values})
payloads = st.fixed_dictionaries({}, optional={
    "point": points | json_values | st.fixed_dictionaries({"x": json_values}),
    "label": st.text(max_size=6) | json_values, "other": json_values})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(payloads, max_size=12), st.integers(min_value=1, max_value=5))
def test_odd_payloads_are_read_typed_when_they_fit_and_plain_when_not(drawn, batch):
    with SQLiteStore(":memory:") as store:
        _begun(store).append([record(f"t{index}", **payload)
                              for index, payload in enumerate(drawn)])
        plain = list(store.iter_record_summaries(suite="demo", payload_fields=FIELDS))
        typed = list(store.iter_record_summaries(suite="demo", payload_fields=FIELDS,
                                                 payload_types=TYPES, batch=batch))
    assert len(typed) == len(plain) == len(drawn)  # nothing dropped
    for with_types, without in zip(typed, plain, strict=True):
        expected = _expected(without.payload)
        if expected is None:  # a field does not fit: the whole record read plain
            assert with_types == without
        else:
            assert with_types.payload.keys() == expected.keys()
            for name, value in expected.items():
                if isinstance(value, Point):  # Raw compares by its bytes
                    got = with_types.payload[name]
                    assert got.x == value.x
                    assert msgspec.json.decode(got.rest) == msgspec.json.decode(value.rest)
                else:
                    assert with_types.payload[name] == value
            assert msgspec.structs.replace(with_types, payload={}) == \
                msgspec.structs.replace(without, payload={})


# -- one payload field of chosen records (`Store.iter_payload_field_at`) ----------------

def _seqs(store: Store) -> list[int]:
    return sorted(summary.seq for summary in store.iter_record_summaries(suite="demo"))


def test_one_field_of_chosen_records_typed_plain_or_unset(backend):  # noqa: F811
    """The field decoded into the reader's type where it fits, as plain JSON where it
    does not, UNSET where the record has none; with each record's arm, trial and run,
    in sequence order, only the records asked for."""
    with backend.open() as store:
        _begun(store).append([
            record("t1", point={"x": 3, "rest": [1, 2]}, transcript=["bulk"] * 50),
            record("t2", point={"x": "not an int"}),
            record("t3", label="no point"),
            record("t4", point={"x": 5})])
        seqs = _seqs(store)
        chosen = [seqs[3], seqs[0], seqs[1], seqs[2]]  # any order asked: sequence order given
        found = list(store.iter_payload_field_at(sorted(chosen[:3]) + [chosen[3]],
                                                 suite="demo", scope="s", field="point",
                                                 kind=Point))
        fewer = list(store.iter_payload_field_at([seqs[1]], suite="demo", scope="s",
                                                 field="point", kind=Point))
        other_scope = list(store.iter_payload_field_at(seqs, suite="demo", scope="elsewhere",
                                                       field="point", kind=Point))
    assert [place.seq for place in found] == seqs
    assert [(place.arm, place.task, place.trial, place.run_id) for place in found] == [
        ("a", task, 1, "run-1") for task in ("t1", "t2", "t3", "t4")]
    first, second, third, fourth = (place.value for place in found)
    assert isinstance(first, Point) and first.x == 3 and msgspec.json.decode(first.rest) == [1, 2]
    assert second == {"x": "not an int"}  # does not fit: plain, as the untyped read gives
    assert third is msgspec.UNSET
    assert fourth == Point(5)
    assert [place.value for place in fewer] == [{"x": "not an int"}]
    assert other_scope == []


def test_one_field_of_a_body_that_is_no_record_is_corrupt(tmp_path):
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        _begun(store).append([record("t1", point={"x": 1}), record("t2", point={"x": 2})])
        seqs = _seqs(store)
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER entries_refuse_update")
    raw.execute("UPDATE entries SET body = CAST('{\"arm\": 7' AS BLOB) WHERE seq = ?",
                (seqs[1],))
    raw.commit()
    raw.close()
    with SQLiteStore(path, create=False) as store:
        assert [place.value for place in store.iter_payload_field_at(
            seqs[:1], suite="demo", scope="s", field="point", kind=Point)] == [Point(1)]
        with pytest.raises(CorruptStore, match=f"entry {seqs[1]} is not a readable record"):
            list(store.iter_payload_field_at(seqs, suite="demo", scope="s", field="point",
                                             kind=Point))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(payloads, min_size=1, max_size=12), st.data())
def test_one_field_is_what_the_summary_read_gives_for_it(drawn, data):
    """Whatever the payloads, the one-field read of any records gives each the value
    the summary read (`iter_record_summaries` with the same type) gives it."""
    with SQLiteStore(":memory:") as store:
        _begun(store).append([record(f"t{index}", **payload)
                              for index, payload in enumerate(drawn)])
        seqs = _seqs(store)
        chosen = sorted(data.draw(st.sets(st.sampled_from(seqs), min_size=1)))
        summaries = list(store.iter_record_summaries(
            suite="demo", scope="s", payload_fields=("point",),
            payload_types={"point": Point}, seqs=chosen))
        places = list(store.iter_payload_field_at(chosen, suite="demo", scope="s",
                                                  field="point", kind=Point))
    assert [place.seq for place in places] == [summary.seq for summary in summaries]
    assert [place.value for place in places] == [
        summary.payload.get("point", msgspec.UNSET) for summary in summaries]

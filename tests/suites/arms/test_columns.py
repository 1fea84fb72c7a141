"""The columnar summary (`views.Columns`) against the `Summary` it replaced in reports:
the same unions to the last bit, the same views as before (`reference_views`, the
views as they were computed from a `Summary`), and the same groups read from stored
rows as `summary_from_rows` makes (equal keys merged, numbers past int64 kept exact)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.group_totals import decoded_chunks
from benchwarden.core.records import Record, TokenComponents, TokenWeights
from benchwarden.suites.arms import columns as columnar
from benchwarden.suites.arms import views
from tests.suites.arms import reference_views as before

ARMS = ["a", "b", "c", "d"]
TASKS = [f"t{n}" for n in range(9)]
# numbers of wide magnitude, NaN-free (a duration, turns and a cost each)
wide_floats = st.floats(-1e15, 1e15, allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1e-300, 5e-324, 0.1, 1e15 + 0.5])
tokens = st.integers(0, 2**40)

trial = st.fixed_dictionaries({
    "arm": st.sampled_from(ARMS), "task": st.sampled_from(TASKS),
    "outcome": st.sampled_from(["pass", "fail"]),
    "failure": st.sampled_from([None, "incorrect", "confused", "hung", 7]),
    "tier": st.sampled_from(["read", "write", None, "", 3]),
    "started": wide_floats, "ended": wide_floats,
    "tokens": st.tuples(tokens, tokens, tokens, tokens, st.none() | tokens),
    "reported": st.booleans(),
    "turns": st.none() | wide_floats | st.integers(0, 50) | st.just("many"),
    "denied": st.none() | st.integers(0, 5),
    "cost": st.none() | wide_floats,
    "version": st.sampled_from(["1", "2", None]),
    "repeat": st.integers(1, 4),  # one trial, or several of the same cell in a row
})


def records_of(trials: list[dict[str, Any]]) -> list[Record]:
    made = []
    for shape in trials:
        for _ in range(shape["repeat"]):
            fresh, creation, read, output, reasoning = shape["tokens"]
            payload: dict[str, Any] = {"tier": shape["tier"], "failure": shape["failure"],
                                       "tokens_reported": shape["reported"],
                                       "bench_version": shape["version"]}
            for name, value in (("turns", shape["turns"]), ("denied_calls", shape["denied"]),
                                ("imputed_cost_usd", shape["cost"])):
                if value is not None:
                    payload[name] = value
            made.append(Record(
                suite="arms", scope="s", arm=shape["arm"], task=shape["task"],
                trial=len(made), run_id="r", outcome=shape["outcome"],
                started_at=shape["started"], ended_at=shape["ended"],
                tokens=TokenComponents(fresh, creation, read, output, reasoning),
                payload=payload))
    return made


def exact(value: Any) -> str:
    """A JSON text in which every float is spelled by its bits (-0.0 included)."""
    return json.dumps(value, default=repr, sort_keys=False,
                      allow_nan=True) if not isinstance(value, float) else value.hex()


def same(found: Any, expected: Any) -> bool:
    return _bits(found) == _bits(expected)


def _bits(value: Any) -> Any:
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return [(_bits(key), _bits(item)) for key, item in value.items()]
    if isinstance(value, list | tuple):
        return [_bits(item) for item in value]
    return (type(value).__name__, value)


matches = st.dictionaries(st.sampled_from(["arm", "task", "tier", "outcome", "failure"]),
                          st.sampled_from(["a", "b", "t1", "t3", "read", "", "3", "pass",
                                           "fail", "incorrect", "7", None]), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(trial, max_size=40), st.lists(matches, min_size=1, max_size=6))
def test_the_columns_unions_are_the_summarys_to_the_bit(trials, asked):
    summary = views.summarize(records_of(trials))
    columns = views.columns_of(summary)
    for match in [{}, *asked]:
        union = before.total(summary, **match)
        assert same(columns.total(**match),
                    {name: getattr(union, name) for name in columnar.TOTAL_FIELDS})
        per_task = columns.by_task(**match)
        expected = before.by_task(summary, **match)
        assert per_task.tasks == list(expected)
        for name in columnar.TOTAL_FIELDS:
            assert same(per_task[name].tolist(),
                        [getattr(totals, name) for totals in expected.values()]), name


WEIGHTS = [views.DEFAULT_WEIGHTS,
           TokenWeights(fresh_input=0.3, cache_creation=1.25, cache_read=0.1, output=5.0)]


@settings(max_examples=150, deadline=None)
@given(st.lists(trial, max_size=40), st.sampled_from(WEIGHTS), st.integers(1, 4),
       st.lists(st.sampled_from(TASKS), max_size=4), st.integers(0, 30))
def test_the_views_over_columns_are_the_views_before_to_the_bit(trials, weights, floor,
                                                                 planned, limit):
    """Every view the report shows, from records made into columns, equals the view as
    computed from a `Summary` before (`reference_views`), floats to the bit."""
    records = records_of(trials)
    summary = views.summarize(records)
    columns = views.columns_of(summary)
    # two runs handed the one task list (as `Store.runs_with_config` hands it), a third
    # with its own
    planned_run = {"arms": ["z"], "tasks": planned, "tiers": ["plan"]}
    configs = [planned_run, {"tasks": planned}, {"tasks": [*reversed(planned), "t8"]}]
    arms, tasks, tiers = views.arms_and_tasks(columns, configs)
    assert (arms, tasks, tiers) == before.arms_and_tasks(summary, configs)
    assert same(views.coverage(columns, arms, tasks, floor),
                before.coverage(summary, arms, tasks, floor))
    assert same(views.headline(columns, arms, tasks, weights, floor),
                before.headline(summary, arms, tasks, weights, floor))
    assert same(views.per_tier(columns, arms, tiers, weights),
                before.per_tier(summary, arms, tiers, weights))
    assert same(views.per_component(columns, arms, weights),
                before.per_component(summary, arms, weights))
    assert same(views.failure_tags(columns, arms), before.failure_tags(summary, arms))
    for arm_a, arm_b in views.all_pairs(arms):
        assert same(views.compare(columns, arm_a, arm_b, weights, floor),
                    before.compare(summary, arm_a, arm_b, weights, floor))
    assert views.shown_trials(columns, limit) == before.shown_trials(summary, limit)
    assert views.shown_trials(columns, 10**9) == before.shown_trials(summary, 10**9)
    assert views.cell_counts(columns) == before.cell_counts(summary)
    assert columns.samples == summary.samples and columns.versions == summary.versions


@settings(max_examples=60, deadline=None)
@given(st.lists(trial, max_size=40), st.sampled_from(WEIGHTS), st.integers(0, 9))
def test_above_the_analytic_threshold_both_headlines_take_abc_of_the_same_task_means(
        trials, weights, threshold):
    """The headline's mean of per-task means over more than `ANALYTIC_INTERVAL_ABOVE`
    tasks (the threshold lowered under these suites' 9 tasks) is the ABC interval on both
    sides: what the oracle then holds the columns to is the per-task means (to the bit)
    and the analytic interval of them, not a bootstrap."""
    from benchwarden.core import stats

    records = records_of(trials)
    summary = views.summarize(records)
    columns = views.columns_of(summary)
    arms, tasks, _ = views.arms_and_tasks(columns)
    kept = stats.ANALYTIC_INTERVAL_ABOVE
    try:
        stats.ANALYTIC_INTERVAL_ABOVE = threshold
        found = views.headline(columns, arms, tasks, weights)
        expected = before.headline(summary, arms, tasks, weights)
    finally:
        stats.ANALYTIC_INTERVAL_ABOVE = kept
    assert same(found, expected)
    for row in found:
        interval = row["cost_equivalent_per_task"]
        if interval is not None:
            assert (interval["method"] == "ABC") == (interval["n"] > threshold)


def stored_row(arm: str, task: str, group_key: str, first_seq: int, numbers: list[int],
               floats: list[float], newest: list[int], versions: list[str]) -> tuple[Any, ...]:
    """A `record_group_totals` row (`UNPACKED_COLUMNS` order) as `decoded_rows` hands it."""
    (records, priced, fresh, creation, read, output, reasoning_samples, reasoning, denied,
     imputed_samples, odd) = numbers
    duration, duration_error, turns, turns_error, cost, cost_error = floats
    return ("arms", "s", arm, task, "pass" if records % 2 else "fail", group_key, first_seq,
            records, priced, fresh, creation, read, output, reasoning_samples, reasoning,
            duration, duration_error, turns, turns_error, denied, imputed_samples, cost,
            cost_error, odd, json.dumps(versions), json.dumps(newest))


group_row = st.tuples(
    st.sampled_from(ARMS[:2]), st.sampled_from(TASKS[:4]),
    # texts that name the same tier and failure: equal keys, merged
    st.sampled_from(['["read", null]', '["read",null]', '[1, null]', '["1", null]',
                     '[null, "hung"]', '[null, "hung" ]']),
    st.integers(1, 5),
    st.lists(st.integers(-2**62, 2**62) | st.integers(0, 9), min_size=11, max_size=11),
    st.lists(wide_floats, min_size=6, max_size=6),
    st.lists(st.integers(1, 10**6), max_size=4),
    st.lists(st.sampled_from(['"1"', '"2"', '7', 'null']), max_size=2))


@settings(max_examples=150, deadline=None)
@given(st.lists(group_row, max_size=30))
def test_columns_read_from_rows_are_the_summary_read_from_them(rows):
    """`columns_from_rows` makes the groups `summary_from_rows` makes, floats to the bit:
    keys that come out equal merged in order, sums past int64 kept exact, each group's
    newest trials pooled and cut the same way."""
    seq = 0
    made = []
    for arm, task, group_key, step, numbers, floats, newest, versions in rows:
        seq += step
        made.append(stored_row(arm, task, group_key, seq, numbers, floats, sorted(newest),
                               versions))
    decoded = [(row, tuple(sorted({text for text in json.loads(row[-2])})),
                json.loads(row[-1])) for row in made]
    expected = before.summary_from_rows(decoded)
    found = before.summary_of(before.columns_from_rows(decoded))
    assert [(key, repr(totals)) for key, totals in found.groups.items()] == \
        [(key, repr(totals)) for key, totals in expected.groups.items()]
    assert found.first_seen == expected.first_seen and found.versions == expected.versions
    # and from the stored rows read row by row, as a PostgreSQL store hands them to a
    # report (checked and decoded by chunks)
    stored = before.summary_of(views.columns_from_chunks(decoded_chunks(made)))
    assert [(key, repr(totals)) for key, totals in stored.groups.items()] == \
        [(key, repr(totals)) for key, totals in expected.groups.items()]
    assert stored.first_seen == expected.first_seen and stored.versions == expected.versions


def test_integer_columns_whose_sums_could_overflow_int64_are_held_exact():
    column = np.array([2**62, 2**62, 5], dtype=np.int64)
    assert columnar.exact_integers(column).dtype == object
    assert int(columnar.exact_integers(column).sum()) == 2**63 + 5
    small = np.array([1, 2, 3], dtype=np.int64)
    assert columnar.exact_integers(small) is small


@given(st.lists(wide_floats, max_size=12))
def test_a_sequential_sum_adds_in_order_from_zero(values):
    total = 0.0
    for value in values:
        total += value
    assert columnar.sequential_sum(np.array(values, dtype=np.float64)).hex() == total.hex()


@given(st.lists(st.lists(wide_floats, min_size=1, max_size=6), max_size=8))
def test_segment_sums_add_each_segment_in_order_from_zero(segments):
    values = np.array([value for segment in segments for value in segment], dtype=np.float64)
    lengths = np.array([len(segment) for segment in segments], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    found = columnar.segment_sums(values, starts, lengths).tolist() if segments else []
    expected = []
    for segment in segments:
        total = 0.0
        for value in segment:
            total += value
        expected.append(total)
    assert [value.hex() for value in found] == [value.hex() for value in expected]


def test_a_column_buffer_turns_to_python_integers_past_int64_and_keeps_every_value():
    buffer = columnar.ColumnBuffer(floats=False)
    buffer.extend((1, 2))
    buffer.extend((3, 2**70, 4))  # the failed extend's partial values are not kept twice
    buffer.extend_array(np.array([5], dtype=np.int64))
    assert buffer.finished().tolist() == [1, 2, 3, 2**70, 4, 5]
    plain = columnar.ColumnBuffer(floats=False)
    plain.extend((1, 2))
    assert plain.finished().dtype == np.int64 and plain.finished().tolist() == [1, 2]
    assert columnar.ColumnBuffer(floats=True).finished().dtype == np.float64


@given(st.booleans(), st.lists(st.tuples(st.sampled_from(["tuple", "array", "array of another kind",
                                                         "through extend_array"]),
                                        st.lists(st.integers(-2**63, 2**63 - 1), max_size=5)),
                              max_size=5))
@settings(max_examples=150, deadline=None)
def test_a_column_buffer_holds_every_chunk_in_order_however_given(floats, chunks):
    """Chunks given as tuples, as arrays of the column's type (a first one kept as it
    is, not copied) or of another type, in any mix: the column is every value in order,
    of the column's type."""
    kind = np.float64 if floats else np.int64
    buffer = columnar.ColumnBuffer(floats=floats)
    expected: list[Any] = []
    first_array = None
    for how, values in chunks:
        typed = [float(value) for value in values] if floats else values
        expected.extend(typed)
        if how == "tuple":
            buffer.extend(tuple(typed))
        elif how == "array of another kind":
            buffer.extend(np.array(typed, dtype=object))
        else:
            given_array = np.array(typed, dtype=kind)
            if how == "array":
                buffer.extend(given_array)
            else:
                buffer.extend_array(given_array)
            if first_array is None and len(expected) == len(typed):
                first_array = given_array
    found = buffer.finished()
    assert found.dtype == kind
    assert found.tolist() == expected
    if first_array is not None and len(chunks) == 1:
        assert found is first_array  # one array given: kept, not copied


@given(st.lists(st.integers(0, 12), max_size=60), st.sampled_from(["int32", "int64"]))
def test_first_seen_codes_are_the_distinct_codes_in_the_order_they_first_occur(codes, dtype):
    array_of_codes = np.array(codes, dtype=dtype)
    found = columnar.first_seen_codes(array_of_codes)
    assert found.tolist() == list(dict.fromkeys(codes))
    assert found.dtype == array_of_codes.dtype

"""The per-group fold (core/group_totals.py): pure, in memory. Folding the same records
in any batching gives the same row bit for bit; the row holds what an independent
per-record computation gives (integers exactly, float sums to rounding)."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core.group_totals import (
    FOLD_COLUMNS,
    GROUP_KEY_COLUMNS,
    GROUP_TOTALS_COLUMNS,
    NEWEST_KEPT,
    CodedTexts,
    GroupTotals,
    UnreadableGroupTotals,
    compensated_add,
    decoded_chunks,
    decoded_rows,
    first_difference,
    fold_batch_into,
    fold_into,
    fold_row,
    group_of,
)
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import SUMMARY_COLUMNS, summary_row


def test_the_fold_reads_the_summary_columns_it_means():
    """`group_totals` reads fold rows by position, and takes them from summary rows by
    position: both name the columns of `FOLD_COLUMNS`, which are summary columns."""
    from benchwarden.core import group_totals

    assert [SUMMARY_COLUMNS[position] for position in group_totals._SUMMARY_POSITIONS] == \
        list(FOLD_COLUMNS)
    assert FOLD_COLUMNS[group_totals._KEY] == GROUP_KEY_COLUMNS
    for position, column in ((group_totals._SEQ, "seq"),
                             (group_totals._DURATION, "duration_s"),
                             (group_totals._FRESH, "fresh_input"),
                             (group_totals._CREATION, "cache_creation"),
                             (group_totals._READ, "cache_read"),
                             (group_totals._OUTPUT, "output"),
                             (group_totals._REASONING, "reasoning"),
                             (group_totals._PRICED, "priced"),
                             (group_totals._TURNS, "turns_number"),
                             (group_totals._DENIED, "denied_number"),
                             (group_totals._COST, "cost_number"),
                             (group_totals._ODD, "odd_values"),
                             (group_totals._VERSION, "field_bench_version")):
        assert FOLD_COLUMNS[position] == column


def test_compensated_add_keeps_what_plain_addition_loses():
    total, error = 0.0, 0.0
    for value in [1e16, 1.0, -1e16, 1.0] * 1000:
        total, error = compensated_add(total, error, value)
    assert total + error == 2000.0
    plain = 0.0
    for value in [1e16, 1.0, -1e16, 1.0] * 1000:
        plain += value
    assert plain != 2000.0  # what the compensation is for


def test_an_overflowing_sum_stays_infinite_not_nan():
    total, error = compensated_add(1.7e308, 0.0, 1.7e308)
    assert math.isinf(total) and not math.isnan(total + error)


records_strategy = st.lists(st.tuples(
    st.sampled_from(["a", "b"]), st.sampled_from(["t0", "t1"]), st.booleans(),
    st.sampled_from([None, "read", "write"]),
    st.floats(0, 1e6, allow_nan=False, allow_infinity=False),
    st.one_of(st.none(), st.integers(0, 50), st.floats(0, 1e3), st.just("odd")),
    st.one_of(st.none(), st.floats(0, 10)), st.booleans(),
    st.integers(0, 10**9), st.one_of(st.none(), st.sampled_from(["1", "2"]))),
    min_size=1, max_size=40)


def summary_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    made = []
    for seq, (arm, task, passed, tier, duration, turns, cost, reported, tokens,
              version) in enumerate(rows, start=1):
        payload: dict[str, Any] = {"tier": tier, "turns": turns, "tokens_reported": reported}
        if cost is not None:
            payload["imputed_cost_usd"] = cost
        if version is not None:
            payload["bench_version"] = version
        record = Record(suite="arms", scope="s", arm=arm, task=task, trial=seq, run_id="r",
                        outcome="pass" if passed else "fail", started_at=1.5,
                        ended_at=1.5 + duration,
                        tokens=TokenComponents(tokens, 1, 2, 3, tokens if seq % 2 else None),
                        payload=payload)
        made.append(summary_row(seq, msgspec.json.encode(record)))
    return made


@given(records_strategy, st.lists(st.integers(1, 7), min_size=1, max_size=10))
@settings(max_examples=150, deadline=None)
def test_totals_do_not_depend_on_how_records_were_batched(rows, cuts):
    """Folded in one batch, one record at a time, or in any batches, through stored rows
    (as an append reads the touched groups back): the same rows, floats bit for bit."""
    _assert_batching_changes_nothing(rows, cuts)


# many versions in a group: past SHARED_VERSIONS a group holds a set of its own
many_versions_strategy = st.lists(st.tuples(
    st.sampled_from(["a"]), st.sampled_from(["t0", "t1"]), st.booleans(), st.just(None),
    st.just(1.0), st.just(None), st.just(None), st.just(True), st.integers(0, 9),
    st.one_of(st.none(), st.sampled_from([f"v{n:02d}" for n in range(60)]))),
    min_size=40, max_size=160)


@given(many_versions_strategy, st.lists(st.integers(1, 30), min_size=1, max_size=10))
@settings(max_examples=100, deadline=None)
def test_a_group_of_many_bench_versions_stores_them_all_sorted_however_batched(rows, cuts):
    """A store written by another tool may give each record a version of its own: past
    `SHARED_VERSIONS` a group adds them to a set of its own and writes the text once per
    row; the rows are those of the shared path, every version once, sorted."""
    _assert_batching_changes_nothing(rows, cuts)
    whole: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(whole, summary_rows(rows))
    for group in whole.values():
        versions = sorted({json.dumps(row[-1]) for row in rows if row[-1] is not None
                           and (row[0], row[1], "pass" if row[2] else "fail")
                           == (group.arm, group.task, group.outcome)})  # JSON text each
        assert group.bench_versions == versions
        assert group.row()[-2] == json.dumps(versions, separators=(",", ":"))
        # what is read back folds on as what was never stored
        assert GroupTotals.from_row(group.row()).row() == group.row()


def test_a_version_per_record_one_record_at_a_time_as_an_append_folds() -> None:
    rows = [("a", "t0", True, None, 1.0, None, None, True, 3, f"v{n:03d}")
            for n in reversed(range(50))]
    in_order: dict[tuple[Any, ...], GroupTotals] = {}
    for row in summary_rows(rows):
        fold_batch_into(in_order, [fold_row(row)])
    [group] = in_order.values()
    expected = [json.dumps(f"v{n:03d}") for n in range(50)]
    assert group.bench_versions == expected
    assert group.row()[-2] == json.dumps(expected, separators=(",", ":"))
    assert isinstance(group.versions, set)  # past SHARED_VERSIONS: its own, added in place


def _assert_batching_changes_nothing(rows: list[tuple[Any, ...]], cuts: list[int]) -> None:
    summaries = summary_rows(rows)
    whole: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(whole, summaries)
    one_by_one: dict[tuple[Any, ...], GroupTotals] = {}
    for row in summaries:
        fold_into(one_by_one, [row])
    batched: dict[tuple[Any, ...], GroupTotals] = {}
    start, index = 0, 0
    while start < len(summaries):
        size = cuts[index % len(cuts)]
        # as stored and read back: every touched group goes through its row
        stored = {key: GroupTotals.from_row(group.row()) for key, group in batched.items()}
        fold_into(stored, summaries[start:start + size])
        batched = stored
        start, index = start + size, index + 1
    in_order: dict[tuple[Any, ...], GroupTotals] = {}  # as an append folds its batches
    start, index = 0, 0
    while start < len(summaries):
        size = cuts[index % len(cuts)]
        touched = fold_batch_into(in_order, [fold_row(row) for row in
                                             summaries[start:start + size]])
        assert [group.key for group in touched] == \
            list(dict.fromkeys(map(group_of, summaries[start:start + size])))
        start, index = start + size, index + 1
    expected = {key: group.row() for key, group in whole.items()}
    assert {key: group.row() for key, group in one_by_one.items()} == expected
    assert {key: group.row() for key, group in batched.items()} == expected
    assert {key: group.row() for key, group in in_order.items()} == expected
    assert first_difference(batched.values(), whole) is None


@given(records_strategy)
@settings(max_examples=100, deadline=None)
def test_a_group_row_holds_the_per_record_totals(rows):
    """An independent statement: per group, counts and token sums over priced records
    exactly, float sums to rounding of `math.fsum`, the newest sequence numbers, the
    distinct bench versions."""
    summaries = summary_rows(rows)
    totals: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(totals, summaries)
    for key, group in totals.items():
        mine = [dict(zip(SUMMARY_COLUMNS, row, strict=True)) for row in summaries
                if group_of(row) == key]
        priced = [row for row in mine if row["priced"]]
        assert group.records == len(mine) and group.priced == len(priced)
        assert group.first_seq == mine[0]["seq"]
        assert group.fresh_input == sum(row["fresh_input"] for row in priced)
        assert group.reasoning_samples == sum(row["reasoning"] is not None for row in priced)
        assert group.duration_s + group.duration_s_error == math.fsum(
            row["duration_s"] for row in mine) or math.isclose(
            group.duration_s + group.duration_s_error,
            math.fsum(row["duration_s"] for row in mine), rel_tol=1e-15)
        turns = [row["turns_number"] for row in mine if row["turns_number"] is not None]
        assert math.isclose(group.turns + group.turns_error, math.fsum(turns),
                            rel_tol=1e-15, abs_tol=1e-300)
        assert group.imputed_samples == sum(row["cost_number"] is not None for row in mine)
        assert group.odd_values == sum(row["odd_values"] for row in mine)
        assert group.newest == tuple(row["seq"] for row in mine)[-NEWEST_KEPT:]
        assert group.bench_versions == sorted({row["field_bench_version"] for row in mine
                                               if row["field_bench_version"] is not None})


wide_numbers = (st.integers(-2**62, 2**62) | st.floats(allow_nan=False)
                | st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324]))


@given(st.lists(st.tuples(
    st.integers(1, 2**62), st.floats(0, math.inf, allow_nan=False), st.booleans(),
    *[st.integers(0, 2**62)] * 4, st.none() | st.integers(0, 2**62), st.none() | wide_numbers,
    st.none() | st.integers(-2**53, 2**53), st.none() | wide_numbers, st.integers(0, 3),
    st.none() | st.sampled_from(['"1"', '"2"', '"é"'])), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_a_groups_first_record_makes_what_the_fold_makes(rows):
    """`GroupTotals.first` (a new group's first record, what an append opening new cells
    does for every record) gives the object `empty` then `fold_rows` give, column for
    column, type for type, -0.0 told from 0.0, infinities kept; later rows fold the same
    onto either."""
    key = ("arms", "s", "a", "t", "pass", "[null,null]")
    made = [(seq, *key, duration, fresh, creation, read, output, reasoning, int(priced),
             turns, denied, cost, odd, version)
            for (seq, duration, priced, fresh, creation, read, output, reasoning, turns,
                 denied, cost, odd, version) in rows]
    folded = GroupTotals.empty(key, int(made[0][0]))
    folded.fold_rows(made[:1])
    first = GroupTotals.first(key, made[0])
    assert repr([(type(value), value) for value in first.row()]) == \
        repr([(type(value), value) for value in folded.row()])
    assert first.versions == folded.versions and first.newest_seqs == folded.newest_seqs
    folded.fold_rows(made[1:])
    first.fold_rows(made[1:])
    assert repr(first.row()) == repr(folded.row())


def test_first_difference_names_the_first_wrong_group_and_column():
    summaries = summary_rows([("a", "t0", True, "read", 1.0, 2, None, True, 5, "1"),
                              ("b", "t1", False, None, 2.0, 3, 0.5, True, 7, None)])
    expected: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(expected, summaries)
    stored = [GroupTotals.from_row(group.row()) for group in expected.values()]
    assert first_difference(stored, expected) is None
    stored[1].output += 1
    assert first_difference(stored, expected) == \
        'group arms/s/b/t1 (fail, [null,null]) has a wrong output'
    assert "is missing" in str(first_difference(stored[:1], expected))
    stored[1].output -= 1
    extra = GroupTotals.from_row(("arms", "s", "c", "t9", *stored[0].row()[4:]))
    assert "totals records the store does not hold" in str(
        first_difference([*stored, extra], expected))
    assert len(GROUP_TOTALS_COLUMNS) == len(stored[0].row())


def _stored_row() -> list[Any]:
    group = GroupTotals.empty(("s", "c", "a", "t", "pass", "[null,null]"), 1)
    group.fold([summary_row(1, msgspec.json.encode(Record(
        suite="s", scope="c", arm="a", task="t", trial=1, run_id="r", outcome="pass",
        started_at=1.0, ended_at=3.0, tokens=TokenComponents(output=5),
        payload={"turns": 2})))])
    return list(group.row())


@pytest.mark.parametrize(("column", "value", "kind"), [
    ("records", "abc", "a whole number"), ("output", 2.5, "a whole number"),
    ("priced", None, "a whole number"), ("duration_s", "2.0", "a number"),
    ("turns_error", None, "a number"), ("arm", 7, "text"),
])
def test_a_stored_row_of_the_wrong_kind_is_named_not_used(column, value, kind):
    """SQLite's loose column types keep whatever an edit wrote; a report must not sum a
    string, so reading the row names the group and column instead."""
    row = _stored_row()
    assert GroupTotals.from_row(row).same_as(GroupTotals.from_row(_stored_row()))
    row[GROUP_TOTALS_COLUMNS.index(column)] = value
    with pytest.raises(ValueError, match=f"s/c/{'7' if column == 'arm' else 'a'}/t: column "
                       f"{column} is not {kind}"):
        GroupTotals.from_row(row)


def test_a_whole_number_in_a_float_column_is_read_as_a_float():
    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index("duration_s")] = 2  # SQLite hands back 2.0 stored as 2
    group = GroupTotals.from_row(row)
    assert type(group.duration_s) is float and group.duration_s == 2.0


def test_postgresql_sums_of_integers_read_as_whole_numbers():
    """PostgreSQL's SUM over integers is NUMERIC (a version 3 store summed read-only):
    a whole Decimal is a whole number, a fraction is not."""
    from decimal import Decimal

    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index("records")] = Decimal("3")
    row[GROUP_TOTALS_COLUMNS.index("duration_s")] = Decimal("2.5")
    group = GroupTotals.from_row(row)
    assert (group.records, type(group.records)) == (3, int)
    assert (group.duration_s, type(group.duration_s)) == (2.5, float)
    row[GROUP_TOTALS_COLUMNS.index("records")] = Decimal("2.5")
    with pytest.raises(ValueError, match="column records is not a whole number"):
        GroupTotals.from_row(row)


@given(records_strategy, st.sampled_from(GROUP_TOTALS_COLUMNS[:6]))
@settings(max_examples=100, deadline=None)
def test_a_sound_row_read_directly_equals_the_general_reading(rows, as_bytes):
    """A row of the kinds the store writes is taken directly; the same row with one
    text column handed back as bytes (as a driver may) goes the general, checking way.
    Both give the same group, every field and both JSON columns."""
    groups: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(groups, summary_rows(rows))
    for group in groups.values():
        row = group.row()
        direct = GroupTotals.from_row(row)
        at = GROUP_TOTALS_COLUMNS.index(as_bytes)
        general = GroupTotals.from_row((*row[:at], row[at].encode("utf-8"), *row[at + 1:]))
        assert direct.row() == general.row() == row
        for name in GroupTotals.__slots__:
            assert getattr(direct, name) == getattr(general, name), name
            assert type(getattr(direct, name)) is type(getattr(general, name)), name


@pytest.mark.parametrize(("column", "text"), [
    ("newest", "[1.0,2]"), ("newest", '["3"]'), ("bench_versions", '[1,"2"]'),
])
def test_json_columns_of_another_shape_are_read_as_before(column, text):
    """Only the JSON the store writes is taken directly; any other shape is read by the
    general path exactly as before (numbers of versions as their text, whole floats and
    digit strings as sequence numbers)."""
    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index(column)] = text
    group = GroupTotals.from_row(row)
    if column == "newest":
        assert group.newest_seqs == [int(float(part)) for part in text[1:-1].replace(
            '"', "").split(",")]
    else:
        assert group.versions == {"1", "2"}


def test_unreadable_json_columns_are_still_refused_whatever_the_path():
    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index("newest")] = "[1,"
    with pytest.raises(ValueError, match="unreadable bench_versions or newest"):
        GroupTotals.from_row(row)


@given(records_strategy, st.sampled_from([None, *GROUP_TOTALS_COLUMNS[:6]]))
@settings(max_examples=60, deadline=None)
def test_decoded_rows_hold_what_from_row_reads(rows, as_bytes):
    """Each row, sound or read the general way (a text column as bytes): the columns,
    versions and newest trials `GroupTotals.from_row` holds, in the rows' order."""
    groups: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(groups, summary_rows(rows))
    stored = [group.row() for group in groups.values()]
    if as_bytes is not None:
        at = GROUP_TOTALS_COLUMNS.index(as_bytes)
        stored = [(*row[:at], row[at].encode("utf-8"), *row[at + 1:]) for row in stored]
    decoded = list(decoded_rows(iter(stored)))
    assert len(decoded) == len(stored)
    for row, (plain, versions, newest) in zip(stored, decoded, strict=True):
        group = GroupTotals.from_row(row)
        assert tuple(plain[:len(GROUP_TOTALS_COLUMNS) - 2]) == group.row()[:-2]
        assert [type(value) for value in plain[:-2]] == [type(value) for value in
                                                         group.row()[:-2]]
        assert versions == tuple(group.bench_versions) and newest == group.newest_seqs


def test_decoded_rows_refuse_what_from_row_refuses_in_the_same_words():
    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index("output")] = "many"
    with pytest.raises(ValueError) as expected:
        GroupTotals.from_row(row)
    with pytest.raises(UnreadableGroupTotals) as found:
        list(decoded_rows([tuple(_stored_row()), tuple(row)]))
    assert str(found.value) == str(expected.value)


odd_cells = st.sampled_from([("newest", "[1.0,2]"), ("newest", '["3"]'),
                             ("bench_versions", '[1,"2"]'), ("duration_s", 3),
                             ("arm", b"cli"), ("newest", "[]"), ("newest", "[ 4, 5 ]"),
                             ("newest", "[1]\n[2]"), ("newest", "[1],[2"), ("newest", "3]"),
                             ("newest", "[1,,2]"), ("newest", "[01]"), ("newest", "[,]"),
                             ("newest", "[" + "9" * 25 + "]"), ("newest", "[-1]")])


@given(records_strategy, st.integers(1, 5), st.lists(st.tuples(st.integers(0, 40), odd_cells),
                                                    max_size=3))
@settings(max_examples=150, deadline=None)
def test_decoded_chunks_are_the_decoded_rows_by_column(rows, size, edits):
    """`decoded_chunks` gives each chunk's rows as `decoded_rows` gives them, transposed,
    whether every row of a chunk is as the store writes it (checked a column at a time,
    the newest trials decoded in one call) or some are not (a whole or bytes where a
    float or text is due, JSON of another shape, texts that joined would shift one list
    into the next: read row by row the general way), or refused in the same words."""
    groups: dict[tuple[Any, ...], GroupTotals] = {}
    fold_into(groups, summary_rows(rows))
    stored = [list(group.row()) for group in groups.values()]
    for at, (column, value) in edits:
        if stored:
            stored[at % len(stored)][GROUP_TOTALS_COLUMNS.index(column)] = value
    rows_as_stored = [tuple(row) for row in stored]
    try:
        expected = list(decoded_rows(iter(rows_as_stored)))
    except UnreadableGroupTotals as error:  # (newest JSON of no list of whole numbers)
        with pytest.raises(UnreadableGroupTotals) as found_error:
            list(decoded_chunks(iter(rows_as_stored), size))
        assert str(found_error.value) == str(error)
        return
    found = []
    for columns, versions, newest in decoded_chunks(iter(rows_as_stored), size):
        assert len(columns) == len(GROUP_TOTALS_COLUMNS)
        found.extend(zip(zip(*columns, strict=True), versions, newest, strict=True))
    assert [(tuple(plain), versions, newest) for plain, versions, newest in found] == \
        [(tuple(plain), versions, newest) for plain, versions, newest in expected]
    assert [[type(value) for value in plain] for plain, _, _ in found] == \
        [[type(value) for value in plain] for plain, _, _ in expected]


def test_decoded_chunks_refuse_what_decoded_rows_refuse_in_the_same_words():
    row = _stored_row()
    row[GROUP_TOTALS_COLUMNS.index("output")] = "many"
    with pytest.raises(UnreadableGroupTotals) as expected:
        list(decoded_rows([tuple(_stored_row()), tuple(row)]))
    with pytest.raises(UnreadableGroupTotals) as found:
        list(decoded_chunks([tuple(_stored_row()), tuple(row)]))
    assert str(found.value) == str(expected.value)


@pytest.mark.parametrize("texts", [("[1],[2", "3]"), ("[1", "2]"), ("[4,[5]", "]")])
def test_newest_texts_that_joined_would_shift_a_list_are_refused_as_one_by_one(texts):
    """Two `newest` texts each unreadable alone, but one JSON list of two lists when
    joined: the chunk's one-call decoding must not take them (it would hand a group
    another's trials); they are refused as `decoded_rows` refuses them."""
    rows = []
    for seq, text in enumerate(texts, start=1):
        row = _stored_row()
        row[GROUP_TOTALS_COLUMNS.index("first_seq")] = seq
        row[GROUP_TOTALS_COLUMNS.index("newest")] = text
        rows.append(tuple(row))
    with pytest.raises(UnreadableGroupTotals) as expected:
        list(decoded_rows(rows))
    with pytest.raises(UnreadableGroupTotals) as found:
        list(decoded_chunks(rows))
    assert str(found.value) == str(expected.value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["cli", "http", "t-1", "t-2", "", "é", "[\"a\",null]"]),
                max_size=40), st.randoms(use_true_random=False))
def test_coded_texts_read_as_the_texts_in_order_numbered_by_first_appearance(values, random):
    """A text column coded in a database's row order and taken in `order`: row by row
    the texts in that order, its names each distinct text once in the order it first
    appears there, each row's code its text's place among them."""
    import numpy as np

    order = list(range(len(values)))
    random.shuffle(order)
    coded = CodedTexts.of_rows(np, list(values), np.array(order, dtype=np.int64))
    expected = [values[index] for index in order]
    assert list(coded) == expected and len(coded) == len(expected)
    assert coded.names == list(dict.fromkeys(expected))
    assert [coded.names[code] for code in coded.codes.tolist()] == expected
    assert coded.codes.dtype == np.int32
    if expected:
        assert coded[len(expected) - 1] == expected[-1]
        assert coded[1:3] == expected[1:3]

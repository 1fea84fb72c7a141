"""Per-group totals of record summaries: the one fold that appends, upgrades, `verify`
and a report's streaming pass share, so they agree to the last bit.

A group is what a report sums records by: (suite, scope, arm, task, outcome,
group_key), `group_key` being the JSON text of `[tier, failure]` (`store.summary_row`).
The store keeps one `GroupTotals` row per group in `record_group_totals` (derived data
outside the chain, updated in each append's transaction), so a report reads a few
thousand rows instead of a million.

Invariants:
- Pure: nothing here reads a file, a clock or a database.
- Totals do not depend on how records were batched. Integers are summed exactly; a
  float sum is a compensated pair (Neumaier: the running sum and the rounding error it
  lost) advanced one value at a time in sequence order (`compensated_add`), so folding
  a batch into stored totals performs exactly the additions folding every record one by
  one from the start performs. Its value is `sum + error`.
- `newest` holds the group's last `NEWEST_KEPT` sequence numbers, ascending;
  `bench_versions` the distinct bench versions (JSON text) seen, sorted.
- One rule, read from fold rows (`FOLD_COLUMNS`: the columns of a summary row the fold
  reads): `GroupTotals.fold_rows`. An append's shortcuts (`GroupTotals.first` for a
  group's first record, `fold_batch_into` folding a batch row by row) perform the same
  additions in the same order, and tests hold their rows equal to the loop's bit for bit.
"""

from __future__ import annotations

import array
import functools
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import msgspec

Item = TypeVar("Item")

NEWEST_KEPT = 3
"""Newest sequence numbers kept per group (a report shows at most this many per cell)."""

GROUP_KEY_COLUMNS = ("suite", "scope", "arm", "task", "outcome", "group_key")
GROUP_TOTALS_COLUMNS = (
    *GROUP_KEY_COLUMNS, "first_seq", "records", "priced", "fresh_input", "cache_creation",
    "cache_read", "output", "reasoning_samples", "reasoning", "duration_s",
    "duration_s_error", "turns", "turns_error", "denied_calls", "imputed_samples",
    "imputed_cost_usd", "imputed_cost_usd_error", "odd_values", "bench_versions", "newest")
"""A `record_group_totals` row. Token components are sums over priced records (the
driver reported tokens); `reasoning` over priced records that report it. `<x>_error`
is the compensation of the float sum `<x>`. `bench_versions` and `newest` are JSON
arrays (text)."""

FOLD_COLUMNS = ("seq", *GROUP_KEY_COLUMNS, "duration_s", "fresh_input", "cache_creation",
                "cache_read", "output", "reasoning", "priced", "turns_number", "denied_number",
                "cost_number", "odd_values", "field_bench_version")
"""A fold row: the columns of a summary row (`store.SUMMARY_COLUMNS`, same names and
values) the fold reads, in this order, the group key a slice of it (`row[1:7]`). An
append computes it straight from a record (`store.fold_row_of`), without the summary
row's other columns (JSON texts nothing sums); `fold_row` takes it from a summary row."""

# positions in a fold row (FOLD_COLUMNS order)
_SEQ = 0
_KEY = slice(1, 1 + len(GROUP_KEY_COLUMNS))
_DURATION, _FRESH, _CREATION, _READ, _OUTPUT, _REASONING, _PRICED = 7, 8, 9, 10, 11, 12, 13
_TURNS, _DENIED, _COST, _ODD, _VERSION = 14, 15, 16, 17, 18
# where a summary row (SUMMARY_COLUMNS order) holds each column of a fold row
_SUMMARY_POSITIONS = (0, 1, 2, 3, 4, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 28)
fold_row = operator.itemgetter(*_SUMMARY_POSITIONS)
"""The fold row (`FOLD_COLUMNS`) of a summary row (`store.summary_row`)."""


def fold_key(row: Sequence[Any]) -> tuple[Any, ...]:
    """The group key (`GROUP_KEY_COLUMNS` order) of a fold row."""
    return tuple(row[_KEY])


def compensated_add(total: float, error: float, value: float) -> tuple[float, float]:
    """`(total, error)` after adding `value` (Neumaier's step): the rounding lost by
    `total + value` is kept in `error`. Once a sum has overflowed to infinity the error
    is left as it was (it would become NaN)."""
    added = total + value
    if not math.isfinite(added):
        return added, error
    if abs(total) >= abs(value):
        return added, error + ((total - added) + value)
    return added, error + ((value - added) + total)


class GroupTotals:
    """The totals of one group (one `record_group_totals` row), folded record by record."""

    # the two JSON columns are held as a frozen set (one object per distinct set, shared
    # by every group holding it: a writer keeps tens of thousands of groups, and each
    # object of its own is one more for the garbage collector to walk) with its text,
    # both made again only when a new version is seen, and a list while folding
    __slots__ = (*GROUP_TOTALS_COLUMNS[:-2], "versions", "versions_text", "newest_seqs")

    suite: str
    scope: str
    arm: str
    task: str
    outcome: str
    group_key: str
    first_seq: int
    records: int
    priced: int
    fresh_input: int
    cache_creation: int
    cache_read: int
    output: int
    reasoning_samples: int
    reasoning: int
    duration_s: float
    duration_s_error: float
    turns: float
    turns_error: float
    denied_calls: int
    imputed_samples: int
    imputed_cost_usd: float
    imputed_cost_usd_error: float
    odd_values: int
    versions: frozenset[str] | set[str]
    versions_text: str | None
    newest_seqs: list[int]

    @classmethod
    def empty(cls, key: Sequence[Any], first_seq: int) -> GroupTotals:
        """A group with no record yet (its key in `GROUP_KEY_COLUMNS` order)."""
        totals = cls.__new__(cls)
        (totals.suite, totals.scope, totals.arm, totals.task, totals.outcome,
         totals.group_key) = key
        totals.first_seq = first_seq
        totals.records = totals.priced = totals.fresh_input = totals.cache_creation = 0
        totals.cache_read = totals.output = totals.reasoning_samples = totals.reasoning = 0
        totals.denied_calls = totals.imputed_samples = totals.odd_values = 0
        totals.duration_s = totals.duration_s_error = totals.turns = totals.turns_error = 0.0
        totals.imputed_cost_usd = totals.imputed_cost_usd_error = 0.0
        totals.versions, totals.versions_text, totals.newest_seqs = _NO_VERSIONS, "[]", []
        return totals

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> GroupTotals:
        """A stored row (in `GROUP_TOTALS_COLUMNS` order; text may come back as bytes).
        Raises `ValueError` naming the group and column when a value is not of its
        column's kind (text, a whole number, a number: a row edited outside benchwarden,
        which SQLite's loose column types let through) or its JSON columns are not what
        `row` writes."""
        decoded = _sound_json(row)
        if decoded is not None:
            # what the store reads back from a row it wrote: taken as it is (a report of
            # a suite of thousands of tasks reads tens of thousands of rows)
            totals = cls.__new__(cls)
            for name, value in zip(_PLAIN_COLUMN_NAMES, row, strict=False):
                setattr(totals, name, value)
            ordered = tuple(sorted(set(decoded[0])))
            totals.versions, totals.versions_text = _held_versions(ordered)
            totals.newest_seqs = decoded[1]
            return totals
        totals = cls.__new__(cls)
        values = [value.decode("utf-8") if isinstance(value, bytes) else value
                  for value in row]
        for name, value in zip(GROUP_TOTALS_COLUMNS[:-2], values, strict=False):
            kind = type(value)
            if name in _FLOAT_COLUMNS:
                if kind is int or kind is Decimal:
                    value = float(value)
                elif kind is not float:
                    raise _wrong_kind(values, name, "a number")
            elif name in _TEXT_COLUMNS:
                if kind is not str:
                    raise _wrong_kind(values, name, "text")
            elif kind is not int:
                # PostgreSQL's SUM of integers is NUMERIC (a version 3 store summed
                # read-only): a whole Decimal is a whole number
                if not (isinstance(value, Decimal) and value.is_finite()
                        and value == int(value)):
                    raise _wrong_kind(values, name, "a whole number")
                value = int(value)
            setattr(totals, name, value)
        try:
            versions = json.loads(values[-2])
            newest = json.loads(values[-1])
            ordered = tuple(sorted({str(version) for version in versions}))
            totals.newest_seqs = [int(seq) for seq in newest]
        except (TypeError, ValueError):
            raise ValueError(f"the group totals of {'/'.join(map(str, values[:4]))} hold "
                             "unreadable bench_versions or newest") from None
        totals.versions, totals.versions_text = _held_versions(ordered)
        return totals

    @property
    def bench_versions(self) -> list[str]:
        """The distinct bench versions of the group's records (JSON text each), sorted."""
        return sorted(self.versions)

    @property
    def newest(self) -> tuple[int, ...]:
        """The group's newest sequence numbers (at most `NEWEST_KEPT`), ascending."""
        return tuple(self.newest_seqs)

    @classmethod
    def first(cls, key: Sequence[Any], row: Sequence[Any]) -> GroupTotals:
        """A new group holding its first record, given as a fold row (`FOLD_COLUMNS`):
        the totals `empty(key, seq)` then `fold_rows([row])` make, the same additions
        from the same zeros, without walking the fold's loop (in an append that opens
        new cells, every record is a group's first; a test holds the two equal)."""
        (seq, _, _, _, _, _, _, duration, fresh, creation, read, output, reasoning, priced,
         turns, denied, cost, odd, version) = row
        totals = cls.__new__(cls)
        (totals.suite, totals.scope, totals.arm, totals.task, totals.outcome,
         totals.group_key) = key
        totals.first_seq = seq = int(seq)
        totals.records = 1
        if priced:
            totals.priced = 1
            totals.fresh_input, totals.cache_creation = 0 + fresh, 0 + creation
            totals.cache_read, totals.output = 0 + read, 0 + output
            if reasoning is not None:
                totals.reasoning_samples, totals.reasoning = 1, 0 + reasoning
            else:
                totals.reasoning_samples = totals.reasoning = 0
        else:
            totals.priced = totals.fresh_input = totals.cache_creation = 0
            totals.cache_read = totals.output = totals.reasoning_samples = 0
            totals.reasoning = 0
        totals.duration_s, totals.duration_s_error = compensated_add(0.0, 0.0, duration)
        if turns is not None:
            totals.turns, totals.turns_error = compensated_add(0.0, 0.0, turns)
        else:
            totals.turns = totals.turns_error = 0.0
        totals.denied_calls = 0 if denied is None else 0 + denied
        if cost is not None:
            totals.imputed_samples = 1
            totals.imputed_cost_usd, totals.imputed_cost_usd_error = compensated_add(
                0.0, 0.0, cost)
        else:
            totals.imputed_samples = 0
            totals.imputed_cost_usd = totals.imputed_cost_usd_error = 0.0
        totals.odd_values = 0 + odd
        if version is None:
            totals.versions, totals.versions_text = _NO_VERSIONS, "[]"
        else:
            totals.versions = _version_set((version,))
            totals.versions_text = _versions_text((version,))
        totals.newest_seqs = [seq]
        return totals

    def row(self) -> tuple[Any, ...]:
        """The row to store, in `GROUP_TOTALS_COLUMNS` order."""
        text = self.versions_text
        if text is None:  # many versions: written out once per row, not once per version
            text = self.versions_text = _json_text(sorted(self.versions))
        return _plain_columns(self) + (text, _encode_json(self.newest_seqs).decode())

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.suite, self.scope, self.arm, self.task, self.outcome, self.group_key)

    def fold(self, rows: Iterable[Sequence[Any]]) -> None:
        """Add summary rows of this group (`store.summary_row`), in sequence order."""
        self.fold_rows(map(fold_row, rows))

    def fold_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Add fold rows of this group (`FOLD_COLUMNS`), in sequence order."""
        newest = self.newest_seqs
        versions = self.versions
        own: set[str] | None = None  # the versions, once one is added: copied once
        for (seq, _, _, _, _, _, _, duration, fresh, creation, read, output, reasoning, priced,
             turns, denied, cost, odd, version) in rows:
            self.records += 1
            newest.append(int(seq))
            if priced:
                self.priced += 1
                self.fresh_input += fresh
                self.cache_creation += creation
                self.cache_read += read
                self.output += output
                if reasoning is not None:
                    self.reasoning_samples += 1
                    self.reasoning += reasoning
            self.duration_s, self.duration_s_error = compensated_add(
                self.duration_s, self.duration_s_error, duration)
            if turns is not None:
                self.turns, self.turns_error = compensated_add(
                    self.turns, self.turns_error, turns)
            if denied is not None:
                self.denied_calls += denied
            if cost is not None:
                self.imputed_samples += 1
                self.imputed_cost_usd, self.imputed_cost_usd_error = compensated_add(
                    self.imputed_cost_usd, self.imputed_cost_usd_error, cost)
            self.odd_values += odd
            if version is not None and version not in versions:
                if own is None:
                    own = versions if isinstance(versions, set) else set(versions)
                    versions = own
                own.add(version)
        del newest[:-NEWEST_KEPT]
        if own is not None:
            if len(own) <= SHARED_VERSIONS:
                self.versions, self.versions_text = _held_versions(tuple(sorted(own)))
            else:  # the group's own set, added to in place; its text made by `row`
                self.versions, self.versions_text = own, None

    def same_as(self, other: GroupTotals) -> bool:
        """Every column equal (floats exactly: both were folded the one way)."""
        return self.row() == other.row()


_FLOAT_COLUMNS = frozenset(("duration_s", "duration_s_error", "turns", "turns_error",
                            "imputed_cost_usd", "imputed_cost_usd_error"))
_TEXT_COLUMNS = frozenset(GROUP_KEY_COLUMNS)


def _wrong_kind(values: Sequence[Any], column: str, kind: str) -> ValueError:
    named = "/".join(str(part) for part in values[:4])
    return ValueError(f"the group totals of {named}: column {column} is not {kind}")


# the columns held as they are stored, read in one call (`row`, once per touched group)
_PLAIN_COLUMN_NAMES = GROUP_TOTALS_COLUMNS[:-2]
_plain_columns = operator.attrgetter(*_PLAIN_COLUMN_NAMES)
# the Python type of each column of a row as the store writes it and reads it back
_SOUND_KINDS = tuple(str if name in _TEXT_COLUMNS or name in ("bench_versions", "newest")
                     else float if name in _FLOAT_COLUMNS else int
                     for name in GROUP_TOTALS_COLUMNS)
# `newest` as JSON text: a list of integers encodes as `[1,2,3]`, no spaces
_encode_json = msgspec.json.Encoder().encode
_decode_texts = msgspec.json.Decoder(list[str]).decode
_decode_numbers = msgspec.json.Decoder(list[int]).decode


def _sound_json(row: Sequence[Any]) -> tuple[list[str], list[int]] | None:
    """The two JSON columns (bench versions, newest) of a row as the store writes it
    (every column of its kind, the JSON of its shape), decoded; None for any other row
    (`GroupTotals.from_row`'s general path reads it or says what is wrong)."""
    if tuple(map(type, row)) != _SOUND_KINDS:
        return None
    try:
        return _decode_texts(row[-2]), _decode_numbers(row[-1])
    except msgspec.DecodeError:
        return None


DecodedRow = tuple[tuple[Any, ...], tuple[str, ...], list[int]]
"""A stored row as `decoded_rows` gives it: (plain columns, bench versions, newest)."""


class UnreadableGroupTotals(ValueError):
    """A stored row `GroupTotals.from_row` cannot read (its message names the group)."""


def decoded_rows(rows: Iterable[tuple[Any, ...]]) -> Iterator[DecodedRow]:
    """What `GroupTotals.from_row` makes of each stored row, one row at a time and
    without an object per row (a report of a suite of thousands of tasks reads tens of
    thousands): per row, in order, `(plain, bench_versions, newest)`, `plain` holding
    the columns before the two JSON ones as `from_row` reads them (the row itself when
    the store wrote it, else `from_row(row).row()`), `bench_versions` as
    `GroupTotals.bench_versions` (sorted, distinct; one tuple per distinct text) and
    `newest` as `GroupTotals.newest_seqs`. Raises `UnreadableGroupTotals` where
    `from_row` raises `ValueError`, with its message."""
    versions_of: dict[str, tuple[str, ...]] = {}
    for row in rows:
        sound = _sound_json(row)
        if sound is None:
            try:
                group = GroupTotals.from_row(row)
            except ValueError as error:
                raise UnreadableGroupTotals(str(error)) from None
            yield group.row(), tuple(group.bench_versions), group.newest_seqs
            continue
        text = row[-2]
        versions = versions_of.get(text)
        if versions is None:
            versions = versions_of[text] = tuple(sorted(set(sound[0])))
        yield row, versions, sound[1]


def first_seen_order(np: Any, codes: Any, count: int) -> Any:
    """The distinct values of `codes` (an array of whole numbers from 0 to `count` - 1)
    in the order they first occur, as an int64 array: each value's first position
    found in one pass (`minimum.at`), not by sorting every row (`unique`: a tenth of a
    second at a million rows), then only the distinct values sorted by it."""
    first = np.full(count, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    seen = np.flatnonzero(first < len(codes))
    return seen[np.argsort(first[seen], kind="stable")]


class CodedTexts(Sequence[str]):
    """A text column as its distinct texts (`names`, in the order they first appear)
    and each row's place among them (`codes`, int32): one string per distinct value, not
    one a row (an arm, an outcome or a group key names thousands of groups, a task one
    per arm and outcome), and what a report numbers its keys by without hashing a
    million strings again. Reads as the texts it stands for, row by row."""

    __slots__ = ("codes", "names")

    def __init__(self, names: list[str], codes: Any) -> None:
        self.names = names
        self.codes = codes

    @classmethod
    def of_rows(cls, np: Any, values: list[str], order: Any) -> CodedTexts:
        """The column of `values` (in a database's row order) taken in `order`."""
        place_of: dict[str, int] = {}
        places = np.fromiter([place_of.setdefault(value, len(place_of)) for value in values],
                             dtype=np.int32, count=len(values))[order]
        # renumbered by first appearance in `order`, as a row-by-row reading numbers them
        appearance = first_seen_order(np, places, len(place_of))
        renumbered = np.empty(len(place_of), dtype=np.int32)
        renumbered[appearance] = np.arange(len(place_of), dtype=np.int32)
        names = list(place_of)
        return cls([names[place] for place in appearance.tolist()], renumbered[places])

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.names[code] for code in self.codes[index].tolist()]
        return self.names[int(self.codes[index])]

    def __iter__(self) -> Iterator[str]:
        return map(self.names.__getitem__, self.codes.tolist())


DecodedChunk = tuple[list[Sequence[Any]], list[tuple[str, ...]], Any]
"""Stored rows as `decoded_chunks` gives them: (columns, bench versions, newest), the
columns being the rows' `plain` columns of `decoded_rows` transposed (one sequence per
column, `GROUP_TOTALS_COLUMNS` order: a tuple, or from `whole_scope_chunk` a list of
texts, a `CodedTexts` or a numpy array of whole numbers or floats), the other two one
entry per row:
each row's bench versions, and its newest sequence numbers as a list (`decoded_chunks`)
or as a row of a `NEWEST_KEPT`-wide int64 array, ascending and padded with
`NO_SEQUENCE` (`whole_scope_chunk`).
Only the columns before the two JSON ones are read from it: `whole_scope_chunk` gives
no others (rows decoded by `decoded_chunks` keep their JSON texts after them)."""


def decoded_chunks(rows: Iterable[tuple[Any, ...]], size: int = 8192) -> Iterator[DecodedChunk]:
    """`decoded_rows` of `rows` by chunks of `size`, each transposed: the same values
    (and the same `UnreadableGroupTotals`), checked and decoded a column at a time where
    every row of the chunk is as the store writes it (each column of its kind: one pass
    of `type` over it; newest decoded per row, bench versions per distinct text), row
    by row through `decoded_rows` otherwise. A report of a suite of 333,000 tasks reads
    a million rows: checking each row's 26 kinds in turn was a third of reading them."""
    versions_of: dict[str, tuple[str, ...]] = {}
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, size)):
        columns: list[Sequence[Any]] = list(zip(*chunk, strict=True))
        decoded = _sound_chunk(columns, versions_of)
        if decoded is None:
            rows_decoded = list(decoded_rows(chunk))
            columns = list(zip(*(plain for plain, _, _ in rows_decoded), strict=True))
            decoded = ([versions for _, versions, _ in rows_decoded],
                       [newest for _, _, newest in rows_decoded])
        yield columns, decoded[0], decoded[1]


AGGREGATED_INTEGERS = tuple(name for name in GROUP_TOTALS_COLUMNS[len(GROUP_KEY_COLUMNS):-2]
                            if name not in _FLOAT_COLUMNS)
"""The whole-number columns of a stored row, in `GROUP_TOTALS_COLUMNS` order: what a
store hands `whole_scope_chunk` as one JSON array each."""
AGGREGATED_TEXTS = (*GROUP_KEY_COLUMNS[2:], "bench_versions", "newest")
"""The text columns of a stored row past suite and scope (which a scope's rows share),
in `GROUP_TOTALS_COLUMNS` order: one JSON array of strings each."""
FLOAT_COLUMNS = tuple(name for name in GROUP_TOTALS_COLUMNS if name in _FLOAT_COLUMNS)
"""The float columns of a stored row, in `GROUP_TOTALS_COLUMNS` order: read row by row
(a database's text for a float is not always the float), after `first_seq`."""


class SnapshotsDiffer(Exception):
    """`whole_scope_chunk`'s columns read row by row are not of the rows it aggregated:
    a whole-number column read with them (`first_seq`, `records`) differs from the
    aggregated one (another row order, or two snapshots of the store with an append to
    the scope in between: each record appended adds a group or adds one to its group's
    `records`)."""


def whole_scope_chunk(suite: str, scope: str, aggregated: list[str],
                      floats: Sequence[Any],
                      read_with_floats: Mapping[str, Any] | None = None
                      ) -> DecodedChunk | None:
    """A scope's stored group totals as one `decoded_chunks` chunk, in ascending
    `first_seq` order, from what a database aggregates in one pass (a report of a suite
    of 333,000 tasks reads a million rows: made into a million tuples of 26 values, the
    rows alone took seconds): `aggregated`, one JSON array per column of
    `AGGREGATED_INTEGERS` then of `AGGREGATED_TEXTS` but `newest`, all in one row
    order, then `newest` as two: a JSON array of each row's text's length (-1 for a
    value not text), and every row's text joined with nothing between
    (`_newest_of_joined_texts`); and `floats`, each of `FLOAT_COLUMNS` (float64
    arrays, or anything numpy reads as one), in the same row order. Where the floats
    were read by another statement (SQLite: a float's text is not always the float),
    `read_with_floats` holds whole-number columns of `AGGREGATED_INTEGERS` that
    statement read too (`first_seq`, `records`, as int64): each must be its aggregated
    column, value for value, or `SnapshotsDiffer` is raised. `aggregated` is emptied
    as it is decoded, so each text is let go once read.

    The same values (the same chunk, concatenated) as `decoded_chunks` of the rows read
    in `first_seq`, key order, but `newest` as one `NEWEST_KEPT`-wide int64 array (a
    million small lists took a tenth of a gigabyte), or None where it cannot say so: a
    JSON array not of its column's kind, columns of unequal lengths, two groups sharing
    a `first_seq` (the key would order them), a JSON column not of its shape
    (`decoded_rows` then says what is wrong), or a `newest` text not as the store
    writes it, of more than `NEWEST_KEPT` numbers, or not ascending."""
    import numpy as np  # here: an append, which imports this module, needs no numpy

    if len(aggregated) != len(AGGREGATED_INTEGERS) + len(AGGREGATED_TEXTS) + 1:
        raise ValueError("one JSON array is needed per aggregated column")
    read_with_floats = read_with_floats or {}
    aggregated.reverse()  # popped from the end, in column order
    by_name: dict[str, Any] = {}
    try:
        first_seq = _integer_array(np, aggregated.pop(), None)
        if first_seq is None:
            return None
        count = len(first_seq)
        if "first_seq" in read_with_floats:
            _same_rows(np, first_seq, read_with_floats["first_seq"], "first_seq")
        order = np.argsort(first_seq, kind="stable")
        by_name["first_seq"] = first_seq = first_seq[order]
        if count > 1 and not bool(np.all(first_seq[1:] > first_seq[:-1])):
            return None
        for name in AGGREGATED_INTEGERS[1:]:
            column = _integer_array(np, aggregated.pop(), count)
            if column is None:
                return None
            if name in read_with_floats:
                _same_rows(np, column, read_with_floats[name], name)
            by_name[name] = column[order]

        def in_order(values: list[Any]) -> list[Any]:
            """A column's values in `first_seq` order (picked as an array of objects:
            a list of a million indices would be held beside it)."""
            picked = np.fromiter(values, dtype=object, count=count)
            return picked[order].tolist()  # type: ignore[no-any-return]

        for name in AGGREGATED_TEXTS[:-2]:
            values = _decode_texts(aggregated.pop())
            if len(values) != count:
                return None
            by_name[name] = CodedTexts.of_rows(np, values, order)
            del values
        versions = _decode_texts(aggregated.pop())
        text_lengths = _integer_array(np, aggregated.pop(), count)
        joined = aggregated.pop()
        if len(versions) != count or text_lengths is None:
            return None
        counted = _newest_of_joined_texts(np, text_lengths, joined)
        del joined
        if counted is None:
            return None
        newest = _newest_matrix(np, *counted)
        if newest is None:
            return None
        versions_of = {text: tuple(sorted(set(_decode_texts(text))))
                       for text in set(versions)}
    except msgspec.DecodeError:
        return None
    for name, column in zip(FLOAT_COLUMNS, floats, strict=True):
        if len(column) != count:
            return None
        by_name[name] = np.asarray(column, dtype=np.float64)[order] if count else \
            np.zeros(0, dtype=np.float64)
    by_name["suite"], by_name["scope"] = [suite] * count, [scope] * count
    return ([by_name.pop(name) for name in GROUP_TOTALS_COLUMNS[:-2]],
            [versions_of[text] for text in in_order(versions)], newest[order])


def float_columns_of_json(floats: Sequence[str]) -> list[array.array[Any]] | None:
    """`whole_scope_chunk`'s `floats` from JSON arrays aggregated in the same pass as its
    other columns (in their row order: nothing to check them against), for a database
    whose text of a float is that float (PostgreSQL with `extra_float_digits` above 0:
    the shortest text that reads back as the same float), one per `FLOAT_COLUMNS`. None
    where one is not an array of numbers (PostgreSQL writes an infinity as a JSON
    string), or where it holds a negative zero: written `-0` (a whole number), JSON
    reads it as 0.0."""
    if any("-0," in text or "-0]" in text for text in floats):
        return None
    try:
        return [array.array("d", _decode_floats(text)) for text in floats]
    except msgspec.DecodeError:
        return None


_decode_floats = msgspec.json.Decoder(list[float]).decode


NO_SEQUENCE = -1
"""Fills a row of `whole_scope_chunk`'s `newest` past the group's newest numbers."""


def _newest_of_joined_texts(np: Any, text_lengths: Any, joined: str
                            ) -> tuple[Any, Any] | None:
    """From each row's `newest` text as the store writes it, joined with nothing between,
    and each text's length: how many numbers each row's list holds, and all the numbers
    one after another (int64 arrays). None unless every text is `[`, whole numbers in
    JSON's own form (no sign, no leading zero) with a comma between each two, `]`, as
    the store writes them (a space or anything else: `decoded_rows` reads the rows),
    and unless the lengths add up to the joined text (a text is never counted into its
    neighbour's row)."""
    count = len(text_lengths)
    try:
        raw = joined.encode("ascii")
    except UnicodeEncodeError:
        return None
    if count == 0:
        return (text_lengths, np.zeros(0, dtype=np.int64)) if not raw else None
    if raw.translate(None, b"0123456789,[]") or int(text_lengths.min()) < 2 or \
            int(text_lengths.sum()) != len(raw) or raw.count(b"[") != count:
        return None
    octets = np.frombuffer(raw, dtype=np.uint8)
    ends = np.cumsum(text_lengths)
    starts = ends - text_lengths
    if not (bool(np.all(octets[starts] == ord("[")))
            and bool(np.all(octets[ends - 1] == ord("]")))):
        return None  # with as many `[` as rows, none is inside a text either
    commas = np.flatnonzero(octets == ord(","))  # (each row's count by where they fall)
    lengths = np.where(text_lengths > 2, np.searchsorted(commas, ends)
                       - np.searchsorted(commas, starts) + 1, 0)
    numbers = _whole_numbers(np, octets, raw.translate(_SEPARATORS_AS_SPACES), " ")
    # a row of digits and commas holds at most one number more than it has commas: as
    # many in all means each row's commas each stand between two numbers
    if numbers is None or len(numbers) != int(lengths.sum()):
        return None
    return lengths, numbers


_SEPARATORS_AS_SPACES = bytes.maketrans(b",[]", b"   ")
_INT64_LIMITS = (-(2**63), 2**63 - 1)


def _whole_numbers(np: Any, octets: Any, text: bytes, separator: str,
                   digit: Any = None) -> Any:
    """The whole numbers in `text` (digit runs, each with at most a `-` before it,
    between `separator`s: the caller has checked that shape, so numpy reads it to the
    end; `octets` the same bytes as an array), as an int64 array; None where one has a
    leading zero (which JSON does not allow), where numpy reads another count of them
    than there are runs of digits, or where one reaches int64's ends (numpy stops there:
    the number may have been larger). `digit`: where `octets` are digits, if known."""
    if digit is None:
        digit = (octets >= ord("0")) & (octets <= ord("9"))
    first_digit = _run_starts(digit)
    runs = int(np.count_nonzero(first_digit))
    if runs == 0:
        return np.zeros(0, dtype=np.int64)  # (numpy reads a blank text as one zero)
    if bool(np.any(first_digit[:-1] & (octets[:-1] == ord("0")) & digit[1:])):
        return None
    try:
        numbers = np.fromstring(text, dtype=np.int64, sep=separator)
    except ValueError:  # (numpy 2's word for what it cannot read to the end)
        return None
    if len(numbers) != runs or int(numbers.min()) == _INT64_LIMITS[0] or \
            int(numbers.max()) == _INT64_LIMITS[1]:
        return None
    return numbers


def _run_starts(marked: Any) -> Any:
    """Where each run of marked bytes begins."""
    starts = marked.copy()
    starts[1:] &= ~marked[:-1]
    return starts


def _newest_matrix(np: Any, lengths: Any, flat: Any) -> Any:
    """Each row's `newest` numbers (`lengths[i]` of them, taken in turn from `flat`, an
    int64 array) as a row of `NEWEST_KEPT`, ascending and padded with `NO_SEQUENCE`;
    None where a row holds more than `NEWEST_KEPT` or is not strictly ascending, or
    where the lengths do not add up to the numbers."""
    if len(lengths) and (int(lengths.min()) < 0 or int(lengths.max()) > NEWEST_KEPT):
        return None
    if int(lengths.sum()) != len(flat):
        return None
    if len(flat) and int(flat.min()) < 0:
        return None  # (the padding must not be mistaken for a number)
    matrix = np.full((len(lengths), NEWEST_KEPT), NO_SEQUENCE, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    for place in range(NEWEST_KEPT):
        holding = lengths > place
        matrix[holding, place] = flat[starts[holding] + place]
        if place and not bool(np.all(matrix[holding, place] > matrix[holding, place - 1])):
            return None
    return matrix


def _same_rows(np: Any, aggregated: Any, read: Any, name: str) -> None:
    """Raise `SnapshotsDiffer` unless column `name` as aggregated (an int64 array) and
    as read row by row hold the same values in the same order."""
    if len(read) != len(aggregated) or (len(read) and not np.array_equal(
            np.asarray(read, dtype=np.int64), aggregated)):
        raise SnapshotsDiffer(f"the {name} column read row by row is not the aggregated one")


def _integer_array(np: Any, text: str, count: int | None) -> Any:
    """A JSON array of whole numbers as an int64 array, or None where it is not one or
    has not `count` values (any number of them where `count` is None). As a database
    writes one (digits, signs, commas, spaces between brackets), read by numpy
    (`_whole_numbers`: about half the time of decoding a million numbers to Python's);
    anything else, or what that declines, by JSON's decoder, which says what it is."""
    values = _plain_integer_array(np, text)
    if values is None:
        decoded = _decode_numbers(text)
        try:
            values = np.fromiter(decoded, dtype=np.int64, count=len(decoded))
        except (OverflowError, TypeError, ValueError):
            return None
    return values if count is None or len(values) == count else None


def _plain_integer_array(np: Any, text: str) -> Any:
    """`_integer_array`'s reading by numpy of `[`, whole numbers (each with at most a `-`
    before its digits) with a comma between each two, spaces allowed around them, `]`;
    None for any other text. (SQLite writes neither spaces nor, in these columns, signs:
    their checks are skipped where there are none.)"""
    try:
        raw = text.encode("ascii").strip()
    except UnicodeEncodeError:
        return None
    if raw[:1] != b"[" or raw[-1:] != b"]" or raw[1:-1].translate(None, b"0123456789-, "):
        return None
    spaced = b" " in raw
    body = raw[1:-1].translate(None, b" ") if spaced else raw[1:-1]
    if not body:
        return np.zeros(0, dtype=np.int64)
    octets = np.frombuffer(body, dtype=np.uint8)
    digit = (octets >= ord("0")) & (octets <= ord("9"))
    comma = octets == ord(",")
    if comma[0] or comma[-1] or bool(np.any(comma[1:] & comma[:-1])):
        return None  # an empty item
    if b"-" in body:
        minus = octets == ord("-")
        after_comma = np.concatenate(([True], comma[:-1]))  # (the first item follows `[`)
        before_digit = np.concatenate((digit[1:], [False]))
        if bool(np.any(minus & ~(after_comma & before_digit))):
            return None  # a sign out of place, or a sign alone
    if spaced:
        whole = np.frombuffer(raw, dtype=np.uint8)
        if int(np.count_nonzero(_run_starts((whole >= ord("0")) & (whole <= ord("9"))))) \
                != int(np.count_nonzero(_run_starts(digit))):
            return None  # a space between two digits (`1 2`): one number once spaces go
    numbers = _whole_numbers(np, octets, body, ",", digit)
    if numbers is None or len(numbers) != int(np.count_nonzero(comma)) + 1:
        return None
    return numbers


def _sound_chunk(columns: list[Sequence[Any]], versions_of: dict[str, tuple[str, ...]]
                 ) -> tuple[list[tuple[str, ...]], list[list[int]]] | None:
    """A chunk's bench versions and newest per row when every row is as `_sound_json`
    takes it (every column of its kind, both JSON columns of their shape); else None."""
    for column, kind in zip(columns, _SOUND_KINDS, strict=True):
        if set(map(type, column)) != {kind}:
            return None
    try:
        newest = _newest_of_chunk(columns[-1])
        for text in set(columns[-2]).difference(versions_of):
            versions_of[text] = tuple(sorted(set(_decode_texts(text))))
    except msgspec.DecodeError:
        return None
    return [versions_of[text] for text in columns[-2]], newest


# a chunk's `newest` texts, one a line, each a list of digits and commas: then the texts
# joined by commas inside brackets are one JSON list whose items are the texts' lists
# (no text can hold a bracket or a line break to shift an item into the next)
_NUMBER_LIST_LINES = re.compile(r"\[[0-9,]*\](?:\n\[[0-9,]*\])*")
_decode_number_lists = msgspec.json.Decoder(list[list[int]]).decode


def _newest_of_chunk(texts: Sequence[str]) -> list[list[int]]:
    """`_decode_numbers` of each of a chunk's `newest` texts (the same lists, the same
    `DecodeError`): decoded in one call where every text is a plain list of digits and
    commas as the store writes it (`_NUMBER_LIST_LINES`), one by one otherwise. A report
    of a suite of 333,000 tasks reads a million: a call each was seconds."""
    if _NUMBER_LIST_LINES.fullmatch("\n".join(texts)):
        try:
            lists = _decode_number_lists("[" + ",".join(texts) + "]")
        except msgspec.DecodeError:
            lists = None  # (a text such as `[1,,2]`: said by the one-by-one decoding)
        if lists is not None and len(lists) == len(texts):
            return lists
    return list(map(_decode_numbers, texts))


def _json_text(values: list[Any]) -> str:
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


_NO_VERSIONS: frozenset[str] = frozenset()


SHARED_VERSIONS = 16
"""Bench versions up to which a group holds them as a frozen set and its stored text,
each shared with every group holding the same (a store holds a handful of versions).
Past it, a set of the group's own, added to in place, its text written out when the
row is (`GroupTotals.row`): a store written by another tool gave each record a version
of its own, and each new one copied, sorted and encoded the group's whole set again (a
writer's and `verify`'s time quadratic in a group's versions; `verify` 4x at a million
records), while the caches below held their largest sets."""


def _held_versions(ordered: tuple[str, ...]) -> tuple[frozenset[str] | set[str], str | None]:
    """How a group holds these bench versions (sorted): the shared frozen set and its
    text up to `SHARED_VERSIONS`, else a set of its own and no text yet."""
    if len(ordered) <= SHARED_VERSIONS:
        return _version_set(ordered), _versions_text(ordered)
    return set(ordered), None


@functools.lru_cache(maxsize=64)
def _version_set(versions: tuple[str, ...]) -> frozenset[str]:
    """The one frozen set of these bench versions (sorted) the groups holding them share."""
    return frozenset(versions)


@functools.lru_cache(maxsize=64)
def _versions_text(versions: tuple[str, ...]) -> str:
    """The stored text of a set of bench versions (a store holds a handful of sets: one
    text each, not one `json.dumps` per new group)."""
    return _json_text(list(versions))


def group_of(summary_row: Sequence[Any]) -> tuple[Any, ...]:
    """The group key (`GROUP_KEY_COLUMNS` order) of a `store.summary_row`."""
    return fold_key(fold_row(summary_row))


def fold_into(totals: dict[tuple[Any, ...], GroupTotals],
              summary_rows: Sequence[Sequence[Any]]) -> list[GroupTotals]:
    """Fold summary rows (in sequence order) into `totals` by group, making groups not
    there yet; returns the groups touched, in first-touched order."""
    return fold_rows_into(totals, list(map(fold_row, summary_rows)))


def fold_rows_into(totals: dict[tuple[Any, ...], GroupTotals],
                   rows: Sequence[Sequence[Any]]) -> list[GroupTotals]:
    """`fold_into` of fold rows (`FOLD_COLUMNS`)."""
    return fold_groups_into(totals, rows_by_group(rows))


def fold_batch_into(totals: dict[tuple[Any, ...], GroupTotals],
                    rows: Iterable[Sequence[Any]]) -> list[GroupTotals]:
    """`fold_rows_into` for an append's batch: the same totals (each group's rows are
    added in the order given, as there), the rows folded one at a time in the batch's
    order instead of gathered by group first, so a batch of new groups (a run opening
    its cells) makes no list per group; a group's first row makes it (`first`).
    Returns the groups touched, in first-touched order."""
    touched: dict[tuple[Any, ...], GroupTotals] = {}
    for row in rows:
        key = tuple(row[_KEY])  # fold_key, inline: once per record of every append
        group = totals.get(key)
        if group is None:
            group = totals[key] = GroupTotals.first(key, row)
        else:
            group.fold_rows((row,))
        touched[key] = group
    return list(touched.values())


def grouped_by(items: Iterable[Item], key_of: Callable[[Item], Any]) -> dict[Any, list[Item]]:
    """`items` by `key_of` each: the keys in first-seen order, each list in the order
    given (the one grouping the fold and the report's views use)."""
    grouped: dict[Any, list[Item]] = {}
    for item in items:
        key = key_of(item)
        found = grouped.get(key)
        if found is None:
            grouped[key] = [item]
        else:
            found.append(item)
    return grouped


def rows_by_group(rows: Iterable[Sequence[Any]]) -> dict[tuple[Any, ...], list[Sequence[Any]]]:
    """Fold rows by group key, the groups in first-seen order, each group's rows in the
    order given."""
    return grouped_by(rows, fold_key)


def fold_groups_into(totals: dict[tuple[Any, ...], GroupTotals],
                     by_group: Mapping[tuple[Any, ...], Sequence[Sequence[Any]]]
                     ) -> list[GroupTotals]:
    """Fold each group's fold rows (in sequence order; `rows_by_group`) into `totals`,
    making groups not there yet; returns the groups touched, in the order given."""
    touched = []
    for key, rows in by_group.items():
        group = totals.get(key)
        if group is None:
            group = totals[key] = GroupTotals.first(key, rows[0])
            if len(rows) > 1:
                group.fold_rows(rows[1:])
        else:
            group.fold_rows(rows)
        touched.append(group)
    return touched


def first_difference(stored: Iterable[GroupTotals],
                     expected: dict[tuple[Any, ...], GroupTotals]) -> str | None:
    """Pure, for `verify`: the first group (in key order) whose stored totals differ from
    the totals recomputed from the records, in words; None when all agree."""
    found = {group.key: group for group in stored}
    for key in sorted(set(found) | set(expected), key=lambda key: tuple(map(str, key))):
        named = "/".join(str(part) for part in key[:4]) + f" ({key[4]}, {key[5]})"
        if key not in found:
            return f"group {named} is missing"
        if key not in expected:
            return f"group {named} totals records the store does not hold"
        if not found[key].same_as(expected[key]):
            wrong = next(name for name, a, b in zip(GROUP_TOTALS_COLUMNS, found[key].row(),
                                                    expected[key].row(), strict=True)
                         if a != b)
            return f"group {named} has a wrong {wrong}"
    return None

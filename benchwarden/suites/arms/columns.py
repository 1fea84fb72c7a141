"""A scope's group totals held by column: one numpy array per field, groups by position.

A suite of hundreds of thousands of tasks has a million groups (arm, task, tier,
outcome, failure). Held as a `views.Summary` (a dict of keys to `Totals`), each group
cost about 1.4 KB and 30 µs, and every union the views asked for walked Python objects:
50 s and 2.9 GiB for one report. `Columns` holds the same totals as arrays (8 bytes a
field a group), names interned once (a group holds integer codes), and answers the
views' unions with vectorised sums.

Invariants:
- Pure: nothing here reads a file, a clock or a database.
- The same numbers as a `views.Summary`'s groups merged one by one (`Totals.merge`), to
  the last bit (tested with hypothesis against the views as they were computed from a
  `Summary`, `tests/suites/arms/reference_views.py`): integer fields are summed exactly
  (int64 where no sum of a column can overflow it, Python integers otherwise); a float
  union is the same additions in the same order (0.0, then each group in turn: insertion
  order for `total`, first-seen order for `by_task`), never a pairwise or reordered sum.
- Groups are held in insertion order (the order a `Summary` holds them; from the store,
  ascending `first_seq`), with their first-seen order beside it.
- Built, then read: nothing changes a `Columns` once made; unions asked twice are
  computed once.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchwarden.core.group_totals import NO_SEQUENCE, first_seen_order
from benchwarden.core.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: a command that builds no report does not pay for numpy
    np = lazy_module("numpy")


TOTAL_FIELDS = ("samples", "passes", "priced", "fresh_input", "cache_creation", "cache_read",
                "output", "reasoning_samples", "reasoning", "duration_s", "turns",
                "denied_calls", "imputed_samples", "imputed_cost_usd", "odd_values")
"""`views.Totals`' summed fields, in its order."""
FLOAT_FIELDS = frozenset(("duration_s", "turns", "imputed_cost_usd"))
KEY_FIELDS = ("arm", "task", "tier", "outcome", "failure")
"""`views.GroupKey`'s fields, in its order."""
NO_TRIAL = NO_SEQUENCE
"""Fills a group's row of `newest` past its newest trials (sequence numbers are >= 1): the
store's own filler, so a scope it hands over with its newest rows made keeps them."""
_INT64_LIMIT = 2**63


def exact_integers(column: np.ndarray) -> np.ndarray:
    """`column` as int64 when no sum of any of its values can overflow int64, else as
    Python integers (object): a sum is then exact whatever the values."""
    if column.dtype == object or not len(column):
        return column
    largest = max(abs(int(column.min())), abs(int(column.max())))
    if largest * len(column) < _INT64_LIMIT:
        return column
    return column.astype(object)


def sequential_sum(values: np.ndarray) -> float:
    """`0.0 + values[0] + values[1] + ...` added in that order (what merging `Totals` one
    by one does): numpy's `sum` adds pairwise, a cumulative sum adds in order."""
    if not len(values):
        return 0.0
    return float(np.cumsum(np.concatenate(([0.0], values)))[-1])


def segment_sums(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per segment (`values[start:start + length]`, every length >= 1), `0.0` plus its
    values added one at a time in order: a step per position (segments are a task's
    groups: a handful), each step vectorised over every segment."""
    sums = np.zeros(len(starts))
    longest = int(lengths.max()) if len(lengths) else 0
    for step in range(longest):
        if step == 0:
            sums += values[starts]
            continue
        going = np.flatnonzero(lengths > step)
        sums[going] += values[starts[going] + step]
    return sums


def first_seen_codes(codes: np.ndarray) -> np.ndarray:
    """The distinct values of `codes` (codes: whole numbers from 0) in the order they
    first occur, of `codes`' type."""
    count = int(codes.max()) + 1 if len(codes) else 0
    return first_seen_order(np, codes, count).astype(codes.dtype)  # type: ignore[no-any-return]


class TaskColumns:
    """Unions of groups per task: `tasks` (names, in the order their first group was
    seen) and one array per `TOTAL_FIELDS` name, position by position."""

    __slots__ = ("columns", "tasks")

    def __init__(self, tasks: list[str], columns: dict[str, np.ndarray]) -> None:
        self.tasks = tasks
        self.columns = columns

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def floats(self, name: str) -> np.ndarray:
        """A field as floats (`float(value)` of each sum)."""
        column = self.columns[name]
        return column if column.dtype == np.float64 else column.astype(np.float64)

    def cost_equivalent(self, weights: Any) -> np.ndarray:
        """Per task, `Totals.cost_equivalent`: the same products added in the same order."""
        columns = self.columns
        return (weights.fresh_input * columns["fresh_input"]  # type: ignore[no-any-return]
                + weights.cache_creation * columns["cache_creation"]
                + weights.cache_read * columns["cache_read"]
                + weights.output * columns["output"]).astype(np.float64)


class Columns:
    """The totals of a scope's groups by column (see the module's docstring).

    `names[field]` lists each key field's distinct values (`None` included where a tier
    or failure is absent); `codes[field]` gives each group's value as a position in
    that list. `values[name]` holds each group's totals of `TOTAL_FIELDS`; `newest` each
    group's newest sequence numbers, ascending, padded with `NO_TRIAL`; `first_seq` the
    sequence number of each group's first record."""

    def __init__(self, names: dict[str, list[Any]], codes: dict[str, np.ndarray],
                 values: dict[str, np.ndarray], newest: np.ndarray, first_seq: np.ndarray,
                 versions: set[str]) -> None:
        self.names = names
        self.codes = codes
        self.values = {name: (column if name in FLOAT_FIELDS else exact_integers(column))
                       for name, column in values.items()}
        self.newest = newest
        self.first_seq = first_seq
        self.versions = versions
        self._code_of = {field: {value: code for code, value in enumerate(values)}
                         for field, values in names.items()}
        order = np.argsort(first_seq, kind="stable")
        self._in_first_seen_order = bool(np.array_equal(order, np.arange(len(first_seq))))
        self._ordered = None if self._in_first_seen_order else order
        self._memo: dict[tuple[Any, ...], Any] = {}

    def __len__(self) -> int:
        return len(self.first_seq)

    @property
    def samples(self) -> int:
        return int(self.values["samples"].sum())

    def ordered(self) -> np.ndarray:
        """Every group's position, in first-seen order (ties in insertion order)."""
        return np.arange(len(self)) if self._ordered is None else self._ordered

    def code(self, field: str, value: Any) -> int | None:
        """The code of a key field's value (None: no group has it)."""
        return self._code_of[field].get(value)

    def names_of(self, field: str, positions: np.ndarray) -> list[Any]:
        """The key field's value of the groups at `positions`."""
        names = self.names[field]
        return [names[code] for code in self.codes[field][positions].tolist()]

    def matching(self, match: Mapping[str, Any], *, first_seen_order: bool) -> np.ndarray:
        """Positions of the groups whose key fields equal `match`, in insertion order or
        first-seen order."""
        for name in match:
            if name not in KEY_FIELDS:
                raise TypeError(f"a group has no field {name!r}")
        order = self.ordered() if first_seen_order else np.arange(len(self))
        if not match:
            return order
        chosen = np.ones(len(self), dtype=bool)
        for name, value in match.items():
            code = self._code_of[name].get(value)
            if code is None:
                return np.zeros(0, dtype=np.int64)
            chosen &= self.codes[name] == code
        return order[chosen[order]]

    def total(self, **match: Any) -> dict[str, Any]:
        """The union of the groups matching, as `Summary.total` (insertion order): a
        mapping of `TOTAL_FIELDS` to Python numbers."""
        memo = ("total", *sorted(match.items(), key=lambda item: item[0]))
        found = self._memo.get(memo)
        if found is None:
            found = self._memo[memo] = self.total_of(self.matching(match,
                                                                   first_seen_order=False))
        return found  # type: ignore[no-any-return]

    def total_of(self, chosen: np.ndarray) -> dict[str, Any]:
        """`total` of the groups at `chosen` (positions in insertion order)."""
        return {name: (sequential_sum(column[chosen]) if name in FLOAT_FIELDS
                       else int(column[chosen].sum()) if len(chosen) else 0)
                for name, column in self.values.items()}

    def partition(self, field: str, match: Mapping[str, Any], *,
                  first_seen_order: bool) -> dict[int, np.ndarray]:
        """The positions `matching(match)` gives, split by their code of `field`: each
        code's positions in the same order. One pass and one stable sort, where asking
        `matching` once per value scans every group each time (a suite whose every task
        is its own tier asked it once per task and arm)."""
        chosen = self.matching(match, first_seen_order=first_seen_order)
        codes = self.codes[field][chosen]
        order = np.argsort(codes, kind="stable")
        grouped, sorted_codes = chosen[order], codes[order]
        starts = np.flatnonzero(np.diff(sorted_codes)) + 1 if len(chosen) else np.zeros(0, int)
        return {int(sorted_codes[part[0]]): grouped[part]
                for part in np.split(np.arange(len(chosen)), starts) if len(part)}

    def by_task_of(self, chosen: np.ndarray) -> TaskColumns:
        """`by_task` of the groups at `chosen` (positions in first-seen order)."""
        return self._by_task(chosen)

    def by_task(self, **match: Any) -> TaskColumns:
        """The union of the groups matching, per task, as `Summary.by_task`: tasks in
        first-seen order, each task's groups merged in first-seen order. An arm's are
        kept (the views ask for them again and again); others are made when asked (an
        arm and tier's are asked once: kept, they were a tenth of a report's memory at a
        million groups)."""
        if list(match) != ["arm"]:
            return self._by_task(self.matching(match, first_seen_order=True))
        memo = ("by_task", match["arm"])
        found = self._memo.get(memo)
        if found is None:
            found = self._memo[memo] = self._by_task(self.matching(match,
                                                                   first_seen_order=True))
        return found  # type: ignore[no-any-return]

    def _by_task(self, chosen: np.ndarray) -> TaskColumns:
        tasks = self.codes["task"][chosen]
        in_order = first_seen_codes(tasks)
        rank = np.empty(len(self.names["task"]), dtype=np.int64)
        rank[in_order] = np.arange(len(in_order))
        ranks = rank[tasks]
        # each task's groups together, tasks in first-seen order, groups kept in order
        grouped = chosen[np.argsort(ranks, kind="stable")]
        lengths = np.bincount(ranks, minlength=len(in_order))
        starts = (np.cumsum(lengths) - lengths).astype(np.int64)
        columns: dict[str, np.ndarray] = {}
        for name, column in self.values.items():
            picked = column[grouped]
            if name in FLOAT_FIELDS:
                columns[name] = segment_sums(picked, starts, lengths)
            elif len(picked):
                columns[name] = np.add.reduceat(picked, starts)
            else:
                columns[name] = picked
        names = self.names["task"]
        return TaskColumns([names[code] for code in in_order.tolist()], columns)

    def cell_samples(self, arm: str, tasks: Sequence[str]) -> list[int]:
        """Samples of each of `tasks` in `arm` (0 where it has none)."""
        return self.cell_sample_counts(arm, tasks).tolist()  # type: ignore[no-any-return]

    def cell_sample_counts(self, arm: str, tasks: Sequence[str]) -> np.ndarray:
        """`cell_samples` as an array."""
        counts = np.zeros(len(tasks), dtype=self.values["samples"].dtype)
        chosen = self.matching({"arm": arm}, first_seen_order=False)
        if len(chosen):
            where = self._task_positions(tasks)[self.codes["task"][chosen]]
            shown = where >= 0
            np.add.at(counts, where[shown], self.values["samples"][chosen][shown])
        return counts

    def _task_positions(self, tasks: Sequence[str]) -> np.ndarray:
        """Each task code's position in `tasks` (-1: not among them), made once per list
        of tasks (a report asks it for every arm, twice: at 333,000 tasks each making was
        a quarter of a second)."""
        memo = ("task_positions", tuple(tasks))
        found = self._memo.get(memo)
        if found is None:
            position_of = {task: position for position, task in enumerate(tasks)}
            found = self._memo[memo] = np.array(
                [position_of.get(task, -1) for task in self.names["task"]], dtype=np.int64)
        return found  # type: ignore[no-any-return]

    @classmethod
    def of_groups(cls, groups: Mapping[Any, Any], first_seen: Mapping[Any, int],
                  versions: Iterable[str]) -> Columns:
        """The columns of a `views.Summary`'s groups (keys `GroupKey`, values `Totals`)."""
        names: dict[str, list[Any]] = {field: [] for field in KEY_FIELDS}
        code_of: dict[str, dict[Any, int]] = {field: {} for field in KEY_FIELDS}
        codes: dict[str, list[int]] = {field: [] for field in KEY_FIELDS}
        for key in groups:
            for field, value in zip(KEY_FIELDS, key, strict=True):
                code = code_of[field].get(value)
                if code is None:
                    code = code_of[field][value] = len(names[field])
                    names[field].append(value)
                codes[field].append(code)
        totals = list(groups.values())
        values = {}
        for name in TOTAL_FIELDS:
            found = [getattr(part, name) for part in totals]
            values[name] = (np.array(found, dtype=np.float64) if name in FLOAT_FIELDS
                            else _integers(found))
        width = max([len(part.newest) for part in totals] + [NEWEST_WIDTH])
        newest = np.full((len(totals), width), NO_TRIAL, dtype=np.int64)
        for position, part in enumerate(totals):
            newest[position, :len(part.newest)] = part.newest
        return cls(names, {field: np.array(found, dtype=np.int64)
                           for field, found in codes.items()},
                   values, newest, np.array([first_seen[key] for key in groups],
                                            dtype=np.int64), set(versions))


NEWEST_WIDTH = 3
"""Columns of `newest` at least (`views.TRIALS_PER_CELL`: a store keeps as many)."""


def _integers(values: Sequence[int]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array(values, dtype=object)


def integer_chunk(values: Sequence[int]) -> np.ndarray:
    """A chunk of an integer column: int64, or Python integers when one does not fit."""
    return _integers(values)


class ColumnBuffer:
    """A column read in chunks, grown in place (`array.array`: int64 or float64 values
    side by side, reallocated as it grows): chunk after chunk made into arrays of their
    own and joined at the end left hundreds of megabytes of freed chunks among live
    objects at a million groups, memory the process kept. A first chunk that is already
    an array of the column's type is kept as it is, not copied (a store that hands over
    a scope as one chunk: a copy of every column held beside it was a seventh of a
    report's peak at a million groups). A whole number past int64 turns the column into
    Python integers (exact, slower)."""

    __slots__ = ("first", "held", "spilled")

    def __init__(self, floats: bool) -> None:
        self.held = array.array("d" if floats else "q")
        self.first: np.ndarray | None = None
        self.spilled: list[Any] | None = None

    def extend(self, values: Sequence[Any]) -> None:
        if isinstance(values, np.ndarray) and values.dtype == self._dtype():
            self.extend_array(values)
            return
        self._unfirst()
        if self.spilled is not None:
            self.spilled.extend(values)
            return
        before = len(self.held)
        try:
            self.held.extend(values)
        except OverflowError:
            del self.held[before:]  # what the failed extend appended
            self.spilled = [*self.held, *values]
            self.held = array.array(self.held.typecode)

    def extend_array(self, values: np.ndarray) -> None:
        """Values already an array of the column's type. A first one is taken over, not
        copied: `finished` may hand it back, and the column's reader may write to it, so
        it is an array no one else holds (a chunk's own column)."""
        if self.spilled is None and self.first is None and not len(self.held):
            self.first = values
            return
        self._unfirst()
        if self.spilled is not None:
            self.spilled.extend(values.tolist())
        else:
            self.held.frombytes(values.tobytes())

    def _dtype(self) -> type[np.generic]:
        return np.float64 if self.held.typecode == "d" else np.int64

    def _unfirst(self) -> None:
        """The kept first chunk copied into the buffer, before another chunk joins it."""
        if self.first is not None:
            first, self.first = self.first, None
            self.held.frombytes(np.ascontiguousarray(first, dtype=self._dtype()).tobytes())

    def finished(self) -> np.ndarray:
        """The column (its buffer shared, not copied)."""
        if self.first is not None:
            return self.first
        if self.spilled is not None:
            return np.array(self.spilled, dtype=object)
        dtype = self._dtype()
        return np.frombuffer(self.held, dtype=dtype) if len(self.held) \
            else np.zeros(0, dtype=dtype)


__all__ = ["FLOAT_FIELDS", "KEY_FIELDS", "NO_TRIAL", "TOTAL_FIELDS", "ColumnBuffer", "Columns",
           "TaskColumns", "exact_integers", "first_seen_codes", "segment_sums", "sequential_sum"]

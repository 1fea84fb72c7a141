"""Views of arms records: pure functions from per-cell totals to JSON-able tables.

Nothing here reads a file, a clock or a socket: a report reads the store's group totals
into `Columns` (`columns_from_chunks` of `Store.fold_group_chunks`: one array per field,
a million groups in a few hundred megabytes), tests hand in-memory records to the same
functions (every view accepts records, a `Summary` or `Columns`; the first two are made
columns). `Summary` (a dict of groups) is what the streaming pass over records makes, and
what tests compare.

Invariants:
- One pass, bounded memory: `summarize` keeps totals per (arm, task, tier, outcome,
  failure) group and a few trial numbers per cell, never the records; every view is
  computed from those totals (integer token counts summed exactly, float sums as
  compensated pairs added in sequence order by `core.group_totals.compensated_add`: the
  store's group totals are folded the same way, so a report summed by the database
  equals the streamed one to the last bit, whatever the batches the records came in).
- Every rate comes with a Wilson interval and every mean with a standard error
  (clustered by task: trials of one task are not independent) and its interval.
- An empty group yields `None` (rendered as a dash), never 0.
- Cost-equivalent tokens are computed here from stored components and a weight
  table, so history is re-weighted without re-running.
- Token means use only samples whose driver reported tokens (a hung external agent
  reports none); `n` says how many.
- Paired comparisons are over tasks both arms covered, `b - a`, with the minimum
  detectable effect at that number of pairs, and a sentence saying what they show.
"""

from __future__ import annotations

import array
import functools
import json
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from benchwarden.core.group_totals import (
    NEWEST_KEPT,
    CodedTexts,
    DecodedChunk,
    compensated_add,
)
from benchwarden.core.lazy import lazy_module
from benchwarden.core.records import DEFAULT_WEIGHTS, Record, TokenWeights
from benchwarden.core.stats import (
    clustered_mean_se_of_columns,
    mde_proportions,
    paired_difference,
    skewed_mean_cis,
    wilson_interval,
)
from benchwarden.core.store import RecordSummary, summed_number
from benchwarden.suites.arms.columns import (
    KEY_FIELDS,
    NO_TRIAL,
    ColumnBuffer,
    Columns,
    TaskColumns,
    first_seen_codes,
    integer_chunk,
)
from benchwarden.suites.arms.tasks import ALL_PAIRS_UP_TO_ARMS, FAILURE_TAGS, FLOOR, PASS

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: a command that builds no report does not pay for numpy
    np = lazy_module("numpy")

COMPONENTS = ("fresh_input", "cache_creation", "cache_read", "output")
# The payload fields the views read; the store decodes these and skips the rest.
PAYLOAD_FIELDS = ("tier", "failure", "turns", "tokens_reported", "denied_calls",
                  "imputed_cost_usd", "bench_version")
# Trials a report shows per cell, worst first (failures, newest first, then passes):
# as many as the store's group totals keep per group.
TRIALS_PER_CELL = NEWEST_KEPT


class FloatSum:
    """A float sum over a stream, as the store's group totals hold it: a compensated
    pair, one value added at a time (`compensated_add`), so a million durations sum in
    constant memory with an error far below 1e-12 and the same bits as the table."""

    __slots__ = ("error", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.error = 0.0

    def add(self, value: float) -> None:
        self.total, self.error = compensated_add(self.total, self.error, value)

    @property
    def value(self) -> float:
        return self.total + self.error


class Accumulator:
    """What one group collects while the rows stream past (`Totals` when done)."""

    __slots__ = ("samples", "passes", "priced", "fresh_input", "cache_creation", "cache_read",
                 "output", "reasoning_samples", "reasoning", "duration_s", "turns",
                 "denied_calls", "imputed_samples", "imputed_cost_usd", "odd_values", "newest")

    def __init__(self) -> None:
        self.samples = self.passes = self.priced = self.odd_values = 0
        self.fresh_input = self.cache_creation = self.cache_read = self.output = 0
        self.reasoning_samples = self.reasoning = self.denied_calls = self.imputed_samples = 0
        self.duration_s, self.turns, self.imputed_cost_usd = FloatSum(), FloatSum(), FloatSum()
        self.newest: deque[int] = deque(maxlen=TRIALS_PER_CELL)

    def add(self, row: RecordSummary) -> None:
        payload = row.payload
        self.samples += 1
        self.newest.append(row.seq)
        if row.outcome == PASS:
            self.passes += 1
        if payload.get("tokens_reported", True):
            tokens = row.tokens
            self.priced += 1
            self.fresh_input += tokens.fresh_input
            self.cache_creation += tokens.cache_creation
            self.cache_read += tokens.cache_read
            self.output += tokens.output
            if tokens.reasoning is not None:
                self.reasoning_samples += 1
                self.reasoning += tokens.reasoning
        self.duration_s.add(max(0.0, float(row.ended_at) - float(row.started_at)))
        # numbers read by the rule the database's rows were written by (`summed_number`):
        # a value that is not a number is skipped and counted, never a crash
        turns, odd_turns = summed_number(payload.get("turns"))
        if turns is not None:
            self.turns.add(float(turns))
        denied, odd_denied = summed_number(payload.get("denied_calls"), count=True)
        if denied:
            self.denied_calls += int(denied)
        cost, odd_cost = summed_number(payload.get("imputed_cost_usd"))
        if cost is not None:
            self.imputed_samples += 1
            self.imputed_cost_usd.add(float(cost))
        self.odd_values += odd_turns + odd_denied + odd_cost

    def totals(self) -> Totals:
        return Totals(
            samples=self.samples, passes=self.passes, priced=self.priced,
            fresh_input=self.fresh_input, cache_creation=self.cache_creation,
            cache_read=self.cache_read, output=self.output,
            reasoning_samples=self.reasoning_samples, reasoning=self.reasoning,
            duration_s=self.duration_s.value, turns=self.turns.value,
            denied_calls=self.denied_calls, imputed_samples=self.imputed_samples,
            imputed_cost_usd=self.imputed_cost_usd.value, odd_values=self.odd_values,
            newest=tuple(self.newest))


@dataclass(slots=True)
class Totals:
    """Totals of the trials in one group (or a union of groups). Slotted: a report of a
    suite of thousands of tasks holds one per group, tens of thousands of them (a
    `__dict__` each would be most of a report's memory)."""

    samples: int = 0
    passes: int = 0
    priced: int = 0
    """Samples whose driver reported tokens (the token sums are over these)."""
    fresh_input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning_samples: int = 0
    reasoning: int = 0
    duration_s: float = 0.0
    turns: float = 0.0
    denied_calls: int = 0
    imputed_samples: int = 0
    imputed_cost_usd: float = 0.0
    odd_values: int = 0
    """Turn counts, denied-call counts and imputed costs skipped for not being numbers."""
    newest: tuple[int, ...] = ()
    """Sequence numbers of the group's newest trials (at most TRIALS_PER_CELL)."""

    def merge(self, other: Totals) -> None:
        # the one definition of a union, field by field (`Columns` sums its unions in
        # the same order, tested equal to chained merges)
        for name in _TOTAL_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def cost_equivalent(self, weights: TokenWeights) -> float:
        """Sum of the priced samples' cost-equivalent tokens."""
        return (weights.fresh_input * self.fresh_input
                + weights.cache_creation * self.cache_creation
                + weights.cache_read * self.cache_read + weights.output * self.output)


_TOTAL_FIELDS = tuple(name for name in Accumulator.__slots__ if name != "newest")


class GroupKey(NamedTuple):
    """The fields a group's trials share (a tuple: hashed once per row, cheaply)."""

    arm: str
    task: str
    tier: str | None
    outcome: str
    failure: str | None


@dataclass
class Summary:
    """Everything the views need of a scope's records, in memory bounded by its cells:
    the totals per group, the sequence number of each group's first record (for
    first-seen order) and the bench versions seen. What `summarize` makes of records in
    memory; the views read it as `Columns` (`columns_of`)."""

    groups: dict[GroupKey, Totals] = field(default_factory=dict)
    first_seen: dict[GroupKey, int] = field(default_factory=dict)
    """The sequence number of each group's first record (for first-seen order)."""
    versions: set[str] = field(default_factory=set)

    @property
    def samples(self) -> int:
        return sum(totals.samples for totals in self.groups.values())


Source = Columns | Summary | Iterable[Record] | Iterable[RecordSummary]


def _key_text(value: Any) -> str | None:
    """A tier or failure as a group key: text as it is (None when absent); any other
    value (a driver's odd number, boolean or list) as its JSON text, so every key is
    text a report can show and both the database and the stream key it alike."""
    if value is None or type(value) is str:
        return value  # type: ignore[no-any-return]
    return json.dumps(value, ensure_ascii=False)


def summarize(rows: Iterable[RecordSummary | Record]) -> Summary:
    """One pass over records or their summaries (in the order written)."""
    summary = Summary()
    accumulators: dict[tuple[Any, ...], Accumulator] = {}
    last_version: Any = None
    for index, row in enumerate(rows, start=1):
        if isinstance(row, Record):
            row = RecordSummary.of(row, PAYLOAD_FIELDS, seq=index)
        payload = row.payload
        tier, failure = payload.get("tier"), payload.get("failure")
        if type(tier) not in _PLAIN:
            tier = _key_text(tier)
        if type(failure) not in _PLAIN:
            failure = _key_text(failure)
        key = (row.arm, row.task, tier, row.outcome, failure)
        collecting = accumulators.get(key)
        if collecting is None:
            collecting = accumulators[key] = Accumulator()
            summary.first_seen[GroupKey(*key)] = row.seq
        collecting.add(row)
        version = payload.get("bench_version")
        if version != last_version:
            last_version = version
            if version:
                summary.versions.add(str(version))
    summary.groups = {GroupKey(*key): collecting.totals()
                      for key, collecting in accumulators.items()}
    return summary


_PLAIN = (str, type(None))


def _from_json(text: Any) -> Any:
    return None if text is None else _decoded_version(text)


# A scope has a handful of distinct `[tier, failure]` texts and bench versions, and
# tens of thousands of groups in a suite of thousands of tasks: each text is decoded once.
@functools.lru_cache(maxsize=1024)
def _decoded_version(text: str) -> Any:
    return json.loads(text)


@functools.lru_cache(maxsize=1024)
def _tier_and_failure(group_key: str) -> tuple[str | None, str | None]:
    tier, failure = json.loads(group_key)
    return _key_text(tier), _key_text(failure)


# the columns of a `record_group_totals` row as `decoded_chunks` hands them over, in
# the order `_READ_COLUMNS` numbers them (a test holds this to `GROUP_TOTALS_COLUMNS`)
UNPACKED_COLUMNS = (
    "suite", "scope", "arm", "task", "outcome", "group_key", "first_seq", "records", "priced",
    "fresh_input", "cache_creation", "cache_read", "output", "reasoning_samples",
    "reasoning", "duration_s", "duration_s_error", "turns", "turns_error", "denied_calls",
    "imputed_samples", "imputed_cost_usd", "imputed_cost_usd_error", "odd_values",
    "bench_versions", "newest")


def _summary(source: Source) -> Summary:
    return source if isinstance(source, Summary) else summarize(source)  # type: ignore[arg-type]


def columns_of(source: Source) -> Columns:
    """The `Columns` the views read: as given, or made of a `Summary` or of records."""
    if isinstance(source, Columns):
        return source
    summary = _summary(source)
    return Columns.of_groups(summary.groups, summary.first_seen, summary.versions)


def columns_from_chunks(decoded: Iterable[DecodedChunk]) -> Columns:
    """The `Columns` of group totals decoded by chunks as `Store.fold_group_chunks` hands
    them over (`core.group_totals.decoded_chunks`, or a store's one aggregated chunk; in
    ascending `first_seq` order: a `ValueError` otherwise), each chunk's columns made
    arrays at once (a report of a suite of 333,000 tasks reads a million groups). Groups
    whose keys come out equal (two `[tier, failure]` texts naming one tier) are merged, as
    `summarize` would have put their records in one group (their float sums then agree
    with the stream's to rounding only)."""
    code_of: dict[str, dict[Any, int]] = {name: {} for name in KEY_FIELDS}
    # each distinct `[tier, failure]` text by its code, and the tier's and failure's codes
    # of each code
    key_code_of: dict[str, int] = {}
    tier_of_key: list[int] = []
    failure_of_key: list[int] = []
    read_columns = {name: ColumnBuffer(floats=name in _READ_FLOATS) for name in _READ_COLUMNS}
    code_columns = {name: array.array("i") for name in ("arm", "task", "outcome", "group_key")}
    newest_column = ColumnBuffer(floats=False)
    versions: set[str] = set()
    seen_versions: set[tuple[str, ...]] = set()
    for columns, chunk_versions, chunk_newest in decoded:
        for name, position in (("arm", 2), ("task", 3), ("outcome", 4)):
            _extend_codes(code_columns[name], code_of[name], columns[position])
        first_new = len(key_code_of)
        _extend_codes(code_columns["group_key"], key_code_of, columns[5])
        for text in list(key_code_of)[first_new:]:
            tier, failure = _tier_and_failure(text)
            tier_of_key.append(code_of["tier"].setdefault(tier, len(code_of["tier"])))
            failure_of_key.append(code_of["failure"].setdefault(failure,
                                                                len(code_of["failure"])))
        for name, position in _READ_COLUMNS.items():
            read_columns[name].extend(columns[position])
        newest_column.extend_array(chunk_newest if isinstance(chunk_newest, np.ndarray)
                                   else _newest_rows(chunk_newest))
        for texts in set(chunk_versions).difference(seen_versions):
            seen_versions.add(texts)
            for text in texts:
                version = _from_json(text)
                if version:
                    versions.add(str(version))
    read = {name: column.finished() for name, column in read_columns.items()}
    del read_columns
    for name in ("arm", "task", "outcome"):
        read[name] = np.frombuffer(code_columns.pop(name), dtype=np.int32) \
            if len(code_columns[name]) else np.zeros(0, dtype=np.int32)
    group_keys = code_columns.pop("group_key")
    read["tier"] = np.array(tier_of_key, dtype=np.int32)[np.frombuffer(group_keys, np.int32)] \
        if len(group_keys) else np.zeros(0, dtype=np.int32)
    read["failure"] = np.array(failure_of_key, dtype=np.int32)[np.frombuffer(group_keys,
                                                                             np.int32)] \
        if len(group_keys) else np.zeros(0, dtype=np.int32)
    del group_keys
    names = {name: list(found) for name, found in code_of.items()}
    first_seq = read["first_seq"]
    if len(first_seq) > 1 and bool(np.any(first_seq[1:] < first_seq[:-1])):
        raise ValueError("group totals must come in ascending first_seq order")
    newest = newest_column.finished().reshape(-1, TRIALS_PER_CELL)
    pass_code = code_of["outcome"].get(PASS)
    records = read["samples"]
    values = {
        "samples": records,
        "passes": records * (read["outcome"] == pass_code) if pass_code is not None
        else np.zeros_like(records),
        **{name: read.pop(name) for name in _INTEGER_READ},
    }
    for name in _FLOAT_SUMS:
        # a stored float sum is its compensated pair: its value is `sum + error`
        values[name] = read.pop(name)
        values[name] += read.pop(f"{name}_error")
    values = {name: values[name] for name in _TOTAL_FIELDS}
    codes = {name: read[name] for name in KEY_FIELDS}
    if _has_equal_keys(codes, names):
        codes, values, newest, first_seq = _merged_equal_keys(codes, names, values, newest,
                                                              first_seq)
    return Columns(names, codes, values, newest, first_seq, versions)


def _extend_codes(codes: array.array[int], code_of: dict[Any, int],
                  texts: Sequence[Any]) -> None:
    """Each text's code (the next free one for a text not seen before) onto `codes`; of
    a `CodedTexts`, its distinct texts looked up once and its rows' codes mapped by
    array."""
    if isinstance(texts, CodedTexts):
        mapped = np.array([code_of.setdefault(name, len(code_of)) for name in texts.names],
                          dtype=np.int32)
        codes.frombytes(mapped[texts.codes].tobytes())
    else:
        codes.extend([code_of.setdefault(text, len(code_of)) for text in texts])


# where `columns_from_chunks` reads each column of a stored row (`UNPACKED_COLUMNS`)
_READ_COLUMNS = {"first_seq": 6, "samples": 7, "priced": 8, "fresh_input": 9,
                 "cache_creation": 10, "cache_read": 11, "output": 12,
                 "reasoning_samples": 13, "reasoning": 14, "duration_s": 15,
                 "duration_s_error": 16, "turns": 17, "turns_error": 18, "denied_calls": 19,
                 "imputed_samples": 20, "imputed_cost_usd": 21,
                 "imputed_cost_usd_error": 22, "odd_values": 23}
_FLOAT_SUMS = ("duration_s", "turns", "imputed_cost_usd")
_READ_FLOATS = frozenset((*_FLOAT_SUMS, *(f"{name}_error" for name in _FLOAT_SUMS)))
_INTEGER_READ = ("priced", "fresh_input", "cache_creation", "cache_read", "output",
                 "reasoning_samples", "reasoning", "denied_calls", "imputed_samples",
                 "odd_values")
_NO_TRIALS = [NO_TRIAL] * TRIALS_PER_CELL


def _newest_rows(newest: Sequence[Sequence[int]]) -> np.ndarray:
    """Each group's newest trials as a row of `TRIALS_PER_CELL`: the last ones of those
    given, ascending, padded with `NO_TRIAL`."""
    lengths = set(map(len, newest))
    if len(lengths) == 1 and (length := lengths.pop()) <= TRIALS_PER_CELL:
        # every group of the chunk with as many: sorted as a block
        rows = np.sort(np.array(newest, dtype=np.int64).reshape(len(newest), length), axis=1)
        return np.hstack((rows, np.full((len(newest), TRIALS_PER_CELL - length), NO_TRIAL,
                                        dtype=np.int64)))
    return np.array([((sorted(seqs) if len(seqs) > 1 else list(seqs))[-TRIALS_PER_CELL:]
                      + _NO_TRIALS)[:TRIALS_PER_CELL] for seqs in newest],
                    dtype=np.int64).reshape(len(newest), TRIALS_PER_CELL)


def _key_numbers(codes: Mapping[str, np.ndarray], names: Mapping[str, list[Any]]) -> Any:
    """One integer per group naming its key (the codes in mixed radix), or one tuple
    per group where the product of the fields' sizes passes int64."""
    sizes = [max(1, len(names[name])) for name in KEY_FIELDS]
    if math.prod(sizes) < 2**62:
        number = np.zeros(len(codes["arm"]), dtype=np.int64)
        for name, size in zip(KEY_FIELDS, sizes, strict=True):
            number = number * size + codes[name].astype(np.int64)
        return number
    return list(zip(*(codes[name].tolist() for name in KEY_FIELDS), strict=True))


def _has_equal_keys(codes: Mapping[str, np.ndarray], names: Mapping[str, list[Any]]) -> bool:
    numbers = _key_numbers(codes, names)
    if isinstance(numbers, list):
        return len(set(numbers)) != len(numbers)
    ordered = np.sort(numbers)  # (a sort: numpy's `unique` hashes, several times slower)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _merged_equal_keys(codes: dict[str, np.ndarray], names: Mapping[str, list[Any]],
                       values: dict[str, np.ndarray], newest: np.ndarray,
                       first_seq: np.ndarray) -> tuple[dict[str, np.ndarray],
                                                       dict[str, np.ndarray], np.ndarray,
                                                       np.ndarray]:
    """Groups whose keys come out equal (two `[tier, failure]` texts naming one tier,
    say) merged into the first: each later one's
    totals added to the first's in turn (`Totals.merge`), its newest trials pooled."""
    numbers = _key_numbers(codes, names)
    keys = numbers if isinstance(numbers, list) else numbers.tolist()
    fields = {name: column.tolist() for name, column in values.items()}
    first_of: dict[Any, int] = {}
    pooled: dict[int, list[int]] = {}
    kept = np.ones(len(keys), dtype=bool)
    for position, key in enumerate(keys):
        first = first_of.setdefault(key, position)
        if first == position:
            continue
        kept[position] = False
        for column in fields.values():
            column[first] = column[first] + column[position]
        found = pooled.get(first)
        if found is None:
            found = pooled[first] = [seq for seq in newest[first].tolist() if seq != NO_TRIAL]
        found.extend(seq for seq in newest[position].tolist() if seq != NO_TRIAL)
    newest = newest.copy()
    for first, found in pooled.items():
        newest[first] = (sorted(found)[-TRIALS_PER_CELL:] + _NO_TRIALS)[:TRIALS_PER_CELL]
    merged_values = {name: (np.array(column, dtype=np.float64)[kept] if name in _READ_FLOATS
                            else integer_chunk(column)[kept])
                     for name, column in fields.items()}
    return ({name: column[kept] for name, column in codes.items()}, merged_values,
            newest[kept], first_seq[kept])


# ---------------------------------------------------------------------------- estimates

def _clustered(counts: np.ndarray, sums: np.ndarray) -> dict[str, Any] | None:
    if not counts.any():
        return None
    return clustered_mean_se_of_columns(counts, sums).to_json_dict()


def _per_task_bootstraps(per_arm: Sequence[TaskColumns],
                         weights: TokenWeights) -> list[dict[str, Any] | None]:
    """Per arm, the mean over tasks of each task's mean cost, with a BCa bootstrap
    interval over tasks: every task weighs the same however deep its cell, and a skewed
    task mix is not forced into a t interval. The arms' bootstraps run side by side;
    over more than `stats.ANALYTIC_INTERVAL_ABOVE` tasks the interval is BCa's analytic
    approximation (ABC) instead, its `method` saying so (`stats.skewed_mean_cis`)."""
    means: list[list[float] | None] = []
    for per_task in per_arm:
        priced = per_task["priced"]
        kept = priced != 0
        # a float divided by a whole number: the number made a float first, as Python does
        means.append((per_task.cost_equivalent(weights)[kept] / priced[kept])
                     .astype(np.float64).tolist() if kept.any() else None)
    estimates = iter(skewed_mean_cis([found for found in means if found is not None]))
    return [None if found is None else next(estimates).to_json_dict() for found in means]


def _success(totals: Totals) -> dict[str, Any] | None:
    if not totals.samples:
        return None
    return wilson_interval(totals.passes, totals.samples).to_json_dict()


def _total(columns: Columns, **match: Any) -> Totals:
    return Totals(**columns.total(**match))


def _divided(numerators: np.ndarray, denominators: np.ndarray) -> list[float]:
    """`numerator / denominator` of whole numbers, as Python divides them (correctly
    rounded): numpy's division of the two made floats agrees below 2**53."""
    if (numerators.dtype != object and denominators.dtype != object and len(numerators)
            and max(abs(int(numerators.min())), abs(int(numerators.max())),
                    abs(int(denominators.min())), abs(int(denominators.max()))) < 2**53):
        return (numerators.astype(np.float64)  # type: ignore[no-any-return]
                / denominators.astype(np.float64)).tolist()
    return [int(a) / int(b) for a, b in zip(numerators.tolist(), denominators.tolist(),
                                            strict=True)]


# ---------------------------------------------------------------------------- views

def cell_counts(source: Source) -> dict[tuple[str, str], int]:
    """Samples per (arm, task) cell, in first-seen order."""
    columns = columns_of(source)
    counts: dict[tuple[str, str], int] = {}
    ordered = columns.ordered()
    for arm, task, samples in zip(columns.names_of("arm", ordered),
                                  columns.names_of("task", ordered),
                                  columns.values["samples"][ordered].tolist(), strict=True):
        counts[(arm, task)] = counts.get((arm, task), 0) + samples
    return counts


def coverage_class(samples: int, floor: int = FLOOR) -> str:
    if samples >= floor:
        return "covered"
    return "partial" if samples > 0 else "missing"


def coverage(source: Source, arms: Sequence[str], tasks: Sequence[str],
             floor: int = FLOOR) -> dict[str, dict[str, Any]]:
    """Per arm: covered / partial / missing cell counts and samples per task."""
    columns = columns_of(source)
    distinct = _distinct_task_places(tasks)
    table: dict[str, dict[str, Any]] = {}
    for arm in arms:
        samples = columns.cell_sample_counts(arm, tasks)
        table[arm] = {**_coverage_counts(samples, distinct, len(tasks), floor),
                      "samples": dict(zip(tasks, samples.tolist(), strict=True))}
    return table


def _distinct_task_places(tasks: Sequence[str]) -> list[int] | None:
    """Where `coverage` counts a task listed more than once (its last place, where the
    samples' mapping keeps its value), or None where each is listed once."""
    if len(set(tasks)) == len(tasks):
        return None
    return sorted({task: place for place, task in enumerate(tasks)}.values())


def _coverage_counts(samples: np.ndarray, distinct: list[int] | None, cells: int,
                     floor: int) -> dict[str, int]:
    """`coverage`'s counts of one arm from the samples of each listed task, each task
    counted once (`distinct`: `_distinct_task_places`): the headline needs the counts
    alone, without a mapping of a third of a million tasks per arm."""
    counted = samples if distinct is None else samples[distinct]
    covered = int(np.count_nonzero(counted >= floor))
    partial = int(np.count_nonzero((counted < floor) & (counted > 0)))
    return {"covered": covered, "partial": partial,
            "missing": len(counted) - covered - partial, "cells": cells}


def headline(source: Source, arms: Sequence[str], tasks: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> list[dict[str, Any]]:
    columns = columns_of(source)
    distinct = _distinct_task_places(tasks)
    covered = {arm: _coverage_counts(columns.cell_sample_counts(arm, tasks), distinct,
                                     len(tasks), floor) for arm in arms}
    per_task_bootstraps = _per_task_bootstraps([columns.by_task(arm=arm) for arm in arms],
                                               weights)
    rows = []
    for arm, bootstrapped in zip(arms, per_task_bootstraps, strict=True):
        per_task = columns.by_task(arm=arm)
        whole = _total(columns, arm=arm)
        rows.append({
            "arm": arm,
            "samples": whole.samples,
            "success": _success(whole),
            "cost_equivalent": _clustered(per_task["priced"],
                                          per_task.cost_equivalent(weights)),
            "cost_equivalent_per_task": bootstrapped,
            "raw_tokens": _clustered(per_task["priced"], per_task.cost_equivalent(_RAW)),
            "turns": _clustered(per_task["samples"], per_task["turns"]),
            "duration_s": _clustered(per_task["samples"], per_task["duration_s"]),
            "coverage": {k: covered[arm][k] for k in ("covered", "partial", "missing", "cells")},
            "imputed_cost_usd": _clustered(per_task["imputed_samples"],
                                           per_task["imputed_cost_usd"]),
        })
    return rows


_RAW = TokenWeights(fresh_input=1.0, cache_creation=1.0, cache_read=1.0, output=1.0)


def per_tier(source: Source, arms: Sequence[str], tiers: Sequence[str],
             weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    columns = columns_of(source)
    rows = []
    nothing = np.zeros(0, dtype=np.int64)
    for arm in arms:
        # each tier's groups of the arm, found in one pass (what `total` and `by_task`
        # would find asked per tier, scanning every group each time)
        inserted = columns.partition("tier", {"arm": arm}, first_seen_order=False)
        seen = columns.partition("tier", {"arm": arm}, first_seen_order=True)
        for tier in tiers:
            code = columns.code("tier", tier)
            whole = Totals(**columns.total_of(inserted.get(code, nothing) if code is not None
                                              else nothing))
            per_task = columns.by_task_of(seen.get(code, nothing) if code is not None
                                          else nothing)
            rows.append({"arm": arm, "tier": tier, "samples": whole.samples,
                         "success": _success(whole),
                         "cost_equivalent": _clustered(per_task["priced"],
                                                       per_task.cost_equivalent(weights))})
    return rows


def per_component(source: Source, arms: Sequence[str],
                  weights: TokenWeights = DEFAULT_WEIGHTS) -> list[dict[str, Any]]:
    """Mean of each unweighted token component per arm, and its weighted share."""
    columns = columns_of(source)
    rows = []
    for arm in arms:
        per_task = columns.by_task(arm=arm)
        row: dict[str, Any] = {"arm": arm, "samples": _total(columns, arm=arm).priced}
        for name in COMPONENTS:
            row[name] = _clustered(per_task["priced"], per_task.floats(name))
            row[f"{name}_weighted"] = (
                None if row[name] is None else row[name]["mean"] * getattr(weights, name))
        row["reasoning"] = _clustered(per_task["reasoning_samples"],
                                      per_task.floats("reasoning"))
        rows.append(row)
    return rows


def failure_tags(source: Source, arms: Sequence[str]) -> list[dict[str, Any]]:
    columns = columns_of(source)
    passing = columns.code("outcome", PASS)
    rows = []
    for arm in arms:
        whole = _total(columns, arm=arm)
        if not whole.samples:
            rows.append({"arm": arm, "samples": 0, "pass": None,
                         **{tag: None for tag in FAILURE_TAGS}, "denied_calls": None})
            continue
        row: dict[str, Any] = {"arm": arm, "samples": whole.samples, "pass": whole.passes}
        for tag in FAILURE_TAGS:
            chosen = columns.matching({"arm": arm, "failure": tag}, first_seen_order=False)
            failed = chosen[columns.codes["outcome"][chosen] != passing] \
                if passing is not None else chosen
            row[tag] = int(columns.values["samples"][failed].sum()) if len(failed) else 0
        row["denied_calls"] = whole.denied_calls
        rows.append(row)
    return rows


def _cell_means(columns: Columns, arm: str, weights: TokenWeights, floor: int) -> CellMeans:
    """Per covered task: success rate, mean cost-equivalent tokens and samples of one arm."""
    per_task = columns.by_task(arm=arm)
    samples = per_task["samples"]
    covered = np.flatnonzero(samples >= floor)
    tasks = per_task.tasks
    names = [tasks[position] for position in covered.tolist()]
    success = dict(zip(names, _divided(per_task["passes"][covered], samples[covered]),
                       strict=True))
    counts = dict(zip(names, samples[covered].tolist(), strict=True))
    priced = per_task["priced"][covered]
    kept = priced != 0
    cost_means = per_task.cost_equivalent(weights)[covered][kept] / priced[kept]
    cost = dict(zip([name for name, keep in zip(names, kept.tolist(), strict=True) if keep],
                    cost_means.astype(np.float64).tolist(), strict=True))
    return success, cost, counts


def compare(source: Source, arm_a: str, arm_b: str,
            weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR) -> dict[str, Any]:
    """Paired comparison `b - a` over the tasks both arms covered (≥ `floor` samples)."""
    summary = columns_of(source)
    return paired_comparison(arm_a, arm_b, floor, _cell_means(summary, arm_a, weights, floor),
                             _cell_means(summary, arm_b, weights, floor))


def compare_pairs(source: Source, pairs: Sequence[tuple[str, str]],
                  weights: TokenWeights = DEFAULT_WEIGHTS, floor: int = FLOOR
                  ) -> list[dict[str, Any]]:
    """`compare` of each pair `(a, b)`, each arm's per-task means made once (an arm is in
    many pairs: each of 50 arms is in 49)."""
    summary = columns_of(source)
    means: dict[str, CellMeans] = {}

    def means_of(arm: str) -> CellMeans:
        found = means.get(arm)
        if found is None:
            found = means[arm] = _cell_means(summary, arm, weights, floor)
        return found

    return [paired_comparison(a, b, floor, means_of(a), means_of(b)) for a, b in pairs]


def pairs_compared(arms: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """The pairs a report compares: every pair (`all_pairs`) of up to
    `ALL_PAIRS_UP_TO_ARMS` arms, else each other arm against the baseline,
    `(baseline, arm)`. The baseline is the arm a run lists first (where a suite puts it)
    unless one is given; a given baseline's pairs come first, each `(baseline, arm)`, so
    every difference reads as the arm's against it. `baseline` must be one of `arms`."""
    if baseline is None:
        if len(arms) <= ALL_PAIRS_UP_TO_ARMS:
            return all_pairs(arms)
        return [(arms[0], arm) for arm in arms[1:]]
    if baseline not in arms:
        raise ValueError(f"baseline {baseline!r} is not one of the arms")
    others = [arm for arm in arms if arm != baseline]
    against = [(baseline, arm) for arm in others]
    return against if len(arms) > ALL_PAIRS_UP_TO_ARMS else against + all_pairs(others)


def pairs_in_all(arms: Sequence[str]) -> int:
    """How many pairs `arms` make (what `all_pairs` would list)."""
    return len(arms) * (len(arms) - 1) // 2


CellMeans = tuple[dict[str, float], dict[str, float], dict[str, int]]
"""An arm's per-task success rate, cost-equivalent tokens per priced sample and samples,
each by task, over the tasks with at least the floor's samples (`_cell_means`)."""


def paired_comparison(arm_a: str, arm_b: str, floor: int, means_a: CellMeans,
                      means_b: CellMeans) -> dict[str, Any]:
    """`compare`'s result from the two arms' per-task means: the paired differences
    `b - a` over the tasks both covered, the MDEs, the tasks only one covered, each
    arm's means and the sentence saying what they show."""
    success_a, cost_a, samples_a = means_a
    success_b, cost_b, samples_b = means_b
    shared = sorted(set(success_a) & set(success_b))
    success = paired_difference(success_a, success_b)
    tokens = paired_difference(cost_a, cost_b)
    pooled = [*success_a.values(), *success_b.values()]
    base_rate = sum(pooled) / len(pooled) if pooled else None
    success_row = success.to_json_dict()
    # Where the per-task differences have no spread yet, fall back to the binomial MDE
    # at the pooled pass rate so a reader still learns how coarse the comparison is.
    per_arm_samples = min(sum(samples_a[t] for t in shared), sum(samples_b[t] for t in shared))
    success_row["mde_binomial"] = (mde_proportions(base_rate, per_arm_samples)
                                   if shared else None)
    success_row["samples_per_arm"] = per_arm_samples
    priced = [t for t in shared if t in cost_a and t in cost_b]
    result = {
        "a": arm_a, "b": arm_b, "floor": floor,
        "tasks": shared,
        "only_a": sorted(set(success_a) - set(success_b)),
        "only_b": sorted(set(success_b) - set(success_a)),
        "success_difference": success_row,
        "cost_equivalent_difference": tokens.to_json_dict(),
        "success_a": _mean_or_none([success_a[t] for t in shared]),
        "success_b": _mean_or_none([success_b[t] for t in shared]),
        "cost_a": _mean_or_none([cost_a[t] for t in priced]),
        "cost_b": _mean_or_none([cost_b[t] for t in priced]),
    }
    result["conclusion"] = conclusion(result)
    return result


def shown_mde(success: Mapping[str, Any]) -> float | None:
    """The success MDE a reader is shown: the paired one, or the binomial one when the
    per-task differences have no spread (a paired MDE of 0 would claim any difference is
    detectable)."""
    if success.get("sd"):
        return success.get("mde")  # type: ignore[no-any-return]
    return success.get("mde_binomial")  # type: ignore[no-any-return]


def conclusion(result: Mapping[str, Any]) -> str:
    """One sentence saying which arm is better on success and on cost, or that the data
    cannot tell (a 95 % interval that holds 0)."""
    a, b = result["a"], result["b"]
    if not result["tasks"]:
        return (f"the data cannot tell {a} and {b} apart: no task has ≥ {result['floor']} "
                "samples in both arms")
    success, cost = result["success_difference"], result["cost_equivalent_difference"]
    parts = []
    decided = _direction(success)
    mde = shown_mde(success)
    if decided is None:
        parts.append(f"the data cannot tell {a} and {b} apart on success"
                     + (f" (differences under {100 * mde:.1f} pp are not measurable here)"
                        if mde is not None else ""))
    else:
        better, worse = (b, a) if decided > 0 else (a, b)
        parts.append(f"{better} succeeds more often than {worse} "
                     f"({100 * abs(success['mean_diff']):.1f} pp over "
                     f"{len(result['tasks'])} tasks)")
    decided = _direction(cost)
    if decided is None:
        parts.append("cost cannot be told apart" if cost.get("n") else "cost is not known")
    else:
        cheaper, dearer = (a, b) if decided > 0 else (b, a)
        parts.append(f"{cheaper} costs fewer cost-equivalent tokens than {dearer} "
                     f"({abs(cost['mean_diff']):,.0f} per trial)")
    return "; ".join(parts)


def _direction(difference: Mapping[str, Any]) -> int | None:
    """+1 when `b - a` is significantly above 0, -1 below, None when undecided."""
    mean, low, high = difference.get("mean_diff"), difference.get("low"), difference.get("high")
    if mean is None or low is None or high is None or not mean:
        return None
    if low > 0:
        return 1
    if high < 0:
        return -1
    return None


def _mean_or_none(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def all_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(arms) for b in arms[i + 1:]]


def arms_and_tasks(source: Source, configs: Iterable[Mapping[str, Any]] = ()
                   ) -> tuple[list[str], list[str], list[str]]:
    """Arms, tasks and tiers to show: what runs planned plus what records hold, in
    first-seen order, so a planned cell with no sample shows as missing."""
    columns = columns_of(source)
    arms: dict[str, None] = {}
    tasks: dict[str, None] = {}
    tiers: dict[Any, None] = {}
    # a list another config holds too (`Store.runs_with_config` hands every run of a wide
    # suite the one task list) adds nothing the second time
    merged: set[int] = set()
    kept = []  # (and the lists held while their ids mark them)
    for config in configs:
        for found, key in ((arms, "arms"), (tasks, "tasks"), (tiers, "tiers")):
            values = config.get(key, [])
            if id(values) not in merged:
                merged.add(id(values))
                kept.append(values)
                found.update(dict.fromkeys(values))
    ordered = columns.ordered()
    for name, found in (("arm", arms), ("task", tasks), ("tier", tiers)):
        names = columns.names[name]
        for code in first_seen_codes(columns.codes[name][ordered]).tolist():
            if name != "tier" or names[code]:
                found.setdefault(names[code])
    return list(arms), list(tasks), list(tiers)


def shown_trials(source: Source, limit: int) -> list[int]:
    """Sequence numbers of the trials a report shows in full: per cell the newest
    failures first, then the newest passes, `TRIALS_PER_CELL` at most; cells in
    first-seen order, failures of every cell before any pass, `limit` in all.

    Only the cells the choice reaches are walked one by one (a suite of 333,000 tasks has
    a million cells; a report shows a few hundred trials): each pool's groups are put in
    its cells' order with arrays, then taken cell by cell until the limit."""
    columns = columns_of(source)
    ordered = columns.ordered()
    if not len(ordered):
        return []
    cells = (columns.codes["arm"][ordered].astype(np.int64) * len(columns.names["task"])
             + columns.codes["task"][ordered])
    passing_code = columns.code("outcome", PASS)
    passing = (columns.codes["outcome"][ordered] == passing_code if passing_code is not None
               else np.zeros(len(ordered), dtype=bool))
    newest = columns.newest[ordered]
    chosen: dict[int, int] = {}
    picked: list[int] = []
    # failures: cells in the order their first group (of any outcome) was seen
    failing = np.flatnonzero(~passing)
    if len(failing):
        walk = failing[np.argsort(_first_seen_rank(cells)[failing], kind="stable")]
        if _take(walk, cells, newest, chosen, picked, limit):
            return picked[:limit]
    # then passes: cells in the order their first pass was seen
    passes = np.flatnonzero(passing)
    if len(passes):
        walk = passes[np.argsort(_first_seen_rank(cells[passes]), kind="stable")]
        if _take(walk, cells, newest, chosen, picked, limit):
            return picked[:limit]
    return picked[:limit]


def _first_seen_rank(codes: np.ndarray) -> np.ndarray:
    """Per position, the rank of its code among the distinct codes in first-seen order."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]  # type: ignore[no-any-return]


def _take(walk: np.ndarray, cells: np.ndarray, newest: np.ndarray, chosen: dict[int, int],
          picked: list[int], limit: int) -> bool:
    """Take each cell's newest trials of the groups in `walk` (cell by cell), as many as
    the cell has room for; True once `limit` was reached before a cell."""
    current: int | None = None
    seqs: list[int] = []
    for start in range(0, len(walk), 4096):
        part = walk[start:start + 4096]
        for cell, row in zip(cells[part].tolist(), newest[part].tolist(), strict=True):
            if cell != current:
                if current is not None and _took(current, seqs, chosen, picked, limit):
                    return True
                current, seqs = cell, []
            seqs.extend(seq for seq in row if seq != NO_TRIAL)
    return current is not None and _took(current, seqs, chosen, picked, limit)


def _took(cell: int, seqs: list[int], chosen: dict[int, int], picked: list[int],
          limit: int) -> bool:
    if len(picked) >= limit:  # a suite of thousands of cells: the rest is cut
        return True
    take = sorted(seqs, reverse=True)[:TRIALS_PER_CELL - chosen.get(cell, 0)]
    chosen[cell] = chosen.get(cell, 0) + len(take)
    picked.extend(take)
    return False


__all__ = ["ALL_PAIRS_UP_TO_ARMS", "COMPONENTS", "FLOOR", "PAYLOAD_FIELDS", "Summary",
           "all_pairs", "arms_and_tasks", "cell_counts", "compare", "compare_pairs",
           "conclusion", "coverage", "coverage_class", "failure_tags", "headline",
           "pairs_compared", "pairs_in_all", "per_component", "per_tier", "shown_mde",
           "shown_trials", "summarize"]

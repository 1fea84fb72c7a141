"""The append-only, tamper-evident store every suite writes to.

One table, `entries`, holds run starts, records and run ends in one hash chain:
each entry's hash is SHA-256 over the previous entry's hash, the entry's address
and its body's exact stored bytes. `verify()` recomputes the chain and names the
first entry that does not match, then checks the chain against head witnesses
(core/witness.py) so that entries cut off the end are found too.

Invariants:
- Append-only, enforced by the database itself: triggers refuse UPDATE and DELETE.
- A record address (suite, scope, arm, task, trial) is unique: a partial unique index
  refuses a second one, and the refusal names the address. (SQLite keeps that index trial
  first, so a batch's records land together at any store size, and answers per-cell
  questions from `record_cells`, derived counts written in the append's transaction
  and recounted by `verify`.)
- Derived tables (`record_group_totals`, `record_runs`, `run_headings`, `run_configs`,
  SQLite's `record_cells`) are outside the chain: written in each append's transaction,
  recomputed from the chained entries by `verify`, and made again by the next writer
  (or `store repair`) when removed.
- Listing runs and reading a report's runs never reads a run start's body: each start's
  heading (its fields but the configuration) is kept in `run_headings`, and each
  distinct configuration once in `run_configs`, keyed by the SHA-256 of its bytes.
- Every append is one transaction; a batch either lands whole or not at all. After it
  commits, the head witness beside the store is rewritten from the head known inside
  that transaction (its last row: the number it was given, the link just computed), so
  it never names an entry that was not committed, and only moves forward
  (core/witness.py serialises concurrent writers).
- No credential is ever stored: runs are checked for secret-looking keys first, and
  every entry written passes the process's scrubber (`core.secrets`) on the way in (a
  record whose encoded bytes cannot hold a remembered secret is checked, not walked:
  the stored bytes are the same either way).
- Opening never changes what it should not: a store opened with `create=False` is read
  only (nothing is created or written), and a database that is not a benchwarden store
  is refused before anything is written to it.
- Every refusal of the OS or the database is a `StoreError` (an `EnvironmentFailure`,
  exit 4) with a one-line message; `StoreUsageError` (exit 2) is for what the user asked
  for not being there (no store at that path, no such run).
- Reading is bounded in memory: `iter_records` and `verify` page through the table by
  sequence number (keyset pagination), never fetching every body at once.

Backends share this module's logic and differ only in connection and SQL dialect
(`SQLiteStore` here; `PostgresStore` in `store_postgres`). `open_store` picks one
from a path or URL, so suites never know which they write to. URL backends are named in
`URL_BACKENDS` and imported by name when such a URL is opened: the import graph runs one
way (store_postgres -> store), and psycopg, an optional dependency, is imported only by
those who open a PostgreSQL store.
"""

from __future__ import annotations

import array
import dataclasses
import functools
import hashlib
import importlib
import itertools
import json
import math
import os
import sqlite3
import sys
import threading
import time
import typing
import weakref
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import quote

import msgspec

from benchwarden.core.chain import GENESIS_HASH, chain_links, link_hash
from benchwarden.core.collector import paused_cycle_collector
from benchwarden.core.errors import EXIT_USAGE, EnvironmentFailure
from benchwarden.core.group_totals import (
    AGGREGATED_INTEGERS,
    AGGREGATED_TEXTS,
    FLOAT_COLUMNS,
    GROUP_KEY_COLUMNS,
    GROUP_TOTALS_COLUMNS,
    NEWEST_KEPT,
    DecodedChunk,
    DecodedRow,
    GroupTotals,
    SnapshotsDiffer,
    UnreadableGroupTotals,
    decoded_chunks,
    decoded_rows,
    first_difference,
    fold_batch_into,
    fold_groups_into,
    fold_into,
    fold_key,
    fold_row,
    group_of,
    rows_by_group,
    whole_scope_chunk,
)
from benchwarden.core.records import (
    Record,
    Run,
    RunEnd,
    RunSummary,
    TokenComponents,
    canonical_json,
    canonical_json_many,
    non_finite_problem,
)
from benchwarden.core.secrets import credential_paths, may_alter_json, scrub_entry
from benchwarden.core.verdicts import one_line
from benchwarden.core.witness import (
    StoreHead,
    Witness,
    WitnessError,
    read_witness,
    sidecar_for,
    write_witness,
)

SCHEMA_VERSION = 6
# Version 1 has no derived tables; version 2 a `record_summaries` table (one row per
# record) with the summed fields as JSON text only; version 3 that table with typed
# columns and a wide group index; version 4 that table and `record_group_totals`;
# version 5 `record_group_totals` and `record_runs` and no per-record summary rows;
# version 6 (this one) those and `run_headings` and `run_configs` (each run start's
# heading, and each distinct configuration once). Older versions are read as they are
# when opened read-only (version 5: its totals and run counts, the run starts read from
# their bodies; 4 and 3: their summary table counts `runs` and version 3's group index
# sums the totals; 1 and 2: reports stream the bodies) and upgraded to 6 when opened for
# writing (5: the run starts listed; 4: the summary table dropped, the runs counted and
# listed; 1, 2 and 3: the group totals computed from the bodies, then the runs counted
# and listed). Benchwarden versions that know only older versions refuse a newer store,
# so no writer can append a run or a record without its derived rows.
READABLE_SCHEMA_VERSIONS = ("1", "2", "3", "4", "5", "6")
# `PRAGMA application_id` of every SQLite store this version creates ("BWST"): how a
# store is told apart from another application's SQLite file before anything is written.
APPLICATION_ID = 0x42575354
DEFAULT_LOCK_TIMEOUT = 30.0
DEFAULT_BATCH = 500
# Bytes of bodies one page of a body-reading query holds at most, besides the one body
# that crosses it (however large): its `batch` rows are a count, and a store of large
# records (an agent's transcript of megabytes) read 500 or 5,000 of them at a time held
# gigabytes. A page is cut short there and the next one starts after its last row.
PAGE_BYTES = 16 * 1024 * 1024

# the columns an append writes, in the order of the rows `_insert_rows` receives
ENTRY_COLUMNS = ("kind", "suite", "scope", "arm", "task", "trial", "run_id", "body",
                 "prev_hash", "hash")

_record_decoder = msgspec.json.Decoder(Record)
_run_decoder = msgspec.json.Decoder(Run)


class _StoredRunEnd(msgspec.Struct):
    """A run end as stored, its summary's values left as raw JSON (`RunSummary`)."""

    run_id: str
    ended_at: float
    status: str
    summary: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


_run_end_decoder = msgspec.json.Decoder(_StoredRunEnd)
SHARED_END_BYTES = 64 * 1024
"""A run end at least this long (a contamination soak's rung digests: megabytes) is
decoded once per store object while a reader holds it, and shared (`Store._run_end`)."""
SHARED_ENDS = 4
"""How many such ends a store object keeps decoded at most."""
# a JSON object's fields left undecoded (`runs_with_config` decodes the few it keeps)
_raw_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])


# A stored run start decoded whole but for its configuration, left as its JSON text
# (`runs_with_config` decodes the few keys it keeps): made from `records.Run`'s own
# fields and types, so it follows `Run` and accepts the starts `Run` accepts.
_RUN_FIELDS = tuple(run_field.name for run_field in dataclasses.fields(Run))
_run_types = typing.get_type_hints(Run)
_RunOutsideConfig = msgspec.defstruct("RunOutsideConfig", [
    (run_field.name, msgspec.Raw, msgspec.Raw(b"{}")) if run_field.name == "config" else
    (run_field.name, _run_types[run_field.name],
     msgspec.NODEFAULT if run_field.default is dataclasses.MISSING else run_field.default)
    for run_field in dataclasses.fields(Run)], kw_only=True)
_run_outside_config_decoder = msgspec.json.Decoder(_RunOutsideConfig)
# Rows per query of `iter_record_summaries`: slim rows are decoded and dropped at once,
# so a larger page only saves round trips.
SUMMARY_BATCH = 5_000


class RecordSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A record without its bulk: what reports aggregate over (`iter_record_summaries`)."""

    seq: int
    """The entry's sequence number (the order records were written in)."""
    arm: str
    task: str
    trial: int
    run_id: str
    outcome: str
    started_at: float
    ended_at: float
    tokens: TokenComponents
    payload: dict[str, Any]
    """Only the payload fields asked for, and only those the record holds: plain JSON
    values, or values of the types the reader asked for (`iter_record_summaries`)."""

    @property
    def duration_s(self) -> float:
        """As `Record.duration_s`."""
        return max(0.0, self.ended_at - self.started_at)

    @classmethod
    def of(cls, record: Record, payload_fields: Sequence[str], seq: int = 0) -> RecordSummary:
        """The summary of an in-memory record (what the store yields for it)."""
        return cls(seq=seq, arm=record.arm, task=record.task, trial=record.trial,
                   run_id=record.run_id, outcome=record.outcome, started_at=record.started_at,
                   ended_at=record.ended_at, tokens=record.tokens,
                   payload={name: record.payload[name] for name in payload_fields
                            if name in record.payload})


@functools.lru_cache(maxsize=16)
def _summary_decoder(payload_fields: tuple[str, ...],
                     payload_types: tuple[tuple[str, Any], ...] = ()) -> Any:
    """A decoder reading only what `RecordSummary` keeps: msgspec skips every other field
    (the transcript, the final report) without building it. A field named in
    `payload_types` is decoded straight into that type (a suite's own msgspec types, whose
    parts it does not read may be `msgspec.Raw`); the others as plain JSON values."""
    typed = dict(payload_types)
    payload = msgspec.defstruct("SummaryPayload", [(name, typed.get(name, Any), msgspec.UNSET)
                                                   for name in payload_fields], frozen=True)
    slim = msgspec.defstruct("SummaryRecord", [
        ("arm", str), ("task", str), ("trial", int), ("run_id", str), ("outcome", str),
        ("started_at", float), ("ended_at", float),
        ("tokens", TokenComponents, msgspec.field(default_factory=TokenComponents)),
        ("payload", payload, msgspec.field(default_factory=payload))], frozen=True)
    return msgspec.json.Decoder(slim)


class PayloadField(NamedTuple):
    """One payload field of a record, with the record's place (`iter_payload_field_at`)."""

    seq: int
    arm: str
    task: str
    trial: int
    run_id: str
    value: Any
    """The field as decoded (`msgspec.UNSET` when the record has none)."""


def _field_decoder(field: str, kind: Any) -> Any:
    """A decoder reading a record's address, run and its payload's `field` (as `kind`),
    msgspec skipping the rest of the body without building it."""
    payload = msgspec.defstruct("FieldPayload", [(field, kind, msgspec.UNSET)], frozen=True)
    placed = msgspec.defstruct("PlacedField", [
        ("arm", str), ("task", str), ("trial", int), ("run_id", str),
        ("payload", payload, msgspec.field(default_factory=payload))], frozen=True)
    return msgspec.json.Decoder(placed)


# -- summary rows (derived from one record; stored per record only by schemas 2 to 4) --
# A summary row (`SUMMARY_COLUMNS`) is a record without its bulk, with what a report
# sums computed once in Python by `summed_number`'s rules (`priced`, `duration_s`,
# `turns_number`, `denied_number`, `cost_number`, `odd_values`). Its fold row
# (`group_totals.FOLD_COLUMNS`, the columns the totals are folded from, computed by
# `_fold_row` alone) is the input of `group_totals.fold_rows`, the one rule appends,
# upgrades and `verify` total records by. `summary_row` computes the row from a
# record's stored bytes alone.
#
# Schemas 3 and 4 stored one per record in `record_summaries` (typed columns, so the
# database summed them without string functions or a sort; schema 3 through a wide group
# index, schema 4 through `record_group_totals` beside it). Schema 5 stores none: an
# append computes its batch's fold rows (from the records it holds, `fold_row_of`, when
# that is exactly the fold row of the stored bytes), folds them into `record_group_totals`
# and counts its records per run into `record_runs`. The stored row was half of every
# append (decoding the body again, its insert, its run index: about 12 of 26 µs per
# record, bench/README.md) while reports read only the totals and `runs` only a count
# per run. A version 4 or 3 store opened read-only still has its table, read as it is.
SUMMARY_FIELDS = ("tier", "failure", "turns", "tokens_reported", "denied_calls",
                  "imputed_cost_usd", "bench_version")
"""Payload fields copied into a summary row (as JSON text): the per-trial fields reports
group or sum by."""
SUMMARY_COLUMNS = ("seq", "suite", "scope", "arm", "task", "trial", "run_id", "outcome",
                   "group_key", "started_at", "ended_at", "duration_s", "fresh_input",
                   "cache_creation", "cache_read", "output", "reasoning", "priced",
                   "turns_number", "denied_number", "cost_number", "odd_values",
                   *(f"field_{name}" for name in SUMMARY_FIELDS))
"""`group_key` is the JSON text of `[tier, failure]` (null for an absent field): with
arm, task and outcome, the group a report sums the record in. `duration_s` is
`Record.duration_s`; `priced` is 1 when the driver reported tokens (`tokens_reported`
absent or truthy); `turns_number`, `denied_number` and `cost_number` are those payload
fields as `summed_number` reads them (NULL when absent or not a number) and
`odd_values` counts the ones present but not numbers. `field_<name>` holds the payload
field's JSON text, NULL when the record lacks it."""
#
# Schema 4: what a report sums per group is kept summed, in `record_group_totals` (one
# row per (suite, scope, arm, task, outcome, group_key), `core.group_totals`), updated in
# the append's transaction like `record_cells`. A report reads a scope's few thousand
# group rows instead of walking a million-row index (whose pages, cold, are spread
# through the file). The totals are derived from the records' summary rows by
# `group_totals.fold` alone, and `verify` recomputes them from the bodies.
# records decoded per page when totalling the bodies of an older store (slim decode; one
# progress line per page on stderr)
BACKFILL_BATCH = 20_000


@functools.lru_cache(maxsize=1)
def _summary_row_decoder() -> Any:
    payload = msgspec.defstruct("SummaryRowPayload", [(name, Any, msgspec.UNSET)
                                                      for name in SUMMARY_FIELDS], frozen=True)
    slim = msgspec.defstruct("SummaryRowRecord", [
        ("suite", str), ("scope", str), ("arm", str), ("task", str), ("trial", int),
        ("run_id", str), ("outcome", str), ("started_at", float), ("ended_at", float),
        ("tokens", TokenComponents, msgspec.field(default_factory=TokenComponents)),
        ("payload", payload, msgspec.field(default_factory=payload))], frozen=True)
    return msgspec.json.Decoder(slim)


# Largest count `summed_number` accepts as an integer: every backend's 64-bit integer
# column holds the sum of many such values.
_LARGEST_COUNT = 2**53
# Largest integer that converts to a finite float (the sums of turns and costs are floats).
_LARGEST_FLOAT = int(sys.float_info.max)


def summed_number(value: Any, *, count: bool = False) -> tuple[float | int | None, bool]:
    """`(number, odd)`: how a report reads a payload field it sums (turns, denied calls,
    imputed cost), the one rule the database's rows (`summary_row`) and the streaming
    pass share. A JSON number (not a boolean) is its value; absent or null is
    `(None, False)`; anything else (a string, a boolean, a list, an object, an infinite
    or too large number, a fraction where a `count` is wanted) is `(None, True)`: skipped
    and counted as odd, so a report says how many it skipped instead of failing."""
    if value is None or value is msgspec.UNSET:
        return None, False
    kind = type(value)
    if kind is int:
        if abs(value) <= (_LARGEST_COUNT if count else _LARGEST_FLOAT):
            return value, False
        return None, True
    if kind is float and math.isfinite(value):
        if not count:
            return value, False
        if value.is_integer() and abs(value) <= _LARGEST_COUNT:
            return int(value), False
    return None, True


def summary_row(seq: int, body: bytes) -> tuple[Any, ...]:
    """The summary row (in `SUMMARY_COLUMNS` order) of the record stored at `seq` with
    these exact bytes: the definition appends, upgrades and verify share (appends take
    `fold_row_of`'s shortcut where it is the same fold row). Raises `msgspec.DecodeError`
    when the body is not a record."""
    slim = _summary_row_decoder().decode(body)
    payload = slim.payload
    return _summary_row(seq, slim.suite, slim.scope, slim.arm, slim.task, slim.trial,
                        slim.run_id, slim.outcome, slim.started_at, slim.ended_at,
                        slim.tokens, [getattr(payload, name) for name in SUMMARY_FIELDS])


def _summary_row(seq: int, suite: str, scope: str, arm: str, task: str, trial: int,
                 run_id: str, outcome: str, started_at: float, ended_at: float,
                 tokens: TokenComponents, fields: Sequence[Any]) -> tuple[Any, ...]:
    """The row of a record given its parts, `fields` the values of `SUMMARY_FIELDS`
    (`msgspec.UNSET` for a field the payload lacks): its fold row (`_fold_row`, the
    one computation of what is summed) with the columns nothing sums."""
    folded = _fold_row(seq, suite, scope, arm, task, outcome, started_at, ended_at, tokens,
                       fields)
    encode = _json_text
    texts = [None if value is _UNSET else encode(value).decode() for value in fields]
    return (folded[0], suite, scope, arm, task, trial, run_id, outcome, folded[6],
            float(started_at), float(ended_at), *folded[7:18], *texts)


def _fold_row(seq: int, suite: str, scope: str, arm: str, task: str, outcome: str,
              started_at: float, ended_at: float, tokens: TokenComponents,
              fields: Sequence[Any]) -> tuple[Any, ...]:
    """The fold row (`group_totals.FOLD_COLUMNS`) of a record given its parts, as
    `_summary_row`: the columns of its summary row the group totals are folded from,
    computed here alone (`_summary_row` takes them from here)."""
    tier, failure, turns_value, reported, denied_value, cost_value, version = fields
    turns, odd_turns = summed_number(turns_value)
    denied, odd_denied = summed_number(denied_value, count=True)
    cost, odd_cost = summed_number(cost_value)
    return (int(seq), suite, scope, arm, task, outcome,
            _json_text([None if tier is _UNSET else tier,
                        None if failure is _UNSET else failure]).decode(),
            max(0.0, float(ended_at) - float(started_at)), tokens.fresh_input,
            tokens.cache_creation, tokens.cache_read, tokens.output, tokens.reasoning,
            1 if reported is _UNSET or reported else 0,
            None if turns is None else float(turns), denied,
            None if cost is None else float(cost), odd_turns + odd_denied + odd_cost,
            None if version is _UNSET else _json_text(version).decode())


# the JSON text of a summary field (keys in the order given: a decoded body's are sorted)
_json_text = msgspec.json.Encoder().encode
_UNSET = msgspec.UNSET


# The types of payload values that read back from JSON as themselves (`fold_row_of`),
# given that the record's canonical JSON was encoded (so an integer fits 64 bits) and
# `Record.storage_problem` found nothing (so a float is finite); `UNSET` is an absent
# field. A container or a subclass of these is not: the stored bytes are decoded instead.
_SCALAR_KINDS = frozenset((str, bool, int, float, type(None), type(_UNSET)))
# `payload.get`'s default per field of SUMMARY_FIELDS (one `map` call, no loop in Python)
_ABSENT_FIELDS = (_UNSET,) * len(SUMMARY_FIELDS)
_TEXT_KINDS = frozenset((str,))


def fold_row_of(seq: int, record: Record) -> tuple[Any, ...] | None:
    """The fold row (`group_totals.FOLD_COLUMNS`) of a record `append` accepted (its
    canonical JSON encoded and `storage_problem` None), stored at `seq` as exactly that
    canonical JSON: computed from the record in memory instead of decoding the bytes
    just encoded, and without the summary row's texts nothing sums. None where that is
    not certainly `fold_row(summary_row(seq, canonical_json(record)))` (a payload field
    holding a container or a value of a subclass, an address that is not text...): the
    caller decodes the stored bytes then. A property test holds the two equal."""
    if type(record) is not Record:
        return None
    payload, tokens = record.payload, record.tokens
    if type(payload) is not dict or type(tokens) is not TokenComponents:
        return None
    fields = list(map(payload.get, SUMMARY_FIELDS, _ABSENT_FIELDS))
    suite, scope, arm, task, run_id, outcome = address = (
        record.suite, record.scope, record.arm, record.task, record.run_id, record.outcome)
    if not (_SCALAR_KINDS.issuperset(map(type, fields)) and type(record.trial) is int
            and _TEXT_KINDS.issuperset(map(type, address))):
        return None
    return _fold_row(seq, suite, scope, arm, task, outcome, record.started_at,
                     record.ended_at, tokens, fields)


def _same_summary(stored: Sequence[Any], expected: Sequence[Any]) -> bool:
    """Stored and recomputed rows agree (the database may hand integers back as floats
    or text as bytes; a different value is never equal). Whole rows are compared first,
    in one step (what a sound store always passes); only a row that differs is compared
    value by value with bytes read as text."""
    if tuple(stored) == tuple(expected):
        return True
    return len(stored) == len(expected) and all(
        _as_text(a) == _as_text(b) for a, b in zip(stored, expected, strict=True))


def _as_text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _heading_digest(parts: Any) -> bytes:
    """A short digest of a run heading row (`run_start_row`), or of a digest and the
    run's end: what `verify` keeps per run instead of the row."""
    return hashlib.blake2b(msgspec.msgpack.encode(parts), digest_size=16).digest()


def _stored_heading_digest(stored: Sequence[Any]) -> bytes | None:
    """`_heading_digest` of a stored `run_headings` row as `verify` digests the row the
    chain makes (the start's row, then with its end when it has one); None when a value
    is not of its column's kind (text the database turned into bytes is text)."""
    run_id, suite, seq, key, heading, end = stored
    if type(seq) is not int or not isinstance(heading, (bytes, memoryview)) or not (
            end is None or isinstance(end, (bytes, memoryview))):
        return None
    digest = _heading_digest((_as_text(run_id), _as_text(suite), seq, _as_text(key),
                              bytes(heading), None))
    return digest if end is None else _heading_digest((digest, bytes(end)))


def _same_heading(stored: Sequence[Any], expected: Sequence[Any]) -> bool:
    """A stored run heading row (or part of one) is the one recomputed from its start:
    text the same text (the database may hand it back as bytes), the sequence number
    the same integer, the heading and end the same bytes (never text the database
    converted), an end not yet written NULL."""
    return len(stored) == len(expected) and all(
        (b is None and a is None)
        or (type(b) is bytes and isinstance(a, (bytes, memoryview)) and bytes(a) == b)
        or (type(b) is int and type(a) is int and a == b)
        or (type(b) is str and _as_text(a) == b)
        for a, b in zip(stored, expected, strict=True))


# -- the group totals table (derived data, outside the chain) -----------------------
# `record_group_totals`: one row per report group, `core.group_totals` (schema 4). The
# column types of each backend are named by kind here, so both tables match.
_GROUP_TOTALS_KINDS = {name: "text" for name in (*GROUP_KEY_COLUMNS, "bench_versions",
                                                  "newest")} | {
    name: "real" for name in ("duration_s", "duration_s_error", "turns", "turns_error",
                              "imputed_cost_usd", "imputed_cost_usd_error")}
# The group index of schema 3 (dropped by the upgrade to 4).
_VERSION_3_GROUP_INDEX = "record_summaries_by_group"
# A version 3 store's group totals, summed by walking that index (read-only stores): the
# columns of `GROUP_TOTALS_COLUMNS` up to `odd_values` (compensations 0), then the
# group's lowest and highest bench version.
_VERSION_3_GROUP_TOTALS = (
    f"SELECT {', '.join(GROUP_KEY_COLUMNS)}, MIN(seq), COUNT(*), SUM(priced), "
    + "".join(f"SUM({name} * priced), " for name in ("fresh_input", "cache_creation",
                                                      "cache_read", "output"))
    + "SUM(CASE WHEN reasoning IS NULL THEN 0 ELSE priced END), "
    "COALESCE(SUM(reasoning * priced), 0), SUM(duration_s), 0.0, "
    "COALESCE(SUM(turns_number), 0), 0.0, COALESCE(SUM(denied_number), 0), "
    "COUNT(cost_number), COALESCE(SUM(cost_number), 0), 0.0, SUM(odd_values), "
    "MIN(field_bench_version), MAX(field_bench_version) FROM record_summaries "
    f"WHERE suite = {{p}} AND scope = {{p}} GROUP BY {', '.join(GROUP_KEY_COLUMNS)}")
# group keys per read of the touched groups' rows (6 parameters each)
_KEYS_PER_READ = 400
# group rows per UPSERT statement (26 parameters each)
_GROUPS_PER_UPSERT = 32
# groups a writer keeps in memory between its appends (about 1 KB each)
_GROUPS_KEPT_IN_MEMORY = 50_000


# groups `verify` folds in memory; past that it folds into a temporary table instead
# (`_VERIFIED_TOTALS`), so its memory does not grow with a store of many groups
_GROUPS_VERIFIED_IN_MEMORY = 10_000
# the temporary table (of the connection, dropped after) `verify` folds into then
_VERIFIED_TOTALS = "verify_group_totals"
# groups one pass of `verify` folds when the backend refuses it that temporary table (a
# role without TEMP, a read-only transaction or standby, no writable temporary folder):
# it folds the groups of one part a pass, each pass reading every body, so it holds at
# most this many groups recomputed and their stored rows (measured: about 2.8 KB a group
# of the part at its comparison, so up to about 280 MB above the rest of `verify`).
# Larger than the spill bound, so a store of under 90,000 groups (parts are planned 90%
# full) takes no pass beyond the chain's; no larger, as memory follows it: a store of a
# million groups took 12 passes and peaked at 1.54x a store of 100,000 (bench README)
_GROUPS_VERIFIED_PER_PASS = 100_000
# stored group rows read per query when `verify` reads `record_group_totals` whole
# (keyset pages: on PostgreSQL a query's whole result sits in the client's memory)
_GROUP_ROWS_PER_READ = 5_000


def group_totals_table(types: Mapping[str, str], suffix: str = "", *,
                       table: str = "record_group_totals", temporary: bool = False) -> str:
    """`CREATE TABLE` of `record_group_totals` (or of `table`, its layout) with the
    backend's type per kind (`text`, `integer`, `real`); `suffix` follows the closing
    parenthesis."""
    columns = ",\n    ".join(
        f"{name} {types[_GROUP_TOTALS_KINDS.get(name, 'integer')]} NOT NULL"
        for name in GROUP_TOTALS_COLUMNS)
    return (f"CREATE {'TEMPORARY ' if temporary else ''}TABLE IF NOT EXISTS {table} "
            f"(\n    {columns},\n    PRIMARY KEY ({', '.join(GROUP_KEY_COLUMNS)})\n){suffix}")


@functools.lru_cache(maxsize=8)
def _read_group_totals(placeholder: str, keys: int, table: str = "record_group_totals") -> str:
    """The stored rows of `keys` groups: the wanted keys joined to the table's primary
    key, so each is one lookup (a row-value IN list made SQLite scan the table)."""
    one = f"({', '.join([placeholder] * len(GROUP_KEY_COLUMNS))})"
    return (f"WITH wanted ({', '.join(GROUP_KEY_COLUMNS)}) AS (VALUES "
            f"{', '.join([one] * keys)}) SELECT "
            f"{', '.join(f'totals.{name}' for name in GROUP_TOTALS_COLUMNS)} "
            f"FROM wanted JOIN {table} AS totals ON "
            + " AND ".join(f"totals.{name} = wanted.{name}" for name in GROUP_KEY_COLUMNS))


@functools.lru_cache(maxsize=8)
def _upsert_group_totals(placeholder: str, rows: int, table: str = "record_group_totals") -> str:
    """`rows` groups' rows written whole: each inserted, or replacing the stored one (the
    same statement on SQLite and PostgreSQL; the rows' keys are distinct)."""
    one = f"({', '.join([placeholder] * len(GROUP_TOTALS_COLUMNS))})"
    updates = ", ".join(f"{name} = excluded.{name}" for name in GROUP_TOTALS_COLUMNS
                        if name not in GROUP_KEY_COLUMNS)
    return (f"INSERT INTO {table} ({', '.join(GROUP_TOTALS_COLUMNS)}) "
            f"VALUES {', '.join([one] * rows)} ON CONFLICT ({', '.join(GROUP_KEY_COLUMNS)}) "
            f"DO UPDATE SET {updates}")


@functools.lru_cache(maxsize=2)
def _insert_new_group_totals(placeholder: str) -> str:
    """A group's row inserted where its key is not in `record_group_totals` yet, left out
    (not an error) where it is: the same statement on SQLite and PostgreSQL, run once
    per row by `executemany`, whose count of rows inserted says whether any was left
    out. One row per statement: SQLite gives a statement writing several rows a
    statement journal (to undo it alone on an error), which an append's earlier insert
    of its entries has already spilled to a temporary file, so each page it changed
    cost a write there (bench/README.md, store_append.py)."""
    return (f"INSERT INTO record_group_totals ({', '.join(GROUP_TOTALS_COLUMNS)}) "
            f"VALUES ({', '.join([placeholder] * len(GROUP_TOTALS_COLUMNS))}) "
            f"ON CONFLICT ({', '.join(GROUP_KEY_COLUMNS)}) DO NOTHING")



T = TypeVar("T")


class StoreError(EnvironmentFailure):
    """The store or its database refused (exit 4); the message is one line."""


class StoreUsageError(StoreError):
    """What was asked for is not there: no store at a path, no such run (exit 2)."""

    exit_code = EXIT_USAGE


class NoStore(StoreUsageError):
    """A read-only command was pointed at a path that holds no store."""


class DuplicateRecord(StoreError):
    pass


class UnstorableValue(StoreError):
    """An entry holds a value its canonical JSON would not keep (a NaN, an infinity, a
    token count that is not an integer): refused before anything is written, so the
    store never holds a record other than the one its writer made."""


class CorruptStore(StoreError):
    """The file or database is damaged, or is not a benchwarden store."""


class ForeignDatabase(CorruptStore):
    """A database of another application: refused untouched."""


def lock_timeout() -> float:
    """Seconds to wait for another writer's lock (env BENCHWARDEN_STORE_TIMEOUT, default 30)."""
    text = os.environ.get("BENCHWARDEN_STORE_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        from benchwarden.core.errors import ConfigurationError
        raise ConfigurationError(
            f"BENCHWARDEN_STORE_TIMEOUT={text!r} is not a number of seconds (e.g. 30)")
    return value


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    first_broken: str | None = None  # one line naming the entry and what is wrong
    last_seq: int | None = None
    witness_lines: tuple[str, ...] = field(default=())  # one per witness: agrees / says what
    tail_problem: str | None = None  # a witness the chain does not reach or contradicts

    def line(self) -> str:
        if self.first_broken is not None:
            return f"store chain broken after {self.checked} good entries: {self.first_broken}"
        if self.tail_problem is not None:
            return (f"store NOT verified: the chain's {self.checked} entries link up, but "
                    f"{self.tail_problem}")
        ending = f", ending at entry {self.last_seq}" if self.last_seq is not None else ""
        return f"store chain intact: {self.checked} entries verified{ending}"

    def lines(self) -> list[str]:
        """The verdict line, then one line per witness consulted."""
        return [self.line(), *self.witness_lines]


@dataclass(frozen=True)
class RunInfo:
    run: Run
    end: RunEnd | None
    record_count: int


class RunHeading(msgspec.Struct, frozen=True):
    """A run's start as a listing of runs shows it: the fields of `Run` that say which
    run it is and what it measured, without its configuration, seeds and host (read
    from the stored body, whose other fields are skipped unread)."""

    run_id: str
    suite: str
    bench_version: str
    target: dict[str, Any]
    started_at: float
    resumed_from: str | None = None


_run_heading_decoder = msgspec.json.Decoder(RunHeading)
# run starts `run_listing` reads per query (a wide suite's start holds kilobytes of
# configuration: a page of them, not every run's, is in memory at once)
_RUN_STARTS_PER_READ = 500


@dataclass(frozen=True)
class ListedRun:
    """A run as `Store.run_listing` gives it: its heading, its end (None: it never
    ended, it was killed) and its records counted."""

    run: RunHeading
    end: RunEnd | None
    record_count: int


def _held_once(value: Any, strings: dict[str, str]) -> Any:
    """`value` with each string in it (in lists and mappings) replaced by the equal one
    already in `strings` (added when new): names repeated across runs held once."""
    if isinstance(value, str):
        return strings.setdefault(value, value)
    if isinstance(value, list):
        return [_held_once(item, strings) for item in value]
    if isinstance(value, dict):
        return {_held_once(key, strings): _held_once(item, strings)
                for key, item in value.items()}
    return value


def find_secrets(value: Any, path: str = "") -> list[str]:
    """Paths inside `value` whose key or value looks like a credential, by the one rule
    in `core.secrets` (as stored: the NAME of an environment variable, `*_env`, is not
    one, and a credential-like name must hold a string)."""
    return credential_paths(value, path, for_storage=True)


def body_size(body: Any) -> int:
    """Bytes a stored body takes in a page (`PAGE_BYTES`): its length, or 0 for a value
    that is no body at all (a damaged store's number or NULL), which the reader then
    names as unreadable rather than failing here."""
    return len(body) if isinstance(body, (bytes, bytearray, memoryview, str)) else 0


def rows_within_page(rows: Iterable[tuple[Any, ...]],
                     body: int) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of a query reading bodies (column number `body`), taken one at a time up
    to the row whose body brings them to `PAGE_BYTES`: the rows, and whether they were
    cut short there (the caller reads on after the last one)."""
    taken: list[tuple[Any, ...]] = []
    size = 0
    for row in rows:
        taken.append(row)
        size += body_size(row[body])
        if size >= PAGE_BYTES:
            return taken, True
    return taken, False


def _last_page(rows: Sequence[tuple[Any, ...]], cut: bool, batch: int) -> bool:
    """Whether a keyset page of at most `batch` rows (`_bounded_page`) was the query's
    last: it came back empty, or short of `batch` without being cut by bytes."""
    return not rows or (len(rows) < batch and not cut)


def _after_page(chunk: list[int], rows: Sequence[tuple[Any, ...]], cut: bool) -> list[int]:
    """The sequence numbers of `chunk` (sorted) still to read after a page of its rows
    (`_bounded_page`, in sequence order): none unless the page was cut short."""
    if not cut or not rows:
        return []
    last = int(rows[-1][0])
    return [seq for seq in chunk if seq > last]


def _as_bytes(body: Any) -> bytes:
    """Bodies are stored as bytes; a hand-edited row may come back as text, or (SQLite
    keeps any value in any column) as a number or NULL: then its text, which matches
    no hash and decodes to no entry, so the reader names the entry as damaged."""
    if isinstance(body, str):
        return body.encode("utf-8", "surrogateescape")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    return repr(body).encode("ascii", "backslashreplace")


def _entry_hash(previous: str, kind: str, address: Sequence[Any], body: bytes) -> str:
    return link_hash(previous, canonical_json([kind, *address]), body)


@dataclass(frozen=True)
class _Entry:
    kind: str  # "run" | "record" | "run_end"
    suite: str
    scope: str
    arm: str
    task: str
    trial: int
    run_id: str
    body: bytes

    @property
    def address(self) -> tuple[Any, ...]:
        return (self.suite, self.scope, self.arm, self.task, self.trial, self.run_id)

    def describe(self) -> str:
        if self.kind == "record":
            return (f"record {self.suite}/{self.scope}/{self.arm}/{self.task}/"
                    f"trial {self.trial} (run {self.run_id})")
        return f"{self.kind.replace('_', ' ')} of run {self.run_id}"


def cell_counts(addresses: Iterable[Sequence[Any]]) -> list[tuple[str, str, str, str, int, int]]:
    """Pure: per cell of the records among `addresses` (kind, suite, scope, arm, task,
    trial, run_id), `(suite, scope, arm, task, records, highest trial)`, one row per
    cell: what an append adds to `record_cells`. (Counted by `Counter` and a sort by
    trial, whose last value per cell a dict keeps: no Python step per record.)"""
    pairs = [((suite, scope, arm, task), trial)
             for kind, suite, scope, arm, task, trial, _ in addresses if kind == "record"]
    counts = Counter(map(itemgetter(0), pairs))
    highest = dict(sorted(pairs, key=itemgetter(1)))
    return [(*cell, counts[cell], trial) for cell, trial in highest.items()]


def run_counts(addresses: Iterable[Sequence[Any]]) -> list[tuple[str, str, int]]:
    """Pure: per run and suite of the records among `addresses` (kind, suite, scope, arm,
    task, trial, run_id), `(run_id, suite, records)`: what an append adds to
    `record_runs`."""
    counts = Counter((run_id, suite) for kind, suite, _, _, _, _, run_id in addresses
                     if kind == "record")
    return [(run_id, suite, records) for (run_id, suite), records in counts.items()]


# -- the run counts table (derived data, outside the chain; schema 5) ---------------------
# `record_runs`: how many records each run holds (per suite: a run's records normally
# share its suite, but nothing in the chain says so), added to by each append's
# transaction like `record_cells`, so `runs` reads one row per run instead of counting a
# million entries (or, in schema 4, a million summary rows). Recounted by `verify`.
# The same statements on both backends (`{p}` the placeholder; the column types named
# by the backend).
def run_counts_table(text: str, integer: str, suffix: str = "") -> str:
    """`CREATE TABLE` of `record_runs` with the backend's text and integer types."""
    return (f"CREATE TABLE IF NOT EXISTS record_runs (\n    run_id {text} NOT NULL, "
            f"suite {text} NOT NULL, records {integer} NOT NULL,\n    "
            f"PRIMARY KEY (run_id, suite)\n){suffix}")


_COUNT_RUNS = ("INSERT INTO record_runs (run_id, suite, records) VALUES ({p}, {p}, {p}) "
               "ON CONFLICT (run_id, suite) DO UPDATE "
               "SET records = record_runs.records + excluded.records")
_RUNS_FROM_ENTRIES = ("SELECT run_id, suite, COUNT(*) FROM entries WHERE kind = 'record' "
                      "GROUP BY run_id, suite")


# -- the run headings and configurations (derived data, outside the chain; schema 6) -----
# A campaign resumed night after night holds tens of thousands of runs whose starts are
# mostly one configuration again and again (a wide suite's lists every task: about 10 KB a
# start, 500 MB at 50,000 runs), which every listing and report read whole to show a few
# fields, and whose ends, spread through the file, a cold listing read one page each.
# `run_headings` keeps one row per run start: its id and suite (the entry's columns),
# the start's sequence number (runs are listed in the order they started), the hash of
# its configuration, its heading, the start's other members as stored (the same bytes,
# in the same order: what `RunHeading` and `Run` less its configuration decode from),
# and the run's end as stored (NULL until the run ends: set by the append of the end).
# `run_configs` keeps each distinct configuration once, its bytes as stored keyed
# by their SHA-256: a run start is stored as `canonical_json(run)`, whose configuration
# member is exactly `canonical_json(run.config)`, so equal configurations share a row and
# different ones never do. Both are written by the transaction that appends the run
# start (the end by the append of the end), made from the stored bytes alone
# (`run_start_row`), and checked by `verify` against every start and end in the chain.
def run_tables(text: str, integer: str, blob: str) -> tuple[str, str]:
    """`CREATE TABLE` of `run_headings` and of `run_configs` with the backend's types."""
    return (f"CREATE TABLE IF NOT EXISTS run_headings (\n    run_id {text} NOT NULL "
            f"PRIMARY KEY, suite {text} NOT NULL, seq {integer} NOT NULL,\n    "
            f"config_hash {text} NOT NULL, heading {blob} NOT NULL, run_end {blob}\n)",
            f"CREATE TABLE IF NOT EXISTS run_configs (\n    config_hash {text} NOT NULL "
            f"PRIMARY KEY, config {blob} NOT NULL\n)")


RUN_HEADING_COLUMNS = ("run_id", "suite", "seq", "config_hash", "heading", "run_end")
# A run start's row: written again over a row no start backed (derived rows are never
# trusted over the chain); a configuration already kept is left as it is.
_KEEP_RUN_HEADING = (f"INSERT INTO run_headings ({', '.join(RUN_HEADING_COLUMNS)}) VALUES "
                     "({p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (run_id) DO UPDATE SET "
                     + ", ".join(f"{name} = excluded.{name}"
                                 for name in RUN_HEADING_COLUMNS[1:]))
_KEEP_RUN_END = "UPDATE run_headings SET run_end = {p} WHERE run_id = {p}"
_KEEP_RUN_CONFIG = ("INSERT INTO run_configs (config_hash, config) VALUES ({p}, {p}) "
                    "ON CONFLICT (config_hash) DO NOTHING")
# configurations `verify` reads per query (each up to a wide suite's kilobytes)
_RUN_CONFIGS_PER_READ = 200


def config_hash(config: bytes) -> str:
    """The key of a configuration in `run_configs`: the SHA-256 of its stored bytes."""
    return hashlib.sha256(config).hexdigest()


def run_start_parts(body: bytes) -> tuple[bytes, bytes]:
    """Pure: a stored run start split into its heading (a JSON object of its members but
    `config`, each member's bytes and order as stored) and its configuration's bytes as
    stored (`{}` when it has none, as a report reads such a start). Raises
    `msgspec.DecodeError` when the body is not a JSON object."""
    members = _raw_fields.decode(body)
    config = members.pop("config", None)
    return _json_text(members), b"{}" if config is None else bytes(config)


def run_start_row(seq: int, suite: str, run_id: str,
                  body: bytes) -> tuple[tuple[Any, ...], bytes]:
    """Pure: the `run_headings` row (`RUN_HEADING_COLUMNS`) of the run start stored at
    `seq` with these columns and exact bytes, before its run ends (`run_end` None), and
    its configuration's bytes (its row in `run_configs` is `(row[3], config)`): the one
    definition appends, upgrades and `verify` share."""
    heading, config = run_start_parts(body)
    return (run_id, suite, int(seq), config_hash(config), heading, None), config


# What the canonical encoder raises for a value it has no JSON for (a dict key that is not
# a string, a lone surrogate, an object of a type it does not know, an integer too large).
_ENCODER_REFUSALS = (TypeError, ValueError, OverflowError)


def _unstorable_record(record: Record, problem: str) -> UnstorableValue:
    return UnstorableValue(
        f"refusing to store the record {record.suite}/{record.scope}/{record.arm}/"
        f"{record.task}/trial {record.trial} (run {record.run_id}): {problem}; nothing of "
        "this batch was stored (records stored before it are kept)")


def _refuse_non_finite(entry: Run | RunEnd, named: str, *fields: str) -> None:
    """Refuse a run or run end holding a NaN or infinity in one of `fields`: JSON would
    store null in its place, silently."""
    for name in fields:
        problem = non_finite_problem(getattr(entry, name), name)
        if problem is not None:
            raise UnstorableValue(f"refusing to store {named}: {problem}; nothing was stored")


def _encoded(entry: Run | RunEnd, named: str) -> bytes:
    """The canonical JSON of a run or run end; the encoder's refusal (a dict key that is
    not a string, a type JSON has no form for) in one line naming the entry."""
    try:
        return canonical_json(entry)
    except _ENCODER_REFUSALS as error:
        raise UnstorableValue(f"refusing to store {named}: {one_line(str(error))}; "
                              "nothing was stored") from None


def _scrubbed_bodies(records: Sequence[Record], bodies: list[bytes]) -> list[bytes]:
    """The stored bodies of `records` (their canonical JSON in `bodies`) after the process
    scrubber: exactly `canonical_json(scrub_entry(record))` for each. A record is walked
    and re-encoded only when its encoded bytes may hold a remembered secret (one check
    of the whole batch first), so batches holding none cost one search."""
    if not bodies or not may_alter_json(b"\n".join(bodies)):
        return bodies
    return [canonical_json(scrub_entry(record)) if may_alter_json(body) else body
            for record, body in zip(records, bodies, strict=True)]


def compare_with_witnesses(first_hash: str | None, last_seq: int | None,
                           hashes_at: Mapping[int, str],
                           witnesses: Sequence[Witness]) -> tuple[list[str], str | None]:
    """Pure: what each witness says about a chain whose links verified intact.

    `hashes_at` holds the chain's hash at every sequence number a witness names (absent
    when the chain has no entry there). Returns one line per witness and the first
    problem found (None when every witness agrees)."""
    lines: list[str] = []
    problem: str | None = None
    for witness in witnesses:
        head, source = witness.head, witness.source
        hint = ""
        if head.seq == 0:
            lines.append(f"head witness {source}: agrees (it was written when the store was "
                         "still empty)")
            continue
        if first_hash is not None and head.first != first_hash:
            finding = (f"head witness {source} belongs to another store (the first entry it "
                       "records is not this store's first entry)")
        elif head.seq in hashes_at and hashes_at[head.seq] != head.hash:
            finding = (f"entry {head.seq} is not the entry head witness {source} recorded: "
                       "the tail was removed and rewritten")
        elif last_seq is None or head.seq > last_seq:
            ends = f"ends at entry {last_seq}" if last_seq is not None else "is empty"
            removed = head.seq - (last_seq or 0)
            finding = (f"entries were removed from its tail: the store {ends} but head witness "
                       f"{source} says the chain reached entry {head.seq} (up to {removed} "
                       f"entr{'y' if removed == 1 else 'ies'} missing)")
            hint = ("; a plain cp of a store that missed its -wal file looks the same: copy "
                    "stores with `benchwarden store backup`")
        elif head.seq not in hashes_at:
            finding = f"entry {head.seq}, named by head witness {source}, is not in the chain"
        else:
            lines.append(f"head witness {source}: agrees (entry {head.seq} is in the chain "
                         "with the recorded hash)")
            continue
        lines.append(f"head witness {source}: MISMATCH: {finding}{hint}")
        problem = problem or finding
    return lines, problem


class Store(ABC):
    """Shared logic; subclasses supply a connection and their SQL dialect."""

    placeholder = "?"
    location: str
    _connection: Any  # the backend's DB-API connection (sqlite3, psycopg)
    read_only: bool = False
    # the group totals this writer's last append wrote, tagged with the chain's head
    # after it (`_add_to_group_totals`)
    _groups_written: tuple[tuple[int, str], dict[tuple[Any, ...], GroupTotals]] | None = None
    # a version 3 store opened read-only (or a version 4 one without its totals): its
    # summary rows answer `group_totals` (summed by a GROUP BY) and count `runs`
    _reads_version_3_groups: bool = False
    # a version 4 store opened read-only: its `record_group_totals` answer reports, its
    # summary rows count `runs`
    _reads_version_4_tables: bool = False
    # a version 5 store opened read-only (or a version 6 one without its run headings):
    # its `record_group_totals` answer reports, its `record_runs` count `runs`, the run
    # starts are read from their bodies
    _reads_version_5_tables: bool = False
    has_derived_tables: bool = False
    """True when this version's derived tables (`record_group_totals`, `record_runs`,
    `run_headings`, `run_configs`) exist and are complete: appends keep them, reports
    read the totals, `runs` the counts, listings and reports the run headings and
    configurations. False for a store of an older version opened read-only (read as it
    is), one whose derived tables were removed, or a version 1 store a PostgreSQL role
    without CREATE appends to."""

    # -- dialect hooks -------------------------------------------------------
    @abstractmethod
    def _transaction(self) -> Any:
        """Context manager yielding a cursor inside one write transaction that holds
        the append lock (so two writers cannot fork the chain)."""

    @abstractmethod
    def _reading(self) -> AbstractContextManager[None]:
        """Context manager around one statement outside an append: the connection's lock
        held, and the driver's refusal turned into a one-line `StoreError`."""

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._reading():
            return self._connection.execute(sql, tuple(params)).fetchall()  # type: ignore[no-any-return]

    def _fold_query(self, sql: str, params: Sequence[Any],
                    fold: Callable[[Iterator[tuple[Any, ...]]], T]) -> T:
        """`fold` of the rows of a query, handed over as the database gives them (on
        PostgreSQL the result is in libpq's memory, and its rows become Python objects
        only as `fold` asks)."""
        with self._reading():
            return fold(iter(self._connection.execute(sql, tuple(params))))

    def _bounded_page(self, sql: str, params: Sequence[Any],
                      body: int) -> tuple[list[tuple[Any, ...]], bool]:
        """The rows of a query reading bodies (column number `body`), as `_query` gives
        them but stopping at the row whose body brings the page to `PAGE_BYTES`: the
        rows, and whether the page was cut short there (the caller reads on after its
        last row). Rows become Python objects one at a time, SQLite reading them from
        the file as they are asked for (the PostgreSQL store streams them: its own
        `_bounded_page`), so what a page holds is bounded by bytes as well as rows."""
        with self._reading():
            cursor = self._connection.execute(sql, tuple(params))
            try:
                return rows_within_page(cursor, body)
            finally:
                cursor.close()

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """A statement that returns no rows, outside any append (`verify`'s temporary
        table, which even a read-only connection may write)."""
        with self._reading():
            self._connection.execute(sql, tuple(params))

    def _scratch(self, sql: str, params: Sequence[Any] = (), *,
                 rows: bool = False) -> list[tuple[Any, ...]]:
        """A statement on `verify`'s temporary table (its rows when `rows`): the backend's
        refusal to make or write that table (`_temporary_table_refusal`) raised as
        `_NoTemporaryTable`, so `verify` folds in passes instead; any other failure as
        every read's."""
        with self._reading():
            try:
                cursor = self._connection.execute(sql, tuple(params))
                return cursor.fetchall() if rows else []
            except Exception as error:
                why = self._temporary_table_refusal(error)
                if why is None:
                    raise
                raise _NoTemporaryTable(why) from None

    def _temporary_table_refusal(self, error: Exception) -> str | None:
        """Why the backend refused `verify` its temporary table, in words (the driver's
        error says it: a privilege, a read-only transaction, no usable temporary folder);
        None when `error` is another failure."""
        return None

    @abstractmethod
    def _is_unique_violation(self, error: Exception) -> bool:
        ...

    @abstractmethod
    def close(self) -> None:
        ...

    @property
    def witness_path(self) -> Path | None:
        """Where this store's own head witness lives (None: it keeps none)."""
        return None

    def _keeps_witness(self) -> bool:
        """True when the store itself records that a witness must exist beside it."""
        return False

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------
    def _append(self, entries: Sequence[_Entry]) -> None:
        self._append_rows([(entry.kind, *entry.address) for entry in entries],
                          [entry.body for entry in entries])

    def _append_rows(self, addresses: Sequence[tuple[Any, ...]], bodies: Sequence[bytes],
                     records: Sequence[Record | None] | None = None) -> None:
        """Append entries given as (kind, suite, scope, arm, task, trial, run_id) and their
        bodies, in one transaction. The chain's head is read once, inside the
        transaction that holds the append lock; the links are computed in one pass and
        inserted in bulk (`_insert_rows`), which reports the rows' sequence numbers or
        they are read back once; the derived tables are kept in the same transaction
        (`_add_to_derived`); the witness is written once, after commit, naming the last
        row and its link. `records`, when given, holds per entry the record whose
        canonical JSON is exactly its body (None where it is not: a scrubbed record),
        so its summary row need not be decoded from the body."""
        if not addresses:
            return
        if self.read_only:
            raise StoreError(f"store {self.location} was opened read-only; nothing can be appended")
        encoded_addresses = canonical_json_many(addresses)
        try:
            with self._transaction() as cursor:
                cursor.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
                row = cursor.fetchone()
                first_previous = row[1] if row else GENESIS_HASH
                if row is not None and not getattr(self, "_witness_vetted", False):
                    self._vet_witness(cursor, int(row[0]))
                links = chain_links(first_previous, zip(encoded_addresses, bodies, strict=True))
                previous_links = [first_previous, *links[:-1]]
                head_seq = int(row[0]) if row else 0
                seqs = self._insert_rows(cursor, [
                    (*address, body, previous, current) for address, body, previous, current
                    in zip(addresses, bodies, previous_links, links, strict=True)])
                if seqs is None and (self.has_derived_tables or self.witness_path is not None):
                    seqs = self._read_back_seqs(cursor, head_seq, len(addresses))
                self._count_cells(cursor, addresses)
                if self.has_derived_tables:
                    assert seqs is not None  # read back above when the insert did not say
                    self._add_to_derived(cursor, (head_seq, row[1] if row else ""),
                                         addresses, bodies, seqs, links, records)
                head = None  # the witness's head: the last of our rows, its link just computed
                if self.witness_path is not None and seqs is not None:
                    head = StoreHead(seqs[-1], links[-1], self._first_hash(
                        cursor, started_by=links[0] if row is None else None))
        except Exception as error:  # translate the backend's refusal into ours
            if self._is_unique_violation(error):
                raise DuplicateRecord(self._explain_duplicate([
                    _Entry(kind, suite, scope, arm, task, trial, run_id, body)
                    for (kind, suite, scope, arm, task, trial, run_id), body
                    in zip(addresses, bodies, strict=True)])) from None
            raise
        if head is not None:  # only once committed: a crash before this leaves it behind,
            self._committed_first_hash = head.first  # never ahead of the store
            self._write_witness(head, forward_only=True)

    def _count_cells(self, cursor: Any, addresses: Sequence[tuple[Any, ...]]) -> None:
        """Inside the append transaction: add the batch's records to the per-cell counts,
        for backends that keep them (`highest_trial`, `cell_depth`)."""
        return None

    def _cells_problem(self) -> str | None:
        """For `verify`: how the per-cell counts a backend keeps disagree with the records
        (None when they agree or it keeps none)."""
        return None

    def _add_to_derived(self, cursor: Any, before: tuple[int, str],
                        addresses: Sequence[tuple[Any, ...]], bodies: Sequence[bytes],
                        seqs: Sequence[int], links: Sequence[str],
                        records: Sequence[Record | None] | None) -> None:
        """Inside the append transaction: the records just inserted at `seqs` with chain
        `links`, after the head `before` (its number and link; link "" in an empty
        store), folded into the per-group totals and counted per run. Their fold rows
        are computed (from the records in memory where `fold_row_of` is exact, else
        from the stored bytes) and not stored: the totals are what reports read. Run
        starts and ends among them are listed (`_keep_run_headings`)."""
        self._keep_run_headings(cursor, [
            (seq, address[0], address[1], address[6], body) for seq, address, body
            in zip(seqs, addresses, bodies, strict=True) if address[0] != "record"])
        if not any(address[0] == "record" for address in addresses):
            return
        given = records if records is not None else [None] * len(addresses)
        rows = [(record is not None and fold_row_of(seq, record))
                or fold_row(summary_row(seq, body))
                for seq, address, body, record in zip(seqs, addresses, bodies, given,
                                                      strict=True) if address[0] == "record"]
        self._add_to_group_totals(cursor, rows, before, (int(seqs[-1]), links[-1]))
        cursor.executemany(_COUNT_RUNS.format(p=self.placeholder), run_counts(addresses))

    def _keep_run_headings(self, cursor: Any, entries: Sequence[tuple[Any, ...]]) -> None:
        """Inside a transaction holding the append lock: the run starts and ends given
        as (seq, kind, suite, run_id, stored body): each start written to `run_headings`,
        its configuration to `run_configs` (each distinct one once; one already kept is
        left as it is), then each end to its run's row."""
        if not entries:
            return
        headings: list[tuple[Any, ...]] = []
        configs: dict[str, bytes] = {}
        ends = [(_as_bytes(body), run_id) for _, kind, _, run_id, body in entries
                if kind == "run_end"]
        for seq, kind, suite, run_id, body in entries:
            if kind != "run":
                continue
            try:
                row, config = run_start_row(int(seq), suite, run_id, _as_bytes(body))
            except msgspec.DecodeError as error:
                raise self._unreadable_entry(seq, "run start", error) from None
            headings.append(row)
            configs.setdefault(row[3], config)
        p = self.placeholder
        cursor.executemany(_KEEP_RUN_HEADING.format(p=p), headings)
        cursor.executemany(_KEEP_RUN_CONFIG.format(p=p), list(configs.items()))
        cursor.executemany(_KEEP_RUN_END.format(p=p), ends)

    def _list_run_starts(self, cursor: Any) -> None:
        """Inside a transaction holding the append lock: `run_headings` and `run_configs`
        made again from every run start and end in the chain (the starts first, each
        kind read in pages over its own index, `_RUN_STARTS_PER_READ` bodies a page, fewer
        where they reach `PAGE_BYTES`: `_pages_in_transaction`)."""
        cursor.execute("DELETE FROM run_headings")
        cursor.execute("DELETE FROM run_configs")
        for kind in ("run", "run_end"):
            for page in self._pages_in_transaction(
                    cursor, f"SELECT seq, kind, suite, run_id, body FROM entries "
                            f"WHERE kind = '{kind}'", key="run_id", key_at=3,
                    batch=_RUN_STARTS_PER_READ):
                self._keep_run_headings(cursor, page)

    def _read_back_seqs(self, cursor: Any, head_seq: int, count: int) -> list[int]:
        """Inside the append transaction: the sequence numbers of the `count` entries just
        inserted after `head_seq` (the append lock is held, so every entry after it is
        ours), for backends whose bulk insert does not report them."""
        cursor.execute(f"SELECT seq FROM entries WHERE seq > {self.placeholder} ORDER BY seq",
                       (head_seq,))
        seqs = [int(found[0]) for found in cursor.fetchall()]
        if len(seqs) != count:
            raise StoreError(f"store {self.location}: an append saw {len(seqs)} new entries "
                             f"for the {count} it wrote; nothing was stored")
        return seqs

    def _add_to_group_totals(self, cursor: Any, rows: Sequence[tuple[Any, ...]],
                             before: tuple[int, str], after: tuple[int, str]) -> None:
        """Inside the append transaction (the append lock held): fold the batch's fold
        rows (`group_totals.FOLD_COLUMNS`) into `record_group_totals`, in Python
        (`group_totals.fold_rows_into`, the rule `verify` recomputes by), each touched
        group's row written whole, so the SQL is the same on every backend.

        The groups this writer last wrote are kept in memory, tagged with the chain's
        head (sequence number and hash) after that append: when the head before this
        batch is that tag, nobody appended since and the earlier append committed, so
        they are what the table holds: folded and written back by UPSERTs, not read.
        The tag is cleared before folding (a failure part way leaves no cache), and a
        head that does not match (a rolled-back append, another writer) means no group
        is known.

        A group not known is folded as new (its first record is in this batch) and
        inserted where its key is absent, without reading first: a new run's groups are
        all new, and the read cost as much as the insert. Only when the inserts leave a
        row out (its key is there) are the new groups read (`_fold_into_stored`)."""
        cached, self._groups_written = self._groups_written, None
        current = cached[1] if cached is not None and cached[0] == before else {}
        if not rows:
            return
        head_seq = before[0]
        touched = fold_batch_into(current, rows)
        # a group known starts at or before the head; one this batch made, after it
        self._write_group_totals(cursor, [group for group in touched
                                          if group.first_seq <= head_seq])
        created = [group for group in touched if group.first_seq > head_seq]
        if created:
            cursor.executemany(_insert_new_group_totals(self.placeholder),
                               [group.row() for group in created])
            if cursor.rowcount != len(created):
                new = {group.key for group in created}
                self._fold_into_stored(cursor, current, rows_by_group(
                    row for row in rows if fold_key(row) in new), head_seq)
        if len(current) <= _GROUPS_KEPT_IN_MEMORY:
            self._groups_written = (after, current)

    def _fold_into_stored(self, cursor: Any, current: dict[tuple[Any, ...], GroupTotals],
                          batch: Mapping[tuple[Any, ...], Sequence[Sequence[Any]]],
                          head_seq: int) -> None:
        """`_add_to_group_totals` for the groups it folded as new when an insert found a
        key there: each stored row read; one that was there before this batch
        (`first_seq` at most `head_seq`: a group this batch made starts after the head)
        replaces the group folded as new in `current`, is folded again from the stored
        totals with the batch's rows of the group and written back by UPSERT (the rows
        this batch inserted stay)."""
        wanted = list(batch)
        before: dict[tuple[Any, ...], Sequence[Sequence[Any]]] = {}
        for start in range(0, len(wanted), _KEYS_PER_READ):
            chunk = wanted[start:start + _KEYS_PER_READ]
            cursor.execute(_read_group_totals(self.placeholder, len(chunk)),
                           list(itertools.chain.from_iterable(chunk)))
            for found in cursor.fetchall():
                try:
                    group = GroupTotals.from_row(found)
                except ValueError as error:
                    raise self._edited_derived_data(error) from None
                if group.first_seq <= head_seq:
                    current[group.key] = group
                    before[group.key] = batch[group.key]
        self._write_group_totals(cursor, fold_groups_into(current, before))

    def _version_3_group_totals(self, suite: str, scope: str) -> list[GroupTotals]:
        """A version 3 store read as it is (read-only, not upgraded): the totals summed
        by one GROUP BY over its group index (every summed column in it), each group's
        newest trials and, where a group holds more than one, its bench versions by a
        short query each. Float sums are the database's (equal to the fold to rounding)."""
        p = self.placeholder
        where = " AND ".join(f"{name} = {p}" for name in GROUP_KEY_COLUMNS)
        groups = []
        for row in self._query(_VERSION_3_GROUP_TOTALS.replace("{p}", p), (suite, scope)):
            key, low, high = row[:6], row[-2], row[-1]
            versions = [] if low is None else [low] if low == high else sorted(
                {found for found, in self._query(
                    f"SELECT DISTINCT field_bench_version FROM record_summaries WHERE {where} "
                    "AND field_bench_version IS NOT NULL", key)})
            newest = sorted(int(seq) for seq, in self._query(
                f"SELECT seq FROM record_summaries WHERE {where} ORDER BY seq DESC "
                f"LIMIT {NEWEST_KEPT}", key))
            groups.append(GroupTotals.from_row((*row[:-2], json.dumps(versions),
                                                json.dumps(newest))))
        return groups

    def _write_group_totals(self, cursor: Any, groups: Sequence[GroupTotals]) -> None:
        """Each group's row written whole, inserted or replacing the stored one, by
        multi-row UPSERTs of `_GROUPS_PER_UPSERT` rows (a statement per row cost half
        as much again)."""
        for start in range(0, len(groups), _GROUPS_PER_UPSERT):
            chunk = groups[start:start + _GROUPS_PER_UPSERT]
            cursor.execute(_upsert_group_totals(self.placeholder, len(chunk)),
                           list(itertools.chain.from_iterable(group.row() for group in chunk)))

    @property
    def _reads_totals_table(self) -> bool:
        """`record_group_totals` answers reports: this version's, or a version 4 or 5
        store's read as it is (the same table)."""
        return (self.has_derived_tables or self._reads_version_4_tables
                or self._reads_version_5_tables)

    @property
    def _reads_run_counts(self) -> bool:
        """`record_runs` counts each run's records: this version's, or a version 5
        store's read as it is (the same table)."""
        return self.has_derived_tables or self._reads_version_5_tables

    @property
    def _reads_run_headings(self) -> bool:
        """`run_headings` and `run_configs` answer listings and reports (else the run
        starts' bodies are read)."""
        return self.has_derived_tables

    @property
    def has_group_totals(self) -> bool:
        """True when `group_totals` answers: a store of this version, or a version 4 or 3
        store opened read-only (version 3: summed from its summary table)."""
        return self._reads_totals_table or self._reads_version_3_groups

    def group_totals(self, suite: str, scope: str) -> list[GroupTotals]:
        """The per-group totals of a scope (`core.group_totals`): what a report sums,
        summed as the records were appended. Only when `has_group_totals`."""
        if not self._reads_totals_table and self._reads_version_3_groups:
            return self._version_3_group_totals(suite, scope)
        if not self._reads_totals_table:
            raise StoreError(f"store {self.location} has no group totals of this version; "
                             "open it for writing once to add them")
        p = self.placeholder
        rows = self._query(f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM "
                           f"record_group_totals WHERE suite = {p} AND scope = {p}",
                           (suite, scope))
        try:
            return [GroupTotals.from_row(row) for row in rows]
        except ValueError as error:
            raise self._edited_derived_data(error) from None

    def fold_group_totals(self, suite: str, scope: str,
                          fold: Callable[[Iterator[DecodedRow]], T]) -> T:
        """`fold` of the scope's group totals (the values `group_totals` holds) as
        `core.group_totals.decoded_rows` gives them, in ascending `first_seq` order (then
        by key), read from the database one row at a time as `fold` asks: what a report
        reads, tens of thousands of groups in a suite of thousands of tasks, neither
        all held as rows nor made into a `GroupTotals` each."""
        return self.fold_group_rows(suite, scope, lambda rows: fold(decoded_rows(rows)))

    def fold_group_chunks(self, suite: str, scope: str,
                          fold: Callable[[Iterator[DecodedChunk]], T]) -> T:
        """`fold` of the scope's group totals as `core.group_totals.decoded_chunks` gives
        them: the stored rows in ascending `first_seq` order (then by key), checked and
        decoded a chunk at a time (what a report reads: a suite of 333,000 tasks has a
        million groups). A store may hand them over as fewer, larger chunks
        (`_whole_scope_chunk`: the scope's columns aggregated by the database in one
        pass); the values, concatenated, are the same. `UnreadableGroupTotals` raised by
        `fold` is the store's corruption, as in `fold_group_rows`."""
        if self._reads_totals_table:
            chunk = self._whole_scope_chunk(suite, scope)
            if chunk is not None:
                try:
                    return fold(iter((chunk,)))
                except UnreadableGroupTotals as error:
                    raise self._edited_derived_data(error) from None
        return self.fold_group_rows(suite, scope, lambda rows: fold(decoded_chunks(rows)))

    def _whole_scope_chunk(self, suite: str, scope: str) -> DecodedChunk | None:
        """The scope's stored group totals as one chunk, its columns aggregated by the
        database (`core.group_totals.whole_scope_chunk`), where the backend can and every
        stored row is of the kinds the store writes; None otherwise, and the rows are
        read and decoded by chunks, their decoding saying what is wrong."""
        return None

    def fold_group_rows(self, suite: str, scope: str,
                        fold: Callable[[Iterator[tuple[Any, ...]]], T]) -> T:
        """`fold_group_totals` of the stored rows themselves, not decoded
        (`GROUP_TOTALS_COLUMNS` order, as the database gives them), for a reader that
        checks and decodes them by chunks (`core.group_totals.decoded_chunks`: a report
        of a suite of 333,000 tasks reads a million). `UnreadableGroupTotals` raised by
        `fold` is the store's corruption, as there."""
        if not self._reads_totals_table and self._reads_version_3_groups:
            groups = sorted(self._version_3_group_totals(suite, scope),
                            key=lambda group: (group.first_seq, group.key))
            try:
                return fold(group.row() for group in groups)
            except UnreadableGroupTotals as error:
                raise self._edited_derived_data(error) from None
        if not self._reads_totals_table:
            self.group_totals(suite, scope)  # raises, saying why
        p = self.placeholder
        try:
            return self._fold_query(
                f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM record_group_totals "
                f"WHERE suite = {p} AND scope = {p} "
                f"ORDER BY first_seq, {', '.join(GROUP_KEY_COLUMNS)}",
                (suite, scope), fold)
        except UnreadableGroupTotals as error:
            raise self._edited_derived_data(error) from None

    def _edited_derived_data(self, problem: Exception | str) -> CorruptStore:
        """A derived row a reader or writer cannot use, in one line that says the way out."""
        return CorruptStore(f"store {self.location}: {problem} (derived data edited); "
                            "`benchwarden store repair` makes it again from the records, "
                            "`benchwarden verify --store` checks the whole store")

    def _upgrade_derived(self, cursor: Any, schema: Iterable[str], stored: str, *,
                         every: bool = False) -> None:
        """Inside a transaction holding the append lock: give a store of schema version
        `stored` this version's derived tables, by the backend's `schema` statements, and
        mark it. Versions 2 to 4: `record_summaries` dropped (derived, outside the
        chain). Versions 4 to 6 keep their `record_group_totals` (the same table) unless
        it is missing; otherwise the totals are computed from the bodies. Versions 5
        and 6 keep their `record_runs` unless it is missing; otherwise the runs are
        counted. Version 6 keeps its `run_headings` and `run_configs` unless one is
        missing; otherwise the run starts are listed again. `every`: all made again
        from the chain, whatever is there (`store repair`)."""
        keep_totals = not every and stored in ("4", "5", "6") and \
            self._table_exists("record_group_totals")
        keep_runs = not every and stored in ("5", "6") and self._table_exists("record_runs")
        keep_headings = not every and stored == "6" and \
            self._table_exists("run_headings") and self._table_exists("run_configs")
        started = time.monotonic()
        if stored in ("2", "3", "4"):
            print(f"benchwarden: store {self.location}: upgrading to schema "
                  f"{SCHEMA_VERSION}: dropping the per-record summary table", file=sys.stderr,
                  flush=True)
        cursor.execute("DROP TABLE IF EXISTS record_summaries")  # its indexes with it
        for statement in schema:
            cursor.execute(statement)
        if not keep_totals:
            self._total_bodies(cursor)
        if not keep_runs:
            self._recount_runs(cursor)
        if not keep_headings:
            print(f"benchwarden: store {self.location}: listing every run's heading and "
                  "configuration from the run starts", file=sys.stderr, flush=True)
            self._list_run_starts(cursor)
        if stored != str(SCHEMA_VERSION):
            print(f"benchwarden: store {self.location}: upgrading to schema {SCHEMA_VERSION}: "
                  f"done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        cursor.execute(f"UPDATE meta SET value = {self.placeholder} "
                       "WHERE name = 'schema_version'", (str(SCHEMA_VERSION),))

    def rebuild_derived(self) -> None:
        """Make every derived table again from the records in the chain, holding the
        append lock: the group totals from the bodies, the run counts, the run headings
        and configurations, then the backend's cell counts (`store repair`). For derived
        rows that were edited, not only removed; the chain itself is not touched
        (`verify` still checks it)."""
        if self.read_only:
            raise StoreError(f"store {self.location} was opened read-only; its derived "
                             "tables cannot be rebuilt")
        with self._transaction() as cursor:
            self._upgrade_derived(cursor, self._derived_schema(),
                                  self._stored_schema_version() or "1", every=True)
            self._recount_cells(cursor)
        self.has_derived_tables = True
        self._reads_version_3_groups = self._reads_version_4_tables = False
        self._reads_version_5_tables = False

    def _derived_schema(self) -> Iterable[str]:
        """The backend's statements making the derived tables (`_upgrade_derived`)."""
        raise NotImplementedError

    def _column_types(self) -> Mapping[str, str]:
        """The backend's column type per kind (`text`, `integer`, `real`)."""
        return {"text": "TEXT", "integer": "INTEGER", "real": "REAL"}

    def _recount_cells(self, cursor: Any) -> None:
        """Inside a transaction holding the append lock: the per-cell counts of backends
        that keep them, counted again from the records."""
        return None

    def _recount_runs(self, cursor: Any) -> None:
        """Inside a transaction holding the append lock: `record_runs` counted again from
        the records (one GROUP BY over the entries)."""
        cursor.execute("DELETE FROM record_runs")
        cursor.execute(f"INSERT INTO record_runs (run_id, suite, records) {_RUNS_FROM_ENTRIES}")

    def _total_bodies(self, cursor: Any) -> None:
        """Inside a transaction holding the append lock: `record_group_totals` computed
        from every record's stored body, in sequence order (`BACKFILL_BATCH` a page,
        slim decode), by the append's fold; no summary row is written. A line on stderr
        before, per page and after (it takes seconds at a million records)."""
        started = time.monotonic()
        cursor.execute("SELECT COUNT(*) FROM entries WHERE kind = 'record'")
        total = int(cursor.fetchone()[0])
        print(f"benchwarden: store {self.location}: upgrading for fast reports: totalling "
              "every group of records from their bodies", file=sys.stderr, flush=True)
        totals: dict[tuple[Any, ...], GroupTotals] = {}
        done = 0
        for page in self._pages_in_transaction(
                cursor, "SELECT seq, body FROM entries WHERE kind = 'record'", key="seq",
                key_at=0, batch=BACKFILL_BATCH):
            rows = []
            for seq, body in page:
                try:
                    rows.append(summary_row(int(seq), _as_bytes(body)))
                except msgspec.DecodeError as error:
                    raise self._unreadable_entry(seq, "record", error) from None
            fold_into(totals, rows)
            done += len(rows)
            print(f"benchwarden: store {self.location}: totalling every group of records: "
                  f"{done:,} of {total:,}", file=sys.stderr, flush=True)
        self._groups_written = None
        cursor.execute("DELETE FROM record_group_totals")
        self._write_group_totals(cursor, list(totals.values()))
        print(f"benchwarden: store {self.location}: totalling every group of records: "
              f"{len(totals):,} groups, done in {time.monotonic() - started:.1f} s",
              file=sys.stderr, flush=True)

    def _keyset_pages(self, select: str, params: Sequence[Any] = (), *, batch: int,
                      key: str = "seq", key_at: int = 0, after: Any = None,
                      read: Callable[[str, Sequence[Any], int],
                                     tuple[list[tuple[Any, ...]], bool]] | None = None,
                      ) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of `select` (a `SELECT ... WHERE ...` whose last column is a body and
        whose column number `key_at` is `key`, unique among its rows) in `key` order,
        those past `after` when given, in keyset pages of `batch` rows, fewer where their
        bodies reach `PAGE_BYTES`; each page (never an empty one) read by `read`
        (`_bounded_page` by default)."""
        p = self.placeholder
        read = read or self._bounded_page
        while True:
            later = "" if after is None else f" AND {key} > {p}"
            rows, cut = read(f"{select}{later} ORDER BY {key} LIMIT {batch}",
                             (*params, *(() if after is None else (after,))), -1)
            if rows:
                yield rows
            if _last_page(rows, cut, batch):
                return
            after = rows[-1][key_at]

    def _pages_in_transaction(self, cursor: Any, select: str, *, key: str, key_at: int,
                              batch: int) -> Iterator[list[tuple[Any, ...]]]:
        """`_keyset_pages` inside the transaction of `cursor`, each row read from the file
        as it is taken; the PostgreSQL store reads one query through a server-side
        cursor instead."""
        def read(sql: str, params: Sequence[Any], body: int
                 ) -> tuple[list[tuple[Any, ...]], bool]:
            cursor.execute(sql, tuple(params))
            return rows_within_page(cursor, body)

        return self._keyset_pages(select, batch=batch, key=key, key_at=key_at, read=read)

    def _insert_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> Sequence[int] | None:
        """Insert entry rows, in `ENTRY_COLUMNS` order, inside the append transaction
        (backends may use a faster bulk path). Returns the sequence numbers they were given
        when the backend knows them without reading them back (None otherwise)."""
        p = self.placeholder
        cursor.executemany(f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}) "
                           f"VALUES ({', '.join([p] * len(ENTRY_COLUMNS))})", rows)
        return None

    def _vet_witness(self, cursor: Any, last_seq: int) -> None:
        """Inside a writer's first append to a store holding entries: the witness beside
        it must agree with the chain, before anything is written.

        The append moves the witness forward, and `write_witness` replaces a witness it
        cannot read or that names another chain: without this check the evidence that
        entries were cut off the tail (a store restored from an older copy beside a newer
        witness, a damaged witness, a chain cut and grown again) would be overwritten by
        the next run and `verify` would then agree. A missing witness is not refused: a
        store copied without its sidecar starts a new one (`verify` says a store that
        keeps one has lost it until then)."""
        target = self.witness_path
        if target is None:
            self._witness_vetted = True
            return
        try:
            head = read_witness(target)
        except WitnessError as error:
            raise CorruptStore(
                f"store {self.location}: its head witness is unreadable ({error}); nothing "
                f"was appended. Run `benchwarden verify --store {self.location}` to see "
                f"whether entries are missing; to go on from the store as it is, move "
                f"{target} aside") from None
        if head is not None and head.seq > 0:
            cursor.execute(f"SELECT hash FROM entries WHERE seq = {self.placeholder}",
                           (head.seq,))
            found = cursor.fetchone()
            hashes_at = {head.seq: str(found[0])} if found else {}
            _, problem = compare_with_witnesses(
                self._first_hash(cursor), last_seq, hashes_at,
                [Witness(str(target), head)])
            if problem is not None:
                raise CorruptStore(
                    f"store {self.location}: {problem}; nothing was appended. Run "
                    f"`benchwarden verify --store {self.location}`; to go on from the "
                    f"store as it is, move {target} aside")
        self._witness_vetted = True

    def _write_witness(self, head: StoreHead, *, forward_only: bool) -> None:
        target = self.witness_path
        if target is None:
            return
        try:
            write_witness(target, head, forward_only=forward_only)
        except OSError as error:
            raise StoreError(
                f"store {self.location}: the append was stored, but its head witness "
                f"{target} could not be written ({error.strerror or error}); "
                "free space or fix permissions, then resume") from None

    def _update_witness(self) -> None:
        """Start the witness from the committed head (a new store: entry 0, replacing any
        witness a store once at this path left; a store from before witnesses: its head)."""
        if self.witness_path is None:
            return
        with self._transaction() as cursor:
            head = self._head_in(cursor) or StoreHead.empty()
        self._write_witness(head, forward_only=False)

    def _first_hash(self, cursor: Any, *, started_by: str | None = None) -> str:
        """The chain's first hash, inside an append transaction: `started_by` (the first
        link of an append that started the chain), else as committed (read once: the
        first entry never changes once committed, so `_committed_first_hash` keeps it)."""
        if started_by is not None:
            return started_by
        first = getattr(self, "_committed_first_hash", None)
        if first is None:
            cursor.execute("SELECT hash FROM entries ORDER BY seq LIMIT 1")
            first = str(cursor.fetchone()[0])
        return first

    def _head_in(self, cursor: Any) -> StoreHead | None:
        cursor.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        last = cursor.fetchone()
        if last is None:
            return None
        return StoreHead(int(last[0]), str(last[1]), self._first_hash(cursor))

    def head(self) -> StoreHead | None:
        """The chain's last entry (and first hash): what reports embed as `store_head`."""
        last = self._query("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        if not last:
            return None
        first = self._query("SELECT hash FROM entries ORDER BY seq LIMIT 1")
        return StoreHead(int(last[0][0]), str(last[0][1]), str(first[0][0]))

    def _explain_duplicate(self, entries: Sequence[_Entry]) -> str:
        seen: set[tuple[Any, ...]] = set()
        for entry in entries:
            if entry.kind == "record":
                key = (entry.suite, entry.scope, entry.arm, entry.task, entry.trial)
                in_batch = key in seen
                seen.add(key)
                if in_batch or self._query(
                        f"SELECT 1 FROM entries WHERE kind = 'record' AND suite = "
                        f"{self.placeholder} AND scope = {self.placeholder} AND arm = "
                        f"{self.placeholder} AND task = {self.placeholder} AND trial = "
                        f"{self.placeholder}", key):
                    return f"refused: the store already holds {entry.describe()}"
            elif self._query(
                    f"SELECT 1 FROM entries WHERE kind = {self.placeholder} AND run_id = "
                    f"{self.placeholder}", (entry.kind, entry.run_id)):
                return f"refused: the store already holds the {entry.describe()}"
        return "refused: an entry with the same address is already stored"

    def begin_run(self, run: Run) -> None:
        _refuse_non_finite(run, f"run {run.run_id}", "config", "target", "host", "started_at")
        run = scrub_entry(run)  # the credentials this process was given, replaced
        secrets = find_secrets({"config": run.config, "target": run.target})
        if secrets:
            raise StoreUsageError(
                f"refusing to store run {run.run_id}: {', '.join(secrets)} looks like a "
                "credential (pass keys through an environment variable instead)")
        self._append([_Entry("run", run.suite, "", "", "", 0, run.run_id,
                             _encoded(run, f"run {run.run_id}"))])

    def finish_run(self, end: RunEnd) -> None:
        _refuse_non_finite(end, f"the end of run {end.run_id}", "summary", "ended_at")
        end = scrub_entry(end)
        suite = self.run_info(end.run_id).run.suite
        self._append([_Entry("run_end", suite, "", "", "", 0, end.run_id,
                             _encoded(end, f"the end of run {end.run_id}"))])

    def append(self, records: Iterable[Record]) -> None:
        """Append records in one transaction; refuses the whole batch on a duplicate, or
        on a record whose JSON would not read back as it (`Record.storage_problem`)."""
        batch = list(records)
        for record in batch:
            problem = record.storage_problem()
            if problem is not None:
                raise _unstorable_record(record, problem)
        try:
            bodies = canonical_json_many(batch)
        except _ENCODER_REFUSALS as error:  # the encoder's refusal
            for record in batch:  # named by the first record it refuses alone
                try:
                    canonical_json(record)
                except _ENCODER_REFUSALS as alone:
                    raise _unstorable_record(record, one_line(str(alone))) from None
            raise UnstorableValue(f"refusing to store a batch of records: {error}") from None
        stored = _scrubbed_bodies(batch, bodies)
        self._append_rows(
            [("record", record.suite, record.scope, record.arm, record.task, record.trial,
              record.run_id) for record in batch], stored,
            # a record the scrubber re-encoded is summarised from its stored bytes
            batch if stored is bodies else [record if after is before else None for
                                            record, before, after in zip(batch, bodies, stored,
                                                                         strict=True)])

    # -- reading ---------------------------------------------------------------
    def iter_records(self, *, run_id: str | None = None, suite: str | None = None,
                     scope: str | None = None, arm: str | None = None,
                     task: str | None = None, batch: int = DEFAULT_BATCH) -> Iterator[Record]:
        """Records in the order they were written, fetched `batch` at a time by sequence
        number, so memory stays bounded however large the store is."""
        for seq, body in self._record_bodies(run_id=run_id, suite=suite, scope=scope, arm=arm,
                                             task=task, batch=batch):
            yield self._decode_entry(seq, body, _record_decoder, "record")

    def _decode_entry(self, seq: int, body: bytes, decoder: Any, kind: str) -> Any:
        """`body` (entry `seq`, a `kind`: record, run start, run end) decoded; a body the
        decoder refuses (edited outside benchwarden: the triggers were dropped) is a
        `CorruptStore` naming the entry, not a decoder's message with no store in it."""
        try:
            return decoder.decode(body)
        except msgspec.DecodeError as error:  # (ValidationError is one too)
            raise self._unreadable_entry(seq, kind, error) from None

    def _run_end(self, body: bytes, seq: int | None = None) -> RunEnd:
        """A run end decoded from its body (`seq`: the entry, named if it does not decode;
        None: the decoder's error is the caller's to explain). A long end is decoded once
        while a reader holds it: up to `SHARED_ENDS` are kept by their bytes, and a reader
        of the same bytes gets the same object (a report and its digest reading read the
        one end). Kept weakly: an end no reader holds is let go with its bytes (a soak of
        rungs of two has a 133 MB end, which a report had held to its last line for a
        reader long done with it). An end is never changed once written, and no reader
        changes a decoded one."""
        kept: weakref.WeakValueDictionary[bytes, RunEnd] | None = (
            self.__dict__.setdefault("_decoded_ends", weakref.WeakValueDictionary())
            if len(body) >= SHARED_END_BYTES else None)
        found = kept.get(body) if kept is not None else None
        if found is None:
            stored = (_run_end_decoder.decode(body) if seq is None
                      else self._decode_entry(seq, body, _run_end_decoder, "run end"))
            found = RunEnd(stored.run_id, stored.ended_at, stored.status,
                           RunSummary(stored.summary))
            if kept is not None:
                if len(kept) >= SHARED_ENDS:
                    del kept[next(iter(kept))]
                kept[body] = found
        return found

    def _unreadable_entry(self, seq: int, kind: str, error: Exception) -> CorruptStore:
        """The one line for entry `seq`, a `kind`, whose body does not decode."""
        return CorruptStore(f"store {self.location}: entry {seq} is not a readable {kind} "
                            f"({error}); `benchwarden verify --store` checks the whole store")

    def _record_bodies(self, *, run_id: str | None = None, suite: str | None = None,
                       scope: str | None = None, arm: str | None = None,
                       task: str | None = None,
                       batch: int = DEFAULT_BATCH) -> Iterator[tuple[int, bytes]]:
        """`(seq, body)` of matching records in sequence order, `batch` rows per query,
        fewer where their bodies reach `PAGE_BYTES` (keyset pagination by sequence
        number: memory bounded by one page)."""
        if batch < 1:
            raise ValueError("batch must be at least 1")
        p = self.placeholder
        clauses, params = ["kind = 'record'"], []
        if run_id is not None:  # its index yields (run_id, kind, seq) in seq order
            clauses.append(f"run_id = {p}")
            params.append(run_id)
        for column, value in (("suite", suite), ("scope", scope), ("arm", arm), ("task", task)):
            if value is not None:
                # `|| ''` keeps the planner off the address index (not in seq order),
                # which would sort every matching record again for each page
                clauses.append(f"{column} || '' = {p}")
                params.append(value)
        for rows in self._keyset_pages(
                f"SELECT seq, body FROM entries WHERE {' AND '.join(clauses)}", params,
                batch=batch, after=0):
            for seq, body in rows:
                yield int(seq), _as_bytes(body)

    def records(self, *, run_id: str | None = None, suite: str | None = None,
                scope: str | None = None, arm: str | None = None,
                task: str | None = None) -> list[Record]:
        return list(self.iter_records(run_id=run_id, suite=suite, scope=scope, arm=arm,
                                      task=task))

    def highest_trial(self, suite: str, scope: str, arm: str, task: str) -> int:
        """The highest trial number ever used in a cell (0 when empty)."""
        p = self.placeholder
        rows = self._query(
            f"SELECT MAX(trial) FROM entries WHERE kind = 'record' AND suite = {p} AND "
            f"scope = {p} AND arm = {p} AND task = {p}", (suite, scope, arm, task))
        return int(rows[0][0] or 0) if rows else 0

    # -- reading for reports at scale (slim rows, counts, chosen records) -------
    def iter_record_summaries(self, *, suite: str, scope: str | None = None,
                              run_id: str | None = None,
                              payload_fields: Sequence[str] = (),
                              batch: int = SUMMARY_BATCH,
                              payload_types: Mapping[str, Any] | None = None,
                              seqs: Sequence[int] | None = None,
                              ) -> Iterator[RecordSummary]:
        """One slim row per matching record, in the order written: what a report
        aggregates (address, outcome, times, token components, the named payload fields)
        and never the rest of the payload (transcripts, final reports), which is skipped
        while decoding. Memory stays bounded by one page (`batch` rows, fewer where
        their bodies reach `PAGE_BYTES`).

        A payload field is plain JSON values (dicts, lists, strings, numbers), unless
        `payload_types` gives it a type (any type msgspec decodes: the suite's own structs,
        with `msgspec.Raw` for the parts it does not read): then it is decoded into that
        type once, nothing built twice. A record whose typed fields do not fit their types
        (a record older than the types, a hostile body) is read as if no types were given,
        so a reader must accept either form of such a field; one that is not a readable
        record at all is `CorruptStore`, typed or not.

        `run_id`: only that run's records. `seqs` (sorted, from `record_seqs`): only the
        records at these sequence numbers (of the suite and scope), in that order."""
        fields = tuple(payload_fields)
        plain = _summary_decoder(fields)
        types = tuple(sorted((name, kind) for name, kind in (payload_types or {}).items()
                             if name in fields))
        typed = _summary_decoder(fields, types) if types else plain
        if seqs is not None and run_id is not None:
            raise ValueError("iter_record_summaries reads either a run's records or chosen ones")
        bodies = (self._record_bodies(run_id=run_id, suite=suite, scope=scope, batch=batch)
                  if seqs is None
                  else self._bodies_at(seqs, suite, scope, min(batch, DEFAULT_BATCH)))
        for seq, body in bodies:
            try:
                slim = typed.decode(body)
            except msgspec.DecodeError:  # (ValidationError is one): read as the untyped do
                slim = self._decode_entry(seq, body, plain, "record")
            yield RecordSummary(
                seq=seq, arm=slim.arm, task=slim.task, trial=slim.trial, run_id=slim.run_id,
                outcome=slim.outcome, started_at=slim.started_at, ended_at=slim.ended_at,
                tokens=slim.tokens,
                # the fields the record holds (UNSET: absent), each as decoded: plain JSON
                # values are built once by the decoder and need no copy
                payload={name: value for name, value in zip(
                    fields, msgspec.structs.astuple(slim.payload), strict=True)
                    if value is not msgspec.UNSET})

    def iter_payload_field_at(self, seqs: Sequence[int], *, suite: str, scope: str,
                              field: str, kind: Any) -> Iterator[PayloadField]:
        """The one payload field `field` of the records at `seqs` (of the suite and scope,
        as `iter_record_summaries` takes them), each with the address and run it belongs
        to, in sequence order: for a report that reads one digest from each of thousands
        of records (a retrieval seed's last case, a contamination rung's scored replies).
        Decoded straight into `kind` and nothing else of the record but its address and
        run (about a fifth less time than a summary row a record); a record whose field
        does not fit `kind` gives it as plain JSON, one without the field gives
        `msgspec.UNSET`, and a body that is not a record at all is `CorruptStore`, as
        `iter_record_summaries` reads them."""
        typed, plain = _field_decoder(field, kind), _field_decoder(field, Any)
        for seq, body in self._bodies_at(seqs, suite, scope, DEFAULT_BATCH):
            try:
                found = typed.decode(body)
            except msgspec.DecodeError:  # (ValidationError is one)
                found = self._decode_entry(seq, body, plain, "record")
            yield PayloadField(seq, found.arm, found.task, found.trial, found.run_id,
                               getattr(found.payload, field))

    def _bodies_at(self, seqs: Iterable[int], suite: str | None, scope: str | None,
                   batch: int) -> Iterator[tuple[int, bytes]]:
        """`(seq, body)` of the records at `seqs` (of `suite` and `scope`, when given) in
        sequence order, `batch` numbers per query, each query a bounded page."""
        p = self.placeholder
        wanted = sorted({int(seq) for seq in seqs})
        # `|| ''` keeps the planner on the sequence numbers (a lookup each), off the
        # address index (which would walk the whole scope for every query)
        clauses, params = ["kind = 'record'"], []
        for column, value in (("suite", suite), ("scope", scope)):
            if value is not None:
                clauses.append(f"{column} || '' = {p}")
                params.append(value)
        for start in range(0, len(wanted), batch):
            chunk = wanted[start:start + batch]
            while chunk:
                rows, cut = self._bounded_page(
                    f"SELECT seq, body FROM entries WHERE {' AND '.join(clauses)} AND "
                    f"seq IN ({', '.join([p] * len(chunk))}) ORDER BY seq",
                    (*params, *chunk), 1)
                for seq, body in rows:
                    yield int(seq), _as_bytes(body)
                chunk = _after_page(chunk, rows, cut)

    def record_counts(self, suite: str, scope: str) -> dict[tuple[str, int], int]:
        """Records of each arm and trial of a scope, `{(arm, trial): records}`, counted
        by the database over the address index (no body read): how a report learns what
        a scope holds before choosing which records to read."""
        return {group: count for group, (count, _) in self.record_groups(suite, scope).items()}

    def record_groups(self, suite: str, scope: str) -> dict[tuple[str, int], tuple[int, int]]:
        """Each arm and trial of a scope, `{(arm, trial): (records, sequence number of
        its last record)}`, over the address index (no body read): for a report that
        reads what a suite keeps on each group's last record (a digest of the group)."""
        p = self.placeholder
        rows = self._query(
            f"SELECT arm, trial, COUNT(*), MAX(seq) FROM entries WHERE kind = 'record' "
            f"AND suite = {p} AND scope = {p} GROUP BY trial, arm", (suite, scope))
        return {(str(arm), int(trial)): (int(count), int(last))
                for arm, trial, count, last in rows}

    def record_seqs(self, suite: str, scope: str, groups: Iterable[tuple[str, int]], *,
                    tasks: Collection[str] | None = None) -> list[int]:
        """Sorted sequence numbers of a scope's records whose `(arm, trial)` is one of
        `groups` (and, with `tasks`, whose task is one of them), found over the address
        index (no body read): for a report that reads a chosen part of a scope
        (`iter_record_summaries` with `seqs`)."""
        p = self.placeholder
        if tasks is not None:
            return [seq for seq, _, _, _ in self.record_addresses(suite, scope, groups,
                                                                 tasks=tasks)]
        found: list[int] = []
        for arm, trial in sorted(set(groups), key=lambda group: (group[1], group[0])):
            found.extend(int(seq) for seq, in self._query(
                f"SELECT seq FROM entries WHERE kind = 'record' AND suite = {p} AND "
                f"scope = {p} AND trial = {p} AND arm = {p}", (suite, scope, trial, arm)))
        return sorted(found)

    def record_addresses(self, suite: str, scope: str, groups: Iterable[tuple[str, int]], *,
                         tasks: Collection[str]) -> list[tuple[int, str, int, str]]:
        """`(seq, arm, trial, task)` of a scope's records whose `(arm, trial)` is one of
        `groups` and whose task is one of `tasks`, in sequence order, found over the
        address index (no body read): for a report that decides from the addresses alone
        which of them to read."""
        p = self.placeholder
        wanted = set(groups)
        names = sorted(set(tasks))
        if not names or not wanted:
            return []
        arms = sorted({arm for arm, _ in wanted})
        trials = sorted({trial for _, trial in wanted})
        found: list[tuple[int, str, int, str]] = []
        # one lookup per (trial, arm, task) of the index, many per query; the pairs the
        # cross product adds beyond `groups` are dropped here
        step = max(1, DEFAULT_BATCH // max(len(arms), 1))
        for start in range(0, len(trials), step):
            chunk = trials[start:start + step]
            for seq, arm, trial, task in self._query(
                    f"SELECT seq, arm, trial, task FROM entries WHERE kind = 'record' AND "
                    f"suite = {p} AND scope = {p} AND trial IN ({', '.join([p] * len(chunk))}) "
                    f"AND arm IN ({', '.join([p] * len(arms))}) AND task IN "
                    f"({', '.join([p] * len(names))})", (suite, scope, *chunk, *arms, *names)):
                if (str(arm), int(trial)) in wanted:
                    found.append((int(seq), str(arm), int(trial), str(task)))
        found.sort()
        return found

    def records_at(self, seqs: Iterable[int]) -> dict[int, Record]:
        """The records at these sequence numbers (fully decoded), by sequence number: for
        the few records a report shows in full. Numbers that hold no record are absent."""
        return dict(self.iter_records_at(seqs))

    def iter_records_at(self, seqs: Iterable[int]) -> Iterator[tuple[int, Record]]:
        """`(seq, record)` of the records at these sequence numbers, fully decoded, in
        sequence order, read a bounded page at a time (`PAGE_BYTES`): for a reader that
        keeps only part of each (a page's clipped trials), memory is bounded by one page
        however large the records. Numbers that hold no record are left out."""
        for seq, body in self._bodies_at(seqs, None, None, DEFAULT_BATCH):
            yield seq, self._decode_entry(seq, body, _record_decoder, "record")

    def cell_depth(self, suite: str, scope: str, arm: str, task: str) -> tuple[int, int]:
        """`(records, highest trial number)` of one cell, counted by the database over the
        address index (nothing decoded): what planning a run needs, whatever the store's
        size."""
        p = self.placeholder
        rows = self._query(
            f"SELECT COUNT(*), MAX(trial) FROM entries WHERE kind = 'record' AND suite = {p} "
            f"AND scope = {p} AND arm = {p} AND task = {p}", (suite, scope, arm, task))
        if not rows:
            return 0, 0
        return int(rows[0][0] or 0), int(rows[0][1] or 0)

    def runs(self, suite: str | None = None) -> list[RunInfo]:
        p = self.placeholder
        where = f" AND suite = {p}" if suite else ""
        params = (suite,) if suite else ()
        # sorted here, not by ORDER BY seq, which would make SQLite scan every entry
        # instead of the index of run starts
        starts = sorted(self._query(
            f"SELECT seq, body FROM entries WHERE kind = 'run'{where}", params),
            key=lambda row: int(row[0]))
        ends, counts = self._run_ends_and_counts(suite)
        infos = []
        for seq, body in starts:
            run = self._decode_entry(seq, _as_bytes(body), _run_decoder, "run start")
            infos.append(RunInfo(run, ends.get(run.run_id), int(counts.get(run.run_id, 0))))
        return infos

    def _run_ends_and_counts(self, suite: str | None
                             ) -> tuple[dict[str, RunEnd], dict[str, int]]:
        """Each run's end, by run id, and its records counted (`runs`)."""
        p = self.placeholder
        where = f" AND suite = {p}" if suite else ""
        params = (suite,) if suite else ()
        ends = {
            end.run_id: end for end in (
                self._run_end(_as_bytes(body), seq)
                for seq, body in self._query(
                    f"SELECT seq, body FROM entries WHERE kind = 'run_end'{where}", params))
        }
        return ends, self._run_counts(suite)

    def _run_counts(self, suite: str | None) -> dict[str, int]:
        """Each run's records counted, by run id (of `suite`, or of every suite)."""
        p = self.placeholder
        where = f" AND suite = {p}" if suite else ""
        params = (suite,) if suite else ()
        # counted by appends (`record_runs`, one row per run), or in a version 4 or 3
        # store read as it is over its slim summary table (a tenth of the bytes)
        if self._reads_run_counts:
            in_suite = f" WHERE suite = {p}" if suite else ""
            counted = f"SELECT run_id, SUM(records) FROM record_runs{in_suite} GROUP BY run_id"
        elif self.has_group_totals:  # over the index by run, in its order: no sort
            in_suite = f" WHERE suite || '' = {p}" if suite else ""
            counted = f"SELECT run_id, COUNT(*) FROM record_summaries{in_suite} GROUP BY run_id"
        else:
            counted = (f"SELECT run_id, COUNT(*) FROM entries WHERE kind = 'record'{where} "
                       "GROUP BY run_id")
        return {run_id: self._whole_count(count, f"run {run_id}")
                for run_id, count in self._query(counted, params)}

    def runs_with_config(self, suite: str, config_keys: Collection[str]) -> list[RunInfo]:
        """`runs(suite)` with each run's config cut to `config_keys`: the rest of a config
        is never decoded, and equal strings in what is kept (task names) are held once.
        For a report, which reads a few keys of every run's config: a suite of 333,000
        tasks writes configs listing every task three times (11 such runs decoded whole:
        1.3 GiB). Read from the run headings, each distinct configuration once (a
        campaign of 50,000 runs of one configuration: 500 MB of run starts read for a
        few keys of one); from the run starts one at a time in a store without them.
        The whole of a run is `run_info`."""
        strings: dict[str, str] = {}
        # a value whose text another run's config had is that run's value (every run of a
        # suite lists the same tasks: decoded once)
        values_of: dict[bytes, Any] = {}

        def value_of(raw: msgspec.Raw) -> Any:
            text = bytes(raw)
            found = values_of.get(text, values_of)
            if found is values_of:
                found = values_of[text] = _held_once(msgspec.json.decode(text), strings)
            return found

        def kept(config: dict[str, msgspec.Raw]) -> dict[str, Any]:
            return {key: value_of(config[key]) for key in config_keys if key in config}

        def run_of(heading: bytes, config: dict[str, Any]) -> Run:
            # the heading with an empty configuration put first decodes straight into
            # `Run` (built by msgspec: half the time of building it field by field, at
            # 50,000 runs 0.15 s); the configuration kept is set before the run is
            # handed to anyone (through `object.__setattr__`, as a frozen dataclass's
            # own `__init__` sets its fields)
            run = _run_decoder.decode(b'{"config":{}}' if heading == b"{}" else
                                      b'{"config":{},' + heading[1:])
            object.__setattr__(run, "config", config)
            return run

        if self._reads_run_headings:
            # with the cycle collector paused (`core.collector`): a run, its heading's
            # mappings and its end for each of 50,000 runs set off full collections
            # that walked them all again and again, for nothing (no cycle is made)
            with paused_cycle_collector():
                starts, ends = self._runs_from_headings(suite, kept, run_of)
                counts = self._run_counts(suite)
                return [RunInfo(run, ends.get(run.run_id), int(counts.get(run.run_id, 0)))
                        for _, run in sorted(starts, key=lambda start: start[0])]
        else:
            def cut(rows: Iterator[tuple[Any, ...]]) -> list[tuple[int, Run]]:
                starts = []
                for seq, body in rows:
                    start = self._decode_entry(seq, _as_bytes(body),
                                               _run_outside_config_decoder, "run start")
                    fields = {name: getattr(start, name) for name in _RUN_FIELDS}
                    fields["config"] = kept(self._decode_entry(seq, fields["config"],
                                                               _raw_fields, "run start"))
                    starts.append((int(seq), Run(**fields)))
                return starts

            starts = self._fold_query(f"SELECT seq, body FROM entries WHERE kind = 'run' "
                                      f"AND suite = {self.placeholder}", (suite,), cut)
            ends, counts = self._run_ends_and_counts(suite)
        return [RunInfo(run, ends.get(run.run_id), int(counts.get(run.run_id, 0)))
                for _, run in sorted(starts, key=lambda start: start[0])]

    def _runs_from_headings(self, suite: str,
                            kept: Callable[[dict[str, msgspec.Raw]], dict[str, Any]],
                            run_of: Callable[[bytes, dict[str, Any]], Run]
                            ) -> tuple[list[tuple[int, Run]], dict[str, RunEnd]]:
        """`runs_with_config`'s runs of `suite` (with their start's sequence number) and
        their ends (by run id) from `run_headings`, each distinct configuration read and
        cut (`kept`) once; a run whose configuration row is missing or a row that does
        not decode is derived data edited."""
        p = self.placeholder
        headings = self._query(f"SELECT seq, config_hash, heading, run_end FROM run_headings "
                               f"WHERE suite = {p}", (suite,))
        ends: dict[str, RunEnd] = {}
        configs: dict[str, dict[str, Any]] = {}

        def cut(rows: Iterator[tuple[Any, ...]]) -> None:
            for key, config in rows:
                configs[_as_text(key)] = kept(_raw_fields.decode(_as_bytes(config)))

        try:
            self._fold_query(f"SELECT config_hash, config FROM run_configs WHERE config_hash "
                             f"IN (SELECT config_hash FROM run_headings WHERE suite = {p})",
                             (suite,), cut)
            starts = []
            for seq, key, heading, end in headings:
                config = configs.get(_as_text(key))
                if config is None:
                    raise ValueError(f"the configuration of the run started at entry {seq} "
                                     "is missing")
                # a fresh mapping per run, as a run read from its start has
                run = run_of(_as_bytes(heading), dict(config))
                starts.append((int(seq), run))
                if end is not None:
                    ends[run.run_id] = self._run_end(_as_bytes(end))
        except (msgspec.DecodeError, ValueError, TypeError) as error:
            raise self._edited_derived_data(
                f"its run headings or configurations are unreadable ({error})") from None
        return starts, ends

    def run_info(self, run_id: str) -> RunInfo:
        p = self.placeholder
        # ordered here, not by SQL: SQLite sorts these rows, bodies and all, in a temporary
        # tree (a contamination soak's 65 MB end took 440 MB to read so)
        rows = self._query(
            f"SELECT seq, kind, body FROM entries WHERE run_id = {p} "
            "AND kind IN ('run', 'run_end')", (run_id,))
        run = end = None
        for seq, kind, body in sorted(rows, key=lambda row: int(row[0])):
            if kind == "run":
                run = self._decode_entry(seq, _as_bytes(body), _run_decoder, "run start")
            else:
                end = self._run_end(_as_bytes(body), seq)
        if run is None:
            # a prefix matched as the characters it is (LIKE would read `%` and `_` in
            # it as patterns, and fold case: `show %` picked the only run), never empty
            matches = self._query(
                "SELECT run_id FROM entries WHERE kind = 'run' AND "
                f"substr(run_id, 1, {len(run_id)}) = {p}", (run_id,)) if run_id else []
            if len(matches) == 1:
                return self.run_info(matches[0][0])
            hint = "ambiguous prefix" if matches else "no such run"
            raise StoreUsageError(f"run {run_id!r} not found in {self.location} ({hint}); "
                                  "`benchwarden runs --store ...` lists the runs")
        count = self._query(
            f"SELECT COALESCE(SUM(records), 0) FROM record_runs WHERE run_id = {p}"
            if self._reads_run_counts else
            f"SELECT COUNT(*) FROM entries WHERE kind = 'record' AND run_id = {p}",
            (run.run_id,))
        return RunInfo(run, end, self._whole_count(count[0][0], f"run {run.run_id}"))

    def _whole_count(self, value: Any, named: str) -> int:
        """A count the database summed or counted, as an int; a sum SQLite made of an
        edited row holding text (a float, then) is refused as derived data edited."""
        if type(value) is int or (isinstance(value, Decimal) and value == int(value)):
            return int(value)
        raise self._edited_derived_data(f"the record count of {named} is not a whole number")

    def latest_run(self, suite: str | None = None) -> RunInfo:
        """The run started last (`runs(suite)[-1]`), without reading every run: a store of
        thousands of runs decoded every one for `show --latest`. The run starts are read
        by number and id only (`suite` is selected so the planner takes the run starts'
        own index: with only `seq` and `run_id` it walks the index of every entry by run,
        a million entries at a million records; or `run_headings`, a few pages where the
        run starts are spread through the file), then that one run."""
        p = self.placeholder
        where = f" AND suite = {p}" if suite else ""
        starts = self._query(
            "SELECT seq, run_id FROM run_headings" + (f" WHERE suite = {p}" if suite else "")
            if self._reads_run_headings else
            f"SELECT seq, run_id, suite FROM entries WHERE kind = 'run'{where}",
            (suite,) if suite else ())
        if not starts:
            raise StoreUsageError(f"no {suite + ' ' if suite else ''}runs in {self.location}")
        return self.run_info(str(max(starts, key=lambda row: int(row[0]))[1]))

    def run_listing(self, suite: str | None = None) -> list[ListedRun]:
        """Every run (of `suite`) in the order they started, as a listing shows it: each
        run's `RunHeading` (its start without the configuration, seeds and host), end
        and record count. Read from `run_headings`; in a store without them, from the
        run starts in keyset pages over their own index (`_RUN_STARTS_PER_READ` bodies
        held at a time), decoded without what a listing does not show: a store of
        50,000 runs of a 200-task suite held every run's configuration, 3.4 GiB, to
        print its run ids."""
        p = self.placeholder
        params: tuple[Any, ...] = (suite,) if suite else ()
        headings: list[tuple[int, RunHeading]] = []
        if self._reads_run_headings:
            rows = self._query("SELECT seq, heading, run_end FROM run_headings"
                               + (f" WHERE suite = {p}" if suite else ""), params)
            ends: dict[str, RunEnd] = {}
            # the cycle collector paused as in `runs_with_config`
            with paused_cycle_collector():
                try:
                    for seq, heading, end in rows:
                        headings.append((int(seq),
                                         _run_heading_decoder.decode(_as_bytes(heading))))
                        if end is not None:
                            ends[headings[-1][1].run_id] = self._run_end(_as_bytes(end))
                except (msgspec.DecodeError, ValueError, TypeError) as error:
                    raise self._edited_derived_data(
                        f"its run headings are unreadable ({error})") from None
                counts = self._run_counts(suite)
                return [ListedRun(heading, ends.get(heading.run_id),
                                  counts.get(heading.run_id, 0))
                        for _, heading in sorted(headings, key=lambda pair: pair[0])]
        else:
            in_suite = f" AND suite = {p}" if suite else ""
            for page in self._keyset_pages(
                    f"SELECT seq, run_id, body FROM entries WHERE kind = 'run'{in_suite}",
                    params, batch=_RUN_STARTS_PER_READ, key="run_id", key_at=1):
                for seq, _, body in page:
                    headings.append((int(seq), self._decode_entry(
                        seq, _as_bytes(body), _run_heading_decoder, "run start")))
            ends, counts = self._run_ends_and_counts(suite)
        return [ListedRun(heading, ends.get(heading.run_id), counts.get(heading.run_id, 0))
                for _, heading in sorted(headings, key=lambda pair: pair[0])]

    def own_witness(self) -> tuple[Witness | None, str | None]:
        """This store's own head witness, and a line when it is missing or unreadable.

        Raises nothing: an unreadable witness is reported, not fatal."""
        target = self.witness_path
        if target is None:
            return None, None
        try:
            head = read_witness(target)
        except WitnessError as error:
            return None, str(error)
        if head is not None:
            return Witness(str(target), head), None
        return None, None

    def verify(self, witnesses: Sequence[Witness] = (), *, own_witness: bool = True,
               batch: int = DEFAULT_BATCH) -> ChainReport:
        """Recompute the hash chain from the first entry, naming the first mismatch; then
        check the chain against head witnesses: this store's own (unless `own_witness` is
        False) and the `witnesses` given. Reads `batch` entries at a time.

        A store that records that it keeps a witness beside it, but has none there, fails
        unless another witness was given and agrees (a plain copy loses the witness)."""
        consulted = list(witnesses)
        own_problem: str | None = None  # fails the verdict when nothing else vouches
        own_line: str | None = None
        if own_witness and self.witness_path is not None:
            found, unreadable = self.own_witness()
            if found is not None:
                consulted.insert(0, found)
            elif unreadable is not None:
                own_problem = f"its head witness is unreadable ({unreadable})"
                own_line = f"head witness {self.witness_path}: UNREADABLE: {unreadable}"
            elif self._keeps_witness():
                own_problem = (f"its head witness {self.witness_path} is missing although this "
                               "store keeps one, so a removed tail cannot be ruled out")
                own_line = (f"head witness {self.witness_path}: MISSING (not copied with the "
                            "store, or removed); copy stores with `benchwarden store backup`")
            else:
                own_line = (f"note: no head witness at {self.witness_path}: entries removed from "
                            "the end of the chain cannot be detected without one (give a "
                            "report with --witness)")
        wanted = {witness.head.seq for witness in consulted}
        hashes_at: dict[int, str] = {}
        previous = GENESIS_HASH
        first_hash: str | None = None
        last_seq: int | None = None
        checked = 0
        p = self.placeholder
        sql = ("SELECT seq, kind, suite, scope, arm, task, trial, run_id, body, prev_hash, hash "
               f"FROM entries WHERE seq > {p} ORDER BY seq LIMIT {p}")
        version = self._stored_schema_version()
        # which derived tables are checked against the records: those this store's
        # version keeps (a version 4 store read as it is: its summary rows too)
        summaries = version == "4" and self._table_exists("record_summaries")
        totals = version in ("4", "5", "6") and self._table_exists("record_group_totals")
        runs = version in ("5", "6") and self._table_exists("record_runs")
        headings = version == "6" and self._table_exists("run_headings") \
            and self._table_exists("run_configs")
        # the group totals, run counts and run headings recomputed from the entries, as
        # appends make them (memory bounded by the groups and runs, not the records; the
        # configurations by their hashes)
        expected_totals = _ExpectedTotals(self, batch)
        expected_runs: Counter[tuple[str, str]] = Counter()
        # each run's heading row as a digest (`_heading_digest`: 50,000 rows whole were
        # 50 MB) and the hashes of the configurations
        expected_headings: dict[str, bytes] = {}
        expected_configs: set[str] = set()
        after = 0
        while True:
            rows, cut = self._bounded_page(sql, (after, batch), 8)
            summary_problem = (self._summaries_problem(after, rows, expected_totals.fold)
                               if summaries and rows else None)
            if totals and not summaries and rows:
                expected_totals.fold(_bodies_summarised(rows))
            for seq, kind, suite, scope, arm, task, trial, run_id, body, prev_hash, stored in rows:
                entry = _Entry(kind, suite, scope, arm, task, int(trial), run_id, _as_bytes(body))
                problem = None
                if prev_hash != previous:
                    problem = ("its link to the previous entry is broken (an entry was removed "
                               "or reordered)")
                elif _entry_hash(previous, kind, entry.address, entry.body) != stored:
                    problem = "its contents do not match its hash (edited after it was written)"
                elif kind == "record":
                    problem = self._record_columns_problem(entry)
                if problem is None and summary_problem is not None \
                        and summary_problem[0] == int(seq):
                    problem = summary_problem[1]
                if problem:
                    return ChainReport(False, checked,
                                       f"entry {seq}, {entry.describe()}: {problem}",
                                       last_seq=last_seq)
                if first_hash is None:
                    first_hash = stored
                if seq in wanted:
                    hashes_at[int(seq)] = stored
                previous = stored
                last_seq = int(seq)
                checked += 1
                if runs and kind == "record":
                    expected_runs[(run_id, suite)] += 1
                elif headings and kind == "run":
                    try:
                        row, _ = run_start_row(int(seq), suite, run_id, entry.body)
                    except msgspec.DecodeError as error:
                        return ChainReport(False, checked, f"entry {seq}, {entry.describe()}: "
                                           f"it is not a readable run start ({error})",
                                           last_seq=last_seq)
                    expected_headings[run_id] = _heading_digest(row)
                    expected_configs.add(row[3])
                elif headings and kind == "run_end" and run_id in expected_headings:
                    expected_headings[run_id] = _heading_digest(
                        (expected_headings[run_id], entry.body))
            if summary_problem is not None:  # a summary row for a number with no entry
                return ChainReport(False, checked, f"record summary {summary_problem[0]}: "
                                   f"{summary_problem[1]}", last_seq=last_seq)
            if _last_page(rows, cut, batch):
                break
            after = int(rows[-1][0])
        summary_tail: str | None = None
        if summaries:  # rows past the chain's end: its tail was cut (or rows were added)
            extra = self._query(f"SELECT MIN(seq), MAX(seq) FROM record_summaries "
                                f"WHERE seq > {p}", (last_seq or 0,))
            if extra and extra[0][0] is not None:
                ends = f"ends at entry {last_seq}" if last_seq is not None else "is empty"
                summary_tail = (
                    f"entries were removed from its tail: the store {ends} but its summary "
                    f"table holds records up to entry {extra[0][1]}")
        lines, tail_problem = compare_with_witnesses(first_hash, last_seq, hashes_at, consulted)
        missing = self._missing_derived_tables()
        try:
            tail_problem = tail_problem or summary_tail or missing or self._cells_problem() or (
                self._group_totals_problem(expected_totals, last_seq) if totals else None) or (
                self._runs_problem(expected_runs) if runs else None) or (
                self._run_headings_problem(expected_headings, expected_configs)
                if headings else None)
        finally:
            expected_totals.drop()
        if own_line is not None and (checked or own_problem is not None):
            lines.insert(0, own_line)
        if own_problem is not None and not consulted:
            tail_problem = tail_problem or own_problem
        return ChainReport(tail_problem is None, checked, None, last_seq=last_seq,
                           witness_lines=tuple(lines), tail_problem=tail_problem)

    def _missing_derived_tables(self) -> str | None:
        """For `verify`: the derived tables of a version 4, 5 or 6 store that are gone,
        in words."""
        missing = self._tables_missing(self._stored_schema_version())
        if not missing:
            return None
        return (f"its derived table{'s' if len(missing) > 1 else ''} {' and '.join(missing)} "
                f"{'are' if len(missing) > 1 else 'is'} missing (removed outside benchwarden); "
                "opening the store for writing (any run, or `benchwarden store repair`) "
                f"rebuilds {'them' if len(missing) > 1 else 'it'} from the records")

    def _tables_missing(self, version: str | None) -> list[str]:
        """The derived tables a store of `version` keeps (versions 4 to 6) that are not
        there. benchwarden never drops them, but they are outside the chain and anyone
        can; the records themselves are in the chain, so nothing is lost."""
        return [name for name in _DERIVED_TABLES.get(version or "", ())
                if not self._table_exists(name)]

    def _read_as_it_is(self, version: str) -> None:
        """Opening read-only (nothing made or written): what a store of `version` with
        the derived tables it holds answers. This version's, complete: everything. A
        version 5 store (or this version's without its run headings or configurations):
        its totals and run counts, the run starts read from their bodies. A
        version 4 store: its totals and its summary rows (`runs`); without its totals,
        or a version 3 store: the summary rows sum the totals; anything else (or a table
        missing): reports stream the bodies and `runs` counts the entries."""
        missing = self._tables_missing(version)
        self.has_derived_tables = version == str(SCHEMA_VERSION) and not missing
        self._reads_version_5_tables = not self.has_derived_tables and version in (
            "5", "6") and "record_group_totals" not in missing and "record_runs" not in missing
        summaries = version in ("3", "4") and "record_summaries" not in missing \
            and self._table_exists("record_summaries")
        self._reads_version_4_tables = summaries and version == "4" and not missing
        self._reads_version_3_groups = summaries and not self._reads_version_4_tables

    def _say_rebuilding(self, missing: Sequence[str]) -> None:
        """A line on stderr per derived table someone removed, before a writer rebuilds
        it."""
        for table in missing:
            print(f"benchwarden: store {self.location}: its table {table} is missing (removed "
                  "outside benchwarden): rebuilding it from the records", file=sys.stderr,
                  flush=True)

    def _stored_schema_version(self) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE name = 'schema_version'")
        return str(rows[0][0]).strip() if rows else None

    def _table_exists(self, name: str) -> bool:
        rows = self._query(f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                           f"{self.placeholder}", (name,))
        return bool(rows)

    def _group_totals_problem(self, expected: _ExpectedTotals,
                              last_seq: int | None) -> str | None:
        """For `verify`: the first group whose stored totals differ from `expected` (the
        totals folded from every record's body), in one line; None when all agree. Totals
        naming records past the chain's end `last_seq` say its tail was cut. The stored
        rows are read a page at a time; when `expected` was folded into its temporary table
        the database finds the groups that differ (`EXCEPT` both ways), so memory stays
        bounded however many groups there are; when the backend refused that table,
        `expected` compares one part of the groups a pass (`_ExpectedTotals`)."""
        try:
            beyond = max((seq for group in self._stored_group_totals()
                          for seq in group.newest_seqs), default=0)
            if beyond > (last_seq or 0):
                ends = f"ends at entry {last_seq}" if last_seq is not None else "is empty"
                return (f"entries were removed from its tail: the store {ends} but its group "
                        f"totals count records up to entry {beyond}")
            wrong = None
            if expected.spilled:
                try:
                    wrong = self._spilled_difference()
                except _NoTemporaryTable as refusal:
                    expected.give_up_table(refusal, keep_folded=False)
            if expected.in_passes:
                wrong = expected.difference_in_passes(last_seq)
            elif not expected.spilled:
                wrong = self._fold_query(
                    f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM record_group_totals", (),
                    lambda found: first_difference(map(GroupTotals.from_row, found),
                                                   expected.in_memory))
        except ValueError as error:
            wrong = str(error)
        if wrong is None:
            return None
        return (f"its per-group totals (record_group_totals) disagree with its records: "
                f"{wrong} (derived data edited)")

    def _spilled_difference(self) -> str | None:
        """The first group whose stored totals differ from those `verify` folded into its
        temporary table, in words: the database finds the groups that differ (`EXCEPT`
        both ways) and `first_difference` names how. Raises `_NoTemporaryTable` when the
        backend refuses the work space that takes (SQLite with no usable temporary
        folder)."""
        columns = ", ".join(GROUP_TOTALS_COLUMNS)
        keys = ", ".join(GROUP_KEY_COLUMNS)
        differing = self._scratch(
            f"SELECT {keys} FROM (SELECT {columns} FROM record_group_totals EXCEPT "
            f"SELECT {columns} FROM {_VERIFIED_TOTALS}) AS stored UNION "
            f"SELECT {keys} FROM (SELECT {columns} FROM {_VERIFIED_TOTALS} EXCEPT "
            f"SELECT {columns} FROM record_group_totals) AS recomputed "
            f"ORDER BY {keys} LIMIT 1", rows=True)
        if not differing:
            return None
        where = " AND ".join(f"{name} = {self.placeholder}" for name in GROUP_KEY_COLUMNS)
        stored = [GroupTotals.from_row(row) for row in self._query(
            f"SELECT {columns} FROM record_group_totals WHERE {where}", differing[0])]
        wanted = {group.key: group for group in (
            GroupTotals.from_row(row) for row in self._scratch(
                f"SELECT {columns} FROM {_VERIFIED_TOTALS} WHERE {where}", differing[0],
                rows=True))}
        return first_difference(stored, wanted)

    def _stored_group_totals(self) -> Iterator[GroupTotals]:
        """Every row of `record_group_totals`, in key order, `_GROUP_ROWS_PER_READ` a
        query (keyset pages over the primary key: bounded memory on both backends).
        Raises ValueError for a row that is not a group's totals."""
        p = self.placeholder
        keys = ", ".join(GROUP_KEY_COLUMNS)
        select = f"SELECT {', '.join(GROUP_TOTALS_COLUMNS)} FROM record_group_totals"
        order = f"ORDER BY {keys} LIMIT {_GROUP_ROWS_PER_READ}"
        page = self._query(f"{select} {order}")
        while page:
            for row in page:
                yield GroupTotals.from_row(row)
            if len(page) < _GROUP_ROWS_PER_READ:
                return
            after = page[-1][:len(GROUP_KEY_COLUMNS)]
            page = self._query(f"{select} WHERE ({keys}) > "
                               f"({', '.join([p] * len(GROUP_KEY_COLUMNS))}) {order}", after)

    def _verified_summary_pages(self, last_seq: int | None,
                                batch: int) -> Iterator[list[tuple[Any, ...]]]:
        """For `verify`'s passes: the summary rows of the records up to `last_seq` (the
        chain `verify` checked), from their bodies, in sequence order, `batch` records a
        query. An unreadable body is left out (the chain's check named it already)."""
        if last_seq is None:
            return
        for page in self._keyset_pages(
                f"SELECT seq, body FROM entries WHERE kind = 'record' AND "
                f"seq <= {self.placeholder}", (last_seq,), batch=batch, after=0):
            yield _summary_rows_of(page)

    def _runs_problem(self, expected: Mapping[tuple[str, str], int]) -> str | None:
        """For `verify`: the first run (in order of run and suite) whose stored count in
        `record_runs` differs from `expected` (the records counted in the chain), in
        one line; None when all agree."""
        stored: dict[tuple[str, str], Any] = {}
        for run_id, suite, records in self._query(
                "SELECT run_id, suite, records FROM record_runs"):
            stored[(_as_text(run_id), _as_text(suite))] = records
        for key in sorted(set(stored) | set(expected)):
            found, wanted = stored.get(key), expected.get(key)
            if found is not None and type(found) is int and found == wanted:
                continue
            named = f"run {key[0]} (suite {key[1]})"
            wrong = (f"{named} is missing" if found is None else
                     f"{named} counts records the store does not hold" if wanted is None else
                     f"{named} counts {found!r} records, the store holds {wanted}")
            return (f"its per-run counts (record_runs) disagree with its records: {wrong} "
                    "(derived data edited)")
        return None

    def _run_headings_problem(self, expected: dict[str, bytes],
                              configs: Collection[str]) -> str | None:
        """For `verify`: how `run_headings` and `run_configs` disagree with the run starts
        and ends in the chain (`expected`: each run's row as `verify` digests it, emptied
        as the stored rows are matched; `configs`: the hashes of their configurations),
        in one line naming the first run (by id) or configuration (by hash) missing,
        extra or altered; None when all agree. The stored rows are compared as the
        database hands them over (not held all at once), a row that differs against its
        run's start and end read again to name the columns; a stored configuration is
        checked against its key by hashing its bytes, a page at a time (a wide suite's
        are kilobytes each)."""
        wrong: dict[str, str] = {}  # run id -> what is wrong with its row
        differing: dict[str, tuple[Any, ...]] = {}  # run id -> its stored row

        def compare(rows: Iterator[tuple[Any, ...]]) -> None:
            for found in rows:
                run_id = str(_as_text(found[0]))
                wanted = expected.pop(run_id, None)
                if wanted is None:
                    wrong[run_id] = f"run {run_id} is listed but the store holds no start of it"
                elif _stored_heading_digest(found) != wanted and len(differing) < 1:
                    differing[run_id] = found
                elif _stored_heading_digest(found) != wanted:
                    wrong[run_id] = f"run {run_id} differs from its start"

        self._fold_query(f"SELECT {', '.join(RUN_HEADING_COLUMNS)} FROM run_headings", (),
                         compare)
        wrong.update((run_id, f"run {run_id} is missing") for run_id in expected)
        for run_id, found in differing.items():
            wanted_row = self._heading_row_of(run_id)
            wrong[run_id] = f"run {run_id} differs from its start (" + ", ".join(
                name for name, a, b in zip(RUN_HEADING_COLUMNS, found, wanted_row, strict=True)
                if not _same_heading((a,), (b,))) + ")"
        if wrong:
            return (f"its run headings (run_headings) disagree with its run starts: "
                    f"{wrong[min(wrong)]} (derived data edited)")
        seen: set[str] = set()
        p = self.placeholder
        page = self._query(f"SELECT config_hash, config FROM run_configs ORDER BY config_hash "
                           f"LIMIT {_RUN_CONFIGS_PER_READ}")
        while page:
            for stored_key, config in page:
                key = str(_as_text(stored_key))
                seen.add(key)
                problem = (f"configuration {key} is kept but no run start holds it"
                           if key not in configs else
                           f"configuration {key} is not the configuration of that hash"
                           if not isinstance(config, (bytes, memoryview, str))
                           or config_hash(_as_bytes(config)) != key else None)
                if problem is not None:
                    return (f"its run configurations (run_configs) disagree with its run "
                            f"starts: {problem} (derived data edited)")
            if len(page) < _RUN_CONFIGS_PER_READ:
                break
            page = self._query(f"SELECT config_hash, config FROM run_configs WHERE "
                               f"config_hash > {p} ORDER BY config_hash "
                               f"LIMIT {_RUN_CONFIGS_PER_READ}", (_as_text(page[-1][0]),))
        missing = sorted(set(configs) - seen)
        if missing:
            return (f"its run configurations (run_configs) disagree with its run starts: "
                    f"configuration {missing[0]} of run starts in the chain is missing "
                    "(derived data edited)")
        return None

    def _heading_row_of(self, run_id: str) -> tuple[Any, ...]:
        """The `run_headings` row the chain's start and end of `run_id` make (`verify`,
        naming what differs in a stored row)."""
        row: tuple[Any, ...] = ()
        for seq, kind, suite, body in self._query(
                f"SELECT seq, kind, suite, body FROM entries WHERE run_id = {self.placeholder} "
                "AND kind IN ('run', 'run_end') ORDER BY seq", (run_id,)):
            if kind == "run":
                row = run_start_row(int(seq), suite, run_id, _as_bytes(body))[0]
            elif row:
                row = (*row[:-1], _as_bytes(body))
        return row

    def _summaries_problem(self, after: int, page: Sequence[tuple[Any, ...]],
                           fold: Callable[[list[tuple[Any, ...]]], None]
                           ) -> tuple[int, str] | None:
        """The first entry of this page of the chain (entries after `after`) whose summary
        row is missing, extra or not what its body says; None when all agree. Bounded by
        one page: the summary rows of the same sequence range are read and compared. The
        page's expected rows are folded into `totals` (memory bounded by the groups)."""
        p = self.placeholder
        last = int(page[-1][0])
        stored = {int(row[0]): row for row in self._query(
            f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM record_summaries WHERE seq > {p} AND "
            f"seq <= {p} ORDER BY seq", (after, last))}
        complete = True  # a version 4 store's table holds every record's row
        folded: list[tuple[Any, ...]] = []
        for row in page:
            seq, kind, body = int(row[0]), row[1], row[8]
            found = stored.pop(seq, None)
            if kind != "record":
                if found is not None:
                    return seq, ("the summary table holds a record row for it, but it is not "
                                 "a record (derived data edited)")
                continue
            if found is None:
                if complete:
                    return seq, "its row in the summary table is missing (derived data removed)"
                continue
            try:
                expected = summary_row(seq, _as_bytes(body))
            except msgspec.DecodeError:
                continue  # the record check names an unreadable body
            folded.append(expected)
            if not _same_summary(found, expected):
                return seq, ("its row in the summary table disagrees with its body (derived "
                             "data edited)")
        if stored:
            seq = min(stored)
            return seq, "the summary table holds a row for a sequence number with no entry"
        fold(folded)
        return None

    @staticmethod
    def _record_columns_problem(entry: _Entry) -> str | None:
        try:
            record = _record_decoder.decode(entry.body)
        except msgspec.DecodeError as error:
            return f"its body is not a valid record ({error})"
        if (record.suite, record.scope, record.arm, record.task, record.trial,
                record.run_id) != entry.address:
            return "its address columns disagree with its body"
        return None


def _bodies_summarised(page: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """For `verify`: the summary rows of the records of a page of entries (seq, kind, ...
    body at 8), from their stored bodies. An unreadable body is left out (the record
    check names it)."""
    return _summary_rows_of((row[0], row[8]) for row in page if row[1] == "record")


def _summary_rows_of(records: Iterable[tuple[Any, Any]]) -> list[tuple[Any, ...]]:
    """The summary rows of (seq, stored body) pairs, in order; a body that does not
    decode is left out (`verify`'s record check names it)."""
    rows = []
    for seq, body in records:
        try:
            rows.append(summary_row(int(seq), _as_bytes(body)))
        except msgspec.DecodeError:
            continue
    return rows


class _NoTemporaryTable(Exception):
    """The backend refused `verify` its temporary table; the message says why, in words."""


def _part_hash(key: tuple[Any, ...]) -> int:
    """A hash of a group key that is the same in every process and on both backends (not
    Python's `hash`, salted per process): its residues split the groups into the parts
    `verify` folds one a pass."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest(),
                          "big")


class _ExpectedTotals:
    """For `verify`: the group totals folded from the records, page by page, by the
    append's rule (each group's rows in sequence order: its compensated sums depend on
    it). Held in memory up to `_GROUPS_VERIFIED_IN_MEMORY` groups; past that they are
    moved to a temporary table of the connection and folded there as appends fold (the
    touched groups read, folded, written back), so `verify` of a store of millions of
    groups stays bounded in memory. `drop` removes the table.

    Where the backend refuses that table (its driver's error says so: a role without
    TEMP, a read-only transaction or standby, SQLite with no usable temporary folder) the
    groups are folded in passes instead: split by `_part_hash` of their key into parts,
    a part being the keys whose hash leaves `residue` modulo `modulus`, each part at most
    `_GROUPS_VERIFIED_PER_PASS` groups, so memory stays bounded too. The first part is
    the one folded with the chain's check; each other takes a pass over every body
    (`difference_in_passes`), compared with the stored rows of its part alone by the same
    `first_difference`. A part found larger than the bound (a stored table edited to look
    small) is halved on the spot: (residue, modulus) keeps (residue, 2 modulus), whose
    groups were all folded already, and leaves (residue + modulus, 2 modulus) to a pass
    of its own; no group is lost and none folded twice."""

    def __init__(self, store: Store, batch: int = DEFAULT_BATCH) -> None:
        self.store = store
        self.batch = batch
        self.in_memory: dict[tuple[Any, ...], GroupTotals] = {}
        self.spilled = False
        # folding in passes: why (None: not in passes), the part folded now (None: none,
        # every part waits for a pass of its own) and the parts waiting
        self.refusal: str | None = None
        self.part: tuple[int, int] | None = None
        self.parts_left: list[tuple[int, int]] = []

    @property
    def in_passes(self) -> bool:
        return self.refusal is not None

    def fold(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if self.in_passes:
            self._fold_part(rows)
            return
        if not self.spilled:
            fold_into(self.in_memory, rows)
            if len(self.in_memory) > _GROUPS_VERIFIED_IN_MEMORY:
                try:
                    self._spill()
                except _NoTemporaryTable as refusal:
                    self.give_up_table(refusal, keep_folded=True)
            return
        try:
            self._fold_spilled(rows)
        except _NoTemporaryTable as refusal:
            self.give_up_table(refusal, keep_folded=False)

    def _fold_spilled(self, rows: list[tuple[Any, ...]]) -> None:
        store, p = self.store, self.store.placeholder
        current: dict[tuple[Any, ...], GroupTotals] = {}
        wanted = list(dict.fromkeys(map(group_of, rows)))
        for start in range(0, len(wanted), _KEYS_PER_READ):
            chunk = wanted[start:start + _KEYS_PER_READ]
            for found in store._scratch(_read_group_totals(p, len(chunk), _VERIFIED_TOTALS),
                                        [part for key in chunk for part in key], rows=True):
                group = GroupTotals.from_row(found)
                current[group.key] = group
        self._write(fold_into(current, rows))

    def _spill(self) -> None:
        self.store._scratch(group_totals_table(self.store._column_types(),
                                               table=_VERIFIED_TOTALS, temporary=True))
        self.spilled = True  # made: `drop` removes it whatever follows
        self.store._scratch(f"DELETE FROM {_VERIFIED_TOTALS}")
        self._write(list(self.in_memory.values()))
        self.in_memory = {}

    def _write(self, groups: Sequence[GroupTotals]) -> None:
        rows = [group.row() for group in groups]
        for start in range(0, len(rows), _GROUPS_PER_UPSERT):
            chunk = rows[start:start + _GROUPS_PER_UPSERT]
            self.store._scratch(_upsert_group_totals(self.store.placeholder, len(chunk),
                                                     _VERIFIED_TOTALS),
                                [value for row in chunk for value in row])

    def give_up_table(self, refusal: _NoTemporaryTable, *, keep_folded: bool) -> None:
        """The backend refused the temporary table: fold in passes from now on. With
        `keep_folded` the groups in memory are every group folded so far, and the first
        part of them is kept (the chain's check goes on folding it); otherwise (they were
        in the table) every part waits for a pass of its own."""
        try:
            self.drop()
        except StoreError:
            self.spilled = False  # left to the connection's end, which removes it
        self.refusal = str(refusal)
        # parts filled to 90% of the bound on average: the hash spreads the groups evenly
        # but not exactly, and a part found over the bound costs a pass more
        parts = max(1, math.ceil(self._stored_groups() / (0.9 * _GROUPS_VERIFIED_PER_PASS)))
        if keep_folded:
            self.part, self.parts_left = (0, parts), [(residue, parts)
                                                      for residue in range(1, parts)]
            self._keep_part()
        else:
            self.part, self.parts_left = None, [(residue, parts) for residue in range(parts)]
            self.in_memory = {}

    def _stored_groups(self) -> int:
        rows = self.store._query("SELECT COUNT(*) FROM record_group_totals")
        return int(rows[0][0]) if rows else 0

    def _fold_part(self, rows: list[tuple[Any, ...]]) -> None:
        if self.part is None:
            return
        residue, modulus = self.part
        fold_into(self.in_memory, [row for row in rows
                                   if _part_hash(group_of(row)) % modulus == residue])
        while len(self.in_memory) > _GROUPS_VERIFIED_PER_PASS:
            self._halve_part()

    def _halve_part(self) -> None:
        """The part folded now holds more groups than a pass may: keep the half of it
        whose groups are in memory already, the other half waits for a pass."""
        assert self.part is not None
        residue, modulus = self.part
        self.parts_left.append((residue + modulus, 2 * modulus))
        self.part = (residue, 2 * modulus)
        self._keep_part()

    def _keep_part(self) -> None:
        assert self.part is not None
        residue, modulus = self.part
        self.in_memory = {key: group for key, group in self.in_memory.items()
                          if _part_hash(key) % modulus == residue}
        if len(self.in_memory) > _GROUPS_VERIFIED_PER_PASS:
            self._halve_part()

    def difference_in_passes(self, last_seq: int | None) -> str | None:
        """Folding in passes: the first difference of the part folded with the chain's
        check, else of each other part in turn, each folded by a pass over the records
        up to `last_seq` (the chain checked); None when every part agrees. Says on stderr
        why `verify` takes several passes and how many, and again whenever a part found
        too large adds passes to that plan (a person waiting sees the count grow, not a
        count the run then overshoots)."""
        passes_done = 0
        if self.part is not None:
            wrong = self._part_difference()
            if wrong is not None:
                return wrong
            passes_done = 1
        announced = passes_done + len(self.parts_left)
        if self.parts_left:
            print(f"benchwarden: store {self.store.location}: {self.refusal}: verifying the "
                  f"group totals in {announced} pass{'es' if announced > 1 else ''} over the "
                  "records", file=sys.stderr, flush=True)
        while self.parts_left:
            self.part, self.in_memory = self.parts_left.pop(0), {}
            for rows in self.store._verified_summary_pages(last_seq, self.batch):
                self._fold_part(rows)
            wrong = self._part_difference()
            if wrong is not None:
                return wrong
            passes_done += 1
            planned = passes_done + len(self.parts_left)
            if planned > announced:
                print(f"benchwarden: store {self.store.location}: a part of the group totals "
                      f"held more than {_GROUPS_VERIFIED_PER_PASS:,} groups and was split: "
                      f"{planned} passes in all, {passes_done} done", file=sys.stderr,
                      flush=True)
                announced = planned
        return None

    def _part_difference(self) -> str | None:
        """`first_difference` of the part folded now against its stored rows (read whole,
        the other parts' rows skipped). A part holding more stored rows than a pass may
        is halved first (then it holds groups the records do not: found in one half)."""
        assert self.part is not None
        while True:
            residue, modulus = self.part
            stored: list[GroupTotals] = []
            for group in self.store._stored_group_totals():
                if _part_hash(group.key) % modulus == residue:
                    stored.append(group)
                    if len(stored) > _GROUPS_VERIFIED_PER_PASS:
                        break
            else:
                return first_difference(stored, self.in_memory)
            self._halve_part()

    def drop(self) -> None:
        if self.spilled:
            self.store._execute(f"DROP TABLE IF EXISTS {_VERIFIED_TOTALS}")
            self.spilled = False


# the derived tables a store of each version keeps (for `verify` and writers: which are
# missing)
_DERIVED_TABLES = {"4": ("record_summaries", "record_group_totals"),
                   "5": ("record_group_totals", "record_runs"),
                   "6": ("record_group_totals", "record_runs", "run_headings", "run_configs")}


# The unique address of a record, trial first: the records a batch appends (a new run's
# cells, or the next trial of every cell of a campaign going on) share their trial
# numbers, so they land together at one place of the index instead of one leaf per cell
# all over it (what made a campaign's appends slow down as the store grew: every commit
# wrote hundreds of index pages). Per-cell reads are served by `record_cells`.
_SQLITE_ADDRESS_INDEX = """CREATE UNIQUE INDEX IF NOT EXISTS entries_record_address_by_trial
    ON entries (suite, scope, trial, arm, task) WHERE kind = 'record'"""
# The address index of stores made before it (cell first); dropped by
# `_upgrade_address_layout` when such a store is next opened for writing.
_SQLITE_CELL_FIRST_INDEX = "entries_record_address"
# Derived data outside the chain, one row per cell: how many records it holds and its
# highest trial number, counted in the append's transaction (so planning a run reads
# 600 rows, not the store). The one table whose rows change (an append adds to its
# counts); `verify` recounts it from `entries` and reports any difference as damage.
_SQLITE_CELLS_TABLE = """CREATE TABLE IF NOT EXISTS record_cells (
    suite TEXT NOT NULL, scope TEXT NOT NULL, arm TEXT NOT NULL, task TEXT NOT NULL,
    records INTEGER NOT NULL, highest_trial INTEGER NOT NULL,
    PRIMARY KEY (suite, scope, arm, task)
) WITHOUT ROWID"""
_COUNT_CELLS = """INSERT INTO record_cells (suite, scope, arm, task, records, highest_trial)
    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (suite, scope, arm, task) DO UPDATE
    SET records = records + excluded.records,
        highest_trial = max(highest_trial, excluded.highest_trial)"""
_CELLS_FROM_ENTRIES = """SELECT suite, scope, arm, task, COUNT(*), MAX(trial) FROM entries
    WHERE kind = 'record' GROUP BY suite, scope, arm, task"""

# One statement per item: the schema is created inside one transaction, and sqlite3's
# executescript() would commit first.
_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('run', 'record', 'run_end')),
    suite TEXT NOT NULL, scope TEXT NOT NULL, arm TEXT NOT NULL, task TEXT NOT NULL,
    trial INTEGER NOT NULL, run_id TEXT NOT NULL,
    body BLOB NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL
)""",
    _SQLITE_ADDRESS_INDEX,
    _SQLITE_CELLS_TABLE,
    "CREATE UNIQUE INDEX IF NOT EXISTS entries_one_start_per_run ON entries (run_id) "
    "WHERE kind = 'run'",
    "CREATE UNIQUE INDEX IF NOT EXISTS entries_one_end_per_run ON entries (run_id) "
    "WHERE kind = 'run_end'",
    "CREATE INDEX IF NOT EXISTS entries_by_run ON entries (run_id, kind)",
    """CREATE TRIGGER IF NOT EXISTS entries_refuse_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER IF NOT EXISTS entries_refuse_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: DELETE refused'); END""",
)

# The derived tables of schema 6 beyond `record_cells`: the group totals and the run
# counts clustered by their keys (WITHOUT ROWID: a scope's groups are one range of the
# table's own B-tree), the run headings and configurations in rowid tables (their rows,
# hundreds of bytes to kilobytes, are too wide to cluster well).
_SQLITE_DERIVED_SCHEMA = (
    group_totals_table({"text": "TEXT", "integer": "INTEGER", "real": "REAL"},
                       " WITHOUT ROWID"),
    run_counts_table("TEXT", "INTEGER", " WITHOUT ROWID"),
    *run_tables("TEXT", "INTEGER", "BLOB"),
)

# rows per INSERT statement of an SQLite append (10 parameters each, far below SQLite's
# limit of 32,766)
_ROWS_PER_INSERT = 50


@functools.lru_cache(maxsize=8)
def _multi_row_insert(rows: int) -> str:
    one = f"({', '.join(['?'] * len(ENTRY_COLUMNS))})"
    return (f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}) VALUES "
            f"{', '.join([one] * rows)}")


# the append connection's page cache (KiB) and WAL size between checkpoints (pages)
_WRITER_CACHE_KIB = 65536
_WAL_CHECKPOINT_PAGES = 4096
# What a writer's connection sets once in WAL mode (the bench's "SQLite alone" floor sets
# the same): a writer's working set is the address index's leaves for the cells it
# fills, and SQLite's default 2 MiB cache re-reads them every batch once the store is
# large; checkpoints (two fsyncs each) every 16 MiB, not 4 MiB.
WRITER_PRAGMAS = ("PRAGMA synchronous=NORMAL", f"PRAGMA cache_size = -{_WRITER_CACHE_KIB}",
                  f"PRAGMA wal_autocheckpoint = {_WAL_CHECKPOINT_PAGES}")
# (SQLite's default 4 KiB pages are kept: 16 KiB pages made batches of 1,000 up to 13%
# cheaper but single-record appends, what the drivers do, about 25% dearer, every commit
# writing four times the bytes per dirty page to the WAL; bench/README.md.)

# meta row recording that the store keeps a head witness beside it, so that a copy
# which lost the witness is reported instead of passing as intact
_WITNESS_META = ("head_witness", "sidecar")


# SQLite's extended code for "no temporary folder it can write" (SQLITE_IOERR | 25 << 8):
# a sort, a GROUP BY or a temporary table that outgrows memory needs a file, and every
# folder SQLite tries (SQLITE_TMPDIR, TMPDIR, /var/tmp, /usr/tmp, /tmp, .) refused it
_SQLITE_IOERR_GETTEMPPATH = getattr(sqlite3, "SQLITE_IOERR_GETTEMPPATH", 6410)


def sqlite_failure(location: str, error: sqlite3.Error, doing: str = "") -> StoreError:
    """One line a person can act on, for any refusal of SQLite or the OS beneath it."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    reason = " ".join(str(error).split()) or type(error).__name__
    where = f"store {location}"
    action = f" while {doing}" if doing else ""
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreError(
            f"{where} is locked by another process{action}: still locked after "
            f"{lock_timeout():g} s ({reason}); wait for the other writer or set "
            "BENCHWARDEN_STORE_TIMEOUT to wait longer")
    if primary == sqlite3.SQLITE_FULL:
        return StoreError(f"{where}: the disk is full{action} ({reason}); free space and resume "
                          "(nothing half-written was kept)")
    if primary == sqlite3.SQLITE_READONLY:
        return StoreError(f"{where} is read-only{action} ({reason}); check the file's, its "
                          "folder's and the filesystem's write permission")
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return CorruptStore(f"{where} is damaged or is not a database{action} ({reason}); "
                            "restore it from a backup (`benchwarden store backup`)")
    if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StoreError(f"{where} cannot be opened{action} ({reason}); check the path and "
                          "its permissions")
    if code == _SQLITE_IOERR_GETTEMPPATH:
        return StoreError(f"{where}: SQLite found no writable folder for its temporary "
                          f"files{action} ({reason}); set SQLITE_TMPDIR to a writable folder")
    if primary == sqlite3.SQLITE_IOERR:
        return StoreError(f"{where}: input/output error{action} ({reason}); check the disk "
                          "and the filesystem")
    if primary == sqlite3.SQLITE_NOMEM:
        return StoreError(f"{where}: out of memory{action} ({reason})")
    return StoreError(f"{where} refused{action}: {reason}")


def _is_read_only(path: Path) -> bool:
    """True when `path` (or its folder, for a new file) cannot be written: a read-only
    filesystem, or permissions that refuse this user."""
    try:
        folder = path if path.is_dir() else path.parent
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
        if path.exists():
            return not os.access(path, os.W_OK) or not os.access(folder, os.W_OK)
        return not os.access(folder, os.W_OK)
    except OSError:
        return False


def _oserror_failure(location: str, error: OSError) -> StoreError:
    return StoreError(f"store {location}: {error.strerror or error} "
                      f"({getattr(error, 'filename', None) or location})")


def _file_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at `path` (None where it cannot be had): a
    second connection opened later reads the same file only if they have not changed."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _sqlite_uri(path: Path, mode: str, immutable: bool = False) -> str:
    suffix = "&immutable=1" if immutable else ""
    return f"file:{quote(str(path.absolute()), safe='/')}?mode={mode}{suffix}"


@dataclass(frozen=True)
class _Kind:
    """What an SQLite database is, judged from its header and schema without writing."""

    name: str  # "ours" | "legacy" (ours, before the application id) | "empty" | "foreign"
    #            | "damaged" (our id, but not our tables)
    detail: str = ""


# columns a store made before the application id must have to be recognised as ours
_CHAIN_COLUMNS = {"seq", "kind", "run_id", "body", "prev_hash", "hash"}


def _inspect(connection: sqlite3.Connection) -> _Kind:
    application_id = int(connection.execute("PRAGMA application_id").fetchone()[0])
    user_version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    objects = connection.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    tables = {name for kind, name in objects if kind == "table"}
    ours_by_shape = {"entries", "meta"} <= tables and _CHAIN_COLUMNS <= {
        row[1] for row in connection.execute("PRAGMA table_info(entries)")}
    if application_id == APPLICATION_ID:
        if not ours_by_shape and objects:
            return _Kind("damaged", "it carries benchwarden's application id but not its tables")
        return _Kind("ours" if objects else "empty")
    if application_id == 0 and ours_by_shape:
        row = connection.execute(
            "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        if row is not None:
            return _Kind("legacy")
    if application_id == 0 and user_version == 0 and not objects:
        return _Kind("empty")
    shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    parts = [f"application_id 0x{application_id & 0xFFFFFFFF:08x}"] if application_id else []
    if user_version:
        parts.append(f"user_version {user_version}")
    parts.append(f"tables: {shown}" if tables else "no tables")
    return _Kind("foreign", "; ".join(parts))


# the whole-number columns read with the float columns, which must be the aggregated
# ones: the same rows in the same order (each append adds a group or adds to `records`)
_ROW_WISE_INTEGERS = ("first_seq", "records")
# the float columns as read row by row (float64 arrays), and those whole-number columns
# by name (int64 arrays)
_RowWise = tuple[list[Any], dict[str, Any]]
# what reading a scope the aggregated way meets in a row not of its column's kind (a blob
# JSON cannot hold, a text where a float or whole number is read into an array): the
# rows' decoding then says what is wrong
_UNAGGREGATABLE = (sqlite3.DataError, sqlite3.OperationalError, sqlite3.ProgrammingError,
                   TypeError, OverflowError)
# each aggregated column as SQLite gives it to `whole_scope_chunk`; `newest` as two: each
# row's text's length (-1 for a value not text: a blob's bytes must not pass for one),
# and every row's text joined with nothing between, which `whole_scope_chunk` cuts up by
# those lengths and checks (counting a list's numbers by its commas here took SQLite
# longer than all the other columns together)
_AGGREGATED_COLUMNS = ", ".join(
    f"json_group_array({name})" for name in (*AGGREGATED_INTEGERS, *AGGREGATED_TEXTS[:-1]))
_AGGREGATED_NEWEST = (
    "json_group_array(iif(typeof(newest) = 'text', length(newest), -1)), "
    "coalesce(group_concat(newest, ''), '')")


class SQLiteStore(Store):
    """The embedded default: one SQLite file in WAL mode, its head witness beside it.

    `create=True` (writers) creates the file when its folder exists (the folder too only
    with `create_parents`) and initialises an empty file; `create=False` (readers) opens an
    existing store read-only and writes nothing at all; `create=False, read_only=False`
    (resuming) opens an existing store for appending and never creates one."""

    placeholder = "?"

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool | None = None,
                 create_parents: bool = False, timeout: float | None = None) -> None:
        self.location = str(path)
        self.read_only = (not create) if read_only is None else read_only
        if create and self.read_only:
            raise ValueError("a store cannot be both created and read-only")
        self._create = create
        self._lock = threading.RLock()
        self._timeout = lock_timeout() if timeout is None else timeout
        self._memory = str(path) == ":memory:"
        self._path = Path(path)
        self._keeps_sidecar = False
        self._has_cells = False  # `record_cells` exists (and is kept by appends)
        # asked several times per append: built once (a Path costs microseconds)
        self._witness_path = None if self._memory else sidecar_for(self._path)
        if self._memory:
            self._connection = sqlite3.connect(":memory:", isolation_level=None,
                                               check_same_thread=False)
            self._initialise("empty")
            return
        fresh = self._check_path(create, create_parents)
        if not fresh:
            self._refuse_foreign_early()
        self._connect(immutable=False)
        try:
            self._open_existing() if self.read_only else self._open_for_writing()
        except StoreError as error:
            self._connection.close()
            if not (self.read_only and _is_read_only(self._path)
                    and "cannot be opened" in str(error)):
                raise
            # A WAL store on a read-only filesystem (or in a folder this user cannot
            # write) cannot get the -shm file a reader needs; nobody can write it there
            # either, so reading it as immutable is safe.
            self._connect(immutable=True)
            try:
                self._open_existing()
            except BaseException:
                self._connection.close()
                raise
        except BaseException:
            self._connection.close()
            raise

    def _connect(self, *, immutable: bool) -> None:
        self._immutable = immutable
        try:
            self._connection = sqlite3.connect(
                _sqlite_uri(self._path, "ro" if self.read_only else "rwc", immutable), uri=True,
                isolation_level=None, check_same_thread=False, timeout=self._timeout)
        except sqlite3.Error as error:
            raise self._failure(error, "opening it") from None
        self._file_identity = _file_identity(self._path)

    # -- opening ---------------------------------------------------------------
    def _check_path(self, create: bool, create_parents: bool) -> bool:
        """Refuse paths that cannot hold a store; True when the store is new (no file, or
        an empty one)."""
        target = self._path
        try:
            if target.is_dir():
                raise StoreError(f"store path {target} is a directory; give a file path")
            if target.exists():
                if not target.is_file():
                    raise StoreError(f"store path {target} is not a regular file")
                if target.stat().st_size > 0:
                    return False
                if not create:
                    raise NoStore(f"no store at {target}: the file is empty (0 bytes), "
                                  "nothing was ever written to it")
                return True
            if not create:
                raise NoStore(f"no store at {target}")
            parent = target.parent
            if not parent.exists():
                if not create_parents:
                    raise NoStore(
                        f"no store at {target} and its folder {parent} does not exist; create "
                        "the folder first (only the default store's folder is created for you)")
                parent.mkdir(parents=True, exist_ok=True)
            elif not parent.is_dir():
                raise StoreError(f"store path {target}: {parent} is not a directory")
        except OSError as error:
            raise _oserror_failure(self.location, error) from None
        return True

    def _refuse_foreign_early(self) -> None:
        """Judge an existing file from its main database file alone (immutable: no locks,
        no -wal or -shm created), so another application's database is refused before
        anything of ours touches it. The decisive check repeats on the real connection."""
        try:
            probe = sqlite3.connect(_sqlite_uri(self._path, "ro", immutable=True), uri=True,
                                    isolation_level=None)
        except sqlite3.Error:
            return  # the real connection reports it
        try:
            kind = _inspect(probe)
        except sqlite3.Error as error:
            code = getattr(error, "sqlite_errorcode", 0) & 0xFF
            if code == sqlite3.SQLITE_NOTADB:
                raise CorruptStore(
                    f"store {self.location} is not a benchwarden store: the file is not an "
                    "SQLite database (left untouched)") from None
            return
        finally:
            probe.close()
        if kind.name in ("foreign", "damaged"):
            raise self._foreign(kind)

    def _foreign(self, kind: _Kind) -> CorruptStore:
        if kind.name == "damaged":
            return CorruptStore(f"store {self.location} is damaged: {kind.detail}; refused and "
                                "left untouched")
        return ForeignDatabase(
            f"store {self.location} is not a benchwarden store: it is an SQLite database of "
            f"another application ({kind.detail}); refused and left untouched")

    def _failure(self, error: sqlite3.Error, doing: str) -> StoreError:
        """`sqlite_failure`, but a write refused by a read-only file or filesystem says so
        (SQLite often reports it only as "unable to open database file")."""
        if not self.read_only and _is_read_only(self._path):
            reason = " ".join(str(error).split())
            return StoreError(f"store {self.location} is read-only while {doing} ({reason}); "
                              "check the file's, its folder's and the filesystem's write "
                              "permission")
        return sqlite_failure(self.location, error, doing)

    def _inspect_or_fail(self, doing: str) -> _Kind:
        try:
            return _inspect(self._connection)
        except sqlite3.Error as error:
            raise sqlite_failure(self.location, error, doing) from None

    def _open_existing(self) -> None:
        kind = self._inspect_or_fail("reading its header")
        if kind.name in ("foreign", "damaged"):
            raise self._foreign(kind)
        if kind.name == "empty":
            raise NoStore(f"no store at {self.location}: it is an empty SQLite database, "
                          "nothing was ever written to it")
        self._check_version()
        self._keeps_sidecar = self._meta(_WITNESS_META[0]) == _WITNESS_META[1]
        self._has_cells = self._table_exists("record_cells")
        try:  # a report's GROUP BY over a large scope: fewer re-reads of the same pages
            self._connection.execute(f"PRAGMA cache_size = -{_WRITER_CACHE_KIB}")
        except sqlite3.Error as error:
            raise sqlite_failure(self.location, error, "reading it") from None
        self._read_as_it_is(str(self._meta("schema_version")).strip())

    def _open_for_writing(self) -> None:
        try:
            self._connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise self._failure(error, "opening it for writing") from None
        try:
            kind = self._inspect_or_fail("reading its header")
            if kind.name in ("foreign", "damaged"):
                raise self._foreign(kind)
            if kind.name == "empty" and not self._create:
                raise NoStore(f"no store at {self.location}: it is an empty SQLite database, "
                              "nothing was ever written to it")
            self._initialise(kind.name)
            self._connection.execute("COMMIT")
        except BaseException:
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")
            raise
        try:
            mode = self._connection.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                self._connection.execute("PRAGMA journal_mode=WAL")
            for pragma in WRITER_PRAGMAS:
                self._connection.execute(pragma)
        except sqlite3.Error as error:
            raise self._failure(error, "switching it to WAL") from None
        self._keeps_sidecar = True
        if kind.name in ("empty", "legacy"):
            # a new store starts its witness (at entry 0, replacing any left by a store once
            # at this path); a store from before witnesses starts one from its head
            self._update_witness()

    def _initialise(self, kind: str) -> None:
        """Inside the open transaction: make an empty database a store, or mark an
        existing store with what this version adds (application id, witness flag)."""
        try:
            if kind == "empty":
                for statement in (*_SQLITE_SCHEMA, *_SQLITE_DERIVED_SCHEMA):
                    self._connection.execute(statement)
                self._connection.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),))
                self._connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            else:
                self._check_version()
                stored = str(self._meta("schema_version")).strip()
                missing = self._tables_missing(stored)
                if stored != str(SCHEMA_VERSION) or missing:
                    # a store of an older version (or one whose derived tables were
                    # removed): its derived tables made this version's, once, in this
                    # transaction (the write lock is held, so no append runs meanwhile)
                    if stored == str(SCHEMA_VERSION):
                        self._say_rebuilding(missing)
                    cursor = self._connection.cursor()
                    self._upgrade_derived(cursor, _SQLITE_DERIVED_SCHEMA, stored)
                    cursor.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._upgrade_address_layout(self._connection.cursor())
            self._has_cells = True
            self.has_derived_tables = True
            if kind in ("empty", "legacy"):
                self._connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            if not self._memory:
                self._connection.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", _WITNESS_META)
        except sqlite3.Error as error:
            raise sqlite_failure(self.location, error, "preparing it") from None

    def _upgrade_address_layout(self, cursor: sqlite3.Cursor) -> None:
        """Inside the open transaction (the write lock held): give a store made before the
        trial-first address index its `record_cells` table (counted from its records) and
        that index, then drop the cell-first one. Once per store; about 2 s at a million
        records on a quiet 2-core machine, a line on stderr per step."""
        names = {row[0] for row in cursor.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
        steps = [(text, statement) for text, statement, needed in (
            ("counting the records of every cell", None, "record_cells" not in names),
            ("indexing record addresses trial first", _SQLITE_ADDRESS_INDEX,
             "entries_record_address_by_trial" not in names),
            ("dropping the cell-first address index",
             f"DROP INDEX IF EXISTS {_SQLITE_CELL_FIRST_INDEX}",
             _SQLITE_CELL_FIRST_INDEX in names)) if needed]
        for text, statement in steps:
            started = time.monotonic()
            print(f"benchwarden: store {self.location}: upgrading for fast appends: {text}",
                  file=sys.stderr, flush=True)
            if statement is None:  # over the cell-first index while it is still there
                cursor.execute(_SQLITE_CELLS_TABLE)
                cursor.execute("INSERT INTO record_cells (suite, scope, arm, task, records, "
                               f"highest_trial) {_CELLS_FROM_ENTRIES}")
            else:
                cursor.execute(statement)
            print(f"benchwarden: store {self.location}: {text}: done in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)

    def _derived_schema(self) -> Iterable[str]:
        return _SQLITE_DERIVED_SCHEMA

    def _recount_cells(self, cursor: Any) -> None:
        cursor.execute(_SQLITE_CELLS_TABLE)
        cursor.execute("DELETE FROM record_cells")
        cursor.execute("INSERT INTO record_cells (suite, scope, arm, task, records, "
                       f"highest_trial) {_CELLS_FROM_ENTRIES}")
        self._has_cells = True

    def _count_cells(self, cursor: Any, addresses: Sequence[tuple[Any, ...]]) -> None:
        if self._has_cells:
            cursor.executemany(_COUNT_CELLS, cell_counts(addresses))

    def _cells_problem(self) -> str | None:
        if not self._has_cells:
            return None
        for first, second, wrong in (
                (_CELLS_FROM_ENTRIES, "SELECT suite, scope, arm, task, records, highest_trial "
                 "FROM record_cells", "is missing or miscounted"),
                ("SELECT suite, scope, arm, task, records, highest_trial FROM record_cells",
                 _CELLS_FROM_ENTRIES, "counts records the store does not hold")):
            rows = self._query(f"SELECT * FROM ({first} EXCEPT {second}) LIMIT 1")
            if rows:
                suite, scope, arm, task = rows[0][:4]
                return (f"its per-cell counts (record_cells) disagree with its records: cell "
                        f"{suite}/{scope}/{arm}/{task} {wrong} (derived data edited)")
        return None

    def highest_trial(self, suite: str, scope: str, arm: str, task: str) -> int:
        return self.cell_depth(suite, scope, arm, task)[1]

    def cell_depth(self, suite: str, scope: str, arm: str, task: str) -> tuple[int, int]:
        if not self._has_cells:  # a store from before the table, opened read-only
            return super().cell_depth(suite, scope, arm, task)
        rows = self._query("SELECT records, highest_trial FROM record_cells WHERE suite = ? "
                           "AND scope = ? AND arm = ? AND task = ?", (suite, scope, arm, task))
        if not rows:
            return 0, 0
        records, highest = rows[0]
        if type(records) is not int or type(highest) is not int:
            raise self._edited_derived_data(f"the cell counts of {suite}/{scope}/{arm}/{task} "
                                            "are not whole numbers")
        return records, highest

    def record_counts(self, suite: str, scope: str) -> dict[tuple[str, int], int]:
        """As `Store.record_counts`, from `record_cells` (a few rows per arm, not an index
        walk over every record) when each cell of the scope holds trials 1 to its highest
        and no other (its record count is its highest trial: a contamination run's rungs,
        written whole): then an arm holds in trial t one record per cell whose highest
        trial is t or more. Any other scope is counted over the index."""
        if not self._has_cells or self._query(
                "SELECT 1 FROM entries WHERE kind = 'record' AND trial < 1 AND suite = ? "
                "AND scope = ? LIMIT 1", (suite, scope)):
            # a trial below 1 (the store does not refuse one) breaks "a cell's records
            # are trials 1 to its highest": count over the index
            return super().record_counts(suite, scope)
        highest: dict[str, list[int]] = {}
        for arm, records, top in self._query(
                "SELECT arm, records, highest_trial FROM record_cells WHERE suite = ? AND "
                "scope = ?", (suite, scope)):
            if type(records) is not int or records != top or records < 1:
                return super().record_counts(suite, scope)
            highest.setdefault(str(arm), []).append(records)
        counts: dict[tuple[str, int], int] = {}
        for arm, tops in highest.items():
            tops.sort(reverse=True)
            cells = 0
            for trial in range(tops[0], 0, -1):  # cells reaching `trial`, counted downwards
                while cells < len(tops) and tops[cells] >= trial:
                    cells += 1
                counts[(arm, trial)] = cells
        return counts

    def _meta(self, name: str) -> str | None:
        try:
            row = self._connection.execute("SELECT value FROM meta WHERE name = ?",
                                           (name,)).fetchone()
        except sqlite3.Error as error:
            raise sqlite_failure(self.location, error, "reading it") from None
        return None if row is None else str(row[0])

    def _check_version(self) -> None:
        version = self._meta("schema_version")
        if version is None or version.strip() not in READABLE_SCHEMA_VERSIONS:
            raise CorruptStore(
                f"store {self.location} has schema version {version}, this benchwarden reads "
                f"{' and '.join(READABLE_SCHEMA_VERSIONS)}; use the matching benchwarden "
                "version")

    # -- the backend hooks -----------------------------------------------------
    @property
    def witness_path(self) -> Path | None:
        return self._witness_path

    def _keeps_witness(self) -> bool:
        return self._keeps_sidecar

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            try:
                cursor = self._connection.cursor()
                cursor.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise self._failure(error, "appending") from None
            try:
                yield cursor
            except BaseException as error:
                if self._connection.in_transaction:
                    try:
                        self._connection.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # SQLite already rolled back (it does on a full disk)
                if isinstance(error, sqlite3.Error) and not self._is_unique_violation(error):
                    raise self._failure(error, "appending") from None
                raise
            try:
                cursor.execute("COMMIT")
            except sqlite3.Error as error:
                if self._connection.in_transaction:
                    try:
                        self._connection.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise self._failure(error, "committing an append") from None

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.Error as error:
                raise sqlite_failure(self.location, error, "reading it") from None

    def _whole_scope_chunk(self, suite: str, scope: str) -> DecodedChunk | None:
        """`core.group_totals.whole_scope_chunk` of the scope's stored group totals: one
        aggregating pass (each whole-number and text column as one JSON array), and
        `first_seq`, `records` and the float columns read row by row straight into
        arrays (SQLite's text of a float is not always that float). Of a store in a file,
        side by side (`_aggregated_beside_rows`: the aggregate on a second connection,
        in a thread, while this one reads the rows; two snapshots, which must hold the
        same rows); otherwise, or where an append came in between, one after the other
        in one snapshot. None where a value is not of its column's kind (a JSON array
        of another kind, a blob, a float column holding something else), or where
        `whole_scope_chunk` gives None."""
        where = "FROM record_group_totals WHERE suite = ? AND scope = ?"
        aggregate = f"SELECT {_AGGREGATED_COLUMNS}, {_AGGREGATED_NEWEST} {where}"
        row_wise = f"SELECT {', '.join((*_ROW_WISE_INTEGERS, *FLOAT_COLUMNS))} {where}"
        params = (suite, scope)
        if not self._memory and not self._connection.in_transaction:
            read = self._aggregated_beside_rows(aggregate, row_wise, params)
            if read is not None:
                try:
                    return whole_scope_chunk(suite, scope, *read)
                except SnapshotsDiffer:
                    pass  # an append to the scope between the two: read in one snapshot
        with self._reading():
            began = not self._connection.in_transaction
            if began:
                self._connection.execute("BEGIN")  # one snapshot for both statements
            try:
                try:
                    aggregated = list(self._connection.execute(aggregate, params).fetchone())
                except _UNAGGREGATABLE:
                    return None  # a blob JSON cannot hold: the rows' decoding says so
                columns = self._row_wise_columns(row_wise, params)
            finally:
                if began:
                    self._connection.execute("COMMIT")
        if columns is None:
            return None
        try:  # one snapshot: only another row order makes the columns differ
            return whole_scope_chunk(suite, scope, aggregated, *columns)
        except SnapshotsDiffer:
            return None

    def _aggregated_beside_rows(self, aggregate: str, row_wise: str, params: tuple[Any, ...]
                                ) -> tuple[list[str], list[Any], dict[str, Any]] | None:
        """`aggregate`'s one row on this connection while a thread reads
        `_row_wise_columns` on a second, read-only one (SQLite builds the JSON arrays
        without holding the GIL): at a million groups about 2 s each, on two cores. The
        thread takes the row by row read, not the aggregate: what it frees stays in its
        own malloc arena, and the aggregate's hundreds of megabytes of JSON, freed here,
        are reused by what the report builds next (the other way round, a report's peak
        grew by 200 MiB). Each statement is its own snapshot; `whole_scope_chunk` checks
        they hold the same rows. None where the second connection cannot be had or
        either statement fails (the one-snapshot way then reads, and says what is
        wrong). An interrupt stops the other statement too."""
        try:
            other = sqlite3.connect(
                _sqlite_uri(self._path, "ro", self._immutable), uri=True,
                isolation_level=None, check_same_thread=False, timeout=self._timeout)
        except sqlite3.Error:
            return None
        if _file_identity(self._path) != self._file_identity:
            other.close()  # the path names another file now than the one this store opened
            return None
        outcome: list[_RowWise | None] = []

        def rows_there() -> None:
            try:
                outcome.append(self._row_wise_columns(row_wise, params, other))
            except Exception:  # noqa: BLE001 - (also interrupted): the one-snapshot way
                pass  # reads again and says what is wrong; `outcome` stays empty

        thread = threading.Thread(target=rows_there, name="benchwarden-rows")
        stopping = False
        try:
            thread.start()
            with self._reading():
                try:
                    aggregated = list(self._connection.execute(aggregate, params).fetchone())
                except _UNAGGREGATABLE:
                    stopping = True
                    return None  # a blob JSON cannot hold: the rows' decoding says so
        except BaseException:
            stopping = True
            raise
        finally:
            # interrupted again until its thread ends: an interrupt sent before the
            # statement starts is lost
            while thread.is_alive():
                if stopping:
                    other.interrupt()
                thread.join(0.05 if stopping else None)
            other.close()
        if not outcome or outcome[0] is None:
            return None
        return (aggregated, *outcome[0])

    def _row_wise_columns(self, row_wise: str, params: tuple[Any, ...],
                          connection: sqlite3.Connection | None = None) -> _RowWise | None:
        """Each float column of `row_wise`'s rows, and the whole-number columns read
        with them (`_ROW_WISE_INTEGERS`), by name (on this store's connection, or
        `connection`): `whole_scope_chunk`'s `floats` and `read_with_floats`. Every
        value is read into one float64 array in one C loop (a million rows in about 1.7
        s, where taking the rows apart into a column each took 2.3-2.5), the
        whole-number columns checked whole and under 2**53 (so exact as floats), then
        made int64. None where a value is not of its column's kind."""
        import numpy as np  # here: an append, which imports this module, needs no numpy

        try:
            cursor = (connection or self._connection).execute(row_wise, params)
            flat = array.array("d", itertools.chain.from_iterable(cursor))
        except _UNAGGREGATABLE:
            return None  # a blob, a text, or a NULL
        table = np.frombuffer(flat, dtype=np.float64).reshape(
            -1, len(_ROW_WISE_INTEGERS) + len(FLOAT_COLUMNS))
        integers: dict[str, Any] = {}
        for position, name in enumerate(_ROW_WISE_INTEGERS):
            column = table[:, position]
            if len(column) and not float(np.abs(column).max()) < 2.0**53:
                return None  # past what a float holds exactly: the rows' decoding reads it
            whole = column.astype(np.int64)
            if not np.array_equal(whole, column):
                return None  # a fraction
            integers[name] = whole
        return [table[:, position] for position in range(len(_ROW_WISE_INTEGERS),
                                                         table.shape[1])], integers

    def _temporary_table_refusal(self, error: Exception) -> str | None:
        """SQLite makes a temporary table in memory and spills it to a file in its
        temporary folder (SQLITE_TMPDIR, TMPDIR, /var/tmp, /usr/tmp, /tmp, then the
        current folder: the first writable one) once it outgrows its cache: with none
        writable the write fails (SQLITE_IOERR_GETTEMPPATH, or CANTOPEN), with that
        folder full it fails as full."""
        code = getattr(error, "sqlite_errorcode", None)
        if not isinstance(error, sqlite3.Error) or not isinstance(code, int):
            return None
        reason = " ".join(str(error).split())
        if code == _SQLITE_IOERR_GETTEMPPATH or code & 0xFF == sqlite3.SQLITE_CANTOPEN:
            return (f"no temporary table can be made: SQLite finds no writable temporary "
                    f"folder (set SQLITE_TMPDIR; {reason})")
        if code & 0xFF == sqlite3.SQLITE_FULL:
            return f"no temporary table can be made: its temporary folder is full ({reason})"
        return None

    def _insert_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> Sequence[int] | None:
        """Multi-row INSERTs of `_ROWS_PER_INSERT` rows: a fifth less database time per
        entry than one INSERT each (statement steps, and AUTOINCREMENT's bookkeeping,
        which SQLite does once per statement). Same constraints, same transaction.

        Returns the rows' sequence numbers without reading them back: AUTOINCREMENT gives
        each inserted row one more than the largest ever given, so with the append lock
        held a batch's rows are numbered consecutively, and the last statement's
        `lastrowid` is the last of them. (Checked: the numbers from the first statement's
        to the last must span exactly the batch, else they are read back.)"""
        if not rows:
            return None
        first: int | None = None
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start:start + _ROWS_PER_INSERT]
            cursor.execute(_multi_row_insert(len(chunk)),
                           list(itertools.chain.from_iterable(chunk)))
            if first is None:
                first = int(cursor.lastrowid) - len(chunk) + 1
        last = int(cursor.lastrowid)
        if first is None or last - first + 1 != len(rows):
            return None  # not what AUTOINCREMENT promises: read them back instead
        return range(first, last + 1)

    def _is_unique_violation(self, error: Exception) -> bool:
        return isinstance(error, sqlite3.IntegrityError) and "UNIQUE" in str(error)

    def close(self) -> None:
        with self._lock:
            try:
                self._connection.close()
            except sqlite3.Error:
                pass

    # -- copying ---------------------------------------------------------------
    def backup_to(self, destination: str | Path) -> Path:
        """Copy this store to a new file with SQLite's online backup (consistent even while
        others append; a plain `cp` can miss entries still in the -wal file), then copy the
        head witness as it was before the copy began (a lower bound the copy satisfies)."""
        target = Path(destination).expanduser()
        try:
            if target.exists() or target.is_symlink():
                raise StoreUsageError(f"{target} already exists; store backup never overwrites")
            if not target.parent.is_dir():
                raise StoreUsageError(f"folder {target.parent} does not exist; create it first")
        except OSError as error:
            raise _oserror_failure(str(target), error) from None
        witness_text: str | None = None
        if self.witness_path is not None:
            try:
                witness_text = self.witness_path.read_text(encoding="utf-8")
            except FileNotFoundError:
                witness_text = None
            except OSError as error:
                raise _oserror_failure(self.location, error) from None
        partial = target.with_name(f".{target.name}.partial")
        try:
            copy = sqlite3.connect(str(partial), isolation_level=None)
            try:
                with self._lock:
                    self._connection.backup(copy)
                copy.execute("PRAGMA journal_mode=WAL")
            finally:
                copy.close()
            if witness_text is not None:
                from benchwarden.core.files import write_text_atomically
                write_text_atomically(sidecar_for(target), witness_text, mode=0o644,
                                      encoding="utf-8")
            os.replace(partial, target)
        except sqlite3.Error as error:
            _remove_quietly(partial)
            raise sqlite_failure(str(target), error, "writing the backup") from None
        except OSError as error:
            _remove_quietly(partial)
            raise _oserror_failure(str(target), error) from None
        except BaseException:
            _remove_quietly(partial)
            raise
        return target


def _remove_quietly(path: Path) -> None:
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        try:
            leftover.unlink(missing_ok=True)
        except OSError:
            pass


# URL scheme -> "module:class" of the backend that opens it; its constructor takes the
# URL and the keywords `create` and `read_only`.
URL_BACKENDS: dict[str, str] = {
    "postgresql://": "benchwarden.core.store_postgres:PostgresStore",
    "postgres://": "benchwarden.core.store_postgres:PostgresStore",
}


def is_url(location: str | Path) -> bool:
    return str(location).startswith(tuple(URL_BACKENDS))


def open_store(location: str | Path, *, create: bool = True, read_only: bool | None = None,
               create_parents: bool = False) -> Store:
    """A store from a file path (SQLite) or a URL of a backend in `URL_BACKENDS`.

    `create=False` is the mode of every read-only command: the store must exist and be a
    benchwarden store, and nothing at all is created or written (a missing path raises
    `NoStore`). `create=True` (writers) creates a new SQLite file when its folder exists;
    `create_parents` also creates the folder (the CLI asks for it only for the default
    store under ~/.benchwarden). `read_only` defaults to `not create`; `create=False,
    read_only=False` is for resuming: the store must exist, and can be appended to."""
    text = str(location)
    for scheme, target in URL_BACKENDS.items():
        if text.startswith(scheme):
            module_name, _, class_name = target.partition(":")
            backend: type[Store] = getattr(importlib.import_module(module_name), class_name)
            return backend(text, create=create, read_only=read_only)  # type: ignore[call-arg]
    return SQLiteStore(Path(text).expanduser(), create=create, read_only=read_only,
                       create_parents=create_parents)

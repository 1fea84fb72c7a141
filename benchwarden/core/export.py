"""Records out of the store as flat tables for other tools (pandas, DuckDB, a
spreadsheet), and back again.

Every format carries the same columns, in this order (export format version 1):

| column | type | meaning |
|---|---|---|
| `suite` | text | suite that measured the record (`contamination`, `arms`, `retrieval`) |
| `scope` | text | scope the address is unique in (a run id, or a suite-wide scope for arms) |
| `arm` | text | leg label, condition or strategy |
| `task` | text | probe index, task id or case id |
| `trial` | integer | repetition, trial number or seed |
| `run_id` | text | run that made the record |
| `bench_version` | text or empty | `bench_version` of that run (empty when the run is unknown) |
| `outcome` | text | the suite's word for what happened (`ok`, `error`, `pass`, `fail`, ...) |
| `started_at` | float | seconds since the epoch, when the sample started |
| `ended_at` | float | seconds since the epoch, when it ended |
| `duration_s` | float | `max(0, ended_at - started_at)`, for convenience |
| `tokens_fresh_input` | integer | prompt tokens neither written to nor read from a cache |
| `tokens_cache_creation` | integer | prompt tokens written to a cache |
| `tokens_cache_read` | integer | prompt tokens read from a cache |
| `tokens_output` | integer | completion tokens |
| `tokens_reasoning` | integer or empty | reasoning tokens, only where the server reports them |
| `payload_json` | text | what the suite measured, as canonical JSON (sorted keys, compact) |

Token components are unweighted; cost-equivalent tokens are computed by the reader
with whatever weights they choose. Formats: JSON Lines (one object per line, UTF-8),
Parquet (the schema metadata holds `benchwarden.export_version`), CSV (UTF-8, a header
row, RFC 4180 quoting; an empty cell is "none" only in the two nullable columns).

Invariants: `read_export(write_export(records))` gives back equal records in every
format; the columns and their order change only with a new export version; an
export is written to a temporary file and renamed, so a failed export never leaves a
half-written file in place of a good one; writing streams (records are read a page at
a time and written `BATCH_ROWS` at a time, fewer when their payloads pass
`BATCH_BYTES`), so an export's memory grows neither with the store nor with the size
of its records, and its bytes are the same whatever the batch size (Parquet: the same
table, one row group per batch).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from benchwarden.core.files import replaced_atomically
from benchwarden.core.records import Record, TokenComponents, canonical_json
from benchwarden.core.store import Store

EXPORT_VERSION = "1"
FORMATS = ("jsonl", "parquet", "csv")

_TEXT, _INTEGER, _FLOAT = "text", "integer", "float"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("suite", _TEXT), ("scope", _TEXT), ("arm", _TEXT), ("task", _TEXT),
    ("trial", _INTEGER), ("run_id", _TEXT), ("bench_version", _TEXT), ("outcome", _TEXT),
    ("started_at", _FLOAT), ("ended_at", _FLOAT), ("duration_s", _FLOAT),
    ("tokens_fresh_input", _INTEGER), ("tokens_cache_creation", _INTEGER),
    ("tokens_cache_read", _INTEGER), ("tokens_output", _INTEGER),
    ("tokens_reasoning", _INTEGER), ("payload_json", _TEXT),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)
NULLABLE = frozenset({"bench_version", "tokens_reasoning"})

_json_decoder = msgspec.json.Decoder()
_row_encoder = msgspec.json.Encoder()  # keeps the column order of each row


class ExportError(ValueError):
    """An export or import that cannot proceed; the message is one line."""


def record_row(record: Record, bench_version: str | None = None) -> dict[str, Any]:
    """One record as a flat row with the documented column names, in order."""
    tokens = record.tokens
    return {
        "suite": record.suite, "scope": record.scope, "arm": record.arm, "task": record.task,
        "trial": record.trial, "run_id": record.run_id, "bench_version": bench_version,
        "outcome": record.outcome, "started_at": float(record.started_at),
        "ended_at": float(record.ended_at), "duration_s": float(record.duration_s),
        "tokens_fresh_input": tokens.fresh_input, "tokens_cache_creation": tokens.cache_creation,
        "tokens_cache_read": tokens.cache_read, "tokens_output": tokens.output,
        "tokens_reasoning": tokens.reasoning,
        "payload_json": canonical_json(record.payload).decode("utf-8"),
    }


def row_record(row: Mapping[str, Any]) -> Record:
    """The record a row describes (`bench_version` and `duration_s` are derived, dropped)."""
    missing = [name for name in COLUMN_NAMES if name not in row]
    if missing:
        raise ExportError(f"not a benchwarden export: missing column(s) {', '.join(missing)}")
    try:
        payload = _json_decoder.decode(row["payload_json"])
    except msgspec.DecodeError as error:
        raise ExportError(f"payload_json of {row['suite']}/{row['arm']}/{row['task']}/"
                          f"trial {row['trial']} is not JSON: {error}") from None
    return Record(
        suite=row["suite"], scope=row["scope"], arm=row["arm"], task=row["task"],
        trial=int(row["trial"]), run_id=row["run_id"], outcome=row["outcome"],
        started_at=float(row["started_at"]), ended_at=float(row["ended_at"]),
        tokens=TokenComponents(
            fresh_input=int(row["tokens_fresh_input"]),
            cache_creation=int(row["tokens_cache_creation"]),
            cache_read=int(row["tokens_cache_read"]), output=int(row["tokens_output"]),
            reasoning=None if row["tokens_reasoning"] is None else int(row["tokens_reasoning"])),
        payload=payload,
    )


def _check_format(format: str) -> str:
    if format not in FORMATS:
        raise ExportError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
    return format


def format_from_path(path: str | Path) -> str | None:
    """`jsonl`, `parquet` or `csv` from a file name's suffix, else None."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return {"jsonl": "jsonl", "ndjson": "jsonl", "parquet": "parquet", "csv": "csv"}.get(suffix)


# -- writing ---------------------------------------------------------------------------
#
# Exports stream: records are read from the store, turned into rows and written
# `BATCH_ROWS` at a time (one Parquet row group per batch), so peak memory depends on
# the batch, not on how many records the store holds.

BATCH_ROWS = 5_000
# ... and at most about this much payload JSON a batch (characters, the row that
# crosses it included): 5,000 records of an agent's transcripts of megabytes each were
# gigabytes of rows and their encodings at once.
BATCH_BYTES = 8 * 1024 * 1024


def _parquet_schema() -> Any:
    import pyarrow as pa

    types = {_TEXT: pa.string(), _INTEGER: pa.int64(), _FLOAT: pa.float64()}
    return pa.schema([pa.field(name, types[kind], nullable=name in NULLABLE)
                      for name, kind in COLUMNS],
                     metadata={"benchwarden.export_version": EXPORT_VERSION})


def _write_jsonl(batches: Iterable[list[dict[str, Any]]], target: Path) -> None:
    with open(target, "wb") as out:
        for batch in batches:
            lines = [_row_encoder.encode(row) for row in batch]  # control characters
            lines.append(b"")                                    # are escaped: one line
            out.write(b"\n".join(lines))


def _write_parquet(batches: Iterable[list[dict[str, Any]]], target: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    with pq.ParquetWriter(target, schema) as writer:
        for batch in batches:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))  # one row group


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same float
    return str(value)


def _write_csv(batches: Iterable[list[dict[str, Any]]], target: Path) -> None:
    with open(target, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMN_NAMES)
        for batch in batches:
            writer.writerows([_csv_cell(row[name]) for name in COLUMN_NAMES] for row in batch)


_WRITERS = {"jsonl": _write_jsonl, "parquet": _write_parquet, "csv": _write_csv}


def _row_batches(records: Iterable[Record], versions: Mapping[str, str],
                 counter: list[int]) -> Iterator[list[dict[str, Any]]]:
    """Rows in lists of at most BATCH_ROWS rows and about BATCH_BYTES of payload JSON
    (a list ends with the row that reaches it); `counter[0]` counts the rows handed
    out."""
    batch: list[dict[str, Any]] = []
    size = 0
    for record in records:
        row = record_row(record, versions.get(record.run_id))
        batch.append(row)
        size += len(row["payload_json"])
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            counter[0] += len(batch)
            yield batch
            batch, size = [], 0
    if batch:
        counter[0] += len(batch)
        yield batch


def write_export(records: Iterable[Record], path: str | Path, format: str, *,
                 bench_versions: Mapping[str, str] | None = None) -> int:
    """Write records to `path`, streaming them in batches; returns how many.
    `bench_versions` maps run id to the run's `bench_version`, for the `bench_version`
    column."""
    writer = _WRITERS[_check_format(format)]
    target = Path(path).expanduser()
    if target.is_dir():
        raise ExportError(f"export target {target} is a directory; give a file path")
    written = [0]
    with replaced_atomically(target) as temporary:
        writer(_row_batches(records, bench_versions or {}, written), temporary)
    return written[0]


def iter_store_records(store: Store, *, run_id: str | None = None, suite: str | None = None,
                       batch: int = BATCH_ROWS) -> Iterator[Record]:
    """A store's records in store order, `batch` at a time (bounded memory): the
    store's own keyset-paginated `iter_records`, which names an unreadable entry."""
    yield from store.iter_records(run_id=run_id, suite=suite, batch=batch)


def export_store(store: Store, path: str | Path, format: str, *, run_id: str | None = None,
                 suite: str | None = None) -> int:
    """Export a store's records (one run's, one suite's, or all) in store order,
    streaming: memory stays bounded however many records the store holds."""
    _check_format(format)
    if run_id is not None:
        run_id = store.run_info(run_id).run.run_id  # a unique prefix is enough
    # headings only: a run's configuration is not exported with its records
    versions = {info.run.run_id: info.run.bench_version for info in store.run_listing()}
    return write_export(iter_store_records(store, run_id=run_id, suite=suite), path, format,
                        bench_versions=versions)


# -- reading ---------------------------------------------------------------------------

def _read_jsonl(source: Path) -> list[dict[str, Any]]:
    rows = []
    # split on "\n" only: U+2028 and friends may stand unescaped inside strings
    for number, line in enumerate(source.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = _json_decoder.decode(line)
        except msgspec.DecodeError as error:
            raise ExportError(f"{source} line {number} is not JSON: {error}") from None
        if not isinstance(row, dict):
            raise ExportError(f"{source} line {number} is not a JSON object")
        rows.append(row)
    return rows


def _read_parquet(source: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(source)
    except Exception as error:  # pyarrow raises several types for a non-Parquet file
        raise ExportError(f"{source} cannot be read as Parquet: "
                          f"{' '.join(str(error).split())}") from None
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _read_csv(source: Path) -> list[dict[str, Any]]:
    kinds = dict(COLUMNS)
    # a payload (an agent's whole transcript) can be far larger than csv's 128 KiB default
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with open(source, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMN_NAMES:
            raise ExportError(f"{source} is not a benchwarden CSV export (its header differs "
                              "from the documented columns)")
        rows = []
        for number, cells in enumerate(reader, start=2):
            if len(cells) != len(COLUMN_NAMES):
                raise ExportError(f"{source} row {number} has {len(cells)} cells, "
                                  f"expected {len(COLUMN_NAMES)}")
            row: dict[str, Any] = {}
            for name, cell in zip(COLUMN_NAMES, cells, strict=True):  # lengths checked above
                if name in NULLABLE and cell == "":
                    row[name] = None
                elif kinds[name] == _INTEGER:
                    row[name] = int(cell)
                elif kinds[name] == _FLOAT:
                    row[name] = float(cell)
                else:
                    row[name] = cell
            rows.append(row)
    return rows


_READERS = {"jsonl": _read_jsonl, "parquet": _read_parquet, "csv": _read_csv}


def read_export_rows(path: str | Path, format: str) -> list[dict[str, Any]]:
    """The rows of an export, with the documented column names and Python types."""
    reader = _READERS[_check_format(format)]
    source = Path(path).expanduser()
    if not source.is_file():
        raise ExportError(f"export {source} does not exist or is not a file")
    try:
        return reader(source)
    except UnicodeDecodeError as error:
        raise ExportError(f"{source} is not UTF-8 text: {error}") from None
    except csv.Error as error:
        raise ExportError(f"{source} is not valid CSV: {error}") from None
    except ValueError as error:
        if isinstance(error, ExportError):
            raise
        raise ExportError(f"{source} holds a value of the wrong type: {error}") from None


def read_export(path: str | Path, format: str) -> list[Record]:
    """The records of an export, equal to the records that were exported."""
    return [row_record(row) for row in read_export_rows(path, format)]

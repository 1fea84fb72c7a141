"""Exports: every record written then read back equal, in every format; the columns
are the documented ones; bad files give one clear line."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import benchwarden.core.export as export_module
from benchwarden.core.export import (
    COLUMN_NAMES,
    FORMATS,
    ExportError,
    export_store,
    format_from_path,
    read_export,
    read_export_rows,
    write_export,
)
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import SQLiteStore

# Any text a model or a server could send: unicode, control characters, line
# separators, quotes, commas; never lone surrogates (they cannot be UTF-8 at all).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12)
counts = st.integers(0, 2**53)
seconds = st.floats(0, 4e9, allow_nan=False)

records = st.builds(
    Record, suite=text, scope=text, arm=text, task=text, trial=st.integers(1, 2**31),
    run_id=text, outcome=text, started_at=seconds, ended_at=seconds,
    tokens=st.builds(TokenComponents, fresh_input=counts, cache_creation=counts,
                     cache_read=counts, output=counts, reasoning=st.none() | counts),
    payload=st.dictionaries(text, json_values, max_size=5))


def make_record(task: str, run_id: str = "run-1", **payload: object) -> Record:
    return Record(suite="demo", scope=run_id, arm="a", task=task, trial=1, run_id=run_id,
                  outcome="ok", started_at=10.0, ended_at=12.5,
                  tokens=TokenComponents(1, 2, 3, 4, None), payload=payload)


@pytest.mark.parametrize("format", FORMATS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(written=st.lists(records, max_size=6))
def test_every_record_reads_back_equal(tmp_path, format, written):
    path = tmp_path / f"export.{format}"
    assert write_export(written, path, format) == len(written)
    assert read_export(path, format) == written


@pytest.mark.parametrize("format", FORMATS)
def test_columns_are_the_documented_ones_in_order(tmp_path, format):
    path = tmp_path / f"x.{format}"
    write_export([make_record("t")], path, format, bench_versions={"run-1": "3"})
    [row] = read_export_rows(path, format)
    assert tuple(row) == COLUMN_NAMES
    assert row["bench_version"] == "3" and row["duration_s"] == 2.5
    assert row["tokens_cache_read"] == 3 and row["tokens_reasoning"] is None
    assert json.loads(row["payload_json"]) == {}


def test_module_docstring_documents_every_column():
    table_rows = [line for line in export_module.__doc__.splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in table_rows] == list(COLUMN_NAMES)


def test_parquet_schema_has_types_and_version(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "x.parquet"
    write_export([make_record("t")], path, "parquet")
    schema = pq.read_schema(path)
    assert schema.names == list(COLUMN_NAMES)
    assert str(schema.field("trial").type) == "int64"
    assert str(schema.field("started_at").type) == "double"
    assert schema.metadata[b"benchwarden.export_version"] == b"1"


def test_jsonl_keeps_one_record_per_line_whatever_the_text(tmp_path):
    path = tmp_path / "x.jsonl"
    nasty = "line\nbreak\rreturn\u2028separator\u0085next\x00nul"
    write_export([make_record("a", note=nasty), make_record("b")], path, "jsonl")
    assert path.read_bytes().count(b"\n") == 2
    assert read_export(path, "jsonl")[0].payload == {"note": nasty}


def test_csv_keeps_large_payloads(tmp_path):
    path = tmp_path / "x.csv"
    written = [make_record("a", transcript="x" * 500_000)]
    write_export(written, path, "csv")
    assert read_export(path, "csv") == written


@pytest.mark.parametrize("format", FORMATS)
def test_empty_export_reads_back_empty(tmp_path, format):
    path = tmp_path / f"empty.{format}"
    assert write_export([], path, format) == 0
    assert read_export(path, format) == []


def test_store_export_fills_bench_version_and_filters_by_run(tmp_path):
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        for run_id, version in (("run-1", "2"), ("run-2", "3")):
            store.begin_run(stamp_run(suite="demo", bench_version=version, config={},
                                      run_id=run_id))
            store.append([make_record(str(i), run_id=run_id, i=i) for i in range(3)])
        everything = tmp_path / "all.csv"
        assert export_store(store, everything, "csv") == 6
        assert read_export(everything, "csv") == store.records()
        assert [row["bench_version"] for row in read_export_rows(everything, "csv")] == \
            ["2"] * 3 + ["3"] * 3
        one_run = tmp_path / "one.parquet"
        assert export_store(store, one_run, "parquet", run_id="run-2") == 3
        assert read_export(one_run, "parquet") == store.records(run_id="run-2")
        assert export_store(store, tmp_path / "none.jsonl", "jsonl", suite="other") == 0


def test_a_failed_export_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "x.jsonl"
    write_export([make_record("kept")], path, "jsonl")
    before = path.read_bytes()
    with pytest.raises(TypeError):
        write_export([make_record("bad", unencodable=object())], path, "jsonl")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]  # no temporary left behind


@pytest.mark.parametrize("format, content, expected", [
    ("csv", "suite,arm\nx,y\n", "header differs"),
    ("jsonl", '{"suite": "x"}\nnot json\n', "line 2 is not JSON"),
    ("jsonl", '{"suite": "x"}\n', "missing column(s) scope"),
    ("jsonl", "[1, 2]\n", "line 1 is not a JSON object"),
    ("parquet", "not parquet at all", "cannot be read as Parquet"),
])
def test_a_file_that_is_not_an_export_gives_one_line(tmp_path, format, content, expected):
    path = tmp_path / f"bad.{format}"
    path.write_text(content)
    with pytest.raises(ExportError) as caught:
        read_export(path, format)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_csv_with_a_wrong_type_gives_one_line(tmp_path):
    path = tmp_path / "x.csv"
    write_export([make_record("t")], path, "csv")
    path.write_text(path.read_text().replace(",1,run-1,", ",one,run-1,"))
    with pytest.raises(ExportError, match="wrong type"):
        read_export(path, "csv")


def test_unknown_format_and_suffixes():
    with pytest.raises(ExportError, match="unknown export format 'xlsx'"):
        write_export([], "x.xlsx", "xlsx")
    assert format_from_path("a/b.PARQUET") == "parquet"
    assert format_from_path("b.ndjson") == "jsonl"
    assert format_from_path("b.txt") is None


# -- streaming -------------------------------------------------------------------------

def _old_export(records, versions, path, format):
    """The export as it was written before streaming (all rows built in memory, one
    write), kept here as the reference the streaming writers must reproduce."""
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [export_module.record_row(record, versions.get(record.run_id)) for record in records]
    if format == "jsonl":
        with open(path, "wb") as out:
            for row in rows:
                out.write(export_module._row_encoder.encode(row) + b"\n")
    elif format == "csv":
        with open(path, "w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(COLUMN_NAMES)
            for row in rows:
                writer.writerow([export_module._csv_cell(row[name]) for name in COLUMN_NAMES])
    else:
        pq.write_table(pa.Table.from_pylist(rows, schema=export_module._parquet_schema()), path)


def _filled_store(path, runs=3, per_run=7):
    store = SQLiteStore(path)
    for number in range(runs):
        run_id = f"run-{number}"
        store.begin_run(stamp_run(suite="demo" if number % 2 else "other",
                                  bench_version=str(number), config={}, run_id=run_id))
        store.append([make_record(f"t{i}", run_id=run_id, i=i, text="ü,\"\n" * i,
                                  nested={"b": [1.5, None], "a": i})
                      for i in range(per_run)])
    store.append([Record(suite="demo", scope="orphan", arm="x", task="t", trial=2,
                         run_id="no-such-run", outcome="error", started_at=1.0, ended_at=0.5,
                         tokens=TokenComponents(0, 0, 0, 0, 7), payload={})])
    return store


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("batch_rows", [1, 4, 5_000])
@pytest.mark.parametrize("selection", [{}, {"suite": "demo"}, {"run_id": "run-1"}])
def test_streamed_export_equals_the_old_in_memory_export(tmp_path, monkeypatch, format,
                                                         batch_rows, selection):
    import pyarrow.parquet as pq

    monkeypatch.setattr(export_module, "BATCH_ROWS", batch_rows)
    with _filled_store(tmp_path / "s.sqlite") as store:
        versions = {info.run.run_id: info.run.bench_version for info in store.runs()}
        reference = tmp_path / f"old.{format}"
        _old_export(store.records(**selection), versions, reference, format)
        streamed = tmp_path / f"new.{format}"
        count = export_store(store, streamed, format, **selection)
        assert count == len(store.records(**selection)) > 0
    if format == "parquet":
        new, old = pq.read_table(streamed), pq.read_table(reference)
        assert new.schema.equals(old.schema, check_metadata=True)
        assert new.equals(old)
        # one row group per batch: the writer never held more than a batch of rows
        expected_groups = -(-count // batch_rows)
        assert pq.ParquetFile(streamed).num_row_groups == expected_groups
    else:
        assert streamed.read_bytes() == reference.read_bytes()


def test_store_records_are_paged_not_fetched_at_once(tmp_path):
    """Export reads through the store's iterator, which asks for at most `batch` bodies
    per query, in store order, and sees every record exactly once."""

    class CountingStore(SQLiteStore):
        largest = 0

        def _bounded_page(self, sql, params, body):
            rows, cut = super()._bounded_page(sql, params, body)
            if "kind = 'record'" in sql:
                CountingStore.largest = max(CountingStore.largest, len(rows))
            return rows, cut

    with CountingStore(tmp_path / "s.sqlite") as plain:
        plain.append([make_record(f"t{i}", i=i) for i in range(23)])
        expected = plain.records()
        CountingStore.largest = 0
        paged = list(export_module.iter_store_records(plain, batch=5))
        assert CountingStore.largest == 5
        assert paged == expected


def test_a_store_iterator_is_used_when_the_store_has_one(tmp_path):
    calls = []

    with SQLiteStore(tmp_path / "s.sqlite") as store:
        store.append([make_record(f"t{i}") for i in range(3)])
        every = store.records()

        def iter_records(**selection):
            calls.append(selection)
            return iter(every)

        store.iter_records = iter_records
        assert list(export_module.iter_store_records(store, suite="demo", batch=9)) == every
    assert calls == [{"run_id": None, "suite": "demo", "batch": 9}]


@pytest.mark.parametrize("format", FORMATS)
def test_rows_reach_the_file_before_the_last_record_is_read(tmp_path, monkeypatch, format):
    """Streaming, observed from outside: when the generator hands out its last record,
    earlier batches are already in the (temporary) file."""
    monkeypatch.setattr(export_module, "BATCH_ROWS", 10)
    sizes = []

    def records():
        for i in range(100):
            yield make_record(f"t{i}", padding="x" * 200)
        [temporary] = [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
        sizes.append(temporary.stat().st_size)

    write_export(records(), tmp_path / f"out.{format}", format)
    # 90 of the 100 rows (each over 200 bytes) were handed to the writer already
    assert sizes and sizes[0] > 90 * 200 * (0.1 if format == "parquet" else 1)


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("batch_bytes", [1, 900, 4_000])
def test_a_batch_is_cut_by_its_payloads_bytes_and_the_export_is_the_same(tmp_path, monkeypatch,
                                                                         format, batch_bytes):
    """Records of very different sizes (an agent's transcript of megabytes beside a
    short one): a batch ends at the row whose payload JSON reaches `BATCH_BYTES`, and
    the file holds the same rows as the export written at once."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(export_module, "BATCH_BYTES", batch_bytes)
    sizes = [0, 1_500, 30, 30, 6_000, 0, 700, 700, 700, 12, 2_500, 3]
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        store.append([make_record(f"t{i}", transcript="y" * size)
                      for i, size in enumerate(sizes)])
        records = store.records()
        versions = {"run-1": "1"}
        reference = tmp_path / f"old.{format}"
        _old_export(records, versions, reference, format)
        batches = list(export_module._row_batches(records, versions, [0]))
        streamed = tmp_path / f"new.{format}"
        assert export_store(store, streamed, format) == len(sizes)
    assert [row for batch in batches for row in batch] == [
        export_module.record_row(record, "1") for record in records]
    for batch in batches:  # every row but the last of a batch left it under the bound
        payloads = [len(row["payload_json"]) for row in batch]
        assert sum(payloads[:-1]) < batch_bytes
        if batch is not batches[-1]:
            assert sum(payloads) >= batch_bytes
    assert len(batches) > 1
    if format == "parquet":
        assert pq.read_table(streamed).equals(pq.read_table(reference))
        assert pq.ParquetFile(streamed).num_row_groups == len(batches)
    else:
        assert streamed.read_bytes() == reference.read_bytes()

"""Exports: every record written then read back equal, in every format; the columns
are the documented ones; bad files give one clear line."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import benchwarden.core.export as export_module
from benchwarden.core.export import (COLUMN_NAMES, FORMATS, ExportError, export_store,
                                     format_from_path, read_export, read_export_rows,
                                     write_export)
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
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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

"""`benchwarden export`: invoke the command, check the file through the Python API."""

from __future__ import annotations

import os
import secrets
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from benchwarden.cli.main import cli
from benchwarden.core.export import read_export, read_export_rows
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import open_store
from tests.conftest import require


def fill(store, run_ids=("run-alpha", "run-beta")) -> None:
    for number, run_id in enumerate(run_ids):
        store.begin_run(stamp_run(suite="demo", bench_version=f"v{number}", config={},
                                  run_id=run_id))
        store.append([
            Record(suite="demo", scope=run_id, arm=arm, task=f"task-{task}", trial=1,
                   run_id=run_id, outcome="ok", started_at=100.0, ended_at=101.25,
                   tokens=TokenComponents(5, 0, 7, 9, None if arm == "a" else 2),
                   payload={"reply": "<b>ü</b>\n\"quoted\", comma", "task": task})
            for arm in ("a", "b") for task in range(2)])


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store.sqlite"
    with open_store(path) as store:
        fill(store)
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, ["export", *args], catch_exceptions=False)


@pytest.mark.parametrize("format", ["jsonl", "parquet", "csv"])
def test_export_writes_every_record_of_the_store(tmp_path, store_path, format):
    out = tmp_path / f"out.{format}"
    result = invoke("--store", str(store_path), "--format", format, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"exported 8 records to {out}" in result.output
    with open_store(store_path) as store:
        assert read_export(out, format) == store.records()


def test_export_of_one_run_by_prefix_with_format_from_suffix(tmp_path, store_path):
    out = tmp_path / "beta.parquet"
    result = invoke("--store", str(store_path), "--run", "run-be", "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = read_export_rows(out, "parquet")
    assert {row["run_id"] for row in rows} == {"run-beta"} and len(rows) == 4
    assert {row["bench_version"] for row in rows} == {"v1"}


@pytest.mark.parametrize("args, expected", [
    (["--out", "records.txt"], "records.txt; give --format jsonl|parquet|csv"),
    (["--run", "no-such-run", "--out", "x.csv"], "run 'no-such-run' not found"),
    (["--format", "xlsx", "--out", "x.csv"], "Invalid value for '--format'"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, store_path, args, expected):
    args = [str(tmp_path / a) if a.endswith((".txt", ".csv")) else a for a in args]
    result = CliRunner().invoke(cli, ["export", "--store", str(store_path), *args])
    assert result.exit_code == 2
    assert expected in result.output


def test_a_missing_store_is_not_created(tmp_path):
    missing = tmp_path / "typo.sqlite"
    result = CliRunner().invoke(cli, ["export", "--store", str(missing), "--out",
                                      str(tmp_path / "x.csv")])
    assert result.exit_code == 2 and "no store at" in result.output
    assert not missing.exists()


@pytest.mark.postgres
def test_export_from_a_postgres_store(tmp_path):
    url = os.environ.get("BENCHWARDEN_TEST_POSTGRES_URL", "")
    require(bool(url), "PostgreSQL (BENCHWARDEN_TEST_POSTGRES_URL)",
            "run `bash scripts/test-services.sh start` and source .test-services.env")
    import psycopg

    schema = f"bw_export_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        location = f"{url}?options={quote(f'-csearch_path={schema}')}"
        with open_store(location) as store:
            fill(store)
            expected = store.records()
        out = tmp_path / "pg.jsonl"
        result = invoke("--store", location, "--out", str(out))
        assert result.exit_code == 0, result.output
        assert read_export(out, "jsonl") == expected
        one_run = tmp_path / "pg-beta.csv"
        result = invoke("--store", location, "--suite", "demo", "--run", "run-beta",
                        "--out", str(one_run))
        assert result.exit_code == 0, result.output
        assert read_export(one_run, "csv") == [r for r in expected if r.run_id == "run-beta"]
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_record_that_cannot_be_read_mid_export_is_one_line_and_keeps_the_old_file(
        tmp_path, store_path, monkeypatch):
    """A damaged body found after earlier batches were written: one line naming the
    entry, a non-zero exit, and the previous export left whole."""
    import sqlite3

    import benchwarden.core.export as export_module

    monkeypatch.setattr(export_module, "BATCH_ROWS", 2)  # the damage is past the first batch
    out = tmp_path / "out.jsonl"
    assert invoke("--store", str(store_path), "--out", str(out)).exit_code == 0
    before = out.read_bytes()
    with sqlite3.connect(store_path) as connection:  # what a damaged disk or a hand edit does
        connection.execute("DROP TRIGGER entries_refuse_update")
        seq = connection.execute("SELECT seq FROM entries WHERE kind = 'record' ORDER BY seq "
                                 "LIMIT 1 OFFSET 6").fetchone()[0]
        connection.execute("UPDATE entries SET body = ? WHERE seq = ?", (b'{"suite": 1', seq))
    result = CliRunner().invoke(cli, ["export", "--store", str(store_path), "--out", str(out)])
    assert result.exit_code in (2, 4), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "record" in lines[0] and "Traceback" not in result.output
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []

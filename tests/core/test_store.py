"""Store behaviour that is SQLite's own or pure. The behaviour both backends share
(append-only, unique addresses, the hash chain, resume numbering, read-only opening,
head witnesses) is tested once per backend in test_store_backends.py; the same cases
through the real command line are in tests/cli/test_store_commands.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchwarden.core.errors import EXIT_ENVIRONMENT, EXIT_USAGE, ConfigurationError
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import RunEnd
from benchwarden.core.store import (
    APPLICATION_ID,
    CorruptStore,
    ForeignDatabase,
    NoStore,
    SQLiteStore,
    StoreError,
    compare_with_witnesses,
    find_secrets,
    lock_timeout,
    open_store,
)
from benchwarden.core.witness import StoreHead, Witness, WitnessError, parse_witness_text
from tests.core.test_store_backends import make_record

HASHES = st.text("0123456789abcdef", min_size=64, max_size=64)


def _fingerprint(folder: Path) -> dict[str, str]:
    """Every file in `folder` with the SHA-256 of its bytes."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.iterdir()) if path.is_file()}


def _store_with(path: Path, count: int) -> None:
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        for index in range(count):
            store.append([make_record(task=str(index))])


def test_find_secrets_spares_env_var_names_and_token_counts():
    assert find_secrets({"api_key_env": "OPENAI_API_KEY", "max_tokens": 256}) == []
    assert find_secrets({"headers": {"Authorization": "Bearer x"}}) == ["headers.Authorization"]
    assert find_secrets({"extra": ["sk-abcdefghijkl"]}) == ["extra[0]"]
    assert find_secrets({"nested": {"password": ""}}) == []  # empty is not a secret


def test_store_errors_carry_the_exit_codes_of_the_table():
    assert StoreError("x").exit_code == EXIT_ENVIRONMENT
    assert CorruptStore("x").exit_code == EXIT_ENVIRONMENT
    assert NoStore("x").exit_code == EXIT_USAGE


def test_a_file_that_is_not_a_store_gives_one_clear_line(tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"this is not sqlite at all" * 100)
    for create in (True, False):
        with pytest.raises(CorruptStore, match="not an SQLite database") as caught:
            open_store(bogus, create=create)
        assert "\n" not in str(caught.value)
    assert bogus.read_bytes() == b"this is not sqlite at all" * 100  # nothing was written
    assert [p.name for p in tmp_path.iterdir()] == ["bogus.sqlite"]


def test_a_folder_is_not_a_store(tmp_path):
    for create in (True, False):
        with pytest.raises(StoreError, match="is a directory") as caught:
            open_store(tmp_path, create=create)
        assert caught.value.exit_code == EXIT_ENVIRONMENT


def test_reading_a_missing_store_creates_nothing(tmp_path):
    for target in (tmp_path / "typo.sqlite", tmp_path / "no" / "such" / "store.sqlite"):
        with pytest.raises(NoStore, match=f"no store at {target}"):
            open_store(target, create=False)
    assert list(tmp_path.iterdir()) == []


def test_resuming_needs_an_existing_store_and_can_append_to_it(tmp_path):
    path = tmp_path / "s.sqlite"
    with pytest.raises(NoStore):
        open_store(path, create=False, read_only=False)
    path.touch()
    with pytest.raises(NoStore, match="empty"):
        open_store(path, create=False, read_only=False)
    assert list(tmp_path.iterdir()) == [path] and path.stat().st_size == 0
    path.unlink()
    _store_with(path, 1)
    with open_store(path, create=False, read_only=False) as store:
        assert not store.read_only
        store.append([make_record(task="resumed")])
    with open_store(path, create=False) as store:
        assert [r.task for r in store.records()] == ["0", "resumed"] and store.verify().ok
    with pytest.raises(ValueError):
        open_store(path, create=True, read_only=True)


def test_writing_creates_the_file_but_only_asked_for_folders(tmp_path):
    with pytest.raises(NoStore, match="folder .* does not exist"):
        open_store(tmp_path / "deep" / "store.sqlite")
    assert not (tmp_path / "deep").exists()
    with open_store(tmp_path / "deep" / "er" / "store.sqlite", create_parents=True) as store:
        assert store.runs() == [] and store.verify().ok
    with open_store(tmp_path / "flat.sqlite") as store:
        assert store.runs() == []


def test_a_new_store_is_marked_as_ours(tmp_path):
    with open_store(tmp_path / "s.sqlite"):
        pass
    raw = sqlite3.connect(tmp_path / "s.sqlite")
    try:
        assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_foreign_database_is_refused_byte_for_byte_untouched(tmp_path, journal):
    foreign = tmp_path / "app.db"
    raw = sqlite3.connect(foreign)
    raw.execute(f"PRAGMA journal_mode={journal}")
    raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    raw.execute("INSERT INTO users (name) VALUES ('ada')")
    raw.commit()
    raw.close()
    before = _fingerprint(tmp_path)
    for create in (True, False):
        with pytest.raises(ForeignDatabase, match="another application .*users.*untouched"):
            open_store(foreign, create=create)
    assert _fingerprint(tmp_path) == before


def test_an_empty_sqlite_database_with_another_application_id_is_foreign(tmp_path):
    foreign = tmp_path / "app.db"
    raw = sqlite3.connect(foreign)
    raw.execute("PRAGMA application_id = 1234")
    raw.execute("PRAGMA user_version = 7")
    raw.close()
    before = _fingerprint(tmp_path)
    with pytest.raises(ForeignDatabase, match="application_id 0x000004d2; user_version 7"):
        open_store(foreign)
    assert _fingerprint(tmp_path) == before


def test_tables_named_like_ours_do_not_make_a_store(tmp_path):
    """Another application's `entries` and `meta` tables (even with a schema_version)
    are not a store from before the application id: our chain columns are missing."""
    foreign = tmp_path / "app.db"
    raw = sqlite3.connect(foreign)
    raw.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, text TEXT)")
    raw.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
    raw.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    raw.commit()
    raw.close()
    before = _fingerprint(tmp_path)
    with pytest.raises(ForeignDatabase, match="entries, meta"):
        open_store(foreign)
    assert _fingerprint(tmp_path) == before


def test_our_application_id_without_our_tables_is_damage(tmp_path):
    odd = tmp_path / "odd.db"
    raw = sqlite3.connect(odd)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("CREATE TABLE something (x)")
    raw.commit()
    raw.close()
    with pytest.raises(CorruptStore, match="damaged: it carries benchwarden's application id"):
        open_store(odd, create=False)


def test_an_empty_file_is_a_new_store_for_writers_and_no_store_for_readers(tmp_path):
    empty = tmp_path / "made-by-mktemp"
    empty.touch()
    with pytest.raises(NoStore, match="empty"):
        open_store(empty, create=False)
    assert empty.stat().st_size == 0
    with open_store(empty) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="r"))
    with open_store(empty, create=False) as store:
        assert [info.run.run_id for info in store.runs()] == ["r"]


def test_a_read_only_store_writes_nothing_and_refuses_appends(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with(path, 2)
    witness = path.with_name("s.sqlite.head").read_bytes()
    main_file = path.read_bytes()
    with open_store(path, create=False) as store:
        assert store.read_only and len(store.records()) == 2
        with pytest.raises(StoreError, match="read-only"):
            store.append([make_record(task="late")])
        assert store.verify().ok
    assert path.read_bytes() == main_file
    assert path.with_name("s.sqlite.head").read_bytes() == witness


def test_a_store_from_before_witnesses_is_upgraded_by_its_first_writer(tmp_path):
    """A store written by the previous version (no application id, no witness) is
    read as before, and a writer marks it and starts its witness."""
    path = tmp_path / "old.sqlite"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    from benchwarden.core.store import _SQLITE_SCHEMA
    for statement in _SQLITE_SCHEMA:
        raw.execute(statement)
    raw.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    raw.close()
    with open_store(path, create=False) as reader:
        report = reader.verify()
        assert report.ok and "no head witness" not in " ".join(report.lines())  # empty
    with open_store(path) as writer:
        writer.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="r"))
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    raw.close()
    with open_store(path, create=False) as reader:
        report = reader.verify()
    assert report.ok and "agrees" in report.lines()[1]


def test_schema_version_mismatch_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with(path, 0)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    raw.commit()
    raw.close()
    with pytest.raises(CorruptStore, match="schema version 99, this benchwarden reads 1"):
        open_store(path, create=False)


def test_a_damaged_page_is_one_line(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with(path, 40)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")  # the header's page size
    assert len(data) > 3 * page
    data[page:3 * page] = b"\xa5" * (2 * page)  # pages 2 and 3: the tables' b-trees
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStore, match="damaged") as caught:
        with open_store(path, create=False) as store:
            store.verify()
    assert "\n" not in str(caught.value)


def test_a_held_lock_is_waited_for_then_refused_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    _store_with(path, 1)
    monkeypatch.setenv("BENCHWARDEN_STORE_TIMEOUT", "0.2")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked by another process.*0.2 s") as caught:
            open_store(path)
        assert caught.value.exit_code == EXIT_ENVIRONMENT
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_lock_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("BENCHWARDEN_STORE_TIMEOUT", raising=False)
    assert lock_timeout() == 30.0
    monkeypatch.setenv("BENCHWARDEN_STORE_TIMEOUT", "2.5")
    assert lock_timeout() == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("BENCHWARDEN_STORE_TIMEOUT", bad)
        with pytest.raises(ConfigurationError, match="BENCHWARDEN_STORE_TIMEOUT"):
            lock_timeout()


def test_the_witness_follows_every_append_and_never_moves_back(tmp_path):
    path = tmp_path / "s.sqlite"
    first, second = SQLiteStore(path), SQLiteStore(path)
    try:
        first.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        for index in range(6):
            (first if index % 2 else second).append([make_record(task=str(index))])
            head = json.loads(path.with_name("s.sqlite.head").read_text())
            assert head["seq"] == index + 2
            assert StoreHead.from_json_dict(head) == first.head()
    finally:
        first.close()
        second.close()


def test_backup_copies_entries_still_in_the_wal_and_the_witness(tmp_path):
    source = tmp_path / "s.sqlite"
    with open_store(source) as writer:  # held open: the entries stay in the -wal file
        writer.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        writer.append([make_record(task=str(i)) for i in range(30)])
        with open_store(source, create=False) as reader:
            reader.backup_to(tmp_path / "copy.sqlite")
        with pytest.raises(StoreError, match="already exists"):
            SQLiteStore(source, create=False).backup_to(tmp_path / "copy.sqlite")
    with open_store(tmp_path / "copy.sqlite", create=False) as copy:
        assert len(copy.records()) == 30
        report = copy.verify()
    assert report.ok and report.checked == 31 and "agrees" in report.lines()[1]
    assert (tmp_path / "copy.sqlite.head").read_bytes() == (tmp_path / "s.sqlite.head").read_bytes()


def test_iter_records_pages_through_in_order(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with(path, 7)
    with open_store(path, create=False) as store:
        everything = store.records()
        assert [r.task for r in everything] == [str(i) for i in range(7)]
        for batch in (1, 2, 3, 7, 100):
            assert list(store.iter_records(batch=batch)) == everything
            assert list(store.iter_records(task="5", batch=batch)) == [everything[5]]
        for batch in (1, 3):
            report = store.verify(batch=batch)
            assert report.ok and report.checked == 8
        with pytest.raises(ValueError):
            next(store.iter_records(batch=0))


# -- witnesses, pure ----------------------------------------------------------------


@given(first=HASHES, last=st.integers(1, 10_000), ahead=st.integers(1, 10_000))
def test_a_witness_beyond_the_end_of_the_chain_is_a_removed_tail(first, last, ahead):
    witness = Witness("w", StoreHead(last + ahead, "a" * 64, first))
    lines, problem = compare_with_witnesses(first, last, {}, [witness])
    assert problem is not None and "removed from its tail" in problem
    assert f"ends at entry {last}" in problem and f"up to {ahead} entr" in problem
    assert lines[0].startswith("head witness w: MISMATCH")


@given(first=HASHES, seq=st.integers(1, 10_000), stored=HASHES, recorded=HASHES)
def test_a_witness_inside_the_chain_must_match_its_hash(first, seq, stored, recorded):
    witness = Witness("w", StoreHead(seq, recorded, first))
    lines, problem = compare_with_witnesses(first, seq + 3, {seq: stored}, [witness])
    if stored == recorded:
        assert problem is None and "agrees" in lines[0]
    else:
        assert "removed and rewritten" in problem


def test_a_witness_of_another_store_is_named():
    witness = Witness("w", StoreHead(1, "a" * 64, "b" * 64))
    _, problem = compare_with_witnesses("c" * 64, 5, {1: "a" * 64}, [witness])
    assert "another store" in problem
    _, empty = compare_with_witnesses(None, None, {}, [witness])
    assert "is empty" in empty


def test_witness_text_is_a_witness_file_or_a_report_carrying_one():
    head = StoreHead(3, "a" * 64, "b" * 64)
    assert parse_witness_text(json.dumps(head.to_json_dict())) == head
    report = {"schema": "benchwarden.report/1", "store_head": head.to_json_dict()}
    assert parse_witness_text(json.dumps(report)) == head
    for bad, why in (("{", "not JSON"), ("[]", "not a JSON object"),
                     ('{"seq": -1, "hash": "x", "first": "y"}', "whole number"),
                     (json.dumps({**head.to_json_dict(), "hash": "A" * 64}), "hash"),
                     ('{"schema": "benchwarden.report/1"}', "carries no")):
        with pytest.raises(WitnessError, match=why):
            parse_witness_text(bad)


def test_an_in_memory_store_keeps_no_witness():
    with SQLiteStore(":memory:") as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="r"))
        assert store.witness_path is None and store.verify().ok
    assert not os.path.exists(":memory:.head")


def test_a_slower_writer_never_moves_the_witness_back(tmp_path):
    from benchwarden.core.witness import WITNESS_BLOCK, read_witness, write_witness

    path = tmp_path / "s.sqlite.head"
    newer, older = StoreHead(9, "a" * 64, "f" * 64), StoreHead(4, "b" * 64, "f" * 64)
    assert write_witness(path, newer)
    assert not write_witness(path, older)  # the commit that finished first, written last
    assert read_witness(path) == newer and path.stat().st_size == WITNESS_BLOCK
    other_chain = StoreHead(2, "c" * 64, "e" * 64)
    assert write_witness(path, other_chain)  # a different chain is not "later"
    assert write_witness(path, older, forward_only=False) and read_witness(path) == older
    path.write_text("garbage left by someone" * 40)
    assert write_witness(path, newer) and read_witness(path) == newer
    assert path.stat().st_size == WITNESS_BLOCK


def test_a_failed_first_append_does_not_poison_the_witness(tmp_path):
    path = tmp_path / "s.sqlite"
    with open_store(path) as store:
        with pytest.raises(StoreError):
            store.append([make_record(task="x"), make_record(task="x")])  # refused whole
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="r"))
        store.append([make_record(run_id="r", task="y")])
        assert store.verify().ok


def test_an_unreadable_record_body_is_named_not_a_traceback(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with(path, 3)
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER entries_refuse_update")
    raw.execute("UPDATE entries SET body = CAST('{\"suite\": 7' AS BLOB) WHERE seq = 3")
    raw.commit()
    raw.close()
    with open_store(path, create=False) as store:
        with pytest.raises(CorruptStore, match="entry 3 is not a readable record"):
            store.records()
        assert not store.verify().ok


_RUN_BODY_DAMAGE = [
    ("run", "CAST('not json' AS BLOB)", "JSON is malformed"),
    ("run", "CAST('{\"bench_version\": 1}' AS BLOB)", "Expected `str`"),
    ("run", "CAST(replace(CAST(body AS TEXT), '\"config\":{', '\"config\":5,\"x\":{') AS BLOB)",
     "Expected `object`"),
    ("run_end", "CAST('{\"run_id\": [' AS BLOB)", "Expected `str`, got `array`"),
]


@pytest.mark.parametrize("headings_dropped", [False, True])
@pytest.mark.parametrize(("kind", "damage", "reason"), _RUN_BODY_DAMAGE)
def test_an_unreadable_run_start_or_end_is_named_not_a_decoder_message(tmp_path, kind, damage,
                                                                        reason,
                                                                        headings_dropped):
    """Every reader of a run start's or end's body names the entry: `runs` and
    `run_info` always read them; listings and a report's runs read the run headings,
    and the bodies only in a store without them (read as it is)."""
    path = tmp_path / "s.sqlite"
    with open_store(path) as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1",
                                  config={"scope": "s", "tasks": ["t"]}, run_id="r"))
        store.append([make_record(run_id="r", task="t")])
        store.finish_run(RunEnd("r", 1_790_000_030.0, "completed", {}))
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER entries_refuse_update")
    seq = raw.execute("SELECT seq FROM entries WHERE kind = ?", (kind,)).fetchone()[0]
    raw.execute(f"UPDATE entries SET body = {damage} WHERE seq = ?", (seq,))
    if headings_dropped:
        raw.execute("DROP TABLE run_headings")
    raw.commit()
    raw.close()
    named = f"entry {seq} is not a readable {'run start' if kind == 'run' else 'run end'} "
    reads = {"runs": lambda store: store.runs(), "run_info": lambda store: store.run_info("r"),
             "runs_with_config": lambda store: store.runs_with_config("demo", ("tasks",)),
             "run_listing": lambda store: store.run_listing()}
    if not headings_dropped:  # read from the headings kept when the run started
        del reads["runs_with_config"], reads["run_listing"]
    elif "config" in damage:  # a listing shows no configuration: it does not read it
        del reads["run_listing"]
    with open_store(path, create=False) as store:
        for name, read in reads.items():
            with pytest.raises(CorruptStore) as refused:
                read(store)
            assert named in str(refused.value) and reason in str(refused.value), name
            assert "benchwarden verify --store" in str(refused.value), name
        assert not store.verify().ok


def test_runs_read_with_a_cut_config_are_the_runs_with_that_config(tmp_path):
    path = tmp_path / "s.sqlite"
    configs = [{"scope": "x", "tasks": ["t1", "t2"], "all_tasks": ["t1", "t2", "t3"],
                "arms": ["a"]},
               {"scope": "y", "tasks": ["t2", "t1"], "task_tiers": {"t1": "read"}},
               {}]
    with open_store(path) as store:
        for index, config in enumerate(configs):
            store.begin_run(stamp_run(suite="demo", bench_version="1", config=config,
                                      run_id=f"run-{index}"))
            store.append([make_record(task=f"t{index}", run_id=f"run-{index}")])
        store.begin_run(stamp_run(suite="other", bench_version="1", config={"tasks": ["z"]},
                                  run_id="elsewhere"))
    with open_store(path, create=False, read_only=True) as store:
        whole = store.runs("demo")
        cut = store.runs_with_config("demo", ("scope", "tasks", "arms"))
    assert [info.run.run_id for info in cut] == ["run-0", "run-1", "run-2"]
    for found, expected in zip(cut, whole, strict=True):
        kept = {key: value for key, value in expected.run.config.items()
                if key in ("scope", "tasks", "arms")}
        assert found.run.config == kept
        assert dataclasses.replace(found.run, config=expected.run.config) == expected.run
        assert (found.end, found.record_count) == (expected.end, expected.record_count)
    # a task name repeated across runs is one string
    assert cut[0].run.config["tasks"][0] is cut[1].run.config["tasks"][1]

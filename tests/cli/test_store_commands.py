"""`benchwarden runs`, `show RUN` and `verify --store` through the CLI, on contamination runs.

`show` must work from the store alone: the server is stopped before it is called.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes import FakeOpenAIServer
from tests.suites.contamination.helpers import contamination_args, invoke


@pytest.fixture
def finished_runs(tmp_path):
    """A store holding two finished contamination runs (pass, then fail), server gone."""
    store = tmp_path / "store.sqlite"
    reports = []
    for behaviour in ("clean", "drift"):
        path = tmp_path / f"{behaviour}.json"
        with FakeOpenAIServer(behaviour) as server:
            result = invoke(contamination_args(server.url, store, path))
        assert result.exit_code in (0, 1), result.output
        reports.append(json.loads(path.read_text()))
    return store, reports


def test_runs_lists_every_run_with_its_status(finished_runs):
    store, reports = finished_runs
    result = invoke(["runs", "--store", str(store)])
    assert result.exit_code == 0
    for report in reports:
        assert report["run"]["id"] in result.output
    assert result.output.count("completed") == 2 and "contamination" in result.output


def test_show_rerenders_a_run_from_the_store_alone(finished_runs, tmp_path):
    store, (clean, drift) = finished_runs
    for report, word in ((clean, "PASS"), (drift, "FAIL")):
        out = tmp_path / f"shown-{word}.json"
        result = invoke(["show", report["run"]["id"], "--store", str(store), "--json", str(out)])
        assert result.exit_code == 0, result.output
        assert word in result.output and "probe × leg" in result.output
        shown = json.loads(out.read_text())
        assert shown["score"] == report["score"]
        assert shown["cells"] == report["cells"] and shown["verdict"] == report["verdict"]
    latest = invoke(["show", "--latest", "--store", str(store)])
    assert "DIVERGED @ char" in latest.output


def test_show_of_an_unknown_run_exits_2(finished_runs):
    store, _ = finished_runs
    result = invoke(["show", "contamination-nope", "--store", str(store)])
    assert result.exit_code == 2 and "not found" in result.output


def test_verify_store_passes_then_names_the_tampered_record(finished_runs):
    store, _ = finished_runs
    result = invoke(["verify", "--store", str(store)])
    assert result.exit_code == 0 and "intact" in result.output

    raw = sqlite3.connect(store)
    seq = raw.execute("SELECT seq FROM entries WHERE kind = 'record' AND arm = 'c4' "
                      "ORDER BY seq LIMIT 1").fetchone()[0]
    raw.execute("DROP TRIGGER entries_refuse_update")
    changed = raw.execute(
        "UPDATE entries SET body = CAST(replace(CAST(body AS TEXT), '\"ok\"', '\"error\"') "
        "AS BLOB) WHERE seq = ?", (seq,)).rowcount
    raw.commit()
    raw.close()
    assert changed == 1
    result = invoke(["verify", "--store", str(store)])
    assert result.exit_code == 1
    assert f"entry {seq}" in result.output and "/c4/" in result.output


# -- store paths and store damage, through the real command line (a subprocess) ---------------

import hashlib  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

from benchwarden.core.provenance import stamp_run  # noqa: E402
from benchwarden.core.store import open_store  # noqa: E402
from tests.core.test_store_backends import make_record  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens: the store is opened before any request


def bw(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m benchwarden ARGS` in a child process, as a user runs it."""
    child_env = {**os.environ, "COLUMNS": "240", **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO), os.environ.get("PYTHONPATH", "")) if part)
    return subprocess.run([sys.executable, "-m", "benchwarden", *args], capture_output=True,
                          text=True, env=child_env, timeout=180, cwd=REPO)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    message = result.stderr.strip()
    assert message.startswith("benchwarden: error: ") and "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def fingerprint(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.iterdir()) if path.is_file()}


def small_store(path: Path, runs: int = 2, records: int = 3) -> None:
    with open_store(path) as store:
        for run in range(runs):
            run_id = f"run-{run}"
            store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id=run_id))
            store.append([make_record(run_id=run_id, task=str(i)) for i in range(records)])


READ_ONLY_COMMANDS = [
    ["verify", "--store"], ["runs", "--store"], ["show", "--latest", "--store"],
    ["report", "--latest", "--html", "/dev/null", "--store"],
    ["export", "--out", "/dev/null", "--format", "jsonl", "--store"],
    ["arms", "report", "--store"], ["arms", "compare", "a", "b", "--store"],
]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_read_only_commands_never_create_a_store(tmp_path, command):
    for target in (tmp_path / "mistyped.sqlite", tmp_path / "no" / "dir" / "x.sqlite"):
        result = bw(*command, str(target))
        assert_one_line_error(result, 2, f"no store at {target}")
    assert list(tmp_path.iterdir()) == []


def test_verify_without_a_path_checks_the_same_default_store_as_every_command(tmp_path):
    home = Path(os.environ["BENCHWARDEN_HOME"])
    assert_one_line_error(bw("verify"), 2, f"no store at {home / 'store.sqlite'}")
    assert not home.exists()  # reading never creates the default folder either
    # a writing command creates the default location (and only it) ...
    assert bw("contamination", "--url", DEAD_URL, "--no-progress").returncode == 2
    assert (home / "store.sqlite").is_file()
    # ... and `verify`, `verify --store` and `runs` all read that same store
    for args in (["verify"], ["verify", "--store", str(home / "store.sqlite")]):
        result = bw(*args)
        assert result.returncode == 0 and "intact" in result.stdout, result.stderr
    chosen = tmp_path / "chosen.sqlite"
    small_store(chosen)
    result = bw("verify", env={"BENCHWARDEN_STORE": str(chosen)})
    assert result.returncode == 0 and "8 entries verified" in result.stdout


def test_resuming_from_a_mistyped_store_creates_nothing(tmp_path):
    typo = tmp_path / "typo.sqlite"
    result = bw("contamination", "--resume", "contamination-x", "--store", str(typo),
                "--no-progress")
    assert_one_line_error(result, 2, f"no store at {typo}")
    assert list(tmp_path.iterdir()) == []


def test_a_writing_command_does_not_create_a_typed_folder(tmp_path):
    target = tmp_path / "nonexistent" / "dir" / "x.sqlite"
    result = bw("contamination", "--url", DEAD_URL, "--store", str(target), "--no-progress")
    assert_one_line_error(result, 2, "does not exist", "create the folder first")
    assert list(tmp_path.iterdir()) == []
    under_a_file = tmp_path / "file"
    under_a_file.write_text("x")
    result = bw("contamination", "--url", DEAD_URL, "--store", str(under_a_file / "x.sqlite"),
                "--no-progress")
    assert_one_line_error(result, 4, "not a directory")


@pytest.mark.parametrize("command", [["verify", "--store"], ["runs", "--store"],
                                     ["contamination", "--url", DEAD_URL, "--store"]],
                         ids=["verify", "runs", "contamination"])
def test_a_directory_given_as_store_is_exit_4(tmp_path, command):
    assert_one_line_error(bw(*command, str(tmp_path)), 4, "is a directory")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_foreign_database_is_refused_untouched(tmp_path, journal):
    foreign = tmp_path / "notes.db"
    raw = sqlite3.connect(foreign)
    raw.execute(f"PRAGMA journal_mode={journal}")
    raw.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    raw.execute("CREATE INDEX notes_body ON notes (body)")
    raw.execute("INSERT INTO notes (body) VALUES ('keep me')")
    raw.commit()
    raw.close()
    before = fingerprint(tmp_path)
    verified = bw("verify", "--store", str(foreign))
    assert_one_line_error(verified, 4, "not a benchwarden store", "another application", "notes")
    assert "intact" not in verified.stdout
    for command in (["runs"], ["contamination", "--url", DEAD_URL, "--no-progress"]):
        assert_one_line_error(bw(*command, "--store", str(foreign)), 4, "not a benchwarden store")
    assert fingerprint(tmp_path) == before  # byte for byte, and no -wal or -shm appeared
    raw = sqlite3.connect(f"file:{foreign}?mode=ro", uri=True)
    assert raw.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == [
        ("notes",), ("notes_body",)]
    raw.close()


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n" * 200)
    before = fingerprint(tmp_path)
    for command in (["verify"], ["contamination", "--url", DEAD_URL, "--no-progress"]):
        assert_one_line_error(bw(*command, "--store", str(notes)), 4, "not an SQLite database")
    assert fingerprint(tmp_path) == before


def test_an_empty_file_is_no_store_to_read_and_a_new_store_to_write(tmp_path):
    empty = tmp_path / "from-mktemp"
    empty.touch()
    assert_one_line_error(bw("verify", "--store", str(empty)), 2, "empty (0 bytes)")
    assert empty.stat().st_size == 0
    with FakeOpenAIServer("clean") as server:
        result = bw(*contamination_args(server.url, empty))
    assert result.returncode == 0, result.stderr
    assert bw("verify", "--store", str(empty)).returncode == 0


def test_a_lock_held_past_the_timeout_is_exit_4(tmp_path):
    store = tmp_path / "store.sqlite"
    small_store(store)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with FakeOpenAIServer("clean") as server:
            result = bw(*contamination_args(server.url, store),
                        env={"BENCHWARDEN_STORE_TIMEOUT": "0.3"})
        assert_one_line_error(result, 4, "locked by another process", "BENCHWARDEN_STORE_TIMEOUT")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert bw("verify", "--store", str(store)).returncode == 0


def test_a_damaged_page_is_exit_4(tmp_path):
    store = tmp_path / "store.sqlite"
    small_store(store, runs=4, records=20)
    data = bytearray(store.read_bytes())
    data[4096:3 * 4096] = b"\x5a" * (2 * 4096)
    store.write_bytes(bytes(data))
    for command in (["verify"], ["runs"], ["contamination", "--url", DEAD_URL, "--no-progress"]):
        assert_one_line_error(bw(*command, "--store", str(store)), 4, "damaged")


# -- the filesystem refusing: a real tmpfs (root only: mounting needs it) ---------------------

@contextmanager
def tmpfs(folder: Path, size: str):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_is_one_line_exit_4_and_keeps_what_was_stored(tmp_path):
    with tmpfs(tmp_path / "small", "320k") as disk:
        store = disk / "store.sqlite"
        small_store(store, runs=1, records=2)
        filler = disk / "filler"
        descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # take all the space that is left, then give back a little: the run starts,
            while True:  # opens its store, and fills the disk while appending
                os.write(descriptor, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(descriptor)
        os.truncate(filler, max(0, filler.stat().st_size - 64 * 1024))
        with FakeOpenAIServer("clean") as server:
            result = bw(*contamination_args(server.url, store))
        assert_one_line_error(result, 4, str(store))
        assert "full" in result.stderr or "No space" in result.stderr
        filler.unlink()
        verified = bw("verify", "--store", str(store))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        runs = bw("runs", "--store", str(store))
        assert "run-0" in runs.stdout


def test_a_read_only_filesystem_refuses_writes_in_one_line_but_can_be_read(tmp_path):
    with tmpfs(tmp_path / "ro", "4m") as disk:
        store = disk / "store.sqlite"
        small_store(store)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with FakeOpenAIServer("clean") as server:
            result = bw(*contamination_args(server.url, store))
        assert_one_line_error(result, 4, "read-only")
        verified = bw("verify", "--store", str(store))
        assert verified.returncode == 0 and "8 entries verified" in verified.stdout, \
            verified.stdout + verified.stderr


# -- entries cut off the end: the head witness --------------------------------------------------

def _delete_newest_run(store: Path) -> int:
    """Remove the newest run the way someone with write access would: drop the trigger,
    delete, restore the trigger. Returns how many entries went."""
    raw = sqlite3.connect(store)
    run_id = raw.execute("SELECT run_id FROM entries WHERE kind = 'run' "
                         "ORDER BY seq DESC LIMIT 1").fetchone()[0]
    trigger = raw.execute("SELECT sql FROM sqlite_master WHERE name = "
                          "'entries_refuse_delete'").fetchone()[0]
    raw.execute("DROP TRIGGER entries_refuse_delete")
    removed = raw.execute("DELETE FROM entries WHERE run_id = ?", (run_id,)).rowcount
    raw.execute(trigger)
    # and its count in the derived run counts, which would otherwise give the cut away
    raw.execute("DELETE FROM record_runs WHERE run_id = ?", (run_id,))
    # and its heading, and its configuration unless another run has it
    raw.execute("DELETE FROM run_headings WHERE run_id = ?", (run_id,))
    raw.execute("DELETE FROM run_configs WHERE config_hash NOT IN "
                "(SELECT config_hash FROM run_headings)")
    # and recount the derived per-cell counts (SQLite), which would give it away too
    raw.execute("DELETE FROM record_cells")
    raw.execute("INSERT INTO record_cells SELECT suite, scope, arm, task, COUNT(*), MAX(trial) "
                "FROM entries WHERE kind = 'record' GROUP BY suite, scope, arm, task")
    # and the derived group totals, folded again from the records left
    from benchwarden.core.group_totals import fold_into
    from benchwarden.core.store import summary_row

    raw.execute("DELETE FROM record_group_totals")
    for group in fold_into({}, [summary_row(seq, body) for seq, body in raw.execute(
            "SELECT seq, body FROM entries WHERE kind = 'record' ORDER BY seq")]):
        raw.execute(f"INSERT INTO record_group_totals VALUES "
                    f"({', '.join(['?'] * len(group.row()))})", group.row())
    raw.commit()
    raw.close()
    return removed


def test_deleting_the_newest_run_is_detected(finished_runs, tmp_path):
    store, (_, newest) = finished_runs
    before = bw("verify", "--store", str(store))
    assert before.returncode == 0 and "agrees" in before.stdout
    removed = _delete_newest_run(store)
    assert removed > 3
    result = bw("verify", "--store", str(store))
    assert result.returncode == 1, result.stdout
    assert "NOT verified" in result.stdout and "removed from its tail" in result.stdout
    assert f"up to {removed} entries missing" in result.stdout
    # without the witness beside it, the store itself knows it should have one
    Path(f"{store}.head").unlink()
    result = bw("verify", "--store", str(store))
    assert result.returncode == 1 and "MISSING" in result.stdout


def test_a_signed_report_witnesses_the_store_even_when_the_tail_and_its_witness_go(
        finished_runs, tmp_path):
    store, _ = finished_runs
    report = tmp_path / "shown.json"
    assert bw("show", "--latest", "--store", str(store), "--json", str(report)).returncode == 0
    head = json.loads(report.read_text())["store_head"]
    assert head["seq"] > 1
    signed = bw("sign", str(report), "--sha", "0123456789abcdef0123456789abcdef01234567")
    assert signed.returncode == 0, signed.stderr
    ok = bw("verify", str(report), "--store", str(store))
    assert ok.returncode == 0 and "valid signature" in ok.stdout, ok.stdout
    assert f"head witness {report}: agrees" in ok.stdout

    _delete_newest_run(store)
    # the person cutting the tail also rewrites the witness beside the store
    with open_store(store, create=False) as opened:
        forged = opened.head()
    Path(f"{store}.head").write_text(json.dumps(forged.to_json_dict()))
    assert bw("verify", "--store", str(store)).returncode == 0  # undetectable without more
    result = bw("verify", str(report), "--store", str(store))
    assert result.returncode == 1 and "valid signature" in result.stdout
    assert f"says the chain reached entry {head['seq']}" in result.stdout
    assert bw("verify", "--store", str(store), "--witness", str(report)).returncode == 1


def test_a_plain_copy_that_misses_the_wal_is_detected_and_backup_is_not(tmp_path):
    store = tmp_path / "store.sqlite"
    with open_store(store) as writer:  # still open: the newest entries live in the -wal file
        writer.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
        writer.append([make_record(task=str(i)) for i in range(25)])
        assert Path(f"{store}-wal").stat().st_size > 0
        copies = tmp_path / "copies"
        copies.mkdir()
        shutil.copy(store, copies / "with-witness.sqlite")
        shutil.copy(f"{store}.head", copies / "with-witness.sqlite.head")
        shutil.copy(store, copies / "alone.sqlite")
        backed = bw("store", "backup", str(store), str(copies / "backup.sqlite"))
        assert backed.returncode == 0, backed.stderr
    result = bw("verify", "--store", str(copies / "with-witness.sqlite"))
    assert result.returncode == 1 and "removed from its tail" in result.stdout
    assert "benchwarden store backup" in result.stdout
    result = bw("verify", "--store", str(copies / "alone.sqlite"))
    assert result.returncode == 1 and "MISSING" in result.stdout
    result = bw("verify", "--store", str(copies / "backup.sqlite"))
    assert result.returncode == 0 and "26 entries verified" in result.stdout
    assert "agrees" in result.stdout


def test_store_backup_refuses_in_one_line(tmp_path):
    store = tmp_path / "store.sqlite"
    small_store(store)
    existing = tmp_path / "taken.sqlite"
    existing.write_text("mine")
    assert_one_line_error(bw("store", "backup", str(store), str(existing)), 2, "already exists")
    assert existing.read_text() == "mine"
    assert_one_line_error(bw("store", "backup", str(tmp_path / "nope.sqlite"),
                             str(tmp_path / "b.sqlite")), 2, "no store at")
    assert_one_line_error(bw("store", "backup", str(store), str(tmp_path / "no" / "b.sqlite")),
                          2, "does not exist")
    assert_one_line_error(bw("store", "backup", "postgresql://u@127.0.0.1/db",
                             str(tmp_path / "b.sqlite")), 2, "pg_dump")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("store")) == [
        "taken.sqlite"]


# -- the same promises on a PostgreSQL store ------------------------------------------------------

@pytest.mark.postgres
def test_postgres_read_only_commands_create_nothing_and_a_removed_tail_is_found(tmp_path):
    import psycopg

    from tests.conftest import fresh_postgres_database

    with fresh_postgres_database("bw_test_damage") as url:
        for command in (["verify"], ["runs"], ["show", "--latest"]):
            assert_one_line_error(bw(*command, "--store", url), 2, "no benchwarden store")
        with psycopg.connect(url, autocommit=True) as raw:
            assert raw.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                               ).fetchone()[0] == 0
        with FakeOpenAIServer("clean") as server:
            for _ in range(2):
                assert bw(*contamination_args(server.url, url)).returncode == 0
        verified = bw("verify", "--store", url)
        assert verified.returncode == 0 and "agrees" in verified.stdout, verified.stdout
        with psycopg.connect(url, autocommit=True) as raw:  # a superuser cuts the newest run
            raw.execute("ALTER TABLE entries DISABLE TRIGGER entries_refuse_change")
            raw.execute("DELETE FROM entries WHERE run_id = (SELECT run_id FROM entries "
                        "WHERE kind = 'run' ORDER BY seq DESC LIMIT 1)")
            raw.execute("ALTER TABLE entries ENABLE TRIGGER entries_refuse_change")
        result = bw("verify", "--store", url)
        assert result.returncode == 1 and "removed from its tail" in result.stdout
        backup = bw("store", "backup", url, str(tmp_path / "copy.sqlite"))
        assert_one_line_error(backup, 2, "pg_dump")


def test_store_repair_rebuilds_removed_or_edited_derived_tables(tmp_path):
    """A derived table dropped behind benchwarden's back: `verify` fails naming it (exit
    1), reading commands still work, `store repair` rebuilds it from the chain, and
    `verify` passes again; the same for derived rows edited in place. A missing store is
    `no store` (exit 2), never created."""
    path = tmp_path / "store.sqlite"
    small_store(path)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE record_group_totals")
    failed = bw("verify", "--store", str(path))
    assert failed.returncode == 1, failed.stderr
    assert "record_group_totals is missing (removed outside benchwarden)" in failed.stdout
    assert bw("runs", "--store", str(path)).returncode == 0
    repaired = bw("store", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    assert "its table record_group_totals is missing" in repaired.stderr
    assert "derived tables rebuilt from the records (8 entries)" in repaired.stdout
    assert bw("verify", "--store", str(path)).returncode == 0
    with sqlite3.connect(path) as connection:  # edited rows this time, tables kept
        connection.execute("UPDATE record_cells SET records = 99")
        connection.execute("UPDATE record_group_totals SET output = 0")
        connection.execute("UPDATE record_runs SET records = records + 1")
    edited = bw("verify", "--store", str(path))
    assert edited.returncode == 1 and "(derived data edited)" in edited.stdout
    assert bw("store", "repair", str(path)).returncode == 0
    verified = bw("verify", "--store", str(path))
    assert verified.returncode == 0, verified.stdout
    with sqlite3.connect(path) as connection:  # the run count dropped is back, recounted
        connection.execute("DROP TABLE record_runs")
    failed = bw("verify", "--store", str(path))
    assert "record_runs is missing (removed outside benchwarden)" in failed.stdout
    repaired = bw("store", "repair", str(path))
    assert "its table record_runs is missing" in repaired.stderr
    assert bw("verify", "--store", str(path)).returncode == 0
    assert_one_line_error(bw("store", "repair", str(tmp_path / "typo.sqlite")), 2, "no store at")
    assert not (tmp_path / "typo.sqlite").exists()


# -- the plain listing's wrapping ----------------------------------------------------

_LISTING_TEXT = st.text(alphabet=st.sampled_from(list(
    "ab ·-:/\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000é")),
                        max_size=60)


@given(text=_LISTING_TEXT, width=st.integers(20, 70))
def test_wrapping_a_listing_line_is_textwrap_s(text, width):
    """The shortcut for a line that fits gives what `textwrap.wrap` gives, for any mix of
    the whitespace textwrap changes (tabs, line breaks, spaces at either end) and the
    kinds it leaves alone."""
    import textwrap

    from benchwarden.cli.store import wrapped_indented

    assert wrapped_indented(text, width) == textwrap.wrap(
        text, width=width, initial_indent="    ", subsequent_indent="    ",
        break_long_words=False, break_on_hyphens=False)

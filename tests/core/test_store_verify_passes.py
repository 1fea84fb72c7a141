"""`verify` of a store of more groups than it folds in memory, where the backend refuses
the temporary table it would fold them in: a PostgreSQL role without the TEMP privilege,
a read-only PostgreSQL connection, SQLite whose temporary space refuses the table. It
then folds the groups in passes (`_ExpectedTotals`), one hash part of them a pass, and
must reach the verdict the temporary table reaches: a sound store passes, and a group
missing, an extra group or a changed total is named in the same words, also when it
belongs to a part that a later pass folds. The bounds are made small (5 groups in
memory, 20 a pass) so a store of 45 groups takes several passes.

Each refusal is the backend's own: the server refuses the role's or the read-only
transaction's `CREATE TEMPORARY TABLE`; SQLite refuses a temporary database held to a
page or three (`temp.max_page_count`), as it refuses one whose folder is full. SQLite
with no writable temporary folder at all is the last test (it needs a mount namespace,
so root)."""

from __future__ import annotations

import itertools
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import benchwarden.core.store as store_module
from benchwarden.core.group_totals import GROUP_TOTALS_COLUMNS
from benchwarden.core.provenance import stamp_run
from benchwarden.core.records import Record, TokenComponents
from benchwarden.core.store import SQLiteStore, Store, _part_hash
from tests.core.test_store_backends import (  # noqa: F401 (fixtures)
    PostgresBackend,
    SQLiteBackend,
    postgres_database,
)

GROUPS = 45
SPILL_BOUND = 5
PASS_BOUND = 20
PARTS = 3  # 45 stored groups at 20 a pass
PASSES = re.compile(r"verifying the group totals in (\d+) pass(es)? over the records")
GROWN = re.compile(r"was split: (\d+) passes in all, \d+ done")

_schema_numbers = itertools.count(1)


def grouped_record(index: int, trial: int = 1, **payload: Any) -> Record:
    """A record of group `index` (its own task; every third fails, so group keys differ
    in their failure too), with costs and turns whose sums depend on the order."""
    return Record(suite="demo", scope="s", arm="a", task=f"t{index:02d}", trial=trial,
                  run_id="run-1", outcome="fail" if index % 3 == 0 else "pass",
                  started_at=1.0, ended_at=2.0 + index / 7,
                  tokens=TokenComponents(fresh_input=3 + index, output=4),
                  payload={"tier": "read", "turns": 0.1 * trial,
                           "imputed_cost_usd": [0.1, 1e16, 0.3, -1e16][trial % 4],
                           **({"failure": "hung"} if index % 3 == 0 else {}), **payload})


def fill(store: Store, groups: int = GROUPS) -> None:
    """`groups` groups of two records each, the second trials appended after every
    first one (so each group's rows are spread over the chain)."""
    store.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="run-1"))
    for trial in (1, 2):
        records = [grouped_record(index, trial) for index in range(groups)]
        for start in range(0, len(records), 10):
            store.append(records[start:start + 10])


def key_of(store: Store, task: str) -> tuple[Any, ...]:
    keys = [tuple(row) for row in store._query(
        "SELECT suite, scope, arm, task, outcome, group_key FROM record_group_totals "
        f"WHERE task = {store.placeholder}", (task,))]
    assert len(keys) == 1
    return keys[0]


def later_pass_task(store: Store) -> str:
    """A task whose group no part folded with the chain's check holds: its hash is not
    0 modulo the number of parts, so a later pass folds it."""
    for index in range(GROUPS):
        if _part_hash(key_of(store, f"t{index:02d}")) % PARTS != 0:
            return f"t{index:02d}"
    raise AssertionError("every group hashes to the first part")


def later_pass_ghost(store: Store, like: str) -> str:
    """A task name for an extra group (a copy of `like`'s row) that a later pass
    holds."""
    key = key_of(store, like)
    for number in itertools.count():
        name = f"ghost{number}"
        if _part_hash((*key[:3], name, *key[4:])) % PARTS != 0:
            return name
    raise AssertionError("unreachable")


class Refused:
    """A store of this test whose backend refuses `verify` its temporary table, and the
    same store opened by its owner (where the table is made)."""

    def __init__(self, backend: Any, opener: Callable[[], Store], why: str) -> None:
        self.backend = backend
        self.open = opener
        self.why = why


@pytest.fixture(scope="module")
def no_public_temp(postgres_database: str) -> str:  # noqa: F811
    """This module's database with TEMP revoked from PUBLIC (so from every role that is
    not granted it by name; the superuser who fills and edits the stores keeps it)."""
    import psycopg

    from tests.core.test_store_backends import POSTGRES_URL, _url_with

    with psycopg.connect(_url_with(POSTGRES_URL, postgres_database), autocommit=True) as admin:
        admin.execute(f'REVOKE TEMPORARY ON DATABASE "{postgres_database}" FROM PUBLIC')
    return postgres_database


def _reader_role(backend: PostgresBackend, database: str, *, read_only: bool) -> str:
    """A login role that may read the backend's store: without TEMP, or (`read_only`)
    with TEMP but every transaction read-only."""
    role = f"bw_auditor_{secrets.token_hex(3)}"
    schema = backend.location.rsplit("%3D", 1)[1]
    with backend.psycopg.connect(backend.location, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}; "
                      f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
        if read_only:
            admin.execute(f'GRANT TEMPORARY ON DATABASE "{database}" TO {role}')
            admin.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
    return role


def _drop_role(backend: PostgresBackend, role: str) -> None:
    with backend.psycopg.connect(backend.location, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def _sqlite_held_to(path: Path, pages: int) -> Store:
    """The store read-only, its temporary database held to `pages` pages: 1 refuses the
    `CREATE TEMPORARY TABLE`, 3 a write into the table once it has grown."""
    store = SQLiteStore(path, create=False)
    store._connection.execute(f"PRAGMA temp.max_page_count = {pages}")
    return store


@pytest.fixture(params=[
    "sqlite refuses the table",
    "sqlite refuses it once grown",
    pytest.param("postgres role without TEMP", marks=pytest.mark.postgres),
    pytest.param("postgres read-only", marks=pytest.mark.postgres),
])
def refused(request: Any, tmp_path: Path) -> Iterator[Refused]:
    """A filled store of `GROUPS` groups, and how to open it refused its temporary
    table."""
    how = request.param
    if how.startswith("sqlite"):
        backend: Any = SQLiteBackend(tmp_path)
        with backend.open() as store:
            fill(store)
        pages = 1 if how == "sqlite refuses the table" else 3
        yield Refused(backend, lambda: _sqlite_held_to(backend.path, pages),
                      "no temporary table can be made: its temporary folder is full")
        return
    database = request.getfixturevalue("no_public_temp")
    backend = PostgresBackend(database, f"p{next(_schema_numbers)}")
    with backend.open() as store:
        fill(store)
    read_only = how == "postgres read-only"
    role = _reader_role(backend, database, read_only=read_only)
    url = backend.location.replace("://postgres@", f"://{role}@")
    try:
        yield Refused(backend, lambda: store_module.open_store(url, create=False),
                      "this read-only connection may not create a temporary table"
                      if read_only else "this role may not create a temporary table")
    finally:
        _drop_role(backend, role)


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_GROUPS_VERIFIED_IN_MEMORY", SPILL_BOUND)
    monkeypatch.setattr(store_module, "_GROUPS_VERIFIED_PER_PASS", PASS_BOUND)
    monkeypatch.setattr(store_module, "_GROUP_ROWS_PER_READ", 7)  # several stored pages


def passes_said(err: str, why: str) -> int:
    """The number of passes `verify` said it takes, after checking it said it once, with
    the reason."""
    lines = [line for line in err.splitlines() if PASSES.search(line)]
    assert len(lines) == 1, err
    assert why in lines[0], lines[0]
    return int(PASSES.search(lines[0]).group(1))  # type: ignore[union-attr]


def test_a_sound_store_passes_in_several_passes(refused: Refused, small_bounds: None,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    with refused.open() as store:
        report = store.verify(batch=4)
    assert report.ok, report.line()
    assert report.checked == 2 * GROUPS + 1
    assert passes_said(capfd.readouterr().err, refused.why) >= PARTS


@pytest.mark.parametrize("damage", ["a row deleted", "a row added", "a total changed"])
def test_damage_in_a_later_pass_is_named_as_the_temporary_table_names_it(
        refused: Refused, small_bounds: None, damage: str,
        capfd: pytest.CaptureFixture[str]) -> None:
    with refused.backend.open(create=False) as owner:
        task = later_pass_task(owner)
        ghost = later_pass_ghost(owner, task)
    refused.backend.execute({
        "a row deleted": f"DELETE FROM record_group_totals WHERE task = '{task}'",
        "a row added": f"INSERT INTO record_group_totals SELECT suite, scope, arm, '{ghost}', "
                       f"{', '.join(GROUP_TOTALS_COLUMNS[4:])} FROM record_group_totals "
                       f"WHERE task = '{task}'",
        "a total changed": f"UPDATE record_group_totals SET output = output + 1 "
                           f"WHERE task = '{task}'",
    }[damage])
    with refused.open() as store:
        in_passes = store.verify(batch=4)
    passes_said(capfd.readouterr().err, refused.why)
    with refused.backend.open(create=False) as owner:  # the temporary table is made
        in_a_table = owner.verify(batch=4)
    assert "verifying the group totals in" not in capfd.readouterr().err
    assert not in_passes.ok and not in_a_table.ok
    named = ghost if damage == "a row added" else task
    assert f"demo/s/a/{named} (" in in_passes.line(), in_passes.line()
    wording = {"a row deleted": "is missing", "a row added": "totals records the store does "
               "not hold", "a total changed": "has a wrong output"}[damage]
    assert wording in in_passes.line()
    assert in_passes.line() == in_a_table.line()


def test_a_table_that_claims_few_groups_is_folded_in_more_passes_within_the_bound(
        refused: Refused, small_bounds: None, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """The number of parts comes from the stored table's count of rows; when it claims
    one part's worth, each pass that finds more groups halves its part and leaves the
    other half to a pass of its own: the store still passes, and no pass ever holds
    more than the bound."""
    most: list[int] = []
    compare = store_module._ExpectedTotals._part_difference

    def watched(self: Any) -> str | None:
        most.append(len(self.in_memory))
        return compare(self)

    monkeypatch.setattr(store_module._ExpectedTotals, "_stored_groups", lambda self: 1)
    monkeypatch.setattr(store_module._ExpectedTotals, "_part_difference", watched)
    with refused.open() as store:
        report = store.verify(batch=4)
    assert report.ok, report.line()
    err = capfd.readouterr().err
    planned = passes_said(err, refused.why)  # as planned then: the plan grew since
    grown = [int(found.group(1)) for found in GROWN.finditer(err)]
    # each time the plan grew it said so, counting up, and its last count is the
    # number of passes taken
    assert grown and grown[0] > planned and grown == sorted(set(grown)), err
    assert grown[-1] == len(most), (grown, len(most))
    assert len(most) >= GROUPS // PASS_BOUND + 1 and max(most) <= PASS_BOUND
    assert sum(most) == GROUPS  # every group compared, in exactly one part


def test_a_table_edited_to_look_small_is_found_out(refused: Refused, small_bounds: None) -> None:
    """Rows deleted until the table claims one part's worth: the passes adapt and a
    deleted group is named missing."""
    with refused.backend.open(create=False) as owner:
        tasks = sorted(row[0] for row in owner._query("SELECT task FROM record_group_totals"))
    kept = tasks[:3]
    refused.backend.execute("DELETE FROM record_group_totals WHERE task NOT IN "
                            f"({', '.join(repr(task) for task in kept)})")
    with refused.open() as store:
        report = store.verify(batch=4)
    assert not report.ok
    found = re.search(r"group demo/s/a/(\w+) \(\w+, .*\) is missing", report.line())
    assert found and found.group(1) not in kept, report.line()


def test_a_table_with_many_extra_rows_is_found_out_within_the_bound(
        refused: Refused, small_bounds: None) -> None:
    """More stored rows than a pass may hold, most of them for groups no record makes:
    the part is halved until its stored rows fit, and an extra group is named."""
    columns = ", ".join(GROUP_TOTALS_COLUMNS[4:])
    with refused.backend.open(create=False) as owner:
        task = later_pass_task(owner)
    for number in range(3 * PASS_BOUND):
        refused.backend.execute(
            f"INSERT INTO record_group_totals SELECT suite, scope, arm, 'extra{number:03d}', "
            f"{columns} FROM record_group_totals WHERE task = '{task}'")
    with refused.open() as store:
        report = store.verify(batch=4)
    assert not report.ok
    assert re.search(r"group demo/s/a/extra\d+ \(.*\) totals records the store does not hold",
                     report.line()), report.line()


# ------------------------------------------------------- passes agree with the fold in memory

@st.composite
def records_and_damage(draw: Any) -> tuple[list[Record], str, int]:
    count = draw(st.integers(1, 40))
    groups = draw(st.integers(1, 30))
    records = []
    for index in range(count):
        group = draw(st.integers(0, groups - 1))
        records.append(grouped_record(group, trial=index + 1,
                                      turns=draw(st.sampled_from([0.1, 1e16, -1e16, 2.5]))))
    damage = draw(st.sampled_from(["none", "a row deleted", "a row added", "a total changed"]))
    return records, damage, draw(st.integers(0, 10_000))


@given(made=records_and_damage(), spill=st.integers(0, 6), per_pass=st.integers(1, 9),
       pages=st.sampled_from([1, 3]), rows_per_read=st.integers(1, 9),
       batch=st.integers(1, 12))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_passes_reach_the_verdict_of_the_fold_in_memory(
        made: tuple[list[Record], str, int], spill: int, per_pass: int, pages: int,
        rows_per_read: int, batch: int) -> None:
    """Random records, one random damage or none, random small bounds: `verify` in
    passes (its temporary table refused) says what `verify` holding every group in
    memory says, word for word."""
    records, damage, choice = made
    kept = (store_module._GROUPS_VERIFIED_IN_MEMORY, store_module._GROUPS_VERIFIED_PER_PASS,
            store_module._GROUP_ROWS_PER_READ)
    lines = []
    with SQLiteStore(":memory:") as store:
        store.begin_run(stamp_run(suite="demo", bench_version="1", config={},
                                  run_id="run-1"))
        store.append(records)
        tasks = sorted(row[0] for row in store._query("SELECT task FROM record_group_totals"))
        task = tasks[choice % len(tasks)]
        statement = {
            "none": None,
            "a row deleted": f"DELETE FROM record_group_totals WHERE task = '{task}'",
            "a row added": "INSERT INTO record_group_totals SELECT suite, scope, arm, 'ghost', "
                           f"{', '.join(GROUP_TOTALS_COLUMNS[4:])} FROM record_group_totals "
                           f"WHERE task = '{task}'",
            "a total changed": "UPDATE record_group_totals SET duration_s = duration_s + 1e-9 "
                               f"WHERE task = '{task}'",
        }[damage]
        if statement:
            store._connection.execute(statement)
        lines.append(store.verify(batch=batch).line())  # every group in memory
        store._connection.execute(f"PRAGMA temp.max_page_count = {pages}")
        try:
            store_module._GROUPS_VERIFIED_IN_MEMORY = spill
            store_module._GROUPS_VERIFIED_PER_PASS = per_pass
            store_module._GROUP_ROWS_PER_READ = rows_per_read
            report = store.verify(batch=batch)
        finally:
            (store_module._GROUPS_VERIFIED_IN_MEMORY, store_module._GROUPS_VERIFIED_PER_PASS,
             store_module._GROUP_ROWS_PER_READ) = kept
        lines.append(report.line())
    assert report.ok == (damage == "none"), lines
    assert lines[0] == lines[1]


# ------------------------------------------------------- SQLite with no temporary folder

_NO_TEMPORARY_FOLDER = """
import sys
import benchwarden.core.store as store_module
store_module._GROUPS_VERIFIED_IN_MEMORY = 5
store_module._GROUPS_VERIFIED_PER_PASS = 20
with store_module.SQLiteStore(sys.argv[1], create=False) as store:
    # a temporary database of one cached page: it needs its file at once
    store._connection.execute("PRAGMA temp.cache_size = 1")
    report = store.verify(batch=4)
print(report.line())
"""


def test_sqlite_with_no_writable_temporary_folder_verifies_in_passes(tmp_path: Path) -> None:
    """Every folder SQLite may put a temporary file in made read-only (a mount namespace:
    SQLITE_TMPDIR and TMPDIR missing, /var/tmp, /tmp and the current folder read-only
    mounts): the write into the temporary table fails (SQLITE_IOERR_GETTEMPPATH, which
    `verify` used to report as a disk error and stop) and `verify` passes in passes."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None or not Path("/dev/shm").is_dir():
        pytest.skip("needs root, unshare(1) for a mount namespace and /dev/shm")
    hidden = (Path("/tmp"), Path("/var/tmp"))
    if any(Path(sys.prefix).resolve().is_relative_to(folder) for folder in hidden):
        pytest.skip("the interpreter lives under a folder this test hides")
    backend = SQLiteBackend(tmp_path)
    with backend.open() as store:
        fill(store)
    token = secrets.token_hex(4)
    shared = Path("/dev/shm") / f"bw-verify-{token}"
    # the checkout too (a CI clone may live under /tmp, which the test hides)
    checkout = Path("/dev/shm") / f"bw-verify-checkout-{token}"
    shared.mkdir()
    checkout.mkdir()
    script = (f"mount --bind {tmp_path} {shared} && "
              f"mount --bind {Path(store_module.__file__).parents[2]} {checkout} && "
              "mount -t tmpfs -o ro tmpfs /var/tmp && "
              "mount -t tmpfs -o ro tmpfs /tmp && cd /tmp && exec \"$0\" -c \"$1\" \"$2\"")
    environment = {**os.environ, "SQLITE_TMPDIR": "/nonexistent/bw", "TMPDIR": "/nonexistent/bw",
                   "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run([unshare, "-m", "sh", "-c", script, sys.executable,
                               _NO_TEMPORARY_FOLDER, str(shared / backend.path.name)],
                              capture_output=True, text=True, env=environment, timeout=120)
    finally:
        shared.rmdir()
        checkout.rmdir()
    if "mount:" in done.stderr and done.returncode != 0:
        pytest.skip(f"no mount namespace here ({done.stderr.strip()})")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("store chain intact"), done.stdout
    assert "no temporary table can be made: SQLite finds no writable temporary folder" \
        in done.stderr and PASSES.search(done.stderr), done.stderr


@pytest.mark.parametrize(("code", "says"), [
    (6410, "no writable folder for its temporary files"),  # SQLITE_IOERR_GETTEMPPATH
    (10, "input/output error"),                              # any other I/O error
    (4874, "input/output error"),                            # SQLITE_IOERR_SHORT_READ
])
def test_sqlite_with_no_temporary_folder_says_so_in_one_line(code, says):
    error = store_module.sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = code
    line = str(store_module.sqlite_failure("x.sqlite", error, "verifying it"))
    assert says in line and "\n" not in line
    assert ("SQLITE_TMPDIR" in line) == (code == 6410)

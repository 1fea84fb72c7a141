"""The append-only, tamper-evident store every suite writes to.

One table, `entries`, holds run starts, records and run ends in one hash chain:
each entry's hash is SHA-256 over the previous entry's hash, the entry's address
and its body's exact stored bytes. `verify()` recomputes the chain and names the
first entry that does not match.

Invariants:
- Append-only, enforced by the database itself: triggers refuse UPDATE and DELETE.
- A record address (suite, scope, arm, task, trial) is unique: a partial unique index
  refuses a second one, and the refusal names the address.
- Every append is one transaction; a batch either lands whole or not at all.
- No credential is ever stored: runs are checked for secret-looking keys first, and
  every entry written passes the process's scrubber (`core.secrets`) on the way in.

Backends share this module's logic and differ only in connection and SQL dialect
(`SQLiteStore` here; `PostgresStore` in `store_postgres`). `open_store` picks one
from a path or URL, so suites never know which they write to. URL backends are named in
`URL_BACKENDS` and imported by name when such a URL is opened: the import graph runs one
way (store_postgres -> store), and psycopg, an optional dependency, is imported only by
those who open a PostgreSQL store.
"""

from __future__ import annotations

import importlib
import sqlite3
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import msgspec

from benchwarden.core.chain import GENESIS_HASH, link_hash
from benchwarden.core.records import Record, Run, RunEnd, canonical_json
from benchwarden.core.secrets import credential_paths, scrub_entry

SCHEMA_VERSION = 1

_record_decoder = msgspec.json.Decoder(Record)
_run_decoder = msgspec.json.Decoder(Run)
_run_end_decoder = msgspec.json.Decoder(RunEnd)



class StoreError(Exception):
    """A store problem a person can act on; the message is one line."""


class DuplicateRecord(StoreError):
    pass


class CorruptStore(StoreError):
    pass


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    first_broken: str | None = None  # one line naming the entry and what is wrong

    def line(self) -> str:
        if self.ok:
            return f"store chain intact: {self.checked} entries verified"
        return f"store chain broken after {self.checked} good entries: {self.first_broken}"


@dataclass(frozen=True)
class RunInfo:
    run: Run
    end: RunEnd | None
    record_count: int


def find_secrets(value: Any, path: str = "") -> list[str]:
    """Paths inside `value` whose key or value looks like a credential, by the one rule
    in `core.secrets` (as stored: the NAME of an environment variable, `*_env`, is not
    one, and a credential-like name must hold a string)."""
    return credential_paths(value, path, for_storage=True)


def _as_bytes(body: Any) -> bytes:
    """Bodies are stored as bytes; a hand-edited row may come back as text."""
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


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


def _record_entry(record: Record) -> _Entry:
    return _Entry("record", record.suite, record.scope, record.arm, record.task,
                  record.trial, record.run_id, canonical_json(record))


class Store(ABC):
    """Shared logic; subclasses supply a connection and their SQL dialect."""

    placeholder = "?"
    location: str

    # -- dialect hooks -------------------------------------------------------
    @abstractmethod
    def _transaction(self) -> Any:
        """Context manager yielding a cursor inside one write transaction that holds
        the append lock (so two writers cannot fork the chain)."""

    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        ...

    @abstractmethod
    def _is_unique_violation(self, error: Exception) -> bool:
        ...

    @abstractmethod
    def close(self) -> None:
        ...

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------
    def _append(self, entries: Sequence[_Entry]) -> None:
        if not entries:
            return
        p = self.placeholder
        insert = ("INSERT INTO entries (kind, suite, scope, arm, task, trial, run_id, "
                  f"body, prev_hash, hash) VALUES ({', '.join([p] * 10)})")
        try:
            with self._transaction() as cursor:
                cursor.execute("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1")
                row = cursor.fetchone()
                previous = row[0] if row else GENESIS_HASH
                rows = []
                for entry in entries:
                    current = _entry_hash(previous, entry.kind, entry.address, entry.body)
                    rows.append((entry.kind, *entry.address, entry.body, previous, current))
                    previous = current
                cursor.executemany(insert, rows)
        except Exception as error:  # translate the backend's refusal into ours
            if self._is_unique_violation(error):
                raise DuplicateRecord(self._explain_duplicate(entries)) from None
            raise

    def _explain_duplicate(self, entries: Sequence[_Entry]) -> str:
        seen: set[tuple[Any, ...]] = set()
        for entry in entries:
            if entry.kind == "record":
                key = (entry.suite, entry.scope, entry.arm, entry.task, entry.trial)
                in_batch = key in seen
                seen.add(key)
                if in_batch or self._query(
                        "SELECT 1 FROM entries WHERE kind = 'record' AND suite = {p} AND "
                        "scope = {p} AND arm = {p} AND task = {p} AND trial = {p}".format(
                            p=self.placeholder), key):
                    return f"refused: the store already holds {entry.describe()}"
            elif self._query(
                    "SELECT 1 FROM entries WHERE kind = {p} AND run_id = {p}".format(
                        p=self.placeholder), (entry.kind, entry.run_id)):
                return f"refused: the store already holds the {entry.describe()}"
        return "refused: an entry with the same address is already stored"

    def begin_run(self, run: Run) -> None:
        run = scrub_entry(run)  # the credentials this process was given, replaced
        secrets = find_secrets({"config": run.config, "target": run.target})
        if secrets:
            raise StoreError(
                f"refusing to store run {run.run_id}: {', '.join(secrets)} looks like a "
                "credential (pass keys through an environment variable instead)")
        self._append([_Entry("run", run.suite, "", "", "", 0, run.run_id, canonical_json(run))])

    def finish_run(self, end: RunEnd) -> None:
        end = scrub_entry(end)
        suite = self.run_info(end.run_id).run.suite
        self._append([_Entry("run_end", suite, "", "", "", 0, end.run_id, canonical_json(end))])

    def append(self, records: Iterable[Record]) -> None:
        """Append records in one transaction; refuses the whole batch on a duplicate."""
        self._append([_record_entry(scrub_entry(record)) for record in records])

    # -- reading ---------------------------------------------------------------
    def records(self, *, run_id: str | None = None, suite: str | None = None,
                scope: str | None = None, arm: str | None = None,
                task: str | None = None) -> list[Record]:
        clauses, params = ["kind = 'record'"], []
        for column, value in (("run_id", run_id), ("suite", suite), ("scope", scope),
                              ("arm", arm), ("task", task)):
            if value is not None:
                clauses.append(f"{column} = {self.placeholder}")
                params.append(value)
        rows = self._query(
            f"SELECT body FROM entries WHERE {' AND '.join(clauses)} ORDER BY seq", params)
        return [_record_decoder.decode(_as_bytes(row[0])) for row in rows]

    def highest_trial(self, suite: str, scope: str, arm: str, task: str) -> int:
        """The highest trial number ever used in a cell (0 when empty)."""
        p = self.placeholder
        rows = self._query(
            f"SELECT MAX(trial) FROM entries WHERE kind = 'record' AND suite = {p} AND "
            f"scope = {p} AND arm = {p} AND task = {p}", (suite, scope, arm, task))
        return int(rows[0][0] or 0) if rows else 0

    def runs(self, suite: str | None = None) -> list[RunInfo]:
        p = self.placeholder
        where = f" AND suite = {p}" if suite else ""
        params = (suite,) if suite else ()
        starts = self._query(f"SELECT body FROM entries WHERE kind = 'run'{where} ORDER BY seq",
                             params)
        ends = {
            end.run_id: end for end in (
                _run_end_decoder.decode(_as_bytes(row[0])) for row in self._query(
                    f"SELECT body FROM entries WHERE kind = 'run_end'{where}", params))
        }
        counts = dict(self._query(
            f"SELECT run_id, COUNT(*) FROM entries WHERE kind = 'record'{where} GROUP BY run_id",
            params))
        infos = []
        for row in starts:
            run = _run_decoder.decode(_as_bytes(row[0]))
            infos.append(RunInfo(run, ends.get(run.run_id), int(counts.get(run.run_id, 0))))
        return infos

    def run_info(self, run_id: str) -> RunInfo:
        p = self.placeholder
        rows = self._query(
            f"SELECT kind, body FROM entries WHERE run_id = {p} AND kind IN ('run', 'run_end') "
            "ORDER BY seq", (run_id,))
        run = end = None
        for kind, body in rows:
            if kind == "run":
                run = _run_decoder.decode(_as_bytes(body))
            else:
                end = _run_end_decoder.decode(_as_bytes(body))
        if run is None:
            matches = self._query(
                f"SELECT run_id FROM entries WHERE kind = 'run' AND run_id LIKE {p}",
                (run_id + "%",))
            if len(matches) == 1:
                return self.run_info(matches[0][0])
            hint = "ambiguous prefix" if matches else "no such run"
            raise StoreError(f"run {run_id!r} not found in {self.location} ({hint}); "
                             "`benchwarden runs --store ...` lists the runs")
        count = self._query(
            f"SELECT COUNT(*) FROM entries WHERE kind = 'record' AND run_id = {p}", (run_id,))
        return RunInfo(run, end, int(count[0][0]))

    def latest_run(self, suite: str | None = None) -> RunInfo:
        infos = self.runs(suite)
        if not infos:
            raise StoreError(f"no {suite + ' ' if suite else ''}runs in {self.location}")
        return infos[-1]

    def verify(self) -> ChainReport:
        """Recompute the hash chain from the first entry; name the first mismatch."""
        previous = GENESIS_HASH
        checked = 0
        rows = self._query(
            "SELECT seq, kind, suite, scope, arm, task, trial, run_id, body, prev_hash, hash "
            "FROM entries ORDER BY seq")
        for seq, kind, suite, scope, arm, task, trial, run_id, body, prev_hash, stored in rows:
            entry = _Entry(kind, suite, scope, arm, task, int(trial), run_id, _as_bytes(body))
            problem = None
            if prev_hash != previous:
                problem = "its link to the previous entry is broken (an entry was removed or reordered)"
            elif _entry_hash(previous, kind, entry.address, entry.body) != stored:
                problem = "its contents do not match its hash (edited after it was written)"
            elif kind == "record":
                problem = self._record_columns_problem(entry)
            if problem:
                return ChainReport(False, checked, f"entry {seq}, {entry.describe()}: {problem}")
            previous = stored
            checked += 1
        return ChainReport(True, checked)

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


_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('run', 'record', 'run_end')),
    suite TEXT NOT NULL, scope TEXT NOT NULL, arm TEXT NOT NULL, task TEXT NOT NULL,
    trial INTEGER NOT NULL, run_id TEXT NOT NULL,
    body BLOB NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_record_address
    ON entries (suite, scope, arm, task, trial) WHERE kind = 'record';
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_start_per_run ON entries (run_id) WHERE kind = 'run';
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_end_per_run ON entries (run_id) WHERE kind = 'run_end';
CREATE INDEX IF NOT EXISTS entries_by_run ON entries (run_id, kind);
CREATE TRIGGER IF NOT EXISTS entries_refuse_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS entries_refuse_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'benchwarden store is append-only: DELETE refused'); END;
"""


class SQLiteStore(Store):
    """The embedded default: one SQLite file in WAL mode."""

    placeholder = "?"

    def __init__(self, path: str | Path) -> None:
        self.location = str(path)
        self._lock = threading.RLock()
        target = Path(path)
        if target.is_dir():
            raise StoreError(f"store path {target} is a directory; give a file path")
        if str(path) != ":memory:":
            target.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connection = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=30)
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.executescript(_SQLITE_SCHEMA)
            version = self._connection.execute(
                "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if version is None:
                self._connection.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(version[0]) != SCHEMA_VERSION:
                raise CorruptStore(
                    f"store {path} has schema version {version[0]}, this benchwarden reads "
                    f"{SCHEMA_VERSION}; use the matching benchwarden version")
        except sqlite3.DatabaseError as error:
            raise CorruptStore(
                f"store {path} cannot be opened as a benchwarden store: {error}") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._connection.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            else:
                cursor.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._connection.execute(sql, tuple(params)).fetchall()
            except sqlite3.DatabaseError as error:
                raise CorruptStore(f"store {self.location} could not be read: {error}") from None

    def _is_unique_violation(self, error: Exception) -> bool:
        return isinstance(error, sqlite3.IntegrityError) and "UNIQUE" in str(error)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


# URL scheme -> "module:class" of the backend that opens it (constructor takes the URL).
URL_BACKENDS: dict[str, str] = {
    "postgresql://": "benchwarden.core.store_postgres:PostgresStore",
    "postgres://": "benchwarden.core.store_postgres:PostgresStore",
}


def open_store(location: str | Path) -> Store:
    """A store from a file path (SQLite) or a URL of a backend in `URL_BACKENDS`."""
    text = str(location)
    for scheme, target in URL_BACKENDS.items():
        if text.startswith(scheme):
            module_name, _, class_name = target.partition(":")
            backend: type[Store] = getattr(importlib.import_module(module_name), class_name)
            return backend(text)  # type: ignore[call-arg]
    return SQLiteStore(Path(text).expanduser())

"""The PostgreSQL backend of the store, for teams who share one store.

The logic (hash chain, append, queries, verify) lives in `Store`; this module only
connects and speaks PostgreSQL. The layout matches the SQLite store: one `entries`
table in one hash chain, the same partial unique indexes, a `meta` table holding the
schema version.

Invariants, enforced by the server rather than by convention:
- Append-only: a statement-level trigger raises on UPDATE, DELETE and TRUNCATE of
  `entries`, whoever sends them (only a superuser who disables the trigger can edit,
  and `verify()` then names the edited entry).
- One chain: every append takes a transaction-scoped advisory lock keyed to the
  `entries` table before it reads the chain's head, so two writers (threads,
  processes or machines) are serialised and can never fork the chain. An advisory
  lock needs no table privilege, so an append-only role (INSERT + SELECT) can write.
- Appends run at READ COMMITTED whatever the server's default is: each statement
  takes a fresh snapshot, so the head read after the lock is the committed head.
- Nothing in an error message carries the password from the URL.
- Opened with `create=False` (read-only commands), nothing is created: a database
  without the tables is "no store", not a new one.
- Waiting for another writer's lock is bounded (BENCHWARDEN_STORE_TIMEOUT, default
  30 s); past it the append fails with one line instead of hanging.
- The head witness of a PostgreSQL store is kept on the machine that appends
  (`~/.benchwarden/witnesses/`), keyed by the password-free URL: a lower bound of what
  this machine saw, which `verify` on this machine checks.

Which schema holds the tables is PostgreSQL's own business: the first schema on the
connection's `search_path` (set it in the URL, `?options=-csearch_path%3Dteam_a`).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import errors as pg_errors

from benchwarden.core import paths
from benchwarden.core.group_totals import (
    AGGREGATED_INTEGERS,
    AGGREGATED_TEXTS,
    FLOAT_COLUMNS,
    DecodedChunk,
    float_columns_of_json,
    whole_scope_chunk,
)
from benchwarden.core.store import (
    ENTRY_COLUMNS,
    READABLE_SCHEMA_VERSIONS,
    SCHEMA_VERSION,
    CorruptStore,
    NoStore,
    Store,
    StoreError,
    StoreUsageError,
    group_totals_table,
    lock_timeout,
    rows_within_page,
    run_counts_table,
    run_tables,
)

# Rows libpq receives at a time when a page of bodies is streamed (`_bounded_page`):
# chunks need libpq 17 (psycopg's binary package brings its own); one row at a time
# before it.
_STREAM_CHUNK = 64
_server_cursors = itertools.count()  # names of server-side cursors, unique in a process


def _streamed(cursor: Any, sql: str, params: tuple[Any, ...]) -> Generator[tuple[Any, ...]]:
    """`cursor.stream` of the query, in chunks where libpq can (version 17 on)."""
    if psycopg.pq.version() >= 170000:
        try:
            return cursor.stream(sql, params, size=_STREAM_CHUNK)  # type: ignore[no-any-return]
        except TypeError:  # a psycopg older than 3.2 has no `size`
            pass
    return cursor.stream(sql, params)  # type: ignore[no-any-return]


# First key of the advisory lock ("BWST"); the second is the `entries` table's oid,
# so stores in different schemas of one database do not wait for each other.
_LOCK_NAMESPACE = 0x42575354


def _refuse_changes_to(table: str) -> str:
    """The statement that makes `table` append-only (once: a store opened again keeps its
    trigger), refusing UPDATE, DELETE and TRUNCATE through `benchwarden_refuse_change`."""
    return f"""DO $body$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = '{table}_refuse_change'
                     AND tgrelid = '{table}'::regclass) THEN
        CREATE TRIGGER {table}_refuse_change
            BEFORE UPDATE OR DELETE OR TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION benchwarden_refuse_change();
    END IF;
END
$body$;
"""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('run', 'record', 'run_end')),
    suite TEXT NOT NULL, scope TEXT NOT NULL, arm TEXT NOT NULL, task TEXT NOT NULL,
    trial BIGINT NOT NULL, run_id TEXT NOT NULL,
    body BYTEA NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_record_address
    ON entries (suite, scope, arm, task, trial) WHERE kind = 'record';
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_start_per_run
    ON entries (run_id) WHERE kind = 'run';
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_end_per_run
    ON entries (run_id) WHERE kind = 'run_end';
CREATE INDEX IF NOT EXISTS entries_by_run ON entries (run_id, kind);
CREATE OR REPLACE FUNCTION benchwarden_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION 'benchwarden store is append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$body$;
""" + _refuse_changes_to("entries")

# The derived tables of schema 6 (core/store.py): the group totals (`core.group_totals`)
# and the run counts, whose rows each append changes in its transaction, and the run
# headings and configurations each run start adds to; all recomputed by `verify`.
# (Schemas 2 to 4 also kept one `record_summaries` row per record, written by
# a COPY per batch: gone, dropped by the upgrade.)
_COLUMN_TYPES = {"text": "TEXT", "integer": "BIGINT", "real": "DOUBLE PRECISION"}
_DERIVED_SCHEMA = f"""
{group_totals_table(_COLUMN_TYPES)};
{run_counts_table("TEXT", "BIGINT")};
""" + "".join(f"{table};\n" for table in run_tables("TEXT", "BIGINT", "BYTEA"))


# A scope's group totals as `core.group_totals.whole_scope_chunk` takes them, in one
# aggregating statement: each whole-number and text column as one JSON array; `newest`
# as each row's text's length and every row's text joined with nothing between, as the
# SQLite store makes them; then each float column as one JSON array (the shortest text
# that reads back as the same float, with `extra_float_digits` above 0). The aggregates
# of one statement see the rows in one order. An empty scope aggregates to NULL, read as
# an empty array or text.
_AGGREGATED = ", ".join(
    f"coalesce(json_agg({name})::text, '[]')"
    for name in (*AGGREGATED_INTEGERS, *AGGREGATED_TEXTS[:-1])) + (
    ", coalesce(json_agg(length(newest))::text, '[]'), "
    "coalesce(string_agg(newest, ''), ''), ") + ", ".join(
    f"coalesce(json_agg({name})::text, '[]')" for name in FLOAT_COLUMNS)

# libpq reads these from a URL's query as well as from its user-info part
_QUERY_SECRETS = frozenset({"password", "sslpassword"})


def redact(url: str) -> str:
    """The URL with any password replaced (in the user-info part, or a `password=` of the
    query), fit for messages and `location`. Built from the URL's text, not its parsed
    port: a port that is not a number (`host:notaport`) must still give a message, not
    a ValueError."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable PostgreSQL URL>"
    redacted = url
    user_info, at, host_port = parts.netloc.rpartition("@")
    if at and ":" in user_info:
        redacted = redacted.replace(
            f"//{parts.netloc}", f"//{user_info.partition(':')[0]}:***@{host_port}", 1)
    # the query edited in place (urlunsplit would drop the `//` of an empty host)
    head, question_mark, rest = redacted.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    query = "&".join(_redacted_pair(pair) for pair in query.split("&"))
    return head + question_mark + query + hash_mark + fragment


def _redacted_pair(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    return f"{name}=***" if equals and unquote(name).lower() in _QUERY_SECRETS else pair


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    for prefix in ("connection failed: ",):
        text = text.removeprefix(prefix)
    line = text.splitlines()[0] if text else type(error).__name__
    return " ".join(line.replace("FATAL:", "").split())


def _connection_error(location: str, error: psycopg.Error) -> StoreError:
    """One line a person can act on, for a server that will not let us in."""
    reason = _first_line(error)
    lowered = str(error).lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered \
            or "not permitted to log in" in lowered \
            or "role" in lowered and "does not exist" in lowered \
            or "no pg_hba.conf entry" in lowered:
        return StoreError(f"PostgreSQL store {location} refused the credentials: {reason}")
    if "database" in lowered and "does not exist" in lowered:
        return StoreError(f"PostgreSQL store {location}: {reason} (create it first)")
    if "permission denied" in lowered:
        return StoreError(f"PostgreSQL store {location}: {reason}")
    return StoreError(f"cannot reach PostgreSQL store {location}: {reason}")


def _query_error(location: str, error: psycopg.Error, doing: str) -> StoreError:
    """One line for a refusal after connecting: a lock waited out, a full disk, a
    read-only server or role, a damaged table."""
    reason = _first_line(error)
    where = f"PostgreSQL store {location}"
    if isinstance(error, (pg_errors.LockNotAvailable, pg_errors.QueryCanceled)):
        return StoreError(f"{where} is locked by another writer while {doing}: still locked "
                          f"after {lock_timeout():g} s ({reason}); set "
                          "BENCHWARDEN_STORE_TIMEOUT to wait longer")
    if isinstance(error, pg_errors.DiskFull):
        return StoreError(f"{where}: the server's disk is full while {doing} ({reason})")
    if isinstance(error, (pg_errors.ReadOnlySqlTransaction, pg_errors.InsufficientPrivilege)):
        return StoreError(f"{where} refused to let this role write while {doing} ({reason})")
    if isinstance(error, (pg_errors.DataCorrupted, pg_errors.IndexCorrupted)):
        return CorruptStore(f"{where} is damaged while {doing} ({reason})")
    if isinstance(error, psycopg.OperationalError):
        return StoreError(f"{where} failed while {doing}: {reason}")
    return CorruptStore(f"{where} cannot be used as a benchwarden store ({doing}): {reason}")



class PostgresStore(Store):
    """A store in a PostgreSQL database, shared by everyone who can reach it."""

    placeholder = "%s"

    def __init__(self, url: str, *, create: bool = True, read_only: bool | None = None,
                 connect_timeout: float = 10) -> None:
        self.location = redact(url)
        self.read_only = (not create) if read_only is None else read_only
        self._lock = threading.RLock()
        timeout = lock_timeout()
        try:
            self._connection = psycopg.connect(
                url, autocommit=True, connect_timeout=max(1, int(connect_timeout)),
                application_name="benchwarden")
        except psycopg.Error as error:
            raise _connection_error(self.location, error) from None
        except Exception as error:  # a malformed URL is caught by libpq's parser
            raise StoreUsageError(
                f"PostgreSQL store {self.location}: {_first_line(error)}") from None
        self._connection.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        try:
            # bounded wait for the append lock (0 would mean forever in PostgreSQL)
            self._connection.execute(
                f"SET lock_timeout = {max(1, int(timeout * 1000))}")
            # what is read is what was stored, whatever the role's, database's or URL's
            # settings: every float (below 1, the server's text of a float drops digits:
            # a duration of 11.0 read as 10.0 at -15; 3 is exact before PostgreSQL 12
            # too), every text (a LATIN1 client could neither send nor read a task
            # named in another script), and every body (with standard-conforming
            # strings off, psycopg's COPY wrote a body as the text of its hex digits)
            self._connection.execute("SET extra_float_digits = 3")
            self._connection.execute("SET client_encoding = 'UTF8'")
            self._connection.execute("SET standard_conforming_strings = on")
            self._prepare_schema(create)
        except StoreError:
            self._connection.close()
            raise
        except psycopg.Error as error:
            self._connection.close()
            raise _query_error(self.location, error, "opening it") from None

    @property
    def witness_path(self) -> Path | None:
        digest = hashlib.sha256(self.location.encode("utf-8")).hexdigest()[:16]
        return paths.home() / "witnesses" / f"postgresql-{digest}.head"

    def _write_witness(self, head: Any, *, forward_only: bool) -> None:
        target = self.witness_path
        if target is not None:
            try:  # the folder is benchwarden's own default location
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the write below reports it in one line
        super()._write_witness(head, forward_only=forward_only)

    def _prepare_schema(self, create: bool) -> None:
        with self._connection.transaction():
            # Creating the schema while another process does the same would race in
            # the catalogue; the advisory lock makes the first one win cleanly.
            self._connection.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_NAMESPACE,))
            present = self._connection.execute(
                "SELECT to_regclass('entries') IS NOT NULL, to_regclass('meta') IS NOT NULL"
            ).fetchone() or (False, False)
            if present == (True, True):
                version = self._connection.execute(
                    "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
                if version is None:
                    raise CorruptStore(
                        f"PostgreSQL store {self.location} has `entries` and `meta` tables "
                        "that are not a benchwarden store's (no schema version); refused and "
                        "left untouched: point the URL at another database or schema")
                self._check_version(version)
                self._prepare_derived(str(version[0]))
                return  # no DDL: a role without CREATE can still use the store
            if present != (False, False):
                which = "`entries`" if present[0] else "`meta`"
                raise CorruptStore(
                    f"PostgreSQL store {self.location} has a {which} table that is not a "
                    "benchwarden store's; refused and left untouched: point the URL at "
                    "another database or schema")
            if not create:
                raise NoStore(f"no benchwarden store in PostgreSQL {self.location} (no "
                              "`entries` and `meta` tables); a suite run with this --store "
                              "creates one")
            self._connection.execute(_SCHEMA)
            self._connection.execute(_DERIVED_SCHEMA)
            self._connection.execute(
                "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (name) DO NOTHING",
                (str(SCHEMA_VERSION),))
            self.has_derived_tables = True
            self._check_version(self._connection.execute(
                "SELECT value FROM meta WHERE name = 'schema_version'").fetchone())

    def _prepare_derived(self, version: str) -> None:
        """Inside `_prepare_schema`'s transaction: a version 6 store has its derived
        tables; a writer upgrades an older store, or makes again a derived table someone
        removed (`Store._upgrade_derived`, holding the append lock, so no append runs
        meanwhile). A reader reads the store as it is (`Store._read_as_it_is`). A role
        that may not create tables appends to a version 1 store as it is (the store stays
        at version 1, so no derived table is ever incomplete), but is refused a store of
        another older version, whose tables it could not keep complete."""
        stored = version.strip()
        missing = self._tables_missing(stored)
        if stored == str(SCHEMA_VERSION) and not missing:
            self.has_derived_tables = True
            return
        if self.read_only:
            self._read_as_it_is(stored)
            return
        try:
            with self._connection.transaction():  # a savepoint: a refusal undoes only this
                with self._connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_advisory_xact_lock(%s, 'entries'::regclass::oid::int)",
                        (_LOCK_NAMESPACE,))
                    if stored == str(SCHEMA_VERSION):
                        self._say_rebuilding(missing)
                    self._upgrade_derived(cursor, (_DERIVED_SCHEMA,), stored)
        except pg_errors.InsufficientPrivilege:
            if stored == str(SCHEMA_VERSION):
                raise StoreError(
                    f"PostgreSQL store {self.location}: its derived "
                    f"table{'s' if len(missing) > 1 else ''} {' and '.join(missing)} "
                    f"{'are' if len(missing) > 1 else 'is'} missing and this role may not "
                    "make them again: open it for writing once as the tables' owner "
                    "(or run `benchwarden store repair` as the owner)") from None
            if stored != "1":
                raise StoreError(
                    f"PostgreSQL store {self.location} has schema version {stored}; this "
                    f"benchwarden writes version {SCHEMA_VERSION} and this role may not "
                    "upgrade it: open it for writing once as the tables' owner") from None
            return  # an append-only role: reports read the bodies instead
        self.has_derived_tables = True

    def _derived_schema(self) -> Iterable[str]:
        return (_DERIVED_SCHEMA,)

    def _column_types(self) -> Mapping[str, str]:
        return _COLUMN_TYPES

    def _table_exists(self, name: str) -> bool:
        rows = self._query("SELECT to_regclass(%s) IS NOT NULL", (name,))
        return bool(rows and rows[0][0])

    def _check_version(self, row: tuple[Any, ...] | None) -> None:
        if row is not None and str(row[0]) not in READABLE_SCHEMA_VERSIONS:
            raise CorruptStore(
                f"PostgreSQL store {self.location} has schema version {row[0]}, this "
                f"benchwarden reads {' and '.join(READABLE_SCHEMA_VERSIONS)}; use the "
                "matching benchwarden version")

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        with self._lock:
            try:
                with self._connection.transaction():
                    with self._connection.cursor() as cursor:
                        cursor.execute(
                            "SELECT pg_advisory_xact_lock(%s, 'entries'::regclass::oid::int)",
                            (_LOCK_NAMESPACE,))
                        yield cursor
            except pg_errors.UniqueViolation:
                raise  # `Store._append` names the duplicate address
            except psycopg.Error as error:
                raise _query_error(self.location, error, "appending") from None

    def _insert_rows(self, cursor: Any, rows: list[tuple[Any, ...]]) -> Sequence[int] | None:
        """One COPY per batch: the rows stream to the server in one round trip instead of
        one INSERT each; constraints and unique indexes are checked exactly as for INSERT
        (a duplicate fails the COPY, and the transaction, whole). COPY reports no
        sequence numbers: the caller reads them back."""
        with cursor.copy(f"COPY entries ({', '.join(ENTRY_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return None

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except psycopg.Error as error:
                raise _query_error(self.location, error, "reading it") from None

    def _whole_scope_chunk(self, suite: str, scope: str) -> DecodedChunk | None:
        """`core.group_totals.whole_scope_chunk` of the scope's group totals, every column
        aggregated by the server in one statement (`_AGGREGATED`; one statement is one
        snapshot), floats included: the connection's `extra_float_digits` makes each
        float's text that float. None where a column's array is beyond what the server
        can build (a text over its 1 GB), where a float is not finite or is a negative
        zero, or where `whole_scope_chunk` gives None: the rows are then read one by
        one."""
        statement = (f"SELECT {_AGGREGATED} FROM record_group_totals "
                     "WHERE suite = %s AND scope = %s")
        with self._reading():
            try:
                row = self._connection.execute(statement, (suite, scope)).fetchone()
            except (pg_errors.ProgramLimitExceeded, pg_errors.OutOfMemory,
                    pg_errors.InternalError_):
                # a JSON array past 1 GB (`json_agg`'s buffer says so as a limit, the
                # joined `newest` as an allocation refused): the rows' way reads it
                return None
        if row is None:
            return None
        split = len(row) - len(FLOAT_COLUMNS)
        aggregated = list(row[:split])
        floats = float_columns_of_json(row[split:])
        del row
        if floats is None:
            return None
        return whole_scope_chunk(suite, scope, aggregated, floats)

    def _bounded_page(self, sql: str, params: Sequence[Any],
                      body: int) -> tuple[list[tuple[Any, ...]], bool]:
        """As `Store._bounded_page`, the result streamed (`Cursor.stream`, libpq's chunked
        rows, `_STREAM_CHUNK` at a time) instead of received whole: libpq holds a query's
        whole result in memory otherwise, so a page of 5,000 rows of megabyte bodies was
        gigabytes there before the first row was read. A page cut short cancels the rest
        of its query (psycopg does, closing the stream; the connection is in autocommit,
        so nothing else is undone)."""
        with self._reading():
            cursor = self._connection.cursor()
            stream = _streamed(cursor, sql, tuple(params))
            try:
                return rows_within_page(stream, body)
            finally:
                stream.close()
                cursor.close()

    def _pages_in_transaction(self, cursor: Any, select: str, *, key: str, key_at: int,
                              batch: int) -> Iterator[list[tuple[Any, ...]]]:
        """As `Store._pages_in_transaction`, through a server-side cursor: inside the
        upgrade's transaction a streamed query cannot be cut short (cancelling it would
        abort the transaction), and a plain one hands libpq its whole result (a page of
        20,000 megabyte bodies was that many megabytes there). The cursor's rows come
        `_STREAM_CHUNK` at a time and it is closed with the pages (`key_at` is not needed:
        one query, no keyset)."""
        del key_at
        with self._connection.cursor(name=f"benchwarden_pages_{next(_server_cursors)}") \
                as server:
            server.itersize = _STREAM_CHUNK
            server.execute(f"{select} ORDER BY {key}")
            while True:
                page, _ = rows_within_page(itertools.islice(server, batch), -1)
                if not page:
                    return
                yield page

    def _temporary_table_refusal(self, error: Exception) -> str | None:
        """A role without the TEMP privilege on the database, or a read-only transaction
        (`default_transaction_read_only`, a hot standby): the server refuses the
        `CREATE TEMPORARY TABLE`."""
        if isinstance(error, pg_errors.InsufficientPrivilege):
            return f"this role may not create a temporary table ({_first_line(error)})"
        if isinstance(error, pg_errors.ReadOnlySqlTransaction):
            return (f"this read-only connection may not create a temporary table "
                    f"({_first_line(error)})")
        return None

    def _is_unique_violation(self, error: Exception) -> bool:
        return isinstance(error, pg_errors.UniqueViolation)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

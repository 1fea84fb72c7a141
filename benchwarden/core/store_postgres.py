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

Which schema holds the tables is PostgreSQL's own business: the first schema on the
connection's `search_path` (set it in the URL, `?options=-csearch_path%3Dteam_a`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors

from benchwarden.core.store import SCHEMA_VERSION, CorruptStore, Store, StoreError

# First key of the advisory lock ("BWST"); the second is the `entries` table's oid,
# so stores in different schemas of one database do not wait for each other.
_LOCK_NAMESPACE = 0x42575354

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
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_start_per_run ON entries (run_id) WHERE kind = 'run';
CREATE UNIQUE INDEX IF NOT EXISTS entries_one_end_per_run ON entries (run_id) WHERE kind = 'run_end';
CREATE INDEX IF NOT EXISTS entries_by_run ON entries (run_id, kind);
CREATE OR REPLACE FUNCTION benchwarden_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION 'benchwarden store is append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END
$body$;
DO $body$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'entries_refuse_change'
                     AND tgrelid = 'entries'::regclass) THEN
        CREATE TRIGGER entries_refuse_change
            BEFORE UPDATE OR DELETE OR TRUNCATE ON entries
            FOR EACH STATEMENT EXECUTE FUNCTION benchwarden_refuse_change();
    END IF;
END
$body$;
"""


def redact(url: str) -> str:
    """The URL with any password replaced, fit for messages and `location`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable PostgreSQL URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


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
            or "not permitted to log in" in lowered or "role" in lowered and "does not exist" in lowered \
            or "no pg_hba.conf entry" in lowered:
        return StoreError(f"PostgreSQL store {location} refused the credentials: {reason}")
    if "database" in lowered and "does not exist" in lowered:
        return StoreError(f"PostgreSQL store {location}: {reason} (create it first)")
    if "permission denied" in lowered:
        return StoreError(f"PostgreSQL store {location}: {reason}")
    return StoreError(f"cannot reach PostgreSQL store {location}: {reason}")


class PostgresStore(Store):
    """A store in a PostgreSQL database, shared by everyone who can reach it."""

    placeholder = "%s"

    def __init__(self, url: str, *, connect_timeout: float = 10) -> None:
        self.location = redact(url)
        self._lock = threading.RLock()
        try:
            self._connection = psycopg.connect(
                url, autocommit=True, connect_timeout=max(1, int(connect_timeout)),
                application_name="benchwarden")
        except psycopg.Error as error:
            raise _connection_error(self.location, error) from None
        except Exception as error:  # a malformed URL is caught by libpq's parser
            raise StoreError(f"PostgreSQL store {self.location}: {_first_line(error)}") from None
        self._connection.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        try:
            self._prepare_schema()
        except StoreError:
            self._connection.close()
            raise
        except psycopg.Error as error:
            self._connection.close()
            raise CorruptStore(
                f"PostgreSQL store {self.location} cannot be used as a benchwarden store: "
                f"{_first_line(error)}") from None

    def _prepare_schema(self) -> None:
        with self._connection.transaction():
            # Creating the schema while another process does the same would race in
            # the catalogue; the advisory lock makes the first one win cleanly.
            self._connection.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_NAMESPACE,))
            present = self._connection.execute(
                "SELECT to_regclass('entries') IS NOT NULL, to_regclass('meta') IS NOT NULL"
            ).fetchone()
            if present == (True, True):
                version = self._connection.execute(
                    "SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
                self._check_version(version)
                if version is not None:
                    return  # no DDL: a role without CREATE can still use the store
            elif present == (True, False):
                raise CorruptStore(
                    f"PostgreSQL store {self.location} has an `entries` table that is not a "
                    "benchwarden store's (no `meta` table); point the URL at another "
                    "database or schema")
            self._connection.execute(_SCHEMA)
            self._connection.execute(
                "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (name) DO NOTHING",
                (str(SCHEMA_VERSION),))
            self._check_version(self._connection.execute(
                "SELECT value FROM meta WHERE name = 'schema_version'").fetchone())

    def _check_version(self, row: tuple[Any, ...] | None) -> None:
        if row is not None and str(row[0]) != str(SCHEMA_VERSION):
            raise CorruptStore(
                f"PostgreSQL store {self.location} has schema version {row[0]}, this "
                f"benchwarden reads {SCHEMA_VERSION}; use the matching benchwarden version")

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
                raise StoreError(
                    f"PostgreSQL store {self.location} refused the append: "
                    f"{_first_line(error)}") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._connection.execute(sql, tuple(params)).fetchall()
            except psycopg.OperationalError as error:
                raise StoreError(
                    f"PostgreSQL store {self.location} could not be read: "
                    f"{_first_line(error)}") from None
            except psycopg.Error as error:
                raise CorruptStore(
                    f"PostgreSQL store {self.location} could not be read: "
                    f"{_first_line(error)}") from None

    def _is_unique_violation(self, error: Exception) -> bool:
        return isinstance(error, pg_errors.UniqueViolation)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

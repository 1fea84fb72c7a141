"""The tracker itself: a small SQLite-backed issue tracker and the operations every
arm reaches it through (the CLI program, the REST server and the function tools all
call `Tracker` methods, so the arms differ only in interface).

Invariants:
- One SQLite file per instance; each call opens its own connection, so the REST
  server's threads and the CLI's processes never share a handle.
- Issues and pull requests share one number sequence, like most forges.
- `capture_state` keys entities by natural keys (label name, issue/PR number) and
  leaves out row ids and timestamps; free text is trimmed; order-free lists are sorted.
- This module imports only the standard library: the CLI program starts fast.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE users (login TEXT PRIMARY KEY);
CREATE TABLE labels (name TEXT PRIMARY KEY, color TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE items (
    number INTEGER PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('issue', 'pull')),
    title TEXT NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, author TEXT NOT NULL,
    head TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE item_labels (number INTEGER NOT NULL, label TEXT NOT NULL,
    PRIMARY KEY (number, label));
CREATE TABLE assignees (number INTEGER NOT NULL, login TEXT NOT NULL,
    PRIMARY KEY (number, login));
CREATE TABLE comments (id INTEGER PRIMARY KEY AUTOINCREMENT, number INTEGER NOT NULL,
    author TEXT NOT NULL, body TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY AUTOINCREMENT, number INTEGER NOT NULL,
    author TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE review_comments (review_id INTEGER NOT NULL, path TEXT NOT NULL,
    line INTEGER NOT NULL, body TEXT NOT NULL);
"""

REVIEW_KINDS = ("approve", "comment", "request_changes")
_COLOR = re.compile(r"^#?([0-9a-fA-F]{6})$")


class TrackerError(Exception):
    """A refused operation; the message is one line the agent can act on."""


def normalise_color(color: str) -> str:
    match = _COLOR.match(color.strip())
    if not match:
        raise TrackerError(f"colour {color!r} is not six hex digits like #d73a4a")
    return match.group(1).lower()


class Tracker:
    def __init__(self, path: str | Path, user: str = "agent") -> None:
        self.path = Path(path)
        self.user = user

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
        connection.row_factory = sqlite3.Row
        try:
            connection.execute("BEGIN IMMEDIATE")
            yield connection
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.close()

    @classmethod
    def create(cls, path: str | Path, users: tuple[str, ...] = ("maintainer", "agent", "alice"),
               user: str = "agent") -> Tracker:
        connection = sqlite3.connect(str(path))
        with connection:
            connection.executescript(SCHEMA)
            connection.executemany("INSERT INTO users VALUES (?)", [(u,) for u in users])
        connection.close()
        return cls(path, user)

    def as_user(self, user: str) -> Tracker:
        return Tracker(self.path, user)

    # -- helpers -------------------------------------------------------------
    @staticmethod
    def _item(db: sqlite3.Connection, number: int, kind: str | None = None) -> sqlite3.Row:
        row = db.execute("SELECT * FROM items WHERE number = ?", (int(number),)).fetchone()
        if row is None or (kind and row["kind"] != kind):
            what = {"issue": "issue", "pull": "pull request"}.get(kind or "",
                                                                  "issue or pull request")
            raise TrackerError(f"there is no {what} #{number}")
        return row

    @staticmethod
    def _touch(db: sqlite3.Connection, number: int) -> None:
        db.execute("UPDATE items SET updated_at = ? WHERE number = ?", (time.time(), number))

    def _summary(self, db: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
        number = row["number"]
        return {
            "number": number,
            "title": row["title"],
            "state": row["state"],
            "author": row["author"],
            "labels": [r[0] for r in db.execute(
                "SELECT label FROM item_labels WHERE number = ? ORDER BY label", (number,))],
            "assignees": [r[0] for r in db.execute(
                "SELECT login FROM assignees WHERE number = ? ORDER BY login", (number,))],
        }

    def _detail(self, db: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
        detail = self._summary(db, row)
        detail["body"] = row["body"]
        detail["comments"] = [{"author": r["author"], "body": r["body"]} for r in db.execute(
            "SELECT author, body FROM comments WHERE number = ? ORDER BY id", (row["number"],))]
        if row["kind"] == "pull":
            detail["head"] = row["head"]
            detail["reviews"] = [
                {"author": r["author"], "kind": r["kind"], "body": r["body"],
                 "inline_comments": [
                     {"path": c["path"], "line": c["line"], "body": c["body"]}
                     for c in db.execute("SELECT * FROM review_comments WHERE review_id = ?",
                                         (r["id"],))]}
                for r in db.execute("SELECT * FROM reviews WHERE number = ? ORDER BY id",
                                    (row["number"],))]
        return detail

    def _insert_item(self, db: sqlite3.Connection, kind: str, title: str, body: str,
                     labels: list[str], state: str = "open", head: str | None = None) -> int:
        if not title.strip():
            raise TrackerError("a title is required")
        for label in labels:
            self._require_label(db, label)
        now = time.time()
        number = (db.execute("SELECT COALESCE(MAX(number), 0) FROM items").fetchone()[0]) + 1
        db.execute("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (number, kind, title, body, state, self.user, head, now, now))
        db.executemany("INSERT OR IGNORE INTO item_labels VALUES (?, ?)",
                       [(number, label) for label in labels])
        return number

    @staticmethod
    def _require_label(db: sqlite3.Connection, label: str) -> None:
        if db.execute("SELECT 1 FROM labels WHERE name = ?", (label,)).fetchone() is None:
            names = ", ".join(r[0] for r in db.execute("SELECT name FROM labels ORDER BY name"))
            raise TrackerError(f"there is no label {label!r} (labels: {names})")

    # -- issues ----------------------------------------------------------------
    def list_issues(self, state: str = "open", label: str | None = None) -> list[dict[str, Any]]:
        return self._list("issue", state, label)

    def _list(self, kind: str, state: str, label: str | None) -> list[dict[str, Any]]:
        states = {"open": ("open",), "closed": ("closed", "merged"), "merged": ("merged",),
                  "all": ("open", "closed", "merged")}
        if state not in states:
            raise TrackerError(f"state must be one of {', '.join(states)}, not {state!r}")
        with self._db() as db:
            rows = db.execute(
                f"SELECT * FROM items WHERE kind = ? AND state IN "
                f"({', '.join('?' * len(states[state]))}) ORDER BY number",
                (kind, *states[state])).fetchall()
            summaries = [self._summary(db, row) for row in rows]
        if label is not None:
            summaries = [s for s in summaries if label in s["labels"]]
        return summaries

    def show_issue(self, number: int) -> dict[str, Any]:
        with self._db() as db:
            return self._detail(db, self._item(db, number, "issue"))

    def create_issue(self, title: str, body: str = "",
                     labels: list[str] | None = None) -> dict[str, Any]:
        with self._db() as db:
            number = self._insert_item(db, "issue", title, body, list(labels or []))
            return self._detail(db, self._item(db, number))

    def edit_issue(self, number: int, title: str | None = None,
                   body: str | None = None) -> dict[str, Any]:
        return self._edit(number, "issue", title, body)

    def _edit(self, number: int, kind: str, title: str | None, body: str | None) -> dict[str, Any]:
        with self._db() as db:
            self._item(db, number, kind)
            if title is not None:
                if not title.strip():
                    raise TrackerError("a title cannot be empty")
                db.execute("UPDATE items SET title = ? WHERE number = ?", (title, number))
            if body is not None:
                db.execute("UPDATE items SET body = ? WHERE number = ?", (body, number))
            self._touch(db, number)
            return self._detail(db, self._item(db, number))

    def set_state(self, number: int, state: str) -> dict[str, Any]:
        """Close or reopen an issue or pull request (merged pull requests stay merged)."""
        if state not in ("open", "closed"):
            raise TrackerError(f"state must be open or closed, not {state!r}")
        with self._db() as db:
            row = self._item(db, number)
            if row["state"] == "merged":
                raise TrackerError(f"pull request #{number} is merged; it cannot be {state}ed")
            db.execute("UPDATE items SET state = ? WHERE number = ?", (state, number))
            self._touch(db, number)
            return self._summary(db, self._item(db, number))

    def close_issue(self, number: int) -> dict[str, Any]:
        return self.set_state(number, "closed")

    def reopen_issue(self, number: int) -> dict[str, Any]:
        return self.set_state(number, "open")

    def add_labels(self, number: int, labels: list[str]) -> dict[str, Any]:
        with self._db() as db:
            self._item(db, number)
            for label in labels:
                self._require_label(db, label)
            db.executemany("INSERT OR IGNORE INTO item_labels VALUES (?, ?)",
                           [(number, label) for label in labels])
            self._touch(db, number)
            return self._summary(db, self._item(db, number))

    def remove_label(self, number: int, label: str) -> dict[str, Any]:
        with self._db() as db:
            self._item(db, number)
            gone = db.execute("DELETE FROM item_labels WHERE number = ? AND label = ?",
                              (number, label)).rowcount
            if not gone:
                raise TrackerError(f"#{number} has no label {label!r}")
            self._touch(db, number)
            return self._summary(db, self._item(db, number))

    def assign(self, number: int, user: str) -> dict[str, Any]:
        login = self.user if user in ("@me", "me", "self") else user
        with self._db() as db:
            self._item(db, number)
            if db.execute("SELECT 1 FROM users WHERE login = ?", (login,)).fetchone() is None:
                logins = db.execute("SELECT login FROM users ORDER BY login")
                users = ", ".join(row[0] for row in logins)
                raise TrackerError(f"there is no user {login!r} (users: {users})")
            db.execute("INSERT OR IGNORE INTO assignees VALUES (?, ?)", (number, login))
            self._touch(db, number)
            return self._summary(db, self._item(db, number))

    def comment(self, number: int, body: str) -> dict[str, Any]:
        if not body.strip():
            raise TrackerError("a comment needs a body")
        with self._db() as db:
            self._item(db, number)
            db.execute("INSERT INTO comments (number, author, body, created_at) "
                       "VALUES (?, ?, ?, ?)", (number, self.user, body, time.time()))
            self._touch(db, number)
            return {"number": number, "author": self.user, "body": body}

    def whoami(self) -> dict[str, Any]:
        return {"login": self.user}

    # -- labels ----------------------------------------------------------------
    def list_labels(self) -> list[dict[str, Any]]:
        with self._db() as db:
            return [{"name": r["name"], "color": "#" + r["color"], "description": r["description"]}
                    for r in db.execute("SELECT * FROM labels ORDER BY name")]

    def create_label(self, name: str, color: str, description: str = "") -> dict[str, Any]:
        if not name.strip():
            raise TrackerError("a label needs a name")
        hex_color = normalise_color(color)
        with self._db() as db:
            if db.execute("SELECT 1 FROM labels WHERE name = ?", (name,)).fetchone():
                raise TrackerError(f"label {name!r} already exists")
            db.execute("INSERT INTO labels VALUES (?, ?, ?)", (name, hex_color, description))
        return {"name": name, "color": "#" + hex_color, "description": description}

    # -- pull requests ---------------------------------------------------------
    def list_pulls(self, state: str = "open") -> list[dict[str, Any]]:
        return self._list("pull", state, None)

    def show_pull(self, number: int) -> dict[str, Any]:
        with self._db() as db:
            return self._detail(db, self._item(db, number, "pull"))

    def create_pull(self, title: str, head: str, body: str = "",
                    labels: list[str] | None = None) -> dict[str, Any]:
        with self._db() as db:
            number = self._insert_item(db, "pull", title, body, list(labels or []), head=head)
            return self._detail(db, self._item(db, number))

    def merge_pull(self, number: int) -> dict[str, Any]:
        with self._db() as db:
            row = self._item(db, number, "pull")
            if row["state"] != "open":
                raise TrackerError(f"pull request #{number} is {row['state']}, not open")
            db.execute("UPDATE items SET state = 'merged' WHERE number = ?", (number,))
            self._touch(db, number)
            return self._summary(db, self._item(db, number))

    def review_pull(self, number: int, kind: str, body: str = "",
                    inline_comments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        if kind not in REVIEW_KINDS:
            raise TrackerError(f"review kind must be one of {', '.join(REVIEW_KINDS)}, "
                               f"not {kind!r}")
        if kind != "approve" and not body.strip():
            raise TrackerError(f"a {kind} review needs a body")
        with self._db() as db:
            self._item(db, number, "pull")
            cursor = db.execute(
                "INSERT INTO reviews (number, author, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (number, self.user, kind, body, time.time()))
            for inline in inline_comments or []:
                db.execute("INSERT INTO review_comments VALUES (?, ?, ?, ?)",
                           (cursor.lastrowid, str(inline["path"]), int(inline["line"]),
                            str(inline["body"])))
            self._touch(db, number)
        return {"number": number, "author": self.user, "kind": kind, "body": body}

    # -- state for checkers ------------------------------------------------------
    def capture_state(self) -> dict[str, dict[str, dict[str, Any]]]:
        state: dict[str, dict[str, dict[str, Any]]] = {"labels": {}, "issues": {}, "pulls": {}}
        with self._db() as db:
            for row in db.execute("SELECT * FROM labels"):
                state["labels"][row["name"]] = {"color": row["color"],
                                                "description": row["description"].strip()}
            for row in db.execute("SELECT * FROM items ORDER BY number").fetchall():
                detail = self._detail(db, row)
                entity: dict[str, Any] = {
                    "title": row["title"].strip(), "body": row["body"].strip(),
                    "state": row["state"], "author": row["author"],
                    "labels": sorted(detail["labels"]), "assignees": sorted(detail["assignees"]),
                    "comments": sorted([comment["author"], comment["body"].strip()]
                                       for comment in detail["comments"]),
                }
                if row["kind"] == "pull":
                    entity["reviews"] = sorted(
                        [r["author"], r["kind"], r["body"].strip(),
                         sorted([c["path"], c["line"], c["body"].strip()]
                                for c in r["inline_comments"])]
                        for r in detail["reviews"])
                    state["pulls"][str(row["number"])] = entity
                else:
                    state["issues"][str(row["number"])] = entity
        return state


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)

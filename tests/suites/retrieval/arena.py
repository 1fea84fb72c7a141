"""A place to watch hostile strategies from: a marker path outside the scratch folder,
a TCP listener outside the sandbox, a ladder folder and a store holding a secret, and
a copy of `strategy_files/hostile.py` with `hostile_targets.py` written beside it.

It lives under /var/tmp, not /tmp: inside the boundary /tmp is a private empty folder,
which would hide a write by accident and prove nothing about the boundary.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchwarden.core.store import open_store
from benchwarden.suites.retrieval.driver import store_files
from benchwarden.suites.retrieval.ladder import Ladder
from tests.conftest import bwrap_or_skip

FILES = Path(__file__).with_name("strategy_files")
SECRET = "benchwarden-secret-5f1e-never-readable"




class Listener:
    """A listener outside the sandbox that records every connection it accepts: TCP on
    loopback, or a filesystem Unix socket when `unix_path` is given."""

    def __init__(self, unix_path: Path | None = None) -> None:
        if unix_path is None:
            self.socket = socket.socket()
            self.socket.bind(("127.0.0.1", 0))
        else:
            self.socket = socket.socket(socket.AF_UNIX)
            self.socket.bind(str(unix_path))
        self.socket.listen()
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1] if unix_path is None else 0
        self.accepted: list[object] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, address = self.socket.accept()
            except OSError:
                continue
            self.accepted.append(address)
            connection.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.socket.close()


@dataclass
class Arena:
    root: Path
    strategy: Path  # the copy of hostile.py, with hostile_targets.py beside it
    marker: Path
    listener: Listener
    ladder: Path
    store: Path

    def hidden(self) -> list[str]:
        return [str(self.ladder), *store_files_of(self.store)]

    unix_listener: Listener

    def untouched(self) -> None:
        assert not self.marker.exists(), self.marker.read_text()
        assert self.listener.accepted == []
        assert self.unix_listener.accepted == []


def store_files_of(path: Path) -> list[str]:
    class Located:
        location = str(path)

    return store_files(Located())  # type: ignore[arg-type]


@contextlib.contextmanager
def make_arena() -> Iterator[Arena]:
    bwrap_or_skip()
    root = Path(tempfile.mkdtemp(prefix="benchwarden-arena-", dir="/var/tmp"))
    listener = Listener()
    unix_listener = Listener(root / "service.sock")
    try:
        (root / "outside").mkdir()
        ladder = root / "ladder"
        ladder.mkdir()
        Ladder(ladder).ensure_genesis("substring")  # a real ledger: its lines hold "prev_hash"
        stores = root / "stores"
        stores.mkdir()
        store = stores / "store.sqlite"
        open_store(store).close()  # a real store (another application's file is refused)
        with contextlib.closing(sqlite3.connect(store)) as database, database:
            database.execute("CREATE TABLE planted (value TEXT)")
            database.execute("INSERT INTO planted VALUES (?)", (SECRET,))
        strategy_dir = root / "strategy"
        strategy_dir.mkdir()
        shutil.copy(FILES / "hostile.py", strategy_dir / "hostile.py")
        marker = root / "outside" / "marker"
        (ladder / "secret.txt").write_text(SECRET)
        secrets = [ladder / "ledger.jsonl", store, ladder / "secret.txt"]
        (strategy_dir / "hostile_targets.py").write_text(
            f"MARKER = {str(marker)!r}\nPORT = {listener.port}\n"
            f"UNIX_SOCKET = {str(root / 'service.sock')!r}\n"
            f"SECRETS = {[str(path) for path in secrets]!r}\n")
        yield Arena(root, strategy_dir / "hostile.py", marker, listener, ladder, store,
                    unix_listener)
    finally:
        listener.close()
        unix_listener.close()
        shutil.rmtree(root, ignore_errors=True)



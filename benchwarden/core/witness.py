"""Head witnesses: small records of where a store's chain ended, kept outside the store.

A hash chain proves that no entry was edited, removed or reordered *before* the last
one it holds; it cannot tell that entries were cut off its end, because what remains is
still a perfectly good chain. A head witness closes that gap: it names one entry of the
chain (`seq`, its `hash`) and the chain's first entry (`first`), and lives somewhere a
person cutting the tail would also have to find and rewrite:

- beside the store (`store.sqlite.head`), rewritten atomically after every append;
- inside every JSON report built from the store (`store_head`), and so inside every
  signed result, which nobody can rewrite without the signing key.

`verify` checks that the store still holds each witness's entry with that hash. A
witness is a lower bound: a store may have grown since, never shrunk.

Invariants:
- Parsing is pure and never raises anything but `WitnessError` (one line).
- A witness file only ever moves forward and never names an uncommitted entry: the
  store writes it after its append commits, and a writer that finds a later entry of
  the same chain already recorded leaves it (checked and written under `flock`).
- It is rewritten in place as one fixed 512-byte block (one `pwrite` at offset 0, within
  one disk sector), not by rename: ext4 flushes data on a rename over an existing file,
  which cost about 3 ms per append. A reader that catches the block mid-write retries.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchwarden.core.chain import GENESIS_HASH

WITNESS_SCHEMA = "benchwarden.store-head/1"
WITNESS_SUFFIX = ".head"
REPORT_FIELD = "store_head"
WITNESS_BLOCK = 512
_READ_ATTEMPTS = 4

_HASH = re.compile(r"^[0-9a-f]{64}$")


class WitnessError(ValueError):
    """A witness that cannot be read; the message is one line."""


@dataclass(frozen=True)
class StoreHead:
    """One entry of a store's chain: its sequence number and hash, and the chain's first hash."""

    seq: int
    hash: str
    first: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"schema": WITNESS_SCHEMA, "seq": self.seq, "hash": self.hash, "first": self.first}

    @classmethod
    def from_json_dict(cls, data: Any) -> StoreHead:
        if not isinstance(data, Mapping):
            raise WitnessError("not a JSON object")
        schema = data.get("schema", WITNESS_SCHEMA)
        if schema != WITNESS_SCHEMA:
            raise WitnessError(f"unsupported witness schema {schema!r} "
                               f"(this benchwarden reads {WITNESS_SCHEMA})")
        seq = data.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise WitnessError("`seq` is not a whole number")
        for name in ("hash", "first"):
            value = data.get(name)
            if not isinstance(value, str) or not _HASH.match(value):
                raise WitnessError(f"`{name}` is not a SHA-256 hex digest")
        return cls(seq, data["hash"], data["first"])

    @classmethod
    def empty(cls) -> StoreHead:
        """The witness of a store with no entries yet."""
        return cls(0, GENESIS_HASH, GENESIS_HASH)


@dataclass(frozen=True)
class Witness:
    """A head and where it came from (for messages)."""

    source: str
    head: StoreHead


def sidecar_for(store_path: str | Path) -> Path:
    return Path(f"{store_path}{WITNESS_SUFFIX}")


def witness_block(head: StoreHead) -> bytes:
    """The witness as written: its JSON padded with spaces to one fixed block."""
    text = json.dumps(head.to_json_dict(), sort_keys=True).encode("ascii")
    return text.ljust(WITNESS_BLOCK - 1) + b"\n"


def write_witness(path: Path, head: StoreHead, *, forward_only: bool = True) -> bool:
    """Overwrite the witness in place with one write (see the module's invariants).

    With `forward_only`, a witness already naming a later entry of the same chain is kept
    (a slower writer never moves it back); the check and the write happen under an
    exclusive `flock` of the witness file, so concurrent writers are serialised. Returns
    True when it wrote."""
    block = witness_block(head)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        if forward_only:
            try:
                current = StoreHead.from_json_dict(json.loads(os.pread(descriptor, 4096, 0)))
            except (ValueError, WitnessError):
                current = None  # empty, torn or foreign: replace it
            if current is not None and current.first == head.first and current.seq >= head.seq:
                return False
        if os.pwrite(descriptor, block, 0) != len(block):
            raise OSError(errno.ENOSPC, "short write of the head witness")
        if os.fstat(descriptor).st_size != len(block):
            os.ftruncate(descriptor, len(block))  # a longer file left by someone else
        return True
    finally:
        os.close(descriptor)  # also releases the flock


def parse_witness_text(text: str) -> StoreHead:
    """A witness file's contents, or a JSON report that carries a `store_head`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise WitnessError(f"not JSON ({error.msg})") from None
    if isinstance(data, Mapping) and str(data.get("schema", "")).startswith("benchwarden.report/"):
        if REPORT_FIELD not in data or data[REPORT_FIELD] is None:
            raise WitnessError(f"this report carries no `{REPORT_FIELD}` (it was written "
                               "before reports carried one, or from an empty store)")
        return StoreHead.from_json_dict(data[REPORT_FIELD])
    return StoreHead.from_json_dict(data)


def read_witness(path: str | Path) -> StoreHead | None:
    """The witness in `path`; None when there is no such file."""
    target = Path(path).expanduser()
    for attempt in range(_READ_ATTEMPTS):
        try:
            if target.exists() and not target.is_dir() and not target.is_file():
                # a FIFO or device: a plain read waits forever for a writer
                raise WitnessError(f"witness {target} is not a regular file")
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise WitnessError(f"witness {target} is a directory") from None
        except UnicodeDecodeError as error:
            problem = WitnessError(f"witness {target} is not text: {error.reason}")
        except OSError as error:
            raise WitnessError(f"cannot read witness {target}: {error.strerror or error}") from None
        else:
            try:
                return parse_witness_text(text)
            except WitnessError as error:
                problem = WitnessError(f"witness {target}: {error}")
        time.sleep(0.02 * (attempt + 1))  # a writer may have been mid-block: look again
    raise problem

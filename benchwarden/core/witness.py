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
- A witness file is replaced atomically (never half-written) and only ever moves forward:
  the store writes it while holding its append lock, from the committed head.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from benchwarden.core.chain import GENESIS_HASH
from benchwarden.core.files import write_text_atomically

WITNESS_SCHEMA = "benchwarden.store-head/1"
WITNESS_SUFFIX = ".head"
REPORT_FIELD = "store_head"

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
    def from_json_dict(cls, data: Any) -> "StoreHead":
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
    def empty(cls) -> "StoreHead":
        """The witness of a store with no entries yet."""
        return cls(0, GENESIS_HASH, GENESIS_HASH)


@dataclass(frozen=True)
class Witness:
    """A head and where it came from (for messages)."""

    source: str
    head: StoreHead


def sidecar_for(store_path: str | Path) -> Path:
    return Path(f"{store_path}{WITNESS_SUFFIX}")


def write_witness(path: Path, head: StoreHead) -> None:
    write_text_atomically(path, json.dumps(head.to_json_dict(), sort_keys=True) + "\n",
                          mode=0o644)


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
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise WitnessError(f"witness {target} is a directory") from None
    except (OSError, UnicodeDecodeError) as error:
        raise WitnessError(f"cannot read witness {target}: {error}") from None
    try:
        return parse_witness_text(text)
    except WitnessError as error:
        raise WitnessError(f"witness {target}: {error}") from None

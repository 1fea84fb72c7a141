"""The hash link shared by every tamper-evident log (the store, the ladder's ledger).

A link is SHA-256 over the previous link's hex digest followed, for each part, by a NUL
byte and the part's bytes. The first link follows `GENESIS_HASH`. Changing this changes
every recorded hash: existing stores and ledgers would no longer verify.
"""

from __future__ import annotations

import hashlib

GENESIS_HASH = "0" * 64


def link_hash(previous: str, *parts: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(previous.encode("ascii"))
    for part in parts:
        digest.update(b"\x00")
        digest.update(part)
    return digest.hexdigest()

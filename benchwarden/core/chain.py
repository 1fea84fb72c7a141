"""The hash link shared by every tamper-evident log (the store, the ladder's ledger).

A link is SHA-256 over the previous link's hex digest followed, for each part, by a NUL
byte and the part's bytes. The first link follows `GENESIS_HASH`. Changing this changes
every recorded hash: existing stores and ledgers would no longer verify.

`chain_links` computes many consecutive links at once for batch appends; it is
`link_hash` applied in a loop (property-tested to agree), only without a Python call and
four hash updates per link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

GENESIS_HASH = "0" * 64


def link_hash(previous: str, *parts: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(previous.encode("ascii"))
    for part in parts:
        digest.update(b"\x00")
        digest.update(part)
    return digest.hexdigest()


def chain_links(previous: str, entries: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """The links of consecutive two-part entries (address, body) following `previous`:
    the same hashes as `link_hash(previous, address, body)` chained one after another."""
    sha256 = hashlib.sha256
    links: list[str] = []
    append = links.append
    for address, body in entries:
        previous = sha256(b"".join((previous.encode("ascii"), b"\x00", address, b"\x00",
                                    body))).hexdigest()
        append(previous)
    return links

"""A run's stored configuration read in the shape the reader needs.

To the store a run start's `config` is free JSON: each suite writes its own. A reader
that trusts the shape it wrote (a list of levels, a number) crashes on a configuration
of another shape (edited outside benchwarden, its chain then broken, or written by
another tool) with "unexpected TypeError", naming neither the store nor the run.
Reading the keys it uses through a msgspec type makes that the store's fault, said in
one line naming the run and pointing to `verify`.

Invariants:
- Keys the type does not name are ignored (a reader checks only what it reads); keys
  absent take the type's defaults.
- Nothing is converted loosely: a number held as text is refused, as the writer never
  stores one that way; a whole number is accepted where a float is read.
- Pure: the run is handed in; nothing here reads the store.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from benchwarden.core.records import Run
from benchwarden.core.store import CorruptStore

Shape = TypeVar("Shape")


def config_as(location: Any, run: Run, shape: type[Shape], writer: str) -> Shape:
    """`run.config` as `shape` (a msgspec type naming the keys read, with defaults for
    those a run may lack); `CorruptStore` naming the run and what is wrong when it is
    not of that shape. `writer` names the command that writes such runs."""
    try:
        return msgspec.convert(run.config, shape)
    except msgspec.ValidationError as error:
        raise CorruptStore(
            f"store {location}: run {run.run_id}: its configuration is not what `{writer}` "
            f"writes ({error}); `benchwarden verify --store` checks whether the store was "
            "edited") from None


__all__ = ["config_as"]

"""The `bm25s` library as the `bm25` strategy uses it: imported without scipy.sparse.

Why: bm25s imports scipy.sparse at its top (in a `try`), only to build its index
matrix when `csc_backend="scipy"`; scipy.sparse in turn loads scipy's array-API layer,
which walks every NumPy submodule (f2py, testing, ma, polynomial, random...). That is
more than half of what importing bm25s costs (0.23 s of CPU against 0.10 s without it
on the project's machine, bench/retrieval_executor.py), paid serially in both modes: by
the first seed in one process, by a `local:N` parent before its workers fork.

Invariants:
- The strategy builds its index with `csc_backend="numpy"`, bm25s' own documented
  builder, whatever this import found: scores are the same bytes as the scipy builder's
  (checked over every question of many seeds in tests/suites/retrieval/test_strategies.py),
  and results never depend on whether scipy.sparse happened to be imported first.
- scipy.sparse is hidden only while bm25s itself is imported, and only if nothing
  imported it before (`core.lazy.modules_hidden`); a user's own code can import it later.
- Importing this module is what a `local:N` pool preloads for `bm25` (see
  `strategies.BUILTIN_LIBRARIES`), so the parent and its workers share one import.
"""

from __future__ import annotations

from benchwarden.core.lazy import modules_hidden

with modules_hidden("scipy.sparse"):
    import bm25s

import numpy

CSC_BACKEND = "numpy"

__all__ = ["CSC_BACKEND", "bm25s", "numpy"]

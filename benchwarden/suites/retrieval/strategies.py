"""Built-in retrieval strategies and the loader for a user's strategy file.

Built-ins are registered in `BUILTIN_STRATEGIES` exactly the way a user's strategy is
named on the command line, so nothing treats them specially:

- `substring`: lines containing the most question words (case-insensitive substrings);
- `fts5`: SQLite FTS5 over lines, ranked by its `bm25()` function;
- `bm25`: the `bm25s` library over lines (Lucene BM25, English stopwords), ties in
  corpus order;
- `dump`: no ranking at all, it returns as much of the corpus as the budget allows,
  starting at a place picked from the question. It exists so the guards have something
  to catch: it must trip the canary and score efficiency near its floor of 0.5;
- `vouch`: the vouch-kb 1.5.0 agent-memory library's context packs (optional extra
  `benchwarden[vouch]`; see `vouch_adapter.py`).

Every built-in quotes corpus lines exactly, so each item's source span verifies.
Strategies hold state between `index` and `pack`; a fresh instance serves each seed.
A strategy's name (`file stem:object`) is at most `core.html.NAME_LIMIT` characters: a
longer one is refused when it is parsed, before anything is written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sqlite3
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchwarden.core.html import NAME_LIMIT
from benchwarden.suites.retrieval.api import Item, Session

_TOKEN = re.compile(r"[A-Za-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have in is it its of on or "
    "the to was were what when where which who whom why with how".split())


def question_terms(question: str) -> list[str]:
    """Lower-cased content words of a question, in order, without repeats."""
    terms: list[str] = []
    for token in _TOKEN.findall(question.lower()):
        if len(token) >= 2 and token not in STOPWORDS and token not in terms:
            terms.append(token)
    return terms


@dataclass(frozen=True)
class LineUnit:
    session: int
    start: int
    end: int
    text: str

    def item(self) -> Item:
        return Item(text=self.text, source=(self.session, self.start, self.end))


def line_units(sessions: Sequence[Session]) -> list[LineUnit]:
    """Every non-empty line of the corpus with its exact span, in corpus order."""
    return [LineUnit(session.index, start, end, text)
            for session in sessions for start, end, text in session.lines() if text.strip()]


def _fit(units: Sequence[LineUnit], limit: int, budget_chars: int) -> list[Item]:
    """Take ranked lines while they fit; a polite strategy stays inside its budget."""
    items: list[Item] = []
    used = 0
    for unit in units:
        if len(items) >= limit or used + len(unit.text) > budget_chars:
            break
        items.append(unit.item())
        used += len(unit.text)
    return items


class SubstringStrategy:
    """Lines ranked by how many distinct question words they contain."""

    name = "substring"

    def __init__(self) -> None:
        self.units: list[LineUnit] = []

    def index(self, sessions: Sequence[Session]) -> None:
        self.units = line_units(sessions)

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        terms = [term for term in question_terms(question) if len(term) >= 3]
        scored = []
        for position, unit in enumerate(self.units):
            lowered = unit.text.lower()
            hits = sum(1 for term in terms if term in lowered)
            if hits:
                scored.append((-hits, position, unit))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        return _fit([unit for _, _, unit in scored], limit, budget_chars)


class Fts5Strategy:
    """SQLite FTS5 in memory; terms OR-ed, ranked by `bm25()` (lower is better)."""

    name = "fts5"

    def __init__(self) -> None:
        self.connection: sqlite3.Connection | None = None
        self.units: list[LineUnit] = []

    def index(self, sessions: Sequence[Session]) -> None:
        self.units = line_units(sessions)
        self.connection = sqlite3.connect(":memory:")
        self.connection.execute("CREATE VIRTUAL TABLE lines USING fts5(body)")
        self.connection.executemany(
            "INSERT INTO lines (rowid, body) VALUES (?, ?)",
            [(position, unit.text) for position, unit in enumerate(self.units)])

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        if self.connection is None:
            raise RuntimeError("fts5 strategy used before index()")
        terms = question_terms(question)
        if not terms or limit <= 0:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        rows = self.connection.execute(
            "SELECT rowid FROM lines WHERE lines MATCH ? ORDER BY bm25(lines), rowid LIMIT ?",
            (match, limit)).fetchall()
        return _fit([self.units[row[0]] for row in rows], limit, budget_chars)


class Bm25Strategy:
    """The `bm25s` library (Lucene variant) over corpus lines; zero scores dropped."""

    name = "bm25"

    def __init__(self) -> None:
        self.units: list[LineUnit] = []
        self.retriever: Any = None

    def index(self, sessions: Sequence[Session]) -> None:
        # imported here: the sandbox child never needs it
        from benchwarden.suites.retrieval.bm25_library import CSC_BACKEND, bm25s, numpy

        self.units = line_units(sessions)
        tokens = bm25s.tokenize([unit.text for unit in self.units], stopwords="en",
                                show_progress=False)
        self.retriever = bm25s.BM25(csc_backend=CSC_BACKEND)
        self.retriever.index(tokens, show_progress=False)
        self._bm25s = bm25s
        self._numpy = numpy

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        if self.retriever is None:
            raise RuntimeError("bm25 strategy used before index()")
        if limit <= 0 or not self.units:
            return []
        tokens = self._bm25s.tokenize([question], stopwords="en", return_ids=False,
                                      show_progress=False)[0]
        ids = self.retriever.get_tokens_ids(list(tokens))
        if not ids:
            return []
        # Scores straight from the index, not `retrieve()`: that starts a thread pool on
        # every call, which cost more than the scoring itself (bench/retrieval_power.py).
        scores = self.retriever.get_scores_from_ids(ids)
        order = self._numpy.argsort(-scores, kind="stable")[:limit]
        ranked = [self.units[int(document)] for document in order if float(scores[document]) > 0]
        return _fit(ranked, limit, budget_chars)


class DumpStrategy:
    """No ranking: contiguous runs of the corpus until the budget is full.

    The starting line comes from the question's CRC-32 (stable everywhere), so different
    questions see different windows, as a careless "just send everything" pack would.
    """

    name = "dump"

    def __init__(self) -> None:
        self.units: list[LineUnit] = []

    def index(self, sessions: Sequence[Session]) -> None:
        self.units = line_units(sessions)

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        if not self.units or limit <= 0:
            return []
        first = zlib.crc32(question.encode("utf-8")) % len(self.units)
        order = self.units[first:] + self.units[:first]
        chunks: list[list[LineUnit]] = []
        used = 0
        for unit in order:
            if used >= budget_chars:
                break
            last = chunks[-1][-1] if chunks else None
            if last is not None and last.session == unit.session and last.end + 1 == unit.start:
                chunks[-1].append(unit)
            else:
                chunks.append([unit])
            used += len(unit.text) + 1
        items = []
        for chunk in chunks[:limit]:
            session, start, end = chunk[0].session, chunk[0].start, chunk[-1].end
            text = "\n".join(unit.text for unit in chunk)
            items.append(Item(text=text, source=(session, start, end)))
        return items


def VouchStrategy() -> Any:  # noqa: N802 - registered like the classes above
    """vouch-kb's strategy, imported only when used (it is an optional extra)."""
    from benchwarden.suites.retrieval.vouch_adapter import VouchStrategy as Strategy

    return Strategy()


BUILTIN_STRATEGIES: dict[str, Callable[[], Any]] = {
    "substring": SubstringStrategy,
    "fts5": Fts5Strategy,
    "bm25": Bm25Strategy,
    "dump": DumpStrategy,
    "vouch": VouchStrategy,
}


# The libraries a built-in imports when it indexes: a local worker pool imports them in
# the parent before it forks, so each worker does not pay the import again per run.
# bm25's is the module that imports bm25s the way the strategy uses it (no scipy.sparse).
BUILTIN_LIBRARIES: dict[str, tuple[str, ...]] = {
    "bm25": ("benchwarden.suites.retrieval.bm25_library",), "vouch": ("vouch",)}


def libraries_to_preload(spec: StrategySpec) -> tuple[str, ...]:
    """Modules worth importing before worker processes fork (none for a user file:
    importing it would run its code in the harness)."""
    return BUILTIN_LIBRARIES.get(spec.name, ()) if spec.builtin else ()


def _check_builtin_available(name: str) -> None:
    """Built-ins backed by an optional extra say how to install it, in one line."""
    if name == "vouch":
        from benchwarden.suites.retrieval.vouch_adapter import (
            VouchUnavailable,
            check_vouch_installed,
        )

        try:
            check_vouch_installed()
        except VouchUnavailable as error:
            raise StrategyLoadError(str(error)) from None


class StrategyLoadError(ValueError):
    """The strategy named on the command line cannot be loaded (one line)."""


@dataclass(frozen=True)
class StrategySpec:
    """What the user named: a built-in, or `path/to/file.py:object`."""

    name: str
    builtin: bool
    path: str | None = None
    attribute: str | None = None
    source_sha256: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "builtin": self.builtin, "path": self.path,
                "object": self.attribute, "source_sha256": self.source_sha256}


def parse_strategy(text: str) -> StrategySpec:
    """Resolve a strategy name or `file.py:object` without running any of its code."""
    if text in BUILTIN_STRATEGIES:
        _check_builtin_available(text)
        return StrategySpec(name=text, builtin=True)
    path_text, sep, attribute = text.rpartition(":")
    if not sep or not path_text.endswith(".py") or not attribute.isidentifier():
        known = ", ".join(sorted(BUILTIN_STRATEGIES))
        raise StrategyLoadError(
            f"strategy {text!r} is neither a built-in ({known}) nor path/to/file.py:object")
    name = f"{Path(path_text).stem}:{attribute}"
    if len(name) > NAME_LIMIT:
        # the name is drawn at every row of a report's page and stored with every record;
        # a page clips it, so two long names sharing a start would read alike there
        raise StrategyLoadError(
            f"strategy name {name[:60]!r}... is {len(name):,} characters: a strategy's name "
            f"(file stem:object) is at most {NAME_LIMIT}; rename the file or the object")
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise StrategyLoadError(f"strategy file {path} does not exist")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return StrategySpec(name=name, builtin=False,
                        path=str(path.resolve()), attribute=attribute, source_sha256=digest)


def instantiate(candidate: Any, where: str) -> Any:
    """A class or factory is called with no arguments; an instance is used as it is."""
    strategy = candidate
    if isinstance(candidate, type) or (callable(candidate) and not hasattr(candidate, "pack")):
        strategy = candidate()
    missing = [name for name in ("index", "pack") if not callable(getattr(strategy, name, None))]
    if missing:
        raise StrategyLoadError(f"{where} has no callable {' or '.join(missing)}()")
    return strategy


def load_object(path: str, attribute: str) -> Any:
    """Import `path` as a fresh module and return its `attribute` (runs the file's code)."""
    module_name = f"benchwarden_user_strategy_{hashlib.sha256(path.encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise StrategyLoadError(f"cannot import strategy file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        # The strategy's own folder, for helper modules kept beside it; appended, so
        # in-process it can never shadow the harness's own imports.
        sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        # SystemExit too: a file that calls sys.exit() while imported must fail its run
        # in one line, not end the harness with the exit code it chose
        sys.modules.pop(module_name, None)
        raise StrategyLoadError(
            f"importing {path} failed: {type(error).__name__}: {error}") from None
    if not hasattr(module, attribute):
        raise StrategyLoadError(f"{path} defines no {attribute!r}")
    return getattr(module, attribute)


def make_strategy(spec: StrategySpec) -> Any:
    """A fresh in-process strategy instance (built-ins, or a trusted user file)."""
    if spec.builtin:
        return BUILTIN_STRATEGIES[spec.name]()
    assert spec.path is not None and spec.attribute is not None
    return instantiate(load_object(spec.path, spec.attribute), f"{spec.path}:{spec.attribute}")

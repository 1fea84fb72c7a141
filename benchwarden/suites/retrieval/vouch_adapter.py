"""The built-in `vouch` strategy: vouch-kb 1.5.0, a real agent-memory library, as a challenger.

`index` builds a fresh vouch knowledge base for the seed (in the sandbox's scratch
folder, or a private temporary folder when run in-process): each session becomes a
vouch Source (its UTF-8 bytes), each non-empty line a claim proposed with a
byte-offset receipt quoting that line (`propose_quoted_claim`) and approved through
vouch's own receipt gate. `pack` asks vouch for a context pack (`build_context_pack`)
and translates its items into the harness's items:

- the item text is vouch's summary with its «» match markers stripped (and the `…`
  that marks a clipped FTS5 snippet), so the pack holds what vouch returned;
- the item's receipt is the claim's evidence, converted from vouch's byte offsets
  into the session's character offsets; when vouch clipped the line, the span shrinks
  to the part it returned. An item whose text cannot be located in its cited line
  gets no receipt (the grader then counts it unverified), never a guessed one.

Invariants: every KB is new (nothing carries over between seeds); vouch's proposals
are approved in corpus order, so the KB, and therefore every ranking, is the same on
every run of a seed; vouch itself is never patched, only called.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchwarden.suites.retrieval.api import Item, Session

VOUCH_DISTRIBUTION = "vouch-kb"
VOUCH_VERSION = "1.5.0"
INSTALL_HINT = "pip install 'benchwarden[vouch]'"
MATCH_MARKERS = ("«", "»")
ELLIPSIS = "…"
PROPOSER = "benchwarden-indexer"


class VouchUnavailable(ImportError):
    """vouch-kb is not installed, or not the version this adapter speaks to."""


def check_vouch_installed() -> None:
    """Raise VouchUnavailable (one line, naming the install command) unless vouch-kb
    1.5.0 is importable. Reads package metadata only: nothing of vouch runs."""
    try:
        version = importlib.metadata.version(VOUCH_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise VouchUnavailable(f"the vouch strategy needs vouch-kb {VOUCH_VERSION}, which is "
                               f"not installed: {INSTALL_HINT}") from None
    if version != VOUCH_VERSION:
        raise VouchUnavailable(f"the vouch strategy speaks to vouch-kb {VOUCH_VERSION}, found "
                               f"{version}: {INSTALL_HINT}")
    if importlib.util.find_spec("vouch") is None:
        raise VouchUnavailable(f"vouch-kb is recorded as installed but `import vouch` finds "
                               f"nothing: {INSTALL_HINT}")


def strip_markers(summary: str) -> str:
    """vouch's summary without FTS5 match markers or the snippet's clipping ellipses."""
    text = summary
    for marker in MATCH_MARKERS:
        text = text.replace(marker, "")
    return text.strip(ELLIPSIS)


def byte_to_char_span(text: str, byte_start: int, byte_end: int) -> tuple[int, int] | None:
    """Character offsets of the UTF-8 byte range [byte_start, byte_end) of `text`,
    or None when the range is out of bounds or splits a character."""
    data = text.encode("utf-8")
    if not 0 <= byte_start <= byte_end <= len(data):
        return None
    try:
        start = len(data[:byte_start].decode("utf-8"))
        length = len(data[byte_start:byte_end].decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return start, start + length


def receipt_for(returned: str, session: int, session_text: str, byte_start: int | None,
                byte_end: int | None) -> tuple[int, int, int] | None:
    """The (session, start, end) span quoting `returned`, found inside the cited byte
    range; None when the citation has no offsets or does not contain the text."""
    if byte_start is None or byte_end is None or not returned:
        return None
    span = byte_to_char_span(session_text, byte_start, byte_end)
    if span is None:
        return None
    start, end = span
    offset = session_text[start:end].find(returned)
    if offset < 0:
        return None
    return (session, start + offset, start + offset + len(returned))


class VouchStrategy:
    """vouch-kb's context packs over a fresh knowledge base per seed."""

    name = "vouch"

    def __init__(self) -> None:
        check_vouch_installed()
        self.store: Any = None
        self.folder: Path | None = None
        self.sessions: dict[str, Session] = {}  # vouch source id -> the session it holds

    def index(self, sessions: Sequence[Session]) -> None:
        from vouch import proposals
        from vouch.storage import KBStore

        self.close()
        # In the sandbox the harness names a private writable scratch folder; run
        # in-process, the strategy makes (and `close` removes) a temporary one.
        parent = os.environ.get("BENCHWARDEN_SCRATCH") or None
        self.folder = Path(tempfile.mkdtemp(prefix="vouch-kb-", dir=parent))
        self.store = KBStore.init(self.folder)
        self.sessions = {}
        pending = []
        for session in sessions:
            source = self.store.put_source(session.text.encode("utf-8"), title=session.title,
                                           locator=f"session-{session.index}",
                                           source_type="transcript")
            self.sessions[source.id] = session
            for number, (_, _, line) in enumerate(session.lines()):
                if not line.strip():
                    continue
                proposed = proposals.propose_quoted_claim(
                    self.store, text=line, source_id=source.id, quote=line,
                    proposed_by=PROPOSER, slug_hint=f"s{session.index}-l{number}")
                if proposed is not None:
                    pending.append(proposed.proposal)
        for proposal in pending:  # corpus order: the KB is the same on every run
            proposals.resolve_pending_receipt_claim(
                self.store, proposal, actor=PROPOSER, reason="receipt verified")

    def pack(self, question: str, limit: int, budget_chars: int) -> list[Item]:
        from vouch.context import build_context_pack
        from vouch.storage import ArtifactNotFoundError

        if self.store is None:
            raise RuntimeError("vouch strategy used before index()")
        if limit <= 0:
            return []
        result = build_context_pack(self.store, query=question, limit=limit,
                                    max_chars=budget_chars)
        items: list[Item] = []
        for entry in result.get("items", []):
            text = strip_markers(str(entry.get("summary") or ""))
            if not text:
                continue
            source = None
            for citation in entry.get("citations") or []:
                try:
                    evidence = self.store.get_evidence(citation)
                except ArtifactNotFoundError:
                    continue
                session = self.sessions.get(evidence.source_id)
                if session is None:
                    continue
                source = receipt_for(text, session.index, session.text, evidence.byte_start,
                                     evidence.byte_end)
                if source is not None:
                    break
            items.append(Item(text=text, source=source))
        return items

    def close(self) -> None:
        """Remove this strategy's knowledge base (the harness calls it after each seed)."""
        folder, self.folder, self.store = self.folder, None, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


__all__ = ["INSTALL_HINT", "VOUCH_VERSION", "VouchStrategy", "VouchUnavailable",
           "byte_to_char_span", "check_vouch_installed", "receipt_for", "strip_markers"]

r"""Scoring of the contamination suite: classify every probe in every leg, then judge.

Pure: the inputs are recorded outcomes (`Legs`), the outputs values (`Score`,
`Verdict`). Nothing here reads a network, a file or a clock, so a stored run re-scores
to the same answer forever.

Why it is shaped this way:
- Two solo references, because a reply that is not reproducible alone would otherwise
  make concurrency look guilty. A probe whose references disagree is `AloneUnstable`
  and makes no comparisons, but still fails the verdict under its own name.
- A solo post-check after the rungs, because state left behind by a concurrent batch
  (a poisoned prefix cache, a restored slot) only shows in later solo work: a
  divergence there is `Persistent`.
- Liveness before equality: two replies that both stopped after three tokens are equal
  and prove nothing, so replies (and references) below the completion-token floor are
  `Unmeasured`.
- The canary check runs before the comparison: a foreign canary is leakage on its own
  evidence, a stronger statement than "differs from its reference", and it needs no
  reference and no proof of concurrency.
- A rung is judged as a whole: when any of its requests failed (scored or ballast, for
  any reason: HTTP status, transport error, a local limit such as "Too many open files",
  a timeout, a cut stream, a cap) it did not run as planned, and when its peak in flight
  was 1 it ran nothing together. Either way its cells are `Unmeasured` with the rung's
  reason ("rung c32: 28 of 32 requests failed: HTTP 500 ×28"), so neither a server that
  refuses what it cannot serve nor a serialising one can pass. Only a foreign canary
  still speaks (it is evidence on its own).
- Replies are compared on the exact bytes the server sent: the client keeps each invalid
  UTF-8 byte as a lone surrogate U+DC80..U+DCFF ("surrogateescape"), and `exact_bytes`
  turns the canonical string back into those bytes, so `\xff` and `\xfe` differ even
  though both would decode to U+FFFD. Positions (`at`, earliest divergence) count
  characters of the canonical string, where each invalid byte is one character.
- Model text is shown through `display_text`, one rule everywhere (terminal, JSON
  excerpts): an invalid byte as `\xNN`, a literal backslash doubled (`\\`), so the
  two can never be confused; never U+FFFD. Error lines are the client's own, already
  valid text (it shows an invalid byte there as `\xNN` too).

- Each divergence (a diverged, persistent or contaminated cell, and the `ref` cell of
  an alone-unstable probe) is also given a divergence class from token log-probabilities
  (`classify_divergence`), for an engine developer: `near-tie` when the reference's own
  margin between its token and the one the reply chose at the first differing token is
  under `near_tie_nats`; `substantive` when it is not, and always when a foreign canary
  is present; `unclassified` when the logprobs cannot say (none were sent, or the
  reply's token is outside the reference's top candidates by less than the threshold).
  The class explains a failure; it never softens the verdict.

Invariants:
- Each cell increments exactly one class counter (identical, diverged, contaminated,
  persistent, alone_unstable, unmeasured).
- A rung reply classified before the score (`Judged`, a reader's way to hold a huge
  soak) counts exactly as its outcome would, and `rung_cell` makes the very cell the
  score would have held.
- The verdict passes only when at least one cell was compared and every compared cell
  is `Identical`; "nothing measured" is a fail.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any, ClassVar, Protocol

from benchwarden.core.verdicts import Verdict, one_line
from benchwarden.suites.contamination.fidelity import RungFidelity, rung_fidelity
from benchwarden.targets.replies import Candidate, Reply, RequestOutcome

# 2: rung failures make the rung unmeasured; byte-exact comparison; rungs report
# `requests_sent` (was `slots`), `requests_failed` and `failures`.
BENCH_VERSION = "2"

REASONING_END = "\x01"
TOOL_CALL = "\x02"
TOOL_ARGUMENTS = "\x03"
FINISH = "\x04"

REFERENCE_LEG = "ref"
POST_LEG = "post"
MAX_RUNGS_NAMED = 8  # in the verdict line; the report lists every rung
NOT_RECORDED = "not recorded: the run stopped before this request (resume it with --resume)"


def rung_label(level: int) -> str:
    """The name a rung of concurrency `level` is stored and shown under (`c4`); the level
    itself travels as an int, and this label is never parsed back."""
    return f"c{level}"


# Divergence classes (what kind of difference a failed cell is; see classify_divergence).
NEAR_TIE = "near-tie"
SUBSTANTIVE = "substantive"
UNCLASSIFIED = "unclassified"
DIVERGENCE_KINDS = (NEAR_TIE, SUBSTANTIVE, UNCLASSIFIED)
DEFAULT_NEAR_TIE_NATS = 0.5
"""A flip whose reference margin is under half a nat (the reference preferred its token
by a probability ratio under e^0.5 ≈ 1.65) is within what batched float arithmetic is
known to move on CPU and GPU kernels; a larger margin is not a rounding accident."""


# -- classes ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Identical:
    kind: ClassVar[str] = "identical"


class Diverged:
    """The canonical forms differ (or match with different completion-token counts);
    `at` is their longest common prefix in characters, `detail` the line saying where.
    Compared, hashed and shown as the pair `(at, detail)`; immutable.

    `Diverged.at_char(at, reference, reply)` keeps only the two excerpts around `at` and
    writes the line when it is first read: a diverged soak classifies tens of thousands
    of cells, and only the cells of the rungs a report lists are ever shown."""

    __slots__ = ("at", "_detail", "_excerpts")
    kind: ClassVar[str] = "diverged"
    at: int
    _detail: str
    _excerpts: tuple[str, str] | None

    def __init__(self, at: int, detail: str) -> None:
        object.__setattr__(self, "at", at)
        object.__setattr__(self, "_detail", detail)
        object.__setattr__(self, "_excerpts", None)

    @classmethod
    def at_char(cls, at: int, reference: str, reply: str) -> Diverged:
        """Where two canonical forms differ, `at` their common prefix's length."""
        start = max(0, at - 20)
        found = cls(at, "")
        object.__setattr__(found, "_excerpts", (reference[start:at + 20], reply[start:at + 20]))
        return found

    @property
    def detail(self) -> str:
        excerpts = self._excerpts
        if excerpts is not None:
            object.__setattr__(self, "_detail", _divergence_detail(*excerpts, self.at))
            object.__setattr__(self, "_excerpts", None)
        return self._detail

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Diverged is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Diverged):
            return NotImplemented
        return (self.at, self.detail) == (other.at, other.detail)

    def __hash__(self) -> int:
        return hash((Diverged, self.at, self.detail))

    def __repr__(self) -> str:
        return f"Diverged(at={self.at!r}, detail={self.detail!r})"


@dataclass(frozen=True, slots=True)
class Contaminated:
    """Another probe's canary occurs in this reply."""

    foreign: str
    kind: ClassVar[str] = "contaminated"


@dataclass(frozen=True, slots=True)
class Persistent:
    """Diverged in the solo post-check that runs after the rungs."""

    at: int
    kind: ClassVar[str] = "persistent"


@dataclass(frozen=True, slots=True)
class AloneUnstable:
    """The probe's two solo references disagree: contamination is unattributable."""

    kind: ClassVar[str] = "alone_unstable"


@dataclass(frozen=True, slots=True)
class Unmeasured:
    why: str
    kind: ClassVar[str] = "unmeasured"


CellClass = Identical | Diverged | Contaminated | Persistent | AloneUnstable | Unmeasured
CLASS_NAMES = ("identical", "diverged", "contaminated", "persistent", "alone_unstable",
               "unmeasured")


@dataclass(frozen=True, slots=True)
class DivergencePoint:
    """What kind of divergence a failed cell is, from the first differing token.

    `step` is the index of the first token (logprob entry) at which the reference's and
    the reply's tokens differ. `margin` is, as the REFERENCE saw that step, the logprob
    of the reference's token minus the logprob of the token the reply chose there (in
    nats; >= 0 for a greedy reference). When the reply's token is not among the
    reference's top candidates, `margin_is_bound` is set and `margin` is the lower bound
    logprob(reference token) - logprob(lowest top candidate). `reply_margin` is the same
    difference as the diverged reply saw it (its token minus the reference's token), when
    the reference's token is among its candidates."""

    kind: str  # NEAR_TIE, SUBSTANTIVE or UNCLASSIFIED
    reason: str
    threshold: float
    step: int | None = None
    reference_token: str | None = None
    reply_token: str | None = None
    margin: float | None = None
    margin_is_bound: bool = False
    reply_margin: float | None = None
    reference_top: tuple[Candidate, ...] = ()
    foreign: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"class": self.kind, "reason": self.reason,
                                "threshold_nats": self.threshold}
        for name in ("step", "margin", "reply_margin", "foreign"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.reference_token is not None:
            data["reference_token"] = display_text(self.reference_token)
        if self.reply_token is not None:
            data["reply_token"] = display_text(self.reply_token)
        if self.margin_is_bound:
            data["margin_is_bound"] = True
        if self.reference_top:
            data["reference_top"] = [{"token": display_text(c.token), "logprob": c.logprob}
                                     for c in self.reference_top]
        return data


@dataclass(frozen=True, slots=True)
class Cell:
    probe: int
    leg: str  # "ref" (reference unusable), "c<N>" (a rung) or "post"
    repeat: int
    result: CellClass
    divergence: DivergencePoint | None = None

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"probe": self.probe, "leg": self.leg, "repeat": self.repeat,
                                "class": self.result.kind}
        for name in ("at", "detail", "foreign", "why"):
            if hasattr(self.result, name):
                data[name] = getattr(self.result, name)
        if self.divergence is not None:
            data["divergence"] = self.divergence.to_json_dict()
        return data


# -- inputs -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Judged:
    """A rung request's reply classified as it was read (`judged`), kept in place of its
    outcome as what the score counts of its cell: a reader of a soak that diverges
    everywhere keeps these few values of each of its hundreds of thousands of replies,
    not the reply nor its cell. `score` counts such a cell and holds it in no `cells`;
    a view that shows it reads the reply again (`rung_cell`). Made only of an ok reply
    at or above the completion-token floor, whose class in a rung that could not be
    compared follows from its class in one that could (`in_rung`)."""

    kind: str
    """Its class's kind in a rung that could be compared (`CellClass.kind`)."""
    at: int | None
    """Where a diverged reply parts from its reference (`Diverged.at`), else None."""
    divergence: str | None
    """Its divergence class (`DivergencePoint.kind`), when it has a divergence point."""
    foreign: int
    """How many foreign canaries the reply holds (counted for a contaminated one)."""
    reference: Reply
    """The reference it was classified against: `score` takes it only for the probe
    whose reference is this very object."""

    def in_rung(self, unmeasured: str | None) -> tuple[str, int | None, str | None, int]:
        """Its kind, `at`, divergence class and foreign canaries in a rung that could not
        be compared for `unmeasured` (None: one that could), as `classify` gives them
        for the reply: a foreign canary still speaks, nothing else does."""
        if unmeasured is None or self.kind == Contaminated.kind:
            return self.kind, self.at, self.divergence, self.foreign
        return Unmeasured.kind, None, None, 0


Outcome = RequestOutcome | None  # None: never recorded (the run was stopped)
RungOutcome = RequestOutcome | Judged | None
"""A rung request's outcome, or its reply already classified (`Judged`)."""


@dataclass(frozen=True, slots=True)
class RungOutcomes:
    label: str
    concurrency: int
    repeat: int
    scored: Sequence[RungOutcome]  # indexed by probe: the first n requests of the rung
    requests: Sequence[RequestOutcome] = ()  # every request sent, ballast included
    cancel_planned: Sequence[bool] = ()  # per request: to be cut by the client on purpose
    # the rung's fidelity when already computed from its requests (a report reading a
    # huge store counts them as it streams and keeps no outcome of an unscored request);
    # None: computed here from `requests` and `cancel_planned`
    fidelity: RungFidelity | None = None


@dataclass(frozen=True)
class Legs:
    ref_a: Sequence[Outcome]
    ref_b: Sequence[Outcome]
    rungs: Sequence[RungOutcomes]
    post: Sequence[Outcome]
    canaries: Sequence[str]
    min_completion_tokens: int
    near_tie_nats: float = DEFAULT_NEAR_TIE_NATS


# -- transcript helpers -------------------------------------------------------------------
def canonical(reply: Reply) -> str:
    """What is compared: reasoning ␁ text (␂ name ␃ args)* ␄ finish_reason."""
    calls = "".join(f"{TOOL_CALL}{call.name}{TOOL_ARGUMENTS}{call.arguments}"
                    for call in reply.tool_calls)
    return f"{reply.reasoning}{REASONING_END}{reply.text}{calls}{FINISH}{reply.finish_reason or ''}"


def exact_bytes(text: str) -> bytes:
    """The bytes a canonical string stands for: invalid UTF-8 bytes restored.

    A lone surrogate outside U+DC80..U+DCFF came from no byte; a string holding one is
    encoded with "surrogatepass" instead (see `same_stream`)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def same_stream(a: str, b: str) -> bool:
    """Byte-exact equality of two canonical forms (both encoded the same way, so the
    comparison stays exact even for surrogates no server byte could produce)."""
    try:
        return a.encode("utf-8", "surrogateescape") == b.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return a.encode("utf-8", "surrogatepass") == b.encode("utf-8", "surrogatepass")


_PICTURES = {REASONING_END: "␁", TOOL_CALL: "␂", TOOL_ARGUMENTS: "␃", FINISH: "␄",
             "\n": "⏎", "\\": "\\\\"}


# every character `display_text` does not show as itself: controls (the separators and
# the newline among them), the backslash, C1 controls and surrogates
_NOT_SHOWN_AS_ITSELF = re.compile("[\x00-\x1f\\\\\x7f-\x9f\ud800-\udfff]")


def display_text(text: str) -> str:
    """Model text for a terminal or a JSON excerpt, unambiguous and valid UTF-8.

    An invalid byte (U+DC80..U+DCFF) is shown as `\\xNN` (NN always 80..ff); a literal
    backslash as `\\\\`; any other control character or lone surrogate as `\\uNNNN`;
    the canonical form's separators as ␁ ␂ ␃ ␄ and a newline as ⏎.
    """
    # a diverged soak shows two excerpts a cell, 70,000 at a million records: the
    # characters shown as themselves are left to the regex engine, not a Python loop
    return _NOT_SHOWN_AS_ITSELF.sub(_shown_character, text)


def _shown_character(match: re.Match[str]) -> str:
    character = match.group(0)
    picture = _PICTURES.get(character)
    if picture is not None:
        return picture
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def foreign_canaries(reply: Reply, own: str, canaries: Sequence[str]) -> list[str]:
    """Other probes' canaries found in this reply, in order of first appearance."""
    return _foreign_in(canonical(reply), own, canaries)


def _foreign_in(form: str, own: str, canaries: Sequence[str]) -> list[str]:
    """`foreign_canaries` of the reply whose canonical form is `form`."""
    found = [(form.find(canary), canary) for canary in canaries
             if canary and canary != own and canary in form]
    return [canary for _, canary in sorted(found)]


def common_prefix(a: str, b: str) -> int:
    """Longest common prefix, in characters."""
    # halving by slice comparisons (each in C) rather than a character at a time: a
    # diverged soak asks this of 35,000 replies at a million records. `low` is always a
    # common prefix's length and `high` never one.
    # `startswith` at an offset compares in place: one slice copied a step, not two.
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    if longer.startswith(shorter):
        return len(shorter)
    low, high = 0, len(shorter)
    while high - low > 1:
        middle = (low + high) // 2
        if longer.startswith(shorter[low:middle], low):
            low = middle
        else:
            high = middle
    return low


def _divergence_detail(reference: str, got: str, at: int) -> str:
    """The line of a divergence at char `at`, from the excerpts of the two forms around
    it (20 characters each side, `Diverged.at_char`)."""
    return (f"stream differs from its solo reference at char {at}: "
            f"reference \"{display_text(reference)}\" vs reply \"{display_text(got)}\"")


# -- divergence classes -------------------------------------------------------------------
class LoggedToken(Protocol):
    """What a divergence class reads of a step of a reply (`TokenLogprob` is one): the
    token, its log-probability and the top candidates reported there. Read-only, so a
    report may hand over steps whose candidates are parsed only when asked for."""

    @property
    def token(self) -> str: ...

    @property
    def logprob(self) -> float: ...

    @property
    def top(self) -> Sequence[Candidate]: ...


class LoggedReply(Protocol):
    """What a divergence class reads of the reply compared with its reference (`Reply`
    is one): its reasoning and text, which its tokens must spell, and the tokens."""

    @property
    def reasoning(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def token_logprobs(self) -> Sequence[LoggedToken] | None: ...


def _token_bytes(entries: Sequence[LoggedToken]) -> bytes:
    tokens = "".join([entry.token for entry in entries])
    try:  # one encoding of the whole (every token escaped alike: the same bytes)
        return tokens.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a token that needs surrogatepass: each token its own way
        return b"".join(exact_bytes(entry.token) for entry in entries)


def _spells(entries: Sequence[LoggedToken], reply: LoggedReply) -> bool:
    """Whether the logprob tokens spell the reply (its text, or reasoning then text)."""
    spelled = _token_bytes(entries)
    return spelled in (exact_bytes(reply.text), exact_bytes(reply.reasoning + reply.text))


_SPELLING_REFERENCES: dict[int, tuple[Reply, bool]] = {}
"""`_spells` of each reference asked about lately, by identity (the reply kept, so the
identity stays its own): a run's few references are asked once a diverged cell."""


def _reference_spells(reference: Reply, entries: Sequence[LoggedToken]) -> bool:
    known = _SPELLING_REFERENCES.get(id(reference))
    if known is not None and known[0] is reference:
        return known[1]
    if len(_SPELLING_REFERENCES) >= 1024:  # a long-lived process: stay bounded
        _SPELLING_REFERENCES.clear()
    spells = _spells(entries, reference)
    _SPELLING_REFERENCES[id(reference)] = (reference, spells)
    return spells


def first_differing_token(reference: Sequence[LoggedToken],
                          reply: Sequence[LoggedToken]) -> int | None:
    """Index of the first step whose tokens differ byte-wise; None when one sequence is
    a prefix of the other (equal ones included)."""
    for step, (ours, theirs) in enumerate(zip(reference, reply, strict=False)):
        # equal strings are equal bytes; unequal ones may still be (two ways to hold
        # one byte), so only they are encoded
        if ours.token != theirs.token and exact_bytes(ours.token) != exact_bytes(theirs.token):
            return step
    return None


def _logprob_of(token: str, candidates: Sequence[Candidate]) -> float | None:
    wanted = exact_bytes(token)
    for candidate in candidates:
        if exact_bytes(candidate.token) == wanted:
            return candidate.logprob
    return None


@dataclass(frozen=True, slots=True)
class DivergenceEvidence:
    """What a reply's divergence class reads of it, given the reference it is compared
    with (`divergence_evidence`): a few values in place of its tens of steps and their
    candidates. A report keeps these for every diverged reply of a huge soak as it reads
    them once, and classifies the cells (`cell_divergence`) when the score knows them."""

    logprobs: bool
    """Whether the reply carried token logprobs (nothing below is read when not)."""
    spells: bool = False
    """Whether its tokens spell its text (`_spells`)."""
    length: int = 0
    """How many steps it has."""
    step: int | None = None
    """The first step whose token differs from the reference's (None: one sequence of
    tokens is a prefix of the other, or the tokens do not spell either reply)."""
    token: str = ""
    """The reply's token at `step`."""
    logprob: float = 0.0
    """Its log-probability there."""
    reference_token_logprob: float | None = None
    """The reply's log-probability of the reference's token at `step`, when that token
    is among the reply's candidates there."""


_WITHOUT_LOGPROBS = DivergenceEvidence(logprobs=False)


def divergence_evidence(reference: Reply, reply: LoggedReply) -> DivergenceEvidence:
    """What `classify_evidence` needs of `reply` to classify it against `reference`."""
    theirs = reply.token_logprobs
    if theirs is None:
        return _WITHOUT_LOGPROBS
    ours = reference.token_logprobs
    spells = _spells(theirs, reply)
    if ours is None or not spells:
        return DivergenceEvidence(True, spells, len(theirs))
    step = first_differing_token(ours, theirs)
    if step is None:
        return DivergenceEvidence(True, True, len(theirs))
    taken = theirs[step]
    return DivergenceEvidence(True, True, len(theirs), step, taken.token, taken.logprob,
                              _logprob_of(ours[step].token, taken.top))


_NO_LOGPROBS_POINTS: dict[tuple[str, float, str | None], DivergencePoint] = {}
"""`classify_evidence`'s point for a pair without logprobs, by which side lacks them,
threshold and foreign canary (a few per run)."""


def classify_divergence(reference: Reply, reply: LoggedReply, *, threshold: float,
                        foreign: str | None = None) -> DivergencePoint:
    """The divergence class of `reply` against `reference` (see `DivergencePoint`).

    near-tie: margin known exactly and below `threshold`, and no foreign canary.
    substantive: a foreign canary (always), or margin (exact or lower bound) at or above
    `threshold`. unclassified: anything the logprobs cannot decide, with the reason."""
    return classify_evidence(reference, divergence_evidence(reference, reply),
                             threshold=threshold, foreign=foreign)


def classify_evidence(reference: Reply, evidence: DivergenceEvidence, *, threshold: float,
                      foreign: str | None = None) -> DivergencePoint:
    """`classify_divergence` of the reply this is the evidence of (against `reference`)."""
    def point(kind: str, reason: str, **found: Any) -> DivergencePoint:
        if foreign is not None:
            kind = SUBSTANTIVE
            reason = f"foreign canary {foreign} in the reply (a leak is always substantive)"
        return DivergencePoint(kind, reason, threshold, foreign=foreign, **found)

    ours = reference.token_logprobs
    if ours is None or not evidence.logprobs:
        # the same point for every such cell of a run (a soak without logprobs diverging
        # everywhere: tens of thousands), made once; points are immutable
        which = "reference" if ours is None else "reply"
        key = (which, threshold, foreign)
        known = _NO_LOGPROBS_POINTS.get(key)
        if known is None:
            if len(_NO_LOGPROBS_POINTS) >= 1024:  # a long-lived process: stay bounded
                _NO_LOGPROBS_POINTS.clear()
            known = _NO_LOGPROBS_POINTS[key] = point(
                UNCLASSIFIED, f"no token logprobs in the {which} (the server sent none or "
                              "the run asked for none: --logprobs)")
        return known
    if not (_reference_spells(reference, ours) and evidence.spells):
        return point(UNCLASSIFIED, "the logprob tokens do not spell the reply's text")
    step = evidence.step
    if step is None:
        if len(ours) == evidence.length:
            return point(UNCLASSIFIED, "the same tokens: the replies differ in tool calls, "
                                       "finish reason or token accounting")
        return point(UNCLASSIFIED, f"one reply stopped at token {min(len(ours), evidence.length)} "
                                   "where the other went on (an end of sequence has no "
                                   "logprob entry)", step=min(len(ours), evidence.length))
    chosen = ours[step]
    found: dict[str, Any] = {"step": step, "reference_token": chosen.token,
                             "reply_token": evidence.token, "reference_top": chosen.top}
    if evidence.reference_token_logprob is not None:
        found["reply_margin"] = evidence.logprob - evidence.reference_token_logprob
    alternative = _logprob_of(evidence.token, chosen.top)
    if alternative is not None:
        margin = chosen.logprob - alternative
        kind = NEAR_TIE if margin < threshold else SUBSTANTIVE
        relation = "under" if kind == NEAR_TIE else "at or above"
        return point(kind, f"the reference preferred its token by {margin:.3f} nats, "
                           f"{relation} the {threshold:g}-nat threshold", margin=margin, **found)
    if not chosen.top:
        return point(UNCLASSIFIED, "the reference reported no top candidates at the "
                                   "diverging token", **found)
    bound = chosen.logprob - min(candidate.logprob for candidate in chosen.top)
    if bound >= threshold:
        return point(SUBSTANTIVE, f"the reply's token is not among the reference's "
                                  f"{len(chosen.top)} top candidates: margin at least "
                                  f"{bound:.3f} nats", margin=bound, margin_is_bound=True,
                     **found)
    return point(UNCLASSIFIED, f"the reply's token is not among the reference's "
                               f"{len(chosen.top)} top candidates and the margin is only "
                               f"known to be at least {bound:.3f} nats (ask for more with "
                               "--logprobs)", margin=bound, margin_is_bound=True, **found)


# -- classification -----------------------------------------------------------------------
def classify(reference: Reply, got: Outcome, own_canary: str, canaries: Sequence[str],
             floor: int, *, persistent_leg: bool, rung_unmeasured: str | None = None,
             reference_form: str | None = None) -> CellClass:
    """One measured outcome against its probe's (stable) solo reference.

    `rung_unmeasured`: why the rung this outcome belongs to cannot be compared (failed
    requests, not concurrent); then only a foreign canary still classifies the cell.
    `reference_form`: `canonical(reference)`, when the caller has it (`score` makes it
    once per probe, not once per cell). A reply that *is* the reference (the report
    shares the reference's reply with every request whose reply the scoring cannot tell
    from it) is compared by identity: the same form, the same token count."""
    if got is None:
        return Unmeasured(NOT_RECORDED)
    if not got.ok or got.reply is None:
        own = f"request failed: {got.error or 'no reply'}"  # the client's line: valid text
        return Unmeasured(f"{rung_unmeasured} (this one: {own})" if rung_unmeasured else own)
    reply = got.reply
    if reply.completion_tokens < floor:
        return Unmeasured(rung_unmeasured
                          or f"only {reply.completion_tokens} completion tokens (floor {floor})")
    expected = canonical(reference) if reference_form is None else reference_form
    actual = expected if reply is reference else canonical(reply)
    foreign = _foreign_in(actual, own_canary, canaries)
    if foreign:
        return Contaminated(foreign[0])
    if rung_unmeasured:
        return Unmeasured(rung_unmeasured)
    if reply is reference:
        return Identical()
    if not same_stream(expected, actual):
        at = common_prefix(expected, actual)
        if persistent_leg:
            return Persistent(at)
        return Diverged.at_char(at, expected, actual)
    if reference.completion_tokens != reply.completion_tokens:
        # the same text accounted for differently is still a different answer
        return Diverged(len(expected),
                        f"identical stream but completion_tokens "
                        f"{reference.completion_tokens} vs {reply.completion_tokens}")
    return Identical()


def reference_of(a: Outcome, b: Outcome, floor: int) -> Reply | CellClass:
    """The usable reference reply of a probe whose solo references are `a` and `b`
    (A's, the very object), or the class of its `ref` cell."""
    for name, outcome in (("A", a), ("B", b)):
        if outcome is None:
            return Unmeasured(f"solo reference {name} {NOT_RECORDED}")
        if not outcome.ok or outcome.reply is None:
            return Unmeasured(f"solo reference {name} failed: {outcome.error or 'no reply'}")
    assert a is not None and b is not None and a.reply is not None and b.reply is not None
    if min(a.reply.completion_tokens, b.reply.completion_tokens) < floor:
        return Unmeasured(
            f"a solo reference was below the {floor} completion-token floor "
            f"({a.reply.completion_tokens} and {b.reply.completion_tokens} tokens)")
    if not same_stream(canonical(a.reply), canonical(b.reply)) \
            or a.reply.completion_tokens != b.reply.completion_tokens:
        return AloneUnstable()
    return a.reply


def probe_reference(legs: Legs, probe: int) -> Reply | CellClass:
    """The reply a probe's measured cells are compared with (its solo reference A), or
    the class of its `ref` cell when it has no usable one."""
    return reference_of(legs.ref_a[probe],
                      legs.ref_b[probe] if probe < len(legs.ref_b) else None,
                      legs.min_completion_tokens)


# -- the score ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    prompts: int = 0
    rungs: int = 0
    compared: int = 0
    identical: int = 0
    diverged: int = 0
    contaminated: int = 0
    persistent: int = 0
    alone_unstable: int = 0
    unmeasured: int = 0
    foreign_canaries: int = 0
    tokens_compared: int = 0
    earliest_divergence: int | None = None
    near_tie: int = 0
    substantive: int = 0
    unclassified: int = 0
    cells: tuple[Cell, ...] = ()
    """Every cell but those of replies classified as they were read (`Judged`), which
    are counted only (`cells_total` counts every cell)."""
    fidelity: tuple[RungFidelity, ...] = ()
    rung_kinds: tuple[frozenset[str], ...] = ()
    """The kinds of each rung's cells (of `Judged` replies too), in the order of
    `fidelity`."""

    COUNTERS: ClassVar[tuple[str, ...]] = (
        "prompts", "rungs", "compared", "identical", "diverged", "contaminated",
        "persistent", "alone_unstable", "unmeasured", "foreign_canaries",
        "tokens_compared", "earliest_divergence", "near_tie", "substantive", "unclassified")

    def counters(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.COUNTERS}

    @property
    def cells_total(self) -> int:
        """Every cell classified: each increments exactly one class counter."""
        return (self.identical + self.diverged + self.contaminated + self.persistent
                + self.alone_unstable + self.unmeasured)

    @property
    def unmeasured_rungs(self) -> list[str]:
        """Why each rung that could not be compared could not (one reason per rung)."""
        return [reason for reason in (f.unmeasured_reason for f in self.fidelity) if reason]


@dataclass
class _Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASS_NAMES, 0))
    compared: int = 0
    foreign: int = 0
    tokens: int = 0
    earliest: int | None = None
    cells: list[Cell] = field(default_factory=list)
    divergences: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIVERGENCE_KINDS, 0))

    def add(self, cell: Cell, *, compared: bool, reference_tokens: int = 0,
            foreign: int = 0) -> None:
        self.cells.append(cell)
        result = cell.result
        self.count(result.kind, compared=compared,
                   at=result.at if isinstance(result, (Diverged, Persistent)) else None,
                   divergence=None if cell.divergence is None else cell.divergence.kind,
                   reference_tokens=reference_tokens, foreign=foreign)

    def count(self, kind: str, *, compared: bool, at: int | None, divergence: str | None,
              reference_tokens: int, foreign: int) -> None:
        """Count a cell of this kind without holding it (`add` holds it too)."""
        self.counts[kind] += 1
        self.compared += compared
        if kind == Identical.kind:
            self.tokens += reference_tokens
        if at is not None:
            self.earliest = at if self.earliest is None else min(self.earliest, at)
        if kind == Contaminated.kind:
            self.foreign += foreign
        if divergence is not None:
            self.divergences[divergence] += 1


def _fidelity_of(rung: RungOutcomes) -> RungFidelity:
    """The rung's fidelity as given, else computed from its requests."""
    if rung.fidelity is not None:
        return rung.fidelity
    return rung_fidelity(rung.label, rung.concurrency, rung.repeat, list(rung.requests),
                         list(rung.cancel_planned))


def score(legs: Legs) -> Score:
    floor = legs.min_completion_tokens
    canaries = list(legs.canaries)
    fidelity = tuple(_fidelity_of(rung) for rung in legs.rungs)
    unmeasured = [fit.unmeasured_reason for fit in fidelity]  # once a rung, not a cell
    # each rung's kinds as bits over CLASS_NAMES (a small int, held once by Python), not a
    # set a rung: a soak of rungs of two has half a million of them
    rung_kinds = [0] * len(legs.rungs)
    tally = _Tally()
    for probe in range(len(legs.ref_a)):
        own = canaries[probe] if probe < len(canaries) else ""
        reference = probe_reference(legs, probe)
        if not isinstance(reference, Reply):
            tally.add(Cell(probe, REFERENCE_LEG, 1, reference,
                           _references_divergence(reference, legs, probe)), compared=False)
            continue
        form = canonical(reference)
        measured: Iterable[tuple[str, int, RungOutcome, bool, str | None]] = chain((
            (rung.label, rung.repeat, rung.scored[probe] if probe < len(rung.scored) else None,
             False, reason)
            for rung, reason in zip(legs.rungs, unmeasured, strict=False)), [
            (POST_LEG, 1, legs.post[probe] if probe < len(legs.post) else None, True, None)])
        # one reply object classifies alike in every cell of the probe with the same
        # reason to be unmeasured: the report shares one object among the requests whose
        # stored replies are the same bytes (the reference's above all, and a diverged
        # variant a server gives again and again), so each is judged once per reason,
        # not once per cell. Keyed by identity; the value keeps the reply alive.
        judged_replies: dict[tuple[int, bool, str | None],
                             tuple[Reply, tuple[CellClass, DivergencePoint | None, int]]] = {}
        for index, (label, repeat, got, persistent_leg, rung_unmeasured) in enumerate(measured):
            if isinstance(got, Judged):
                if got.reference is not reference or persistent_leg:
                    raise ValueError(f"probe {probe} {label}: a reply classified against "
                                     "another reference, or out of a rung")
                kind, at, divergence_kind, foreign = got.in_rung(rung_unmeasured)
                tally.count(kind, compared=True, at=at, divergence=divergence_kind,
                            reference_tokens=reference.completion_tokens, foreign=foreign)
                rung_kinds[index] |= _KIND_BIT[kind]
                continue
            reply = got.reply if got is not None and got.error is None else None
            known = (None if reply is None
                     else judged_replies.get((id(reply), persistent_leg, rung_unmeasured)))
            if known is not None:
                judged = known[1]
            else:
                judged = _judged(reference, got, own, canaries, floor, legs.near_tie_nats,
                                 persistent_leg, rung_unmeasured, form)
                if reply is not None:
                    judged_replies[(id(reply), persistent_leg, rung_unmeasured)] = (reply,
                                                                                   judged)
            result, divergence, foreign = judged
            tally.add(Cell(probe, label, repeat, result, divergence), compared=True,
                      reference_tokens=reference.completion_tokens, foreign=foreign)
            if not persistent_leg:
                rung_kinds[index] |= _KIND_BIT[result.kind]
    counts = tally.counts
    return Score(
        prompts=len(legs.ref_a), rungs=len(legs.rungs), compared=tally.compared,
        identical=counts["identical"], diverged=counts["diverged"],
        contaminated=counts["contaminated"], persistent=counts["persistent"],
        alone_unstable=counts["alone_unstable"], unmeasured=counts["unmeasured"],
        foreign_canaries=tally.foreign, tokens_compared=tally.tokens,
        earliest_divergence=tally.earliest, near_tie=tally.divergences[NEAR_TIE],
        substantive=tally.divergences[SUBSTANTIVE],
        unclassified=tally.divergences[UNCLASSIFIED], cells=tuple(tally.cells),
        fidelity=fidelity, rung_kinds=_kinds_of(rung_kinds))


_KIND_BIT = {kind: 1 << index for index, kind in enumerate(CLASS_NAMES)}
"""Each cell kind's bit in a rung's kinds as `score` gathers them."""


def _kinds_of(masks: Iterable[int]) -> tuple[frozenset[str], ...]:
    """The rungs' kinds from their bits (`_KIND_BIT`), each distinct set one object (a
    soak of tiny rungs has a few sets over a hundred thousand rungs)."""
    distinct: dict[int, frozenset[str]] = {}

    def kinds(mask: int) -> frozenset[str]:
        found = distinct.get(mask)
        if found is None:
            found = distinct[mask] = frozenset(
                kind for kind, bit in _KIND_BIT.items() if mask & bit)
        return found

    return tuple(map(kinds, masks))


def rung_cell(legs: Legs, index: int, probe: int, got: Outcome) -> Cell:
    """The cell `score` makes of probe `probe` in rung `legs.rungs[index]` when the
    request's outcome is `got`: a view showing a cell the score counted as `Judged`
    reads its reply again and makes the cell here. ValueError for a probe without a
    usable reference (it has no rung cells)."""
    reference = probe_reference(legs, probe)
    if not isinstance(reference, Reply):
        raise ValueError(f"probe {probe} has no usable reference, so no rung cells")
    rung = legs.rungs[index]
    canaries = list(legs.canaries)
    result, divergence, _ = _judged(
        reference, got, canaries[probe] if probe < len(canaries) else "", canaries,
        legs.min_completion_tokens, legs.near_tie_nats, False,
        _fidelity_of(rung).unmeasured_reason, canonical(reference))
    return Cell(probe, rung.label, rung.repeat, result, divergence)


def _judged(reference: Reply, got: Outcome, own: str, canaries: Sequence[str], floor: int,
            near_tie_nats: float, persistent_leg: bool, rung_unmeasured: str | None,
            form: str, evidence: DivergenceEvidence | None = None,
            ) -> tuple[CellClass, DivergencePoint | None, int]:
    """One measured outcome's class, its divergence point (a diverged, persistent or
    contaminated cell's, from `evidence` when given, else from the reply) and how many
    foreign canaries its reply holds."""
    result = classify(reference, got, own, canaries, floor, persistent_leg=persistent_leg,
                      rung_unmeasured=rung_unmeasured, reference_form=form)
    foreign = 0
    if isinstance(result, Contaminated) and got is not None and got.reply is not None:
        foreign = len(foreign_canaries(got.reply, own, canaries))
    divergence = None
    if got is not None and got.reply is not None and _has_divergence(result):
        divergence = cell_divergence(
            reference, result,
            divergence_evidence(reference, got.reply) if evidence is None else evidence,
            near_tie_nats)
    return result, divergence, foreign


def judged(reference: Reply, got: RequestOutcome, own: str, canaries: Sequence[str],
           floor: int, near_tie_nats: float, *, reference_form: str | None = None,
           evidence: DivergenceEvidence | None = None) -> Judged | None:
    """A rung request's reply classified against its probe's reference as `score` would
    classify it (`Judged`), its divergence point from `evidence` when given (a reply
    read without its token logprobs), else from the reply's own; None for an outcome
    whose class needs its rung's reason to be unmeasured (a failed request, a reply
    below the floor): those are scored from the outcome."""
    reply = got.reply
    if not got.ok or reply is None or reply.completion_tokens < floor:
        return None
    form = canonical(reference) if reference_form is None else reference_form
    result, divergence, foreign = _judged(reference, got, own, canaries, floor, near_tie_nats,
                                          False, None, form, evidence)
    return Judged(result.kind, result.at if isinstance(result, Diverged) else None,
                  None if divergence is None else divergence.kind, foreign, reference)


def _has_divergence(result: CellClass) -> bool:
    return isinstance(result, (Diverged, Persistent, Contaminated))


def _leaked(result: CellClass) -> str | None:
    """The foreign canary of a contaminated cell, None for any other."""
    return result.foreign if isinstance(result, Contaminated) else None


def cell_divergence(reference: Reply, result: CellClass, evidence: DivergenceEvidence,
                    threshold: float) -> DivergencePoint | None:
    """The divergence point of a measured cell of class `result` whose reply's evidence
    is `evidence`: a diverged, persistent or contaminated cell's (a leak's is substantive
    under its foreign canary); None for any other class."""
    if not _has_divergence(result):
        return None
    return classify_evidence(reference, evidence, threshold=threshold,
                             foreign=_leaked(result))


def with_divergences(result: Score, points: Mapping[int, DivergencePoint]) -> Score:
    """`result` with the divergence points of these cells (by index in `result.cells`)
    replaced and the divergence classes counted again. A cell's class never depends on
    its reply's token logprobs, only its divergence point does: so a score of replies
    read without them, given the points of the same replies read whole
    (`cell_divergence`), is the score of the whole replies, with no second pass and
    without holding every whole reply at once."""
    if not points:
        return result
    cells = list(result.cells)
    kinds = {NEAR_TIE: result.near_tie, SUBSTANTIVE: result.substantive,
             UNCLASSIFIED: result.unclassified}
    for index, point in points.items():
        before = cells[index].divergence
        if before is None:
            raise ValueError(f"cell {index} ({cells[index].leg}, probe {cells[index].probe}) "
                             "has no divergence point to replace")
        kinds[before.kind] -= 1
        kinds[point.kind] += 1
        cells[index] = replace(cells[index], divergence=point)
    return replace(result, cells=tuple(cells), near_tie=kinds[NEAR_TIE],
                   substantive=kinds[SUBSTANTIVE], unclassified=kinds[UNCLASSIFIED])


def _references_divergence(reference: Reply | CellClass, legs: Legs,
                           probe: int) -> DivergencePoint | None:
    """An alone-unstable probe's two solo references, B classified against A."""
    if not isinstance(reference, AloneUnstable):
        return None
    a, b = legs.ref_a[probe], legs.ref_b[probe] if probe < len(legs.ref_b) else None
    if a is None or b is None or a.reply is None or b.reply is None:
        return None
    return classify_divergence(a.reply, b.reply, threshold=legs.near_tie_nats)


# -- bisect -------------------------------------------------------------------------------
def kinds_diverge(kinds: Collection[str]) -> bool | None:
    """Whether one rung's cells, of these kinds, show a divergence (diverged or
    contaminated), None when the rung could not be measured (its cells are unmeasured
    and none diverged)."""
    if set(kinds) & {Diverged.kind, Contaminated.kind}:
        return True
    if Unmeasured.kind in kinds:
        return None
    return False


def bisect_step(low: int, high: int,
                diverges: dict[int, bool | None]) -> tuple[int | None, int | None]:
    """(the next level to run, the smallest diverging level found) of a binary search for
    the smallest concurrency in [low, high] at which a probe diverges, given what the
    levels run so far showed. The top of the range is run first: no divergence there
    ends the search with nothing found. Pure and replayable, so a resumed run and the
    report retrace the same steps. Both are None when the search cannot go on (a rung
    was unmeasured) or found nothing."""
    if any(shown is None for shown in diverges.values()):
        return None, None
    if high not in diverges:
        return high, None
    if not diverges[high]:
        return None, None
    lo, hi = low, high
    while lo < hi:
        middle = (lo + hi) // 2
        if middle not in diverges:
            return middle, None
        if diverges[middle]:
            hi = middle
        else:
            lo = middle + 1
    return None, hi


def _problems(result: Score) -> list[str]:
    problems = []
    if result.unmeasured:
        # the first few reasons and a count, not every one held (a soak of rungs of two
        # can have a few hundred thousand rungs unmeasured)
        reasons: list[str] = []
        unmeasured_rungs = 0
        for reason in (fit.unmeasured_reason for fit in result.fidelity):
            if reason:
                unmeasured_rungs += 1
                if len(reasons) < MAX_RUNGS_NAMED:
                    reasons.append(reason)
        if unmeasured_rungs > MAX_RUNGS_NAMED:  # --repeat can make hundreds: keep it readable
            reasons.append(f"and {unmeasured_rungs - MAX_RUNGS_NAMED} more rungs, see the report")
        # a cell of such a rung says exactly its rung's reason, or that + " (this one: ...)"
        held = [c for c in result.cells if isinstance(c.result, Unmeasured)]
        rung_reasons = set(result.unmeasured_rungs) if held else set()
        others = [c for c in held if isinstance(c.result, Unmeasured)
                  and c.result.why.partition(" (this one: ")[0] not in rung_reasons]
        if others:  # name one other cause, so the line says what to look at
            first = others[0]
            assert isinstance(first.result, Unmeasured)
            reasons.append(f"e.g. probe {first.probe} {first.leg}: "
                           f"{one_line(first.result.why, 120)}")
        problems.append(f"{result.unmeasured} unmeasured ({'; '.join(reasons)})")
    if result.alone_unstable:
        problems.append(f"{result.alone_unstable} not reproducible alone at temperature 0 "
                        "(contamination cannot be attributed for them)")
    if result.contaminated:
        problems.append(f"{result.contaminated} CONTAMINATED "
                        f"({result.foreign_canaries} foreign canaries)")
    if result.persistent:
        problems.append(f"{result.persistent} PERSISTENT (survived into solo requests)")
    if result.diverged:
        problems.append(f"{result.diverged} diverged")
    if result.near_tie or result.substantive > result.contaminated:
        # only once logprobs classified something beyond the canary leaks
        problems.append(f"divergence classes: {result.near_tie} near-tie, "
                        f"{result.substantive} substantive, {result.unclassified} unclassified")
    return problems


def verdict(result: Score) -> Verdict:
    """Zero tolerance: any cell that is not `Identical` fails, and so does nothing compared.

    A numerics-only flip (batch width changing a near-tie argmax) is `Diverged`, not
    `Contaminated`, and still fails: no bound says how many flipped tokens make a leak.
    """
    problems = _problems(result)
    if result.compared == 0:
        detail = "0 comparisons"
        if problems:
            detail += " · " + " · ".join(problems)
        return Verdict.nothing_measured(detail)
    if not problems:
        return Verdict.passed(
            f"{result.prompts} prompts × {result.rungs} rungs + post-check: all "
            f"{result.compared} replies identical to their solo reference "
            f"({result.tokens_compared} tokens compared)")
    where = ("" if result.earliest_divergence is None
             else f"; earliest divergence at char {result.earliest_divergence}")
    return Verdict.failed(" · ".join(problems) + where)

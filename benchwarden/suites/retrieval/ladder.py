"""The king-of-the-hill ladder: public seeds, paired decisions, an append-only ledger.

A ladder is a folder holding `ledger.jsonl` (every decision, hash-chained), the
champions it promoted (`champions/NNN-name.py`, each with a provenance header) and, by
default, the store of the runs it scored (`store.sqlite`).

Invariants:
- Seeds come from a public value: seed i = int(first 12 hex digits of
  sha256(f"{base}:{date}:{i}")), so anyone can re-derive and re-run a decision.
- The ledger is append-only and tamper-evident: each line carries the hash of the
  previous line and its own hash over that link plus its canonical JSON body. Reading
  it checks the chain and names the first broken line.
- The first entry (genesis) names the initial champion; the current champion is the
  challenger of the latest decision that dethroned, else the genesis champion.
- A challenger whose run failed (sandbox limit, crash, error, no boundary) holds by
  construction: it is recorded with its one-line reason and can never be promoted.
- A ladder lives on one bench version (its genesis entry's): a challenge under another
  version is refused before anything runs, since old reigns were won on other numbers.
- Champion and challenger both run in the sandbox under the isolation the caller
  chose (recorded in the decision), with the ladder folder and the store hidden.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from benchwarden.core.chain import GENESIS_HASH, link_hash
from benchwarden.core.files import write_text_atomically
from benchwarden.core.provenance import git_sha
from benchwarden.core.records import canonical_json
from benchwarden.core.store import Store
from benchwarden.core.version import __version__
from benchwarden.suites.retrieval.driver import RunSettings, hiding_the_store, run_strategy
from benchwarden.suites.retrieval.report import build_report
from benchwarden.suites.retrieval.sandbox import SandboxLimits
from benchwarden.suites.retrieval.scoring import BENCH_VERSION, DECIDE_ON, decide
from benchwarden.suites.retrieval.strategies import StrategySpec, parse_strategy

LEDGER_NAME = "ledger.jsonl"
CHAMPIONS_DIR = "champions"
DEFAULT_CHAMPION = "bm25"
DEFAULT_SEED_COUNT = 12
EXIT_DETHRONED = 0
EXIT_ERROR = 1
EXIT_HELD = 3

_decoder = msgspec.json.Decoder()


class LedgerError(ValueError):
    """The ledger cannot be trusted or used; the message is one line."""


# The shape of the entries this module writes, as far as anything reads them back
# (`champion`, `champion_spec`, `leaderboard`, `ladder show`). The hash chain proves a
# line unedited since it was appended, not that whoever appended it was this program:
# the hash is public, so a line of another shape can carry a valid hash. A genesis or a
# decision is checked against its shape when read, so a wrong one is a LedgerError
# naming the line and the field, never a KeyError or TypeError deep in a reader.
# Unknown fields are allowed (a later version may add some); entries of other kinds are
# skipped by every reader, so only their being objects is required, and the readers
# that need a genesis first (`first_genesis`) say so when it is not.
class _Strategy(msgspec.Struct):
    name: str
    builtin: bool = False
    path: str | None = None
    object: str | None = None
    source_sha256: str | None = None


class _Scored(_Strategy):
    scored_seeds: list[int] = []
    composite: list[float] = []
    composite_guarded: list[float] = []
    failure: dict[str, Any] | None = None


class _Verdict(msgspec.Struct):
    mean_diff: float | None = None
    se: float | None = None
    band: float | None = None
    dethroned: bool = False


class _Genesis(msgspec.Struct):
    kind: Literal["genesis"]
    at: float
    champion: _Strategy
    seq: int = 0


class _Decision(msgspec.Struct):
    kind: Literal["decision"]
    at: float
    date: str
    seq: int
    decide_on: Literal["composite", "composite_guarded"]
    outcome: Literal["dethroned", "held", "error"]
    champion: _Scored
    challenger: _Scored
    verdict: _Verdict | None = None
    promoted: _Strategy | None = None


_SHAPES: dict[str, tuple[type[msgspec.Struct], str]] = {
    "genesis": (_Genesis, "a genesis entry"), "decision": (_Decision, "a decision")}


def _check_shape(where: str, entry: dict[str, Any]) -> None:
    """Refuse (LedgerError) a genesis or decision whose fields are not of the shape
    written here."""
    kind = entry.get("kind")
    if not isinstance(kind, str) or kind not in _SHAPES:
        return
    shape, what = _SHAPES[kind]
    try:
        checked = msgspec.convert(entry, shape)
    except msgspec.ValidationError as error:
        raise LedgerError(f"{where} is not {what} of this benchwarden's shape ({error}); "
                          "the ledger was not written by `benchwarden ladder`") from None
    if isinstance(checked, _Decision) and checked.outcome == "dethroned" \
            and checked.promoted is None:
        raise LedgerError(f"{where} is a dethroning decision that names no promoted "
                          "champion; the ledger was not written by `benchwarden ladder`")


def derive_seeds(base: str, date: str, count: int = DEFAULT_SEED_COUNT) -> list[int]:
    """Seeds anyone can recompute from the public base (a commit sha) and the date."""
    if count < 1:
        raise ValueError("a ladder needs at least one seed")
    return [int(hashlib.sha256(f"{base}:{date}:{i}".encode()).hexdigest()[:12], 16)
            for i in range(count)]


def entry_hash(previous: str, body: Mapping[str, Any]) -> str:
    return link_hash(previous, canonical_json(dict(body)))


@dataclass(frozen=True)
class ChallengeResult:
    exit_code: int
    outcome: str  # "dethroned" | "held" | "error"
    reason: str
    entry: dict[str, Any]
    failures: dict[str, Any] = field(default_factory=dict)  # role -> failure, with traceback


class Ladder:
    """One ladder folder. Reading verifies the chain; appending holds a file lock."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.ledger_path = self.directory / LEDGER_NAME

    # -- ledger --------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        if not self.ledger_path.exists():
            return []
        entries: list[dict[str, Any]] = []
        previous = GENESIS_HASH
        with open(self.ledger_path, "rb") as stream:
            for number, raw in enumerate(stream, start=1):
                if not raw.strip():
                    continue
                try:
                    entry = _decoder.decode(raw)
                except msgspec.DecodeError:
                    raise LedgerError(f"{self.ledger_path} line {number} is not JSON") from None
                if not isinstance(entry, dict):
                    raise LedgerError(f"{self.ledger_path} line {number} is JSON but not an "
                                      "object; the ledger was not written by `benchwarden "
                                      "ladder`")
                body = {k: v for k, v in entry.items() if k != "hash"}
                if entry.get("prev_hash") != previous:
                    raise LedgerError(f"{self.ledger_path} line {number}: chain broken "
                                      "(a line was removed, reordered or inserted)")
                if entry_hash(previous, body) != entry.get("hash"):
                    raise LedgerError(f"{self.ledger_path} line {number}: contents do not "
                                      "match their hash (edited after it was written)")
                _check_shape(f"{self.ledger_path} line {number}", entry)
                previous = entry["hash"]
                entries.append(entry)
        return entries

    def append(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.ledger_path, "ab") as stream:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            try:
                existing = self.entries()
                previous = existing[-1]["hash"] if existing else GENESIS_HASH
                entry = dict(body)
                entry["seq"] = len(existing)
                entry["prev_hash"] = previous
                entry["hash"] = entry_hash(previous, entry)
                stream.write(canonical_json(entry) + b"\n")
                stream.flush()
                os.fsync(stream.fileno())
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
        return entry

    def ensure_genesis(self, champion: str = DEFAULT_CHAMPION) -> None:
        if self.entries():
            return
        spec = parse_strategy(champion)
        self.append({"kind": "genesis", "at": time.time(),
                     "champion": self._describe(spec), "bench_version": BENCH_VERSION})

    # -- champions -------------------------------------------------------------
    def champion(self) -> dict[str, Any]:
        """The current champion's description (as written in the ledger)."""
        entries = self.entries()
        if not entries:
            raise LedgerError(f"{self.ledger_path} has no entries; run a challenge first")
        current = first_genesis(entries)["champion"]
        for entry in entries[1:]:
            if entry.get("kind") == "decision" and entry.get("outcome") == "dethroned":
                current = entry["promoted"]
        return current

    def champion_spec(self) -> StrategySpec:
        champion = self.champion()
        if champion.get("builtin"):
            return parse_strategy(champion["name"])
        path = self.directory / champion["path"]
        spec = parse_strategy(f"{path}:{champion['object']}")
        if champion.get("source_sha256") and spec.source_sha256 != champion["source_sha256"]:
            raise LedgerError(f"champion file {path} changed since it was promoted "
                              "(its sha256 no longer matches the ledger)")
        return spec

    def _describe(self, spec: StrategySpec) -> dict[str, Any]:
        description = spec.describe()
        if spec.path and Path(spec.path).is_relative_to(self.directory.resolve()):
            description["path"] = str(Path(spec.path).relative_to(self.directory.resolve()))
        return description

    def promote(self, spec: StrategySpec, header: str) -> dict[str, Any]:
        """Copy a winning file into the ladder with a provenance header; describe it."""
        if spec.builtin:
            return spec.describe()
        assert spec.path is not None and spec.attribute is not None
        folder = self.directory / CHAMPIONS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        number = len(list(folder.glob("*.py"))) + 1
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(spec.path).stem)
        target = folder / f"{number:03d}-{stem}.py"
        source = Path(spec.path).read_text(encoding="utf-8")
        write_text_atomically(target, header + source, mode=0o644)
        promoted = parse_strategy(f"{target}:{spec.attribute}")
        description = promoted.describe()
        description["path"] = str(target.relative_to(self.directory))
        description["name"] = spec.name
        description["original_sha256"] = spec.source_sha256
        return description


def _header(spec: StrategySpec, base: str, date: str, seeds: list[int], decide_on: str,
            decision: Any) -> str:
    verdict = decision.verdict
    lines = [
        "# Promoted to champion by `benchwarden ladder challenge`.",
        f"# decided {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} on {decide_on}, "
        f"bench_version {BENCH_VERSION}, benchwarden {__version__}",
        f"# seeds: {len(seeds)} derived from sha256(f'{{base}}:{{date}}:{{i}}') with "
        f"base {base} and date {date}",
        f"# mean_diff {verdict.mean_diff:+.6f} >= band {verdict.band:.6f} (se {verdict.se:.6f})",
        f"# original: {spec.path} ({spec.attribute}), sha256 {spec.source_sha256}",
        "",
    ]
    return "\n".join(lines) + "\n"


def default_base() -> str | None:
    sha = git_sha()
    return sha.split("+")[0] if sha else None


def challenge(ladder: Ladder, challenger_text: str, *, store: Store, base: str, date: str,
              seed_count: int = DEFAULT_SEED_COUNT, decide_on: str = "composite",
              limits: SandboxLimits = SandboxLimits(), limit: int = 10,
              budget_chars: int = 2000, initial_champion: str = DEFAULT_CHAMPION,
              isolation: str = "bwrap",
              on_progress: Callable[[str, int], None] | None = None) -> ChallengeResult:
    """Score champion and challenger on the derived seeds, decide, record, maybe promote."""
    if decide_on not in DECIDE_ON:
        raise ValueError(f"decide on composite or composite_guarded, not {decide_on!r}")
    challenger_spec = parse_strategy(challenger_text)
    ladder.directory.mkdir(parents=True, exist_ok=True)
    # One challenge at a time per ladder: a decision is only meaningful against the
    # champion it was scored against, so a second challenger waits for the first.
    with open(ladder.directory / ".challenge.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            return _challenge_locked(ladder, challenger_spec, store=store, base=base, date=date,
                                     seed_count=seed_count, decide_on=decide_on, limits=limits,
                                     limit=limit, budget_chars=budget_chars,
                                     initial_champion=initial_champion, isolation=isolation,
                                     on_progress=on_progress)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _challenge_locked(ladder: Ladder, challenger_spec: StrategySpec, *, store: Store, base: str,
                      date: str, seed_count: int, decide_on: str, limits: SandboxLimits,
                      limit: int, budget_chars: int, initial_champion: str, isolation: str,
                      on_progress: Callable[[str, int], None] | None) -> ChallengeResult:
    ladder.ensure_genesis(initial_champion)
    check_bench_version(ladder.entries())
    champion_spec = ladder.champion_spec()
    seeds = derive_seeds(base, date, seed_count)
    settings = RunSettings(limit=limit, budget_chars=budget_chars, sandbox=True,
                           sandbox_limits=limits, isolation=isolation,
                           # the folder, and the ledger file itself in case the
                           # strategy's own folder (shown read-only) is the ladder's
                           hidden=(str(ladder.directory.resolve()),
                                   str(ladder.ledger_path.resolve())))
    settings = hiding_the_store(settings, store)
    extra = {"ladder": str(ladder.directory), "base": base, "date": date}

    def score(spec: StrategySpec, role: str) -> dict[str, Any]:
        progress = (lambda n: on_progress(role, n)) if on_progress else None
        run_id = run_strategy(store, spec, seeds, settings, on_progress=progress,
                              extra_config={**extra, "role": role})
        return build_report(store, run_id).to_json()

    champion_report = score(champion_spec, "champion")
    challenger_report = score(challenger_spec, "challenger")
    failures = {role: report["failure"] for role, report in
                (("champion", champion_report), ("challenger", challenger_report))
                if report.get("failure")}
    entry: dict[str, Any] = {
        "kind": "decision", "at": time.time(), "base": base, "date": date, "seeds": seeds,
        "decide_on": decide_on, "bench_version": BENCH_VERSION,
        "benchwarden_version": __version__, "harness_git_sha": git_sha(),
        "settings": settings.to_json_dict(),
        "champion": {**ladder.champion(), "run_id": champion_report["run"]["id"],
                     **_scores(champion_report)},
        "challenger": {**ladder._describe(challenger_spec),
                       "run_id": challenger_report["run"]["id"], **_scores(challenger_report)},
    }
    try:
        decision = decide(champion_report, challenger_report, decide_on)
    except ValueError as error:
        entry.update(outcome="error", reason=str(error), verdict=None)
        return ChallengeResult(EXIT_ERROR, "error", str(error), ladder.append(entry), failures)
    entry["verdict"] = decision.verdict.to_json_dict() if decision.verdict else None
    entry["reason"] = decision.reason
    if decision.dethroned:
        entry["outcome"] = "dethroned"
        entry["promoted"] = ladder.promote(
            challenger_spec, _header(challenger_spec, base, date, seeds, decide_on, decision))
        return ChallengeResult(EXIT_DETHRONED, "dethroned", decision.reason, ladder.append(entry),
                               failures)
    entry["outcome"] = "held"
    return ChallengeResult(EXIT_HELD, "held", decision.reason, ladder.append(entry), failures)


def check_bench_version(entries: list[dict[str, Any]]) -> None:
    """Refuse (LedgerError, one line) to extend a ladder begun on another bench version:
    its past decisions and reigns were measured on numbers that meant something else."""
    started = str(entries[0].get("bench_version")) if entries else BENCH_VERSION
    if started != BENCH_VERSION:
        raise LedgerError(f"this ladder was started on retrieval bench_version {started}; this "
                          f"benchwarden scores bench_version {BENCH_VERSION}, so its decisions "
                          "are not comparable: start a new ladder folder")


def _scores(report: Mapping[str, Any]) -> dict[str, Any]:
    blocks = report.get("seeds") or []
    return {
        "composite": [block["composite"] for block in blocks],
        "composite_guarded": [block["composite_guarded"] for block in blocks],
        "scored_seeds": [block["seed"] for block in blocks],
        "failure": _failure_summary(report.get("failure")),
    }


def _failure_summary(failure: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ledger keeps the one-line reason and where; the traceback stays in the store."""
    if not failure:
        return None
    return {key: value for key, value in failure.items() if key != "traceback"}


def first_genesis(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The ledger's first entry, which must be its genesis (LedgerError otherwise)."""
    if not entries or entries[0].get("kind") != "genesis":
        raise LedgerError("the ledger's first line is not its genesis entry (kind "
                          "'genesis', naming the initial champion); the ledger was not "
                          "written by `benchwarden ladder`")
    return entries[0]


def leaderboard(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each reign in order: who, since when, how many defences, the winning margin.
    A ledger whose first line is not a genesis is a LedgerError."""
    if not entries:
        return []
    first_genesis(entries)
    reigns = [{"champion": entries[0]["champion"]["name"], "since": entries[0]["at"],
               "date": None, "mean": None, "margin": None, "defences": 0, "decide_on": None}]
    for entry in entries[1:]:
        if entry.get("kind") != "decision":
            continue
        if entry.get("outcome") == "dethroned":
            scores = entry["challenger"].get(entry["decide_on"]) or []
            reigns.append({
                "champion": entry["promoted"]["name"], "since": entry["at"],
                "date": entry["date"], "decide_on": entry["decide_on"],
                "mean": (sum(scores) / len(scores)) if scores else None,
                "margin": (entry.get("verdict") or {}).get("mean_diff"), "defences": 0})
        elif entry.get("outcome") == "held":
            reigns[-1]["defences"] += 1
    return reigns


__all__ = ["EXIT_DETHRONED", "EXIT_ERROR", "EXIT_HELD", "ChallengeResult", "Ladder",
           "LedgerError", "challenge", "default_base", "derive_seeds", "leaderboard"]

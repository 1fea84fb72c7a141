"""What a benchmark remembers: runs, records and their token components.

Invariants:
- A record is addressed by (suite, scope, arm, task, trial); the store refuses a
  second record at the same address.
- Token components are stored unweighted. Cost-equivalent tokens exist only at render
  time (`cost_equivalent`), so history can be re-weighted without re-running.
- Records are plain frozen values with a canonical JSON form (sorted keys, no
  whitespace), which is what the store hashes. Nothing here reads a clock or a file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec


def _as_plain(value: Any) -> Any:
    """The encoders' hook: a `RunSummary` (a stored run end's, read back) is encoded as
    the plain mapping it stands for; any other type is refused as msgspec refuses it."""
    if isinstance(value, RunSummary):
        return dict(value)
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_encoder = msgspec.json.Encoder(order="sorted", enc_hook=_as_plain)


def canonical_json(value: Any) -> bytes:
    """The one byte form a value is hashed and compared in: sorted keys, compact."""
    return _encoder.encode(value)


def canonical_json_many(values: Sequence[Any]) -> list[bytes]:
    """`canonical_json` of each value, encoded in one call (the store's batch path).

    Compact JSON never holds a raw newline (one inside a string is escaped), so the
    newline-delimited encoding splits back into exactly the per-value bytes; a test
    holds the two equal on generated values."""
    if not values:
        return []
    return _encoder.encode_lines(values).split(b"\n")[:-1]


# JSON has no NaN or infinity: the canonical encoder writes null for them, silently, so a
# record holding one would read back as another record. The store refuses such a value
# (`storage_problem`) instead; the walk below finds one without building any path, and
# only a record that holds one is walked again to name where.
_PLAIN_JSON = frozenset((str, int, bool, type(None)))


def _holds_non_finite(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        value = value.values()
    elif kind is not list and kind is not tuple:
        if isinstance(value, float):
            return not math.isfinite(value)
        if isinstance(value, Mapping):
            value = value.values()
        elif isinstance(value, (list, tuple)):
            pass
        elif kind in _PLAIN_JSON:
            return False
        else:  # another type the encoder takes (a dataclass, a Struct, a set...): as it
            try:  # encodes; one it cannot encode is left for the encoder to refuse
                return _holds_non_finite(msgspec.to_builtins(value))
            except (TypeError, ValueError):
                return False
    for item in value:
        kind = type(item)
        if kind in _PLAIN_JSON:
            continue
        if kind is float:
            if not math.isfinite(item):
                return True
        elif _holds_non_finite(item):
            return True
    return False


def first_non_finite(value: Any, path: str) -> tuple[str, float] | None:
    """Pure: the first NaN or infinite float inside `value` and where it is (`path`
    extended by `.key` and `[index]`), None when there is none."""
    if not _holds_non_finite(value):
        return None
    if isinstance(value, float):
        return path, value
    if isinstance(value, Mapping):
        items: Any = ((f"{path}.{key}", item) for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return first_non_finite(msgspec.to_builtins(value), path)
    for where, item in items:
        found = first_non_finite(item, where)
        if found is not None:
            return found
    return None


def non_finite_problem(value: Any, path: str) -> str | None:
    """`first_non_finite` in words, for a refusal: `payload.cost is NaN, which JSON
    cannot hold`."""
    found = first_non_finite(value, path)
    if found is None:
        return None
    where, number = found
    return f"{where} is {_number_words(number)}, which JSON cannot hold"


def _number_words(value: float) -> str:
    return "NaN" if math.isnan(value) else "infinity" if value > 0 else "minus infinity"


@dataclass(frozen=True)
class TokenWeights:
    """Multipliers that turn token components into cost-equivalent tokens."""

    fresh_input: float = 1.0
    cache_creation: float = 1.25
    cache_read: float = 0.1
    output: float = 5.0

    @classmethod
    def parse(cls, text: str) -> TokenWeights:
        """Read `fresh=1,cache_creation=1.25,cache_read=0.1,output=5` (any subset)."""
        aliases = {"fresh": "fresh_input", "fresh_input": "fresh_input",
                   "cache_creation": "cache_creation", "cache_read": "cache_read",
                   "output": "output"}
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, number = part.partition("=")
            if not sep or name.strip() not in aliases:
                raise ValueError(
                    f"weight {part!r} is not NAME=NUMBER with NAME one of "
                    "fresh, cache_creation, cache_read, output")
            field_name = aliases[name.strip()]
            if field_name in values:
                raise ValueError(f"weight {part!r}: {name.strip()} is given twice")
            try:
                weight = float(number)
            except ValueError:
                raise ValueError(f"weight {part!r}: {number!r} is not a number") from None
            # a cost is a sum of tokens times weights: a NaN or infinite weight made every
            # cost in the views NaN or infinite, and a negative one made tokens pay back
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight {part!r}: weights are finite numbers, 0 or more")
            values[field_name] = weight
        return dataclasses.replace(cls(), **values)


DEFAULT_WEIGHTS = TokenWeights()


@dataclass(frozen=True)
class TokenComponents:
    """Tokens one sample consumed, by kind, exactly as the target reported them."""

    fresh_input: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int | None = None  # only where the server reports it separately

    def __add__(self, other: TokenComponents) -> TokenComponents:
        reasoning = None
        if self.reasoning is not None or other.reasoning is not None:
            reasoning = (self.reasoning or 0) + (other.reasoning or 0)
        return TokenComponents(
            fresh_input=self.fresh_input + other.fresh_input,
            cache_creation=self.cache_creation + other.cache_creation,
            cache_read=self.cache_read + other.cache_read,
            output=self.output + other.output,
            reasoning=reasoning,
        )

    @property
    def raw_total(self) -> int:
        return self.fresh_input + self.cache_creation + self.cache_read + self.output

    def cost_equivalent(self, weights: TokenWeights = DEFAULT_WEIGHTS) -> float:
        return (weights.fresh_input * self.fresh_input
                + weights.cache_creation * self.cache_creation
                + weights.cache_read * self.cache_read
                + weights.output * self.output)


@dataclass(frozen=True)
class RecordKey:
    """Where a record lives. Unique within the store."""

    suite: str
    scope: str
    arm: str
    task: str
    trial: int


@dataclass(frozen=True)
class Record:
    """One measured sample.

    `outcome` is the suite's own word for what happened ("ok", "error", "pass",
    "fail", ...); `payload` holds whatever the suite measured, as JSON-able data.
    Times are seconds since the epoch, taken by the driver, never by scoring.
    """

    suite: str
    scope: str
    arm: str
    task: str
    trial: int
    run_id: str
    outcome: str
    started_at: float
    ended_at: float
    tokens: TokenComponents = field(default_factory=TokenComponents)
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.suite, self.scope, self.arm, self.task, self.trial)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    def to_json_dict(self) -> dict[str, Any]:
        return cast("dict[str, Any]", msgspec.to_builtins(self))

    def storage_problem(self) -> str | None:
        """Pure: why this record's canonical JSON would not read back as this record, in
        words (`payload.scores[2] is NaN, which JSON cannot hold`), or None. Checked by
        the store before anything is written: a non-finite float anywhere, a time that
        is not a finite number, a token count that is not an integer."""
        for name in ("started_at", "ended_at"):
            moment = getattr(self, name)
            if type(moment) is not int and not (isinstance(moment, float)
                                                 and math.isfinite(moment)):
                return (non_finite_problem(moment, name) if isinstance(moment, float)
                        else f"{name} is {type(moment).__name__}, not a number of seconds")
        for name in ("fresh_input", "cache_creation", "cache_read", "output", "reasoning"):
            count = getattr(self.tokens, name)
            if type(count) is not int and not (count is None and name == "reasoning"):
                return f"tokens.{name} is {count!r}, not a whole number of tokens"
        return non_finite_problem(self.payload, "payload")

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Record:
        return msgspec.convert(data, cls)


@dataclass(frozen=True)
class Run:
    """One invocation of a suite, stamped with everything needed to reproduce it.

    The target description never holds a credential: `config` and `target` are
    checked for secret-looking keys before a run is stored (see `store`).
    """

    run_id: str
    suite: str
    bench_version: str
    config: Mapping[str, Any]
    seeds: tuple[int, ...]
    target: Mapping[str, Any]
    package_version: str
    git_sha: str | None
    host: Mapping[str, Any]
    started_at: float
    resumed_from: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return cast("dict[str, Any]", msgspec.to_builtins(self))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Run:
        return msgspec.convert(data, cls)


class RunSummary(Mapping[str, Any]):
    """A stored run end's summary as the store reads it back: each value kept as its
    raw JSON and decoded (as plain JSON values, what a summary written as a dict reads
    back as) when first read, then kept. A summary can hold megabytes a reader never
    reads whole (a contamination soak's rung digests: 65 MB of JSON and 300 MB of
    objects at a million records): `typed` decodes one value straight into a type, and
    nothing decodes what no one reads. Equal to any mapping with the same items."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Mapping[str, msgspec.Raw]) -> None:
        self._raw = raw
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        found = self._decoded.get(key, self._decoded)
        if found is self._decoded:
            found = self._decoded[key] = msgspec.json.decode(self._raw[key])
        return found

    def __contains__(self, key: object) -> bool:  # without decoding the value
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"RunSummary({dict(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (Ray) as the plain mapping
        return dict, (dict(self),)

    def typed(self, key: str, kind: Any) -> Any:
        """The value at `key` decoded straight into `kind` and not kept (KeyError when
        there is none; `msgspec.ValidationError` when it does not fit `kind`)."""
        return msgspec.json.decode(self._raw[key], type=kind)


@dataclass(frozen=True)
class RunEnd:
    """Appended when a run stops, however it stopped. A run with no end was killed.
    Read back from a store, its `summary` is a `RunSummary`."""

    run_id: str
    ended_at: float
    status: str  # "completed" | "failed" | "interrupted"
    summary: Mapping[str, Any] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return cast("dict[str, Any]", msgspec.to_builtins(self, enc_hook=_as_plain))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> RunEnd:
        return msgspec.convert(data, cls)

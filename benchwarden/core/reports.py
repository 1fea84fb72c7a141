"""Report plumbing shared by every suite: the JSON envelope and the terminal look.

Invariants:
- Every JSON report carries `schema` (the envelope's version), `suite` and
  `bench_version` (the suite's), so numbers are never compared across versions by
  accident.
- JSON is written atomically (temp file then rename): a reader never sees half a report.
- A typed report (a `msgspec.Struct`) is written as its msgspec encoding; the typed
  pieces every suite shares (the run block, the verdict, an estimate) live here so two
  suites' reports spell them the same.
- A report built from a store carries `store_head`, the store's last entry when the
  report was built: a head witness (core/witness.py) that `verify --store S --witness
  REPORT` checks, so a signed report proves entries were not later cut off the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.text import Text

from benchwarden.core.collector import paused_cycle_collector
from benchwarden.core.files import replaced_atomically
from benchwarden.core.records import Run, RunEnd
from benchwarden.core.tables import FitTables
from benchwarden.core.verdicts import Verdict

REPORT_SCHEMA = "benchwarden.report/1"

VERDICT_STYLE = {"pass": "bold white on green", "fail": "bold white on red",
                 "info": "bold white on blue"}


def run_block(run: Run, end: RunEnd | None) -> dict[str, Any]:
    """The `run` block of a report: identity, configuration, target, provenance."""
    return {
        "id": run.run_id,
        "suite": run.suite,
        "bench_version": run.bench_version,
        "config": dict(run.config),
        "seeds": list(run.seeds),
        "target": dict(run.target),
        "package_version": run.package_version,
        "git_sha": run.git_sha,
        "host": dict(run.host),
        "started_at": run.started_at,
        "ended_at": end.ended_at if end else None,
        "duration_s": max(0.0, end.ended_at - run.started_at) if end else None,
        "status": end.status if end else "incomplete",
        "resumed_from": run.resumed_from,
    }


def store_head_block(store: Any) -> dict[str, Any] | None:
    """The `store_head` of a report built from `store` (None for an empty store)."""
    head = store.head()
    return head.to_json_dict() if head is not None else None


def envelope(*, suite: str, bench_version: str, run: Run | None, end: RunEnd | None,
             verdict: Verdict | None, body: Mapping[str, Any],
             store_head: Mapping[str, Any] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "suite": suite,
        "bench_version": bench_version,
    }
    if run is not None:
        report["run"] = run_block(run, end)
    if verdict is not None:
        report["verdict"] = verdict.to_json_dict()
    if store_head is not None:
        report["store_head"] = dict(store_head)
    report.update(body)
    return report


class StoreHeadBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The `store_head` of a report: the store's last entry when the report was built."""

    schema: str = ""
    """The witness format's version."""
    seq: int = 0
    """Sequence number of the store's last entry."""
    hash: str = ""
    """Chain hash of that entry."""
    first: str = ""
    """Chain hash of the store's first entry (which store this head belongs to)."""


class RunBlock(msgspec.Struct, frozen=True, kw_only=True):
    """The `run` block of a report (`run_block`), typed."""

    id: str = ""
    """The run id."""
    suite: str = ""
    """The suite that ran."""
    bench_version: str = ""
    """The suite's bench version at the time of the run."""
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    """The run's configuration as recorded."""
    seeds: list[Any] = msgspec.field(default_factory=list)
    """Seeds the run used."""
    target: dict[str, Any] = msgspec.field(default_factory=dict)
    """What was measured (URL, model, strategy...)."""
    package_version: str | None = None
    """benchwarden's version."""
    git_sha: str | None = None
    """The checkout's commit, when known."""
    host: dict[str, Any] = msgspec.field(default_factory=dict)
    """The machine's description."""
    started_at: float | None = None
    """Unix time the run began."""
    ended_at: float | None = None
    """Unix time the run ended; None while incomplete."""
    duration_s: float | None = None
    """Seconds from start to end (None while incomplete, and in reports written before it)."""
    status: str = "incomplete"
    """completed, interrupted, failed or incomplete."""
    resumed_from: str | None = None
    """The run this one continued, if any."""


class VerdictBlock(msgspec.Struct, frozen=True):
    """The verdict of a report: its kind and one-line reason."""

    kind: str
    """pass, fail or info."""
    reason: str = ""
    """One line saying why."""


class EstimateBlock(msgspec.Struct, frozen=True, kw_only=True):
    """A mean (or rate) with its standard error and interval (`stats.Estimate`), typed."""

    mean: float | None = None
    """Point estimate; None when there was nothing to estimate from."""
    se: float | None = None
    """Standard error of `mean`; None below two units."""
    low: float | None = None
    """Lower end of the 95 % interval (the method's own: t, Wilson, BCa...)."""
    high: float | None = None
    """Upper end of the 95 % interval."""
    n: int = 0
    """Samples the estimate used."""
    method: str = ""
    """How `se` and the interval were obtained."""


class PairedBlock(msgspec.Struct, frozen=True, kw_only=True):
    """A paired difference `b - a` (`stats.PairedComparison`), typed."""

    n: int = 0
    """Pairs used."""
    mean_diff: float | None = None
    """Mean of the differences."""
    sd: float | None = None
    """Sample standard deviation of the differences."""
    se: float | None = None
    """Standard error of `mean_diff`."""
    low: float | None = None
    """Lower end of the 95 % t interval."""
    high: float | None = None
    """Upper end of the 95 % t interval."""
    p_value: float | None = None
    """Two-sided paired t-test p-value."""
    mde: float | None = None
    """Minimum detectable effect at 80 % power."""


def as_json(report: Any) -> dict[str, Any]:
    """A report as JSON-able builtins: a typed report through msgspec, a mapping as is."""
    if isinstance(report, msgspec.Struct):
        return msgspec.to_builtins(report)  # type: ignore[no-any-return]
    return dict(report)


def convert(data: Any, kind: type[Any], what: str) -> Any:
    """`data` read into the typed `kind`; a one-line ValueError when it does not fit."""
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as error:
        raise ValueError(f"{what} does not read as a report: {error}") from None


def write_json(path: str | Path, report: Any) -> Path:
    """The report as JSON indented by two spaces, written atomically. Each member of the
    report, and each item of its lists and mappings, is encoded by msgspec and written
    in turn (`_write_indented`), so memory holds one item's text, not the whole report's
    (Python's indenting encoder, which this replaces, took 2 s for a report of 17,700
    seeds, and `json.dumps` had held every piece of a report of a suite of 333,000 tasks
    at once, about a quarter of a gigabyte). A typed report's long members (a block a
    seed, a row a task) are encoded straight from their structs (`_members`), never
    built again as builtins first. The text is `json.dumps(as_json(report), indent=2,
    ensure_ascii=False)`'s but for how some floats are spelt (`0.00001` for `1e-05`,
    `1e16` for `1e+16`: the same numbers; a float as a mapping key, which no report
    has, likewise)."""
    target = Path(path).expanduser()
    # the collector paused (`core.collector`): the builtins of a report of thousands of
    # seeds or tasks set off full collections that walk them all (0.49 s of 0.13 s)
    with paused_cycle_collector(), replaced_atomically(target, None) as temporary, \
            temporary.open("wb") as stream:
        members = _members(report) if isinstance(report, msgspec.Struct) else as_json(report)
        _write_indented(stream, members, 0)
        stream.write(b"\n")
    return target


def _members(report: msgspec.Struct) -> Any:
    """A typed report's members as `as_json` gives them (the same keys, in the same
    order, the same left out as defaults), except that each member that is a non-empty
    list, or a mapping keyed by strings, is the report's own: its items stay structs,
    which msgspec encodes to the same text their builtins would give. Only the report
    less those members is made builtins (by msgspec itself, so what `omit_defaults`
    leaves out is msgspec's own rule)."""
    # the class's own field tables (`structs.fields` would resolve every annotation)
    kind = type(report)
    if kind.__struct_config__.array_like:  # written as a JSON array: builtins whole
        return as_json(report)
    names = dict(zip(kind.__struct_encode_fields__, kind.__struct_fields__, strict=True))
    long: dict[str, Any] = {}
    for name in names.values():
        value = getattr(report, name)
        if (type(value) is list and value) or (
                type(value) is dict and value and all(type(key) is str for key in value)):
            long[name] = value
    if not long:
        return as_json(report)
    rest = msgspec.to_builtins(msgspec.structs.replace(
        report, **{name: type(value)() for name, value in long.items()}))
    # a tag comes first, then the fields in their order, as msgspec writes them
    order = [key for key in rest if key not in names] + list(names)
    members: dict[str, Any] = {}
    for key in order:
        if names.get(key) in long:
            members[key] = long[names[key]]
        elif key in rest:
            members[key] = rest[key]
    return members


# How deep `_write_indented` walks before encoding a value whole: the report, its
# members, and their items (a seed block, a task row) each as one piece.
_STREAMED_DEPTH = 2
# The items of a member are encoded several to one msgspec call, about this much text a
# call (at most `_ITEMS_MOST` items): one call an item cost as much again as the encoding
# for 17,700 seed blocks (Python's work per call), while memory still holds about one
# call's text. The first call takes one item, and each next call's count follows from
# the bytes per item of the call before, so a member of huge items stays an item a call.
_CHUNK_CHARS = 1 << 20
_ITEMS_MOST = 1024


def _write_indented(stream: Any, value: Any, level: int) -> None:
    """`value` as indented JSON (UTF-8 bytes to the binary `stream`) at nesting `level`,
    written piece by piece down to `_STREAMED_DEPTH`, deeper values encoded whole (their
    lines indented to `level`)."""
    indent = b"  " * (level + 1)
    if level < _STREAMED_DEPTH and isinstance(value, dict) and value:
        stream.write(b"{")
        if level + 1 == _STREAMED_DEPTH:
            _write_items(stream, list(value.items()), level, mapping=True)
        else:
            for number, (key, item) in enumerate(value.items()):
                stream.write(b"%s\n%s%s: " % (b"," if number else b"", indent, _json_key(key)))
                _write_indented(stream, item, level + 1)
        stream.write(b"\n%s}" % indent[:-2])
    elif level < _STREAMED_DEPTH and isinstance(value, (list, tuple)) and value:
        stream.write(b"[")
        if level + 1 == _STREAMED_DEPTH:
            _write_items(stream, list(value), level, mapping=False)
        else:
            for number, item in enumerate(value):
                stream.write(b"%s\n%s" % (b"," if number else b"", indent))
                _write_indented(stream, item, level + 1)
        stream.write(b"\n%s]" % indent[:-2])
    else:
        stream.write(_indented_whole(value, b"  " * level))


def _indented_whole(value: Any, pad: bytes) -> bytes:
    """`value` encoded whole as indented JSON, its lines after the first indented by
    `pad` (compact JSON never holds a raw newline, a newline in a string being escaped,
    so the formatter's newlines are all line breaks)."""
    try:
        text = msgspec.json.format(msgspec.json.encode(value), indent=2)
    except (TypeError, OverflowError):  # a flag or None as a key, an int past 64 bits
        text = json.dumps(value, indent=2, ensure_ascii=False,
                          default=msgspec.to_builtins).encode("utf-8")
    return text.replace(b"\n", b"\n" + pad) if pad else text


def _write_items(stream: Any, items: list[Any], level: int, *, mapping: bool) -> None:
    """The items of a list (or the `(key, value)` pairs of a mapping) at `level`, each
    encoded whole, several to one msgspec call (`_CHUNK_CHARS`): the call's list (or
    mapping) formatted, its brackets cut off and its lines moved to `level`. A call that
    msgspec refuses, or a mapping whose keys are not all strings (spelt as `json.dumps`
    spells them by `_json_key`), is written an item at a time."""
    pad = b"  " * level
    indent = pad + b"  "
    start, count = 0, 1
    while start < len(items):
        chunk = items[start:start + count]
        text = None
        if not mapping or all(type(key) is str for key, _ in chunk):
            try:
                text = msgspec.json.format(
                    msgspec.json.encode(dict(chunk) if mapping else chunk), indent=2)
            except (TypeError, OverflowError):
                text = None
        if text is not None:
            # "[\n  item,\n  item\n]": the items' lines, each moved by `pad`
            stream.write((b"," if start else b"") + b"\n" + pad
                         + text[2:-2].replace(b"\n", b"\n" + pad))
            count = max(1, min(_ITEMS_MOST, _CHUNK_CHARS * len(chunk) // max(len(text), 1)))
        else:
            for number, item in enumerate(chunk, start):
                stream.write(b"%s\n%s" % (b"," if number else b"", indent))
                if mapping:
                    key, item = item
                    stream.write(b"%s: " % _json_key(key))
                stream.write(_indented_whole(item, indent))
        start += len(chunk)


def _json_key(key: Any) -> bytes:
    """A mapping key as `json.dumps` writes it: a string as is, a number as its text, a
    flag or None as its JSON word."""
    if not isinstance(key, str):
        key = json.dumps(key) if key is None or isinstance(key, (bool, float)) else str(key)
    return msgspec.json.encode(key)


def read_json(path: str | Path) -> dict[str, Any]:
    try:
        with open(Path(path).expanduser(), encoding="utf-8") as stream:
            data = json.load(stream)
    except FileNotFoundError:
        raise ValueError(f"report {path} does not exist") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"report {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"report {path} is not a JSON object")
    return data


def verdict_text(verdict: Verdict) -> Text:
    text = Text()
    text.append(f" {verdict.kind.upper()} ", style=VERDICT_STYLE[verdict.kind])
    text.append(" " + verdict.reason)
    return text


def console(stderr: bool = False) -> Console:
    """The console every view prints through; its tables fold rather than cut a cell
    with "…" and never break a word to fit (`core.tables`), so a CI log at 80 columns
    keeps whole ids, numbers and headings."""
    made = Console(stderr=stderr, highlight=False, soft_wrap=False)
    made.push_render_hook(FitTables(made))
    return made

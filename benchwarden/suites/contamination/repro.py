"""`--repro DIR`: a replay of a failing probe an engine developer can run without us.

`write_repro(report, DIR)` writes two files from a contamination report:
- `DIR/repro.py`: a Python script using the standard library only (no benchwarden, no
  third-party package) that sends the probe's exact recorded body alone, then every
  body of its rung at once (threads released together by a barrier; ballast the run cut
  mid-stream is cut after as many content deltas), then the probe alone again, against
  the URL given on its command line, and prints whether the replies differ (exit 1 when
  they do, 0 when they do not, 2 when a request fails).
- `DIR/README.txt`: the run in words: engine, model, preset, seed, scenario, which probe
  in which rung, what diverged and its divergence class.

Invariants:
- Everything the script sends is embedded in it, byte for byte as the run stored it
  (request bodies, the rung's slots); the recorded reference and reply are embedded too,
  so the script also says whether today's solo reply is the one the run saw.
- The script compares the same canonical form the suite does (reasoning ␁ text, tool
  calls, ␄ finish reason), on exact bytes (invalid UTF-8 kept).
- Nothing here talks to a server; the report is the only input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchwarden.core.errors import ConfigurationError, EnvironmentFailure
from benchwarden.suites.contamination.report import CellBlock, ContaminationReport, as_report
from benchwarden.suites.contamination.scoring import canonical, rung_label
from benchwarden.targets.replies import RequestOutcome

# Which failing cell a replay is made for, most telling first.
_PREFERENCE = ("contaminated", "diverged", "persistent")


def prepare_repro_dir(path: str | Path) -> Path:
    """The folder a replay goes to, made if absent; a file in its way is a usage error."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(f"--repro {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise EnvironmentFailure(f"cannot make the --repro folder {folder}: "
                                 f"{error.strerror or error}") from None
    return folder


def failing_cell(report: ContaminationReport) -> CellBlock | None:
    """The cell a replay is made for: the first contaminated, else diverged, else
    persistent cell (in the report's order)."""
    for kind in _PREFERENCE:
        for cell in report.cells:
            if cell.kind == kind:
                return cell
    return None


def _canonical_of(outcome: dict[str, Any]) -> str | None:
    try:
        restored = RequestOutcome.from_json_dict(dict(outcome))
    except (TypeError, ValueError):
        return None
    return canonical(restored.reply) if restored.reply is not None else None


def replay_plan(report: ContaminationReport) -> dict[str, Any] | None:
    """Everything the script needs, as plain JSON (None when no cell failed)."""
    cell = failing_cell(report)
    if cell is None or report.request is None or not report.request.bodies:
        return None
    run = report.run
    config = run.config if run else {}
    rung_leg, rung_repeat, rung_level = cell.leg, cell.repeat, cell.level
    if cell.level is None:  # a persistent cell: replay the last rung before the post-check
        if not report.rungs:
            return None
        rung_leg, rung_repeat = report.rungs[-1].label, report.rungs[-1].repeat
        rung_level = report.rungs[-1].concurrency
        if isinstance(report.rungs_total, int) and config.get("concurrency") \
                and not config.get("bisect"):  # the last rung run may not be listed
            rung_level = int(config["concurrency"][-1])
            rung_leg = rung_label(rung_level)
            rung_repeat = int(config.get("repeat") or 1)
    slots = [{"probe": entry.probe, "cancel_after_deltas": entry.cancel_after_deltas}
             for entry in sorted((entry for entry in report.requests
                                  if entry.leg == rung_leg and entry.repeat == rung_repeat),
                                 key=lambda entry: entry.slot)]
    rung = next((r for r in report.rungs if (r.label, r.repeat) == (rung_leg, rung_repeat)),
                None)
    if (rung is None and isinstance(report.rungs_total, int)) \
            or (rung is not None and isinstance(rung.requests_listed, int)):
        slots = _planned_slots(report, config, rung_level or 0, rung)
    reference = next((entry for entry in report.requests
                      if entry.leg == "ref_a" and entry.probe == cell.probe), None)
    got = next((entry for entry in report.requests if entry.leg == cell.leg
                and entry.repeat == cell.repeat and entry.scored and entry.probe == cell.probe),
               None)
    return {
        "run_id": run.id if run else None,
        "recorded_url": (run.target or {}).get("url") if run else None,
        "model": (run.target or {}).get("model") if run else None,
        "preset": report.request.preset, "seed": config.get("seed"),
        "scenario": config.get("scenario"), "probe": cell.probe, "cell_leg": cell.leg,
        "cell_class": cell.kind, "rung": rung_leg,
        "canaries": [probe.canary for probe in report.probes],
        "bodies": list(report.request.bodies),
        "slots": slots or [{"probe": cell.probe, "cancel_after_deltas": None}],
        "recorded_reference": _canonical_of(reference.outcome) if reference else None,
        "recorded_reply": _canonical_of(got.outcome) if got else None,
    }


def _planned_slots(report: ContaminationReport, config: Any, level: int,
                   rung: Any) -> list[dict[str, Any]]:
    """Every slot of a rung the report lists only in part (or not at all), as the run's
    plan lays them out: slot i sends probe i mod probes, and in the cancel scenario every
    other ballast slot is cut (`driver.Plan`, the same rule the run followed)."""
    from benchwarden.suites.contamination.driver import Plan

    bodies = tuple(report.request.bodies) if report.request is not None else ()
    plan = Plan("", "", bodies, (), 1, str(config.get("scenario", "shared-prefix")))
    count = rung.requests_sent if rung is not None else plan.slots(level)
    return [{"probe": slot % max(1, plan.probes), "cancel_after_deltas": plan.cancel_after(slot)}
            for slot in range(count)]


def _readme(report: ContaminationReport, plan: dict[str, Any], cell: CellBlock) -> str:
    run = report.run
    verdict = report.verdict.reason if report.verdict else "(no verdict)"
    canary = report.probes[cell.probe].canary if cell.probe < len(report.probes) else "?"
    lines = [
        "A contamination finding from benchwarden, packed for an upstream bug report.",
        "",
        f"run:       {plan['run_id']}",
        f"engine:    {plan['recorded_url']} (the server the run measured)",
        f"model:     {plan['model']}",
        f"preset:    {plan['preset'] or 'none'} (the sampling fields in every body below)",
        f"seed:      {plan['seed']}   scenario: {plan['scenario']}",
        f"verdict:   {verdict}",
        "",
        f"probe {cell.probe} ({canary}) in leg {cell.leg}: {cell.kind}",
    ]
    if cell.detail:
        lines.append(f"  {cell.detail}")
    if cell.foreign:
        lines.append(f"  foreign canary in the reply: {cell.foreign}")
    if cell.divergence is not None:
        point = cell.divergence
        lines.append(f"  divergence class: {point.kind}: {point.reason}")
        if point.step is not None and point.reference_token is not None:
            lines.append(f"  first differing token #{point.step}: reference "
                         f"{point.reference_token!r} vs reply {point.reply_token!r}")
        if point.reference_top:
            lines.append("  reference's top candidates there: " + ", ".join(
                f"{candidate.token!r} {candidate.logprob:.3f}"
                for candidate in point.reference_top))
    lines += [
        "",
        f"The replay sends probe {cell.probe}'s exact body alone, then the {len(plan['slots'])} "
        f"bodies of rung {plan['rung']} at once, then the probe alone again, and",
        "compares the replies byte for byte (reasoning, text, tool calls, finish reason).",
        "",
        "  python repro.py --url http://HOST:PORT [--api-key-env NAME] [--attempts N]",
        "",
        "Exit 1: the replies differ (reproduced); 0: they do not; 2: a request failed.",
        "It needs Python 3.8+ and nothing else.",
    ]
    if run is not None and run.target:
        lines.append("")
        lines.append(f"benchwarden report of the run: `benchwarden show {run.id}`")
    return "\n".join(lines) + "\n"


def write_repro(report: ContaminationReport | dict[str, Any], folder: str | Path) -> Path | None:
    """Write `repro.py` and `README.txt` into `folder`; the script's path, or None when
    the report has no failing probe to replay (nothing is written then)."""
    report = as_report(report)
    plan = replay_plan(report)
    cell = failing_cell(report)
    if plan is None or cell is None:
        return None
    target = prepare_repro_dir(folder)
    # ensure_ascii keeps lone surrogates (invalid bytes) as \udcXX escapes: exact and ASCII
    embedded = json.dumps(plan, ensure_ascii=True, indent=1)
    # a raw triple-quoted string holds JSON as it is: JSON escapes every quote in a string
    script = _SCRIPT.replace("@@PLAN@@", embedded)
    try:
        (target / "repro.py").write_text(script, encoding="utf-8")
        (target / "README.txt").write_text(_readme(report, plan, cell), encoding="utf-8")
    except OSError as error:
        raise EnvironmentFailure(f"cannot write the replay into {target}: "
                                 f"{error.strerror or error}") from None
    return target / "repro.py"


_SCRIPT = r'''#!/usr/bin/env python3
"""Replay of a benchwarden contamination finding (standard library only).

Sends the failing probe's exact recorded body alone, then every body of its rung at
once, then the probe alone again, and prints whether the replies differ.
Exit 1: they differ (reproduced); 0: they do not; 2: a request failed.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import urllib.parse

PLAN = json.loads(r"""@@PLAN@@""")


def canonical(reasoning, text, calls, finish):
    # the suite's compared form: reasoning \x01 text (\x02 name \x03 args)* \x04 finish
    tools = "".join("\x02" + name + "\x03" + args for name, args in calls)
    return reasoning + "\x01" + text + tools + "\x04" + (finish or "")


def exact(text):
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def shown(text):
    return exact(text).decode("utf-8", "backslashreplace").replace("\n", "\u23ce")


def send(url, body, key, timeout, cancel_after=None, barrier=None):
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    base = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if key:
        headers["Authorization"] = "Bearer " + key
    # compact, as the run's client sent it
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogateescape")
    if barrier is not None:
        barrier.wait()
    try:
        connection.request("POST", base + "/v1/chat/completions", payload, headers)
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError("HTTP %d: %s" % (response.status, response.read(300)))
        reasoning, text, calls, finish, deltas = [], [], {}, None, 0
        while True:
            line = response.readline()
            if not line:
                break
            line = line.decode("utf-8", "surrogateescape").rstrip("\r\n")
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            if not data:
                continue
            chunk = json.loads(data)
            if chunk.get("error"):
                raise RuntimeError("server error in stream: %s" % chunk["error"])
            for choice in chunk.get("choices") or []:
                if choice.get("index"):
                    continue
                delta = choice.get("delta") or {}
                for key_name, sink in (("reasoning_content", reasoning), ("reasoning", reasoning),
                                       ("content", text)):
                    if delta.get(key_name):
                        sink.append(delta[key_name])
                        deltas += 1
                for call in delta.get("tool_calls") or []:
                    entry = calls.setdefault(call.get("index"), ["", []])
                    function = call.get("function") or {}
                    if function.get("name") and not entry[0]:
                        entry[0] = function["name"]
                    arguments = function.get("arguments")
                    if arguments:
                        entry[1].append(arguments if isinstance(arguments, str)
                                        else json.dumps(arguments, separators=(",", ":")))
                        deltas += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            if cancel_after is not None and deltas >= cancel_after:
                return None  # cut mid-stream on purpose, as the run did
        return canonical("".join(reasoning), "".join(text),
                         [(name, "".join(args)) for name, args in calls.values()], finish)
    finally:
        connection.close()


def rung(url, key, timeout):
    slots = PLAN["slots"]
    replies = [None] * len(slots)
    errors = []
    barrier = threading.Barrier(len(slots))

    def run(index):
        slot = slots[index]
        try:
            replies[index] = send(url, PLAN["bodies"][slot["probe"]], key, timeout,
                                  slot["cancel_after_deltas"], barrier)
        except Exception as error:  # reported below, the replay stops with exit 2
            errors.append("slot %d: %s" % (index, error))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(slots))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    mine = [i for i, slot in enumerate(slots) if slot["probe"] == PLAN["probe"]
            and slot["cancel_after_deltas"] is None]
    return replies[mine[0]] if mine else None, replies


def compare(name, expected, got):
    a, b = exact(expected), exact(got)
    if a == b:
        print("%-28s SAME as the solo reply" % name)
        return False
    at = 0
    while at < min(len(a), len(b)) and a[at] == b[at]:
        at += 1
    print("%-28s DIFFERS from the solo reply at byte %d:" % (name, at))
    print("    solo:  ...%s" % shown(a[max(0, at - 30):at + 30].decode("utf-8", "surrogateescape")))
    print("    this:  ...%s" % shown(b[max(0, at - 30):at + 30].decode("utf-8", "surrogateescape")))
    return True


def foreign(text):
    own = PLAN["canaries"][PLAN["probe"]]
    return [c for c in PLAN["canaries"] if c and c != own and c in text]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of the server (with or without /v1)")
    parser.add_argument("--api-key-env", help="environment variable holding the API key")
    parser.add_argument("--attempts", type=int, default=1, help="replays to try (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    options = parser.parse_args()
    key = os.environ.get(options.api_key_env, "") if options.api_key_env else ""
    print("replaying run %s: probe %d, %s in %s (model %s, preset %s, seed %s)" % (
        PLAN["run_id"], PLAN["probe"], PLAN["cell_class"], PLAN["cell_leg"], PLAN["model"],
        PLAN["preset"], PLAN["seed"]))
    body = PLAN["bodies"][PLAN["probe"]]
    reproduced = 0
    for attempt in range(1, max(1, options.attempts) + 1):
        try:
            solo = send(options.url, body, key, options.timeout)
            together, _ = rung(options.url, key, options.timeout)
            after = send(options.url, body, key, options.timeout)
        except Exception as error:
            print("a request failed: %s" % error)
            return 2
        print("attempt %d:" % attempt)
        if PLAN["recorded_reference"] is not None:
            same = exact(solo) == exact(PLAN["recorded_reference"])
            print("%-28s %s" % ("solo vs the run's reference",
                                "same" if same else "DIFFERENT (the engine or model changed?)"))
        differ = together is not None and compare("in rung " + PLAN["rung"], solo, together)
        differ = compare("solo again after the rung", solo, after) or differ
        leaked = foreign(together or "")
        if leaked:
            print("foreign canary in the rung reply: %s" % ", ".join(leaked))
        reproduced += bool(differ or leaked)
    print("REPRODUCED in %d of %d attempts" % (reproduced, max(1, options.attempts))
          if reproduced else "not reproduced: every reply matched the solo reply")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
'''

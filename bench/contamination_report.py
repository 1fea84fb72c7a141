"""How the contamination report grows with the number of requests a run recorded.

A contamination run of `--repeat R` over concurrency levels 64 and 128 with 4 probes
records about 192 requests per repetition: `--repeat 10` is about 1,900 records,
`--repeat 100` about 19,000 and `--repeat 500` about 96,000 (`--concurrency
2,4,8,16,32,64,128,256,512`: about 1,020 a repetition, with rungs wider than a report
lists whole). This bench records such runs
once (the real CLI against `tests/fakes/openai_server.py`'s clean fake server, so the
records are the driver's own) and caches them, then runs `show --latest --json` and
`report --latest --html` against each store in their own process: wall time, peak RSS
and the page's size (issue 12: a page under 20 MB at any store size, memory bounded by
what is shown).

Baseline: the same command against the smallest store, in the same run, so a ratio is
the growth. `--before CHECKOUT` runs every command with an older checkout's code too,
alternating before / now in each of `--rounds` rounds, and prints every round and the
medians, now against before.

    python bench/contamination_report.py                             # --repeats 10,100
    python bench/contamination_report.py --repeats 10,500 --rounds 3
    python bench/contamination_report.py --before /tmp/base-main     # A/B in one run
    python bench/contamination_report.py --concurrency 2,4,8,16,32,64,128,256,512 \
        --repeats 10,100                                             # a soak-like ladder
    python bench/contamination_report.py --synthetic 100k,1M --rounds 3 --before /tmp/base
    python bench/contamination_report.py --synthetic 100k,1M --rungs-of-two --distinct

`--synthetic SIZES` measures synthetic soaks instead of recorded runs: the records of the
recorded `--repeat 10` run of the soak-like ladder (`SYNTHETIC_LEVELS`), repeated through
the store API as one run of about SIZE records (each copy of a rung a new repetition,
so every address is unique; the solo legs once), each rung's digest written into the run
end as the driver writes it (`report.digest_of`). Cached as
`contamination-synthetic-<SIZE>-<LEVELS>.v<SCHEMA>.digests<FORMAT>.sqlite` beside the
recorded runs (`digest.FORMAT`: a store whose digests a report reads differently is
built again).
`--synthetic-from STORE` copies another store's latest contamination run instead (a real
engine's, whose bodies carry token logprobs: `contamination-synthetic-<SIZE>-from-<NAME>`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _building import built_in_place, child_output
from _checkout import NEUTRAL_FOLDER, THIS_CHECKOUT, child_environment
from _figures import Figure, add_json_option, emit, now_vs_before
from scale_growth import growth_figures, measure
from scale_store import cache_folder, parse_size

COMMANDS: dict[str, list[str]] = {
    "show_latest": ["show", "--latest", "--store", "{store}", "--json", "{out}/x.json"],
    "report_html": ["report", "--latest", "--store", "{store}", "--html", "{out}/x.html"],
}
RUN = ["--max-tokens", "24", "--min-completion-tokens", "4", "--seed", "5",
       "--no-progress"]
DEFAULT_LEVELS = "64,128"
SYNTHETIC_LEVELS = "2,4,8,16,32,64,128,256,512"
SYNTHETIC_SOURCE_REPEAT = 10
COMMANDS_SYNTHETIC: dict[str, list[str]] = {
    "show_text": ["show", "--latest", "--store", "{store}"],
    **COMMANDS,
}
PAGE_GOAL = 20_000_000
DISTINCT = "-distinct2"
"""How a `--distinct` soak is named; 2: a reply with token logprobs is made its own at
its last token, which then still spells it (1 left the tokens as they were: every
divergence of a real engine's copy was unclassified before its tokens were compared)."""


def ensure_store(repeat: int, cache: Path, levels: str = DEFAULT_LEVELS,
                 behaviour: str = "clean", probes: int = 4) -> Path:
    """The cached store of one `--repeat REPEAT` run over the concurrency `levels` with
    `probes` probes against the fake server behaving as `behaviour`, recorded first
    when missing (into a temporary file moved into place, so a stopped build leaves no
    half store)."""
    ladder = "" if levels == DEFAULT_LEVELS else "-c" + levels.replace(",", "-")
    served = "" if behaviour == "clean" else f"-{behaviour}"
    probed = "" if probes == 4 else f"-p{probes}"
    store = cache / f"contamination-r{repeat}{ladder}{probed}{served}.sqlite"
    if store.exists():
        return store
    sys.path.insert(0, THIS_CHECKOUT)
    from tests.fakes.openai_server import FakeOpenAIServer

    def record(partial: Path) -> None:
        with FakeOpenAIServer(behaviour, delta_delay=0.0) as server:
            done = subprocess.run(
                [sys.executable, "-m", "benchwarden", "contamination", "--url", server.url,
                 "--repeat", str(repeat), "--concurrency", levels, *RUN,
                 "--probes", str(probes),
                 "--store", str(partial)],
                capture_output=True, text=True, env=child_environment(), cwd=NEUTRAL_FOLDER)
        if done.returncode not in (0, 1):
            raise SystemExit(f"recording the --repeat {repeat} run failed: "
                             f"{done.stderr.strip()[-400:]}")

    started = time.perf_counter()
    built_in_place(store, record)
    print(f"  recorded --repeat {repeat} in {time.perf_counter() - started:.0f} s", flush=True)
    return store


# Run in a child of this checkout (`child_environment`): the store API and the digests
# are this checkout's. argv: source store, target store, records wanted.
_BUILD = """
import dataclasses, sys, time
from benchwarden.core.records import RunEnd
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination.digest import SUMMARY_KEY, as_summary
from benchwarden.suites.contamination.report import SOLO_LEGS, digest_of
source, target, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
distinct = sys.argv[4] == "distinct"
def _marked(record, trial):
    reply = record.task.isdigit() and (record.payload.get("outcome") or {}).get("reply")
    if not reply:
        return record
    marker = f" #{trial}{record.arm}"
    steps = reply.get("token_logprobs")
    last = steps[-1] if steps else None
    if last and isinstance(last.get("token"), str) and last["token"] \
            and reply["text"].endswith(last["token"]):
        # a real engine's reply: its last token swapped for the marker, its candidates
        # kept, so its tokens still spell it and its divergence is classified in full
        text = reply["text"][:-len(last["token"])] + marker
        marked = {**reply, "text": text,
                  "token_logprobs": [*steps[:-1], {**last, "token": marker}]}
    else:
        marked = {**reply, "text": reply["text"] + marker}
    outcome = {**record.payload["outcome"], "reply": marked}
    return dataclasses.replace(record, payload={**record.payload, "outcome": outcome})
with SQLiteStore(source, create=False, read_only=True) as opened:
    info = opened.latest_run("contamination")
    records = list(opened.iter_records(suite="contamination",
                                       scope=str(info.run.config["scope"])))
before = [r for r in records if r.arm in SOLO_LEGS and r.arm != "post"]
post = [r for r in records if r.arm == "post"]
rungs = {}
for record in records:
    if record.arm not in SOLO_LEGS:
        rungs.setdefault(record.trial, {}).setdefault(record.arm, []).append(record)
per_repeat = sum(len(batch) for batch in rungs[1].values())
repeats = max(1, (wanted - len(before) - len(post)) // per_repeat)
run_id = f"synthetic-{wanted}"
run = dataclasses.replace(info.run, run_id=run_id, resumed_from=None, config={
    **info.run.config, "scope": run_id, "repeat": repeats})
digests = []
with SQLiteStore(target) as store:
    store.begin_run(run)
    def moved(batch, trial, marked=False):
        copies = [dataclasses.replace(r, run_id=run_id, scope=run_id, trial=trial)
                  for r in batch]
        if marked:  # every scored reply its own: " #<repeat><rung>" after its text
            copies = [_marked(copy, trial) for copy in copies]
        return copies
    store.append(moved(before, 1))
    for repeat in range(1, repeats + 1):
        source_repeat = (repeat - 1) % len(rungs) + 1
        for batch in rungs[source_repeat].values():
            copied = moved(batch, repeat, distinct)
            store.append(copied)
            digests.extend(digest_of(copied))
    store.append(moved(post, 1))
    summary = {**(info.end.summary if info.end else {}), SUMMARY_KEY: as_summary(digests)}
    store.finish_run(RunEnd(run_id, time.time(), "completed", summary))
print(repeats)
"""


def ensure_synthetic(size: int, cache: Path, source: Path | None = None,
                     behaviour: str = "clean", distinct: bool = False,
                     rungs_of_two: bool = False) -> Path:
    """The cached synthetic soak of about `size` records (see the module notes), built
    first when missing from `source`'s latest contamination run (default: the recorded
    `--repeat 10` ladder run against the fake server behaving as `behaviour`), into a
    temporary file moved into place. `distinct`: every copied scored reply made its own
    (its repetition and rung after its text), so none is its reference's or another's:
    the report reads every scored request. `rungs_of_two`: the recorded run is one of
    rungs of two requests, both scored (`--concurrency 2 --probes 2`): the most rungs a
    million records can hold."""
    sys.path.insert(0, THIS_CHECKOUT)
    from benchwarden.core.store import SCHEMA_VERSION
    from benchwarden.suites.contamination.digest import FORMAT

    served = "" if behaviour == "clean" else f"-{behaviour}"
    levels, probes = ("2", 2) if rungs_of_two else (SYNTHETIC_LEVELS, 4)
    shape = (f"c{levels.replace(',', '-')}{'-p2' if rungs_of_two else ''}{served}"
             if source is None else f"from-{source.stem}") + (DISTINCT if distinct else "")
    store = cache / (f"contamination-synthetic-{size}-{shape}.v{SCHEMA_VERSION}"
                     f".digests{FORMAT}.sqlite")
    if store.exists():
        return store
    source = source or ensure_store(SYNTHETIC_SOURCE_REPEAT, cache, levels, behaviour, probes)
    started = time.perf_counter()
    built: list[str] = []
    built_in_place(store, lambda partial: built.append(child_output(
        ["-c", _BUILD, str(source), str(partial), str(size),
         "distinct" if distinct else "as-recorded"],
        f"building the synthetic store of {size:,} records")))
    print(f"  built the synthetic soak of {size:,} records ({built[0].strip()} "
          f"repetitions) in {time.perf_counter() - started:.0f} s", flush=True)
    return store


# Run in a child of this checkout (`child_environment`): this process may have imported
# another checkout's installed package.
_COUNT = """
import sys
from benchwarden.core.store import SQLiteStore
from benchwarden.suites.contamination.report import PAYLOAD_FIELDS, PAYLOAD_TYPES, StoredOutcome
records = plain = 0
with SQLiteStore(sys.argv[1], create=False) as opened:
    for summary in opened.iter_record_summaries(suite="contamination",
                                                payload_fields=PAYLOAD_FIELDS,
                                                payload_types=PAYLOAD_TYPES):
        records += 1
        plain += not isinstance(summary.payload.get("outcome"), StoredOutcome)
print(records, plain)
"""


def records_in(store: Path) -> tuple[int, int]:
    """The store's contamination records, and how many of them the report's typed read
    hands over as plain JSON values instead (their outcome does not fit `StoredOutcome`:
    the fallback, which should be rare)."""
    done = subprocess.run([sys.executable, "-c", _COUNT, str(store)], capture_output=True,
                          text=True, env=child_environment(), cwd=NEUTRAL_FOLDER, check=True)
    records, plain = (int(part) for part in done.stdout.split())
    return records, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", default="10,100",
                        help="comma-separated --repeat of the recorded runs; the first is "
                             "the baseline")
    parser.add_argument("--concurrency", default=DEFAULT_LEVELS, metavar="N,N,...",
                        help="the recorded runs' rungs (2,4,...,512: a soak-like ladder whose "
                             "wide rungs are listed in part)")
    parser.add_argument("--synthetic", default=None, metavar="SIZES",
                        help="measure synthetic soaks of these sizes (100k,1M) instead of "
                             "recorded runs; the first is the baseline")
    parser.add_argument("--synthetic-from", default=None, metavar="STORE",
                        help="build the synthetic soaks from this store's latest contamination "
                             "run (a real engine's records) instead of the recorded ladder")
    parser.add_argument("--behaviour", default="clean",
                        choices=("clean", "drift", "leak", "persistent"),
                        help="how the fake server answers the recorded runs: drift and leak "
                             "change every concurrent reply, so every scored request is read "
                             "(the report's worst case)")
    parser.add_argument("--distinct", action="store_true",
                        help="with --synthetic: every copied scored reply made its own, so "
                             "none is its reference's or another request's (every scored "
                             "request is read: the worst case)")
    parser.add_argument("--rungs-of-two", action="store_true",
                        help="with --synthetic: the recorded run is of rungs of two requests, "
                             "both scored (--concurrency 2 --probes 2): half a million rungs "
                             "at a million records, the most a store of that size holds")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure each command this many times (medians are reported)")
    parser.add_argument("--cache", default=None,
                        help="store cache folder (default: the scale benches' cache)")
    parser.add_argument("--before", default=None, metavar="CHECKOUT",
                        help="an older checkout: run each command with its code too (A/B, "
                             "alternating)")
    add_json_option(parser)
    options = parser.parse_args()
    cache = (Path(options.cache).expanduser().resolve() if options.cache
             else cache_folder() / "contamination")
    # each point measured: (its name in figures, how it is printed, its store)
    points: list[tuple[str, str, Path]] = []
    commands = COMMANDS
    if options.synthetic:
        try:
            sizes = [parse_size(part) for part in options.synthetic.split(",") if part.strip()]
        except ValueError:
            parser.error(f"--synthetic takes sizes such as 100k,1M, not {options.synthetic!r}")
        commands = COMMANDS_SYNTHETIC
        source = Path(options.synthetic_from).resolve() if options.synthetic_from else None
        points = [(f"synthetic_{size}", f"synthetic {size:>9,}",
                   ensure_synthetic(size, cache, source, options.behaviour,
                                    options.distinct, options.rungs_of_two))
                  for size in sizes]
    else:
        try:
            repeats = [int(part) for part in options.repeats.split(",") if part.strip()]
        except ValueError:
            parser.error(f"--repeats takes whole numbers separated by commas, "
                         f"not {options.repeats!r}")
        if not repeats or min(repeats) < 1:
            parser.error("give at least one --repeat of 1 or more")
        points = [(f"repeat_{repeat}", f"--repeat {repeat:>4}",
                   ensure_store(repeat, cache, options.concurrency, options.behaviour))
                  for repeat in repeats]
    if not points or options.rounds < 1:
        parser.error("give at least one store to measure, and 1 round or more")
    sides = [("before", options.before), ("now", None)] if options.before else [("now", None)]

    rounds: dict[tuple[str, str, str], list[tuple[float, float, int | None]]] = {}
    records: dict[str, int] = {}
    for point, shown, store in points:
        records[point], plain = records_in(store)
        print(f"  {shown.strip()}: {records[point]:,} records, {plain:,} of them read "
              "plain (their outcome does not fit the typed read)", flush=True)
        for name, command in commands.items():
            for round_number in range(1, options.rounds + 1):
                for side, code in sides:  # alternating: load drifts hit both sides alike
                    with tempfile.TemporaryDirectory(prefix="bw-contam-out-") as out:
                        arguments = [part.format(store=store, out=out) for part in command]
                        seconds, rss, returned = measure(arguments, code)
                        page = Path(out, "x.html")
                        page_bytes = page.stat().st_size if page.exists() else None
                    rounds.setdefault((name, point, side), []).append((seconds, rss,
                                                                       page_bytes))
                    print(f"  {shown} ({records[point]:>9,} records) {name:<12} "
                          f"{side:<6} round {round_number}: {seconds:6.2f} s {rss:6.0f} MiB"
                          + (f"  page {page_bytes / 2**20:.1f} MiB" if page_bytes else "")
                          + (f"  exit {returned}" if returned else ""), flush=True)

    def median(name: str, point: str, side: str) -> tuple[float, float, int | None]:
        measured = rounds[(name, point, side)]
        pages = [page for _, _, page in measured if page is not None]
        return (statistics.median(seconds for seconds, _, _ in measured),
                statistics.median(rss for _, rss, _ in measured),
                int(statistics.median(pages)) if pages else None)

    figures = []
    base, base_shown, _ = points[0]
    print(f"\nmedians of {options.rounds} round(s) against {base_shown.strip()} "
          f"({records[base]:,} records), this code; goal: page < {PAGE_GOAL / 1e6:.0f} MB")
    for name in commands:
        base_measured = median(name, base, "now")
        for point, shown, _ in points[1:]:
            seconds, rss, page = measured = median(name, point, "now")
            growth = (records[point] / records[base]) if records[base] else 0.0
            print(f"  {name:<12} {shown.strip()} (records x{growth:.1f}): {seconds:6.2f} s "
                  f"(x{seconds / base_measured[0]:.2f}), {rss:5.0f} MiB "
                  f"(x{rss / base_measured[1]:.2f})"
                  + (f", page {page / 2**20:.1f} MiB (x{page / base_measured[2]:.2f})"
                     if page and base_measured[2] else "")
                  + ("" if page is None or page < PAGE_GOAL else "  page goal NOT met"))
            figures += growth_figures(name, point, measured, base_measured,
                                      f"at {shown.strip()} vs {base_shown.strip()}")
    if options.before:
        print(f"\nnow against before ({options.before}), medians")
        for name in commands:
            for point, shown, _ in points:
                now_seconds, now_rss, now_page = median(name, point, "now")
                then_seconds, then_rss, then_page = median(name, point, "before")
                print(f"  {name:<12} {shown}: {then_seconds:6.2f} -> "
                      f"{now_seconds:6.2f} s (x{now_seconds / then_seconds:.2f}), "
                      f"{then_rss:.0f} -> {now_rss:.0f} MiB"
                      + (f", page {then_page / 2**20:.1f} -> {now_page / 2**20:.1f} MiB"
                         if then_page and now_page else ""))
                figures += now_vs_before(name, point, f"at {shown.strip()}",
                                         (now_seconds, then_seconds), (now_rss, then_rss))
                if then_page and now_page:
                    figures.append(Figure(f"{name}.page_bytes.{point}.now_vs_before",
                                          now_page, then_page, "bytes",
                                          f"page at {shown.strip()}, this code vs before"))
    emit("contamination_report", figures, options.json_path)


if __name__ == "__main__":
    main()

"""Run every bench script and collect their figures in one JSON file.

Each bench script (every `bench/*.py` except this runner, the helper modules whose
names start with `_`, and the store builder `scale_store.py`) accepts `--json FILE`
and writes `{"<script>.<figure>": {"value", "baseline", "ratio", "unit"}}` there
(bench/_figures.py). This runner runs them one after another with their default
settings, shows their output as it comes, and merges the figures:

    python bench/run.py --json figures.json                 # every script
    python bench/run.py --only store_append,scale_growth    # a subset

A script that fails is reported (its name, exit code) and the others still run; the
runner then exits 1, and the JSON holds what the others measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
NOT_BENCHES = {"run.py", "scale_store.py"}


def bench_scripts() -> list[Path]:
    return sorted(path for path in BENCH.glob("*.py")
                  if path.name not in NOT_BENCHES and not path.name.startswith("_"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                        help="write every script's figures here, merged")
    parser.add_argument("--only", default=None,
                        help="comma-separated script names (without .py) to run")
    options = parser.parse_args()
    scripts = bench_scripts()
    if options.only:
        wanted = {name.strip().removesuffix(".py") for name in options.only.split(",")}
        unknown = wanted - {path.stem for path in scripts}
        if unknown:
            parser.error(f"no bench script named {', '.join(sorted(unknown))}; "
                         f"scripts: {', '.join(path.stem for path in scripts)}")
        scripts = [path for path in scripts if path.stem in wanted]

    figures: dict[str, dict] = {}
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bw-bench-") as folder:
        for script in scripts:
            out = Path(folder) / f"{script.stem}.json"
            print(f"== {script.name}", flush=True)
            started = time.perf_counter()
            code = subprocess.run([sys.executable, str(script), "--json", str(out)]).returncode
            print(f"== {script.name}: exit {code} after {time.perf_counter() - started:.0f} s",
                  flush=True)
            if code != 0 or not out.exists():
                failed.append(f"{script.stem} (exit {code})")
                continue
            figures.update(json.loads(out.read_text(encoding="utf-8")))
    if options.json_path:
        Path(options.json_path).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"{len(figures)} figures from {len(scripts) - len(failed)} scripts written to "
              f"{options.json_path}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

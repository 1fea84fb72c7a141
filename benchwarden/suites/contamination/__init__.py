"""The `contamination` suite: does concurrency change what a server answers, or leak one
request into another? (SPEC.md §2)

Map:
- `probes`: prompts, canaries and topics drawn from the run seed (pure).
- `presets`: engine presets and the exact request body (pure).
- `scoring`: classification of every probe × leg, divergence classes from token
  logprobs, the bisect search, the counters and the verdict (pure).
- `fidelity`: peak in flight and launch skew of each rung, from client timings (pure).
- `driver`: the legs against a server, every request recorded as it completes (I/O).
- `report`: the typed report (`ContaminationReport`), built once from the store.
- `terminal`, `html`: views that format the typed report and compute nothing.
- `repro`: `--repro DIR`, a stdlib-only replay script of a failing probe, from the report.
- `command`: `benchwarden contamination` (options -> config -> driver -> views).

Python API: `driver.ContaminationConfig` and `driver.run_contamination(config, store)`.

`suite` is what the entry point `benchwarden.suites: contamination` names; this module
imports nothing heavy, so listing suites costs nothing.
"""

from benchwarden.core.suite import ModuleSuite

# kept equal to scoring.BENCH_VERSION by tests/core/test_suite_registry.py
suite = ModuleSuite(
    name="contamination",
    bench_version="2",
    summary="Does concurrency change what an OpenAI-compatible server answers, or leak "
            "one request into another?",
    package=__name__,
    report_class="report:ContaminationReport",
)

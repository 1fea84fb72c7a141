"""The `arms` suite: agent arms (tool shapes) compared on the same tasks, in trials.

Map: `tasks` (the nouns: tasks, arms, environments), `agents` (the agent adapters:
OpenAI-compatible tool loop, external command), `trial` (one sample), `driver` (the I/O
shell: plan, run, append, tally), `report` (the typed report from the store),
`views`/`html` (views), `command` (`benchwarden arms ...`), `boundary`/`supervisor`/
`isolation` (the trial's sandbox and its command gate), `tracker` (the example suite).

`suite` is what the entry point `benchwarden.suites: arms` names; this module imports
nothing heavy, so listing suites costs nothing. Each task suite (e.g. `tracker`) carries
its own bench_version in its runs; `bench_version` here is the default task suite's.
"""

from benchwarden.core.suite import ModuleSuite

# kept equal to tracker.suite.BENCH_VERSION by tests/core/test_suite_registry.py
suite = ModuleSuite(
    name="arms",
    bench_version="tracker-1",
    summary="Compare agent conditions (tool interfaces, prompts, models) on a task suite.",
    package=__name__,
    report_class="report:ArmsReport",
)

"""The `retrieval` suite: context-packing strategies scored on seeded corpora, and the
king-of-the-hill ladder that promotes a challenger only on a significant win.

Map: `corpus` (seeded corpora), `scoring`/`grading` (pure), `driver` (the I/O shell),
`report` (the typed report), `html` (the page), `command` (`benchwarden retrieval`),
`ladder`/`ladder_command` (`benchwarden ladder`).

`suite` is what the entry point `benchwarden.suites: retrieval` names; this module
imports nothing heavy, so listing suites costs nothing.
"""

from benchwarden.core.suite import ModuleSuite

# kept equal to scoring.BENCH_VERSION by tests/core/test_suite_registry.py
suite = ModuleSuite(
    name="retrieval",
    bench_version="3",
    summary="Score retrieval strategies on a seeded knowledge base, with guards.",
    package=__name__,
    report_class="report:RetrievalReport",
    summaries={"ladder": "King of the hill: challengers against the champion, every decision "
                         "in a ledger."},
    commands={"retrieval": f"{__name__}.command:retrieval",
              "ladder": f"{__name__}.ladder_command:ladder"},
)

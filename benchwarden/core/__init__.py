"""The suite-agnostic core: records, store, statistics, verdicts, signing, reports.

Nothing in here knows which suite it serves; suites import the core, never each other.
"""

"""The built-in suites, each registered in pyproject.toml under the entry-point group
`benchwarden.suites` exactly as a third-party suite would be (see `core.suite`).

Nothing here names a suite: use `benchwarden.core.suite.get_suite(name)` and
`registered_suites()`. A suite imports core (and targets), never another suite.
"""

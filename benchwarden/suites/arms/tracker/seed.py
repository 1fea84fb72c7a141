"""The seed plan: what every fresh tracker holds before the agent starts.

4 labels; 8 issues (5 open, 3 closed; one closed issue unlabelled, two open issues
about crashes, one of them unlabelled); 3 pull requests (one labelled, one with a
comment review carrying an inline comment, one with a comment). Everything is
authored by `maintainer` or `alice`, never by the agent, so the agent's own changes
are always distinguishable. Numbers are deterministic: issues 1-8, pull requests 9-11.
"""

from __future__ import annotations

from benchwarden.suites.arms.tracker.operations import Tracker

LABELS = (
    ("bug", "#d73a4a", "Something is not working"),
    ("enhancement", "#a2eeef", "New feature or request"),
    ("documentation", "#0075ca", "Improvements or additions to documentation"),
    ("priority", "#e99695", "Needs attention soon"),
)

# (title, body, labels, state)
ISSUES: tuple[tuple[str, str, list[str], str], ...] = (
    ("Crash when saving an empty file",
     "Saving a file with no content crashes the editor with a null pointer error.",
     ["bug", "priority"], "open"),
    ("Add dark mode", "Many users asked for a dark colour scheme.", ["enhancement"], "open"),
    ("Typo in installation guide",
     "Step 2 of the installation guide says intall instead of install.",
     ["documentation"], "open"),
    ("Crash on startup with missing config",
     "When the config file is missing the app crashes before showing a window.", [], "open"),
    ("Slow search on large projects",
     "Searching a project with 50k files takes over ten seconds.", [], "open"),
    ("Login button misaligned", "The login button overlaps the footer on small screens.",
     ["bug"], "closed"),
    ("Support exporting to CSV", "Allow exporting the table view as a CSV file.", [], "closed"),
    ("Update README badges", "The build badge points at the old CI service.",
     ["documentation"], "closed"),
)

COMMENTS = ((1, "alice", "I can reproduce this on version 2.3."),)

# (title, head branch, body, labels)
PULLS: tuple[tuple[str, str, str, list[str]], ...] = (
    ("Fix crash when saving an empty file", "fix-empty-save",
     "Fixes #1 by checking for empty buffers.", ["bug"]),
    ("Add dark mode toggle", "dark-mode", "Part of #2: adds a toggle in the settings.", []),
    ("Speed up search indexing", "faster-search", "Speeds up #5 with an incremental index.", []),
)
REVIEWS = ((10, "alice", "comment", "Please add a setting to remember the choice.",
            [{"path": "src/settings.py", "line": 42, "body": "Persist this value."}]),)
PULL_COMMENTS = ((11, "alice", "Benchmarks would help here."),)


def seed(tracker: Tracker) -> None:
    maintainer = tracker.as_user("maintainer")
    alice = tracker.as_user("alice")
    for name, color, description in LABELS:
        maintainer.create_label(name, color, description)
    for title, body, labels, state in ISSUES:
        number = maintainer.create_issue(title, body, labels)["number"]
        if state == "closed":
            maintainer.close_issue(number)
    for number, author, body in COMMENTS:
        tracker.as_user(author).comment(number, body)
    for title, head, body, labels in PULLS:
        maintainer.create_pull(title, head, body, labels)
    for number, author, kind, body, inline in REVIEWS:
        tracker.as_user(author).review_pull(number, kind, body, inline)
    for number, author, body in PULL_COMMENTS:
        alice.as_user(author).comment(number, body)

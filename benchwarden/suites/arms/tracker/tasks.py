"""The tracker's twenty tasks over the four default tiers, each with its checker.

Targets in find-then-act tasks are named by a property, never by number, so the
agent has to look before it acts. Tasks that ask for new text give it exactly, so
the expected state is known in full. The agent's login is `agent`.
"""

from __future__ import annotations

from typing import Any

from benchwarden.suites.arms.checkers import Absent, Fact, ReadCheck, StateCheck
from benchwarden.suites.arms.tasks import Task

AGENT = "agent"
S = dict[str, dict[str, dict[str, Any]]]


def _add(values: list[Any], *items: Any) -> list[Any]:
    return sorted([*values, *items])


def _close(number: int):
    def change(state: S) -> None:
        state["issues"][str(number)]["state"] = "closed"
    return change


def _reopen(number: int):
    def change(state: S) -> None:
        state["issues"][str(number)]["state"] = "open"
    return change


def _label(number: int, label: str):
    def change(state: S) -> None:
        issue = state["issues"][str(number)]
        issue["labels"] = _add(issue["labels"], label)
    return change


def _comment(number: int, body: str, entity: str = "issues"):
    def change(state: S) -> None:
        item = state[entity][str(number)]
        item["comments"] = _add(item["comments"], [AGENT, body])
    return change


def _assign(number: int, user: str):
    def change(state: S) -> None:
        issue = state["issues"][str(number)]
        issue["assignees"] = _add(issue["assignees"], user)
    return change


def _all(*changes):
    def change(state: S) -> None:
        for each in changes:
            each(state)
    return change


def _create_issue(state: S) -> None:
    state["issues"]["12"] = {
        "title": "Add keyboard shortcuts", "body": "Users want shortcuts for common actions.",
        "state": "open", "author": AGENT, "labels": [], "assignees": [], "comments": []}


def _merge_crash_fix(state: S) -> None:
    state["pulls"]["9"]["state"] = "merged"


def _fix_typo(state: S) -> None:
    state["issues"]["3"]["body"] = ("Step 2 of the installation guide says install instead "
                                    "of install.")


def _approve_dark_mode(state: S) -> None:
    pull = state["pulls"]["10"]
    pull["reviews"] = _add(pull["reviews"], [AGENT, "approve", "Looks good to me.", []])


def _new_label(state: S) -> None:
    state["labels"]["needs-info"] = {"color": "fbca04", "description": ""}
    _label(2, "needs-info")(state)
    _close(2)(state)


TASKS: tuple[Task, ...] = (
    # -- read ---------------------------------------------------------------------
    Task("open-issue-count", "read",
         "How many open issues are there? Pull requests do not count as issues. "
         "Answer with the number.",
         ReadCheck((Fact("five open issues", ("5", "five")),))),
    Task("bug-issue-titles", "read",
         "List the titles of every issue (open or closed) that has the label bug.",
         ReadCheck((Fact("issue 1", ("crash when saving an empty file",)),
                    Fact("issue 6", ("login button misaligned",))),
                   (Absent("a non-bug issue", ("add dark mode",
                                               "crash on startup with missing config",
                                               "typo in installation guide")),))),
    Task("issue-labels-and-state", "read",
         "Which labels does issue #1 have, and is it open or closed?",
         ReadCheck((Fact("label bug", ("bug",)), Fact("label priority", ("priority",)),
                    Fact("state open", ("open", "opened")),))),
    Task("review-body", "read",
         "What did the review on pull request #10 ask for? Quote the review's text.",
         ReadCheck((Fact("review body", ("please add a setting to remember the choice",),
                         regex=r"setting\W+(?:\w+\W+){0,3}remember\W+(?:\w+\W+){0,2}choice"),))),
    Task("crash-fix-pull-number", "read",
         "Which pull request fixes the crash when saving an empty file? Give its number.",
         ReadCheck((Fact("pull request 9", ("#9", "9", "pr 9", "pull request 9", "nine")),))),
    # -- single mutation -----------------------------------------------------------
    Task("close-issue", "single-mutation", "Close issue #2.", StateCheck(_close(2))),
    Task("reopen-issue", "single-mutation", "Reopen issue #8.", StateCheck(_reopen(8))),
    Task("comment-on-issue", "single-mutation",
         "Comment on issue #5 with exactly this text: Investigating this now.",
         StateCheck(_comment(5, "Investigating this now."))),
    Task("add-label", "single-mutation", "Add the label priority to issue #4.",
         StateCheck(_label(4, "priority"))),
    Task("assign-self", "single-mutation", "Assign issue #3 to yourself.",
         StateCheck(_assign(3, AGENT))),
    Task("create-issue", "single-mutation",
         "Create a new issue titled 'Add keyboard shortcuts' with the body "
         "'Users want shortcuts for common actions.' and no labels.",
         StateCheck(_create_issue)),
    # -- find then act -------------------------------------------------------------
    Task("reopen-unlabelled-closed", "find-then-act",
         "Exactly one closed issue has no labels. Reopen it.", StateCheck(_reopen(7))),
    Task("label-unlabelled-crash", "find-then-act",
         "One open issue about a crash has no labels yet. Add the bug label to it.",
         StateCheck(_label(4, "bug"))),
    Task("merge-crash-fix", "find-then-act",
         "Merge the pull request that fixes the crash when saving an empty file.",
         StateCheck(_merge_crash_fix)),
    Task("fix-typo-in-body", "find-then-act",
         "The body of the issue about a typo in the installation guide itself misspells "
         "'install' as 'intall'. Edit that issue's body to replace 'intall' with 'install', "
         "changing nothing else.",
         StateCheck(_fix_typo)),
    Task("approve-dark-mode", "find-then-act",
         "Approve the pull request that adds a dark mode toggle, with the review text: "
         "Looks good to me.",
         StateCheck(_approve_dark_mode)),
    # -- multi step ----------------------------------------------------------------
    Task("triage-slow-search", "multi-step",
         "Triage the issue about slow search: add the label enhancement, assign it to "
         "yourself, and comment exactly: Triaged for the next release.",
         StateCheck(_all(_label(5, "enhancement"), _assign(5, AGENT),
                         _comment(5, "Triaged for the next release.")))),
    Task("close-open-crashes", "multi-step",
         "For every open issue whose title mentions a crash: comment exactly "
         "'Closing: tracked in the stability epic.' and then close it. Leave pull "
         "requests alone.",
         StateCheck(_all(_comment(1, "Closing: tracked in the stability epic."), _close(1),
                         _comment(4, "Closing: tracked in the stability epic."), _close(4)))),
    Task("new-label-flow", "multi-step",
         "Create a label named needs-info with colour #fbca04 and no description, add it "
         "to issue #2, then close issue #2.",
         StateCheck(_new_label)),
    Task("reopen-assign-comment", "multi-step",
         "Reopen issue #6, assign it to alice, and comment exactly: Regression found in 2.4.",
         StateCheck(_all(_reopen(6), _assign(6, "alice"),
                         _comment(6, "Regression found in 2.4.")))),
)

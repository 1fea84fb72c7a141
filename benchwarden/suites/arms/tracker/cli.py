"""`tracker`: the command-line program of the `cli` arm.

Reads the database path from TRACKER_DB and the acting user from TRACKER_USER.
Prints plain text meant for a reader (an agent), one item per line in listings.
Exit status 0 on success, 1 on a refused operation, 2 on a usage error.
Imports only the standard library and the tracker's operations: it must start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from benchwarden.suites.arms.tracker.operations import Tracker, TrackerError


def _line(item: dict[str, Any]) -> str:
    labels = ",".join(item["labels"]) or "-"
    assignees = ",".join(item["assignees"]) or "-"
    return (f"#{item['number']}\t{item['state']}\t{item['title']}\t"
            f"labels: {labels}\tassignees: {assignees}")


def _detail(item: dict[str, Any]) -> str:
    lines = [f"#{item['number']} {item['title']}",
             f"state: {item['state']}",
             f"author: {item['author']}",
             f"labels: {', '.join(item['labels']) or '-'}",
             f"assignees: {', '.join(item['assignees']) or '-'}"]
    if "head" in item:
        lines.append(f"branch: {item['head']}")
    lines += ["", item["body"] or "(no body)"]
    for comment in item["comments"]:
        lines += ["", f"comment by {comment['author']}:", comment["body"]]
    for review in item.get("reviews", []):
        lines += ["", f"review by {review['author']} ({review['kind']}):",
                  review["body"] or "(no body)"]
        for inline in review["inline_comments"]:
            lines.append(f"  {inline['path']}:{inline['line']}: {inline['body']}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracker", description="A small issue tracker.")
    groups = parser.add_subparsers(dest="group", required=True)

    issue = groups.add_parser("issue", help="issues").add_subparsers(dest="action", required=True)
    listing = issue.add_parser("list", help="list issues")
    listing.add_argument("--state", default="open", choices=["open", "closed", "all"])
    listing.add_argument("--label")
    issue.add_parser("show", help="show one issue").add_argument("number", type=int)
    create = issue.add_parser("create", help="create an issue")
    create.add_argument("--title", required=True)
    create.add_argument("--body", default="")
    create.add_argument("--label", action="append", default=[], help="repeatable")
    edit = issue.add_parser("edit", help="edit title/body")
    edit.add_argument("number", type=int)
    edit.add_argument("--title")
    edit.add_argument("--body")
    for verb in ("close", "reopen"):
        issue.add_parser(verb, help=f"{verb} an issue").add_argument("number", type=int)
    comment = issue.add_parser("comment", help="comment on an issue")
    comment.add_argument("number", type=int)
    comment.add_argument("--body", required=True)
    label = issue.add_parser("label", help="add/remove labels")
    label.add_argument("number", type=int)
    label.add_argument("--add", action="append", default=[], help="repeatable")
    label.add_argument("--remove", action="append", default=[], help="repeatable")
    assign = issue.add_parser("assign", help="assign a user (@me for yourself)")
    assign.add_argument("number", type=int)
    assign.add_argument("user")

    labels = groups.add_parser("label", help="labels").add_subparsers(dest="action", required=True)
    labels.add_parser("list", help="list labels")
    new_label = labels.add_parser("create", help="create a label")
    new_label.add_argument("name")
    new_label.add_argument("--color", required=True, help="#rrggbb")
    new_label.add_argument("--description", default="")

    pr = groups.add_parser("pr", help="pull requests").add_subparsers(dest="action", required=True)
    pr.add_parser("list", help="list pull requests").add_argument(
        "--state", default="open", choices=["open", "closed", "merged", "all"])
    pr.add_parser("show", help="show one pull request").add_argument("number", type=int)
    pr.add_parser("merge", help="merge a pull request").add_argument("number", type=int)
    review = pr.add_parser("review", help="review a pull request")
    review.add_argument("number", type=int)
    kind = review.add_mutually_exclusive_group(required=True)
    kind.add_argument("--approve", dest="kind", action="store_const", const="approve")
    kind.add_argument("--comment", dest="kind", action="store_const", const="comment")
    kind.add_argument("--request-changes", dest="kind", action="store_const",
                      const="request_changes")
    review.add_argument("--body", default="")
    pr_comment = pr.add_parser("comment", help="comment on a pull request")
    pr_comment.add_argument("number", type=int)
    pr_comment.add_argument("--body", required=True)

    groups.add_parser("whoami", help="your login")
    return parser


def run(argv: list[str], tracker: Tracker) -> str:
    args = _parser().parse_args(argv)
    group, action = args.group, getattr(args, "action", None)
    if group == "whoami":
        return tracker.user
    if group == "issue":
        if action == "list":
            items = tracker.list_issues(args.state, args.label)
            return "\n".join(_line(i) for i in items) or "no issues"
        if action == "show":
            return _detail(tracker.show_issue(args.number))
        if action == "create":
            created = tracker.create_issue(args.title, args.body, args.label)
            return f"created issue #{created['number']}"
        if action == "edit":
            if args.title is None and args.body is None:
                raise TrackerError("give --title and/or --body")
            tracker.edit_issue(args.number, args.title, args.body)
            return f"edited #{args.number}"
        if action in ("close", "reopen"):
            item = tracker.set_state(args.number, "closed" if action == "close" else "open")
            return f"#{item['number']} is now {item['state']}"
        if action == "comment":
            tracker.comment(args.number, args.body)
            return f"commented on #{args.number}"
        if action == "label":
            if not args.add and not args.remove:
                raise TrackerError("give --add LABEL and/or --remove LABEL")
            if args.add:
                tracker.add_labels(args.number, args.add)
            for name in args.remove:
                tracker.remove_label(args.number, name)
            return _line(tracker.show_issue(args.number) if _is_issue(tracker, args.number)
                         else tracker.show_pull(args.number))
        if action == "assign":
            return _line(tracker.assign(args.number, args.user))
    if group == "label":
        if action == "list":
            return "\n".join(f"{label['name']}\t{label['color']}\t{label['description']}"
                             for label in tracker.list_labels()) or "no labels"
        created = tracker.create_label(args.name, args.color, args.description)
        return f"created label {created['name']}"
    if group == "pr":
        if action == "list":
            return "\n".join(_line(i) for i in tracker.list_pulls(args.state)) or "no pull requests"
        if action == "show":
            return _detail(tracker.show_pull(args.number))
        if action == "merge":
            tracker.merge_pull(args.number)
            return f"merged #{args.number}"
        if action == "review":
            tracker.review_pull(args.number, args.kind, args.body)
            return f"reviewed #{args.number} ({args.kind})"
        if action == "comment":
            tracker.show_pull(args.number)
            tracker.comment(args.number, args.body)
            return f"commented on #{args.number}"
    raise TrackerError("unknown command")


def _is_issue(tracker: Tracker, number: int) -> bool:
    try:
        tracker.show_issue(number)
        return True
    except TrackerError:
        return False


def main(argv: list[str] | None = None) -> int:
    database = os.environ.get("TRACKER_DB")
    if not database:
        print("tracker: TRACKER_DB is not set", file=sys.stderr)
        return 2
    tracker = Tracker(database, os.environ.get("TRACKER_USER", "agent"))
    try:
        print(run(sys.argv[1:] if argv is None else argv, tracker))
    except TrackerError as error:
        print(f"tracker: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

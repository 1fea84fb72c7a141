"""The tracker's operations as function tools (the `tools` arm), with JSON schemas.

Each entry names a `Tracker` method and its arguments; the REST server and the CLI
call the same methods, so all three arms share one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchwarden.suites.arms.tasks import FunctionTool
from benchwarden.suites.arms.tracker.operations import Tracker, TrackerError, dumps

_NUMBER = {"type": "integer", "description": "Issue or pull request number."}
_STATE = {"type": "string", "enum": ["open", "closed", "all"], "description": "Default open."}


def _tool(name: str, description: str, properties: dict[str, Any],
          required: tuple[str, ...] = ()) -> FunctionTool:
    return FunctionTool(name, description, {
        "type": "object", "properties": properties, "required": list(required),
        "additionalProperties": False})


FUNCTIONS: tuple[FunctionTool, ...] = (
    _tool("whoami", "Your own user login.", {}),
    _tool("list_issues", "List issues (not pull requests), optionally by state and label.",
          {"state": _STATE, "label": {"type": "string"}}),
    _tool("show_issue", "One issue with body, labels, assignees and comments.",
          {"number": _NUMBER}, ("number",)),
    _tool("create_issue", "Create an issue.",
          {"title": {"type": "string"}, "body": {"type": "string"},
           "labels": {"type": "array", "items": {"type": "string"}}}, ("title",)),
    _tool("edit_issue", "Change an issue's title and/or body.",
          {"number": _NUMBER, "title": {"type": "string"}, "body": {"type": "string"}},
          ("number",)),
    _tool("close_issue", "Close an issue or pull request.", {"number": _NUMBER}, ("number",)),
    _tool("reopen_issue", "Reopen an issue or pull request.", {"number": _NUMBER}, ("number",)),
    _tool("add_labels", "Add existing labels to an issue or pull request.",
          {"number": _NUMBER, "labels": {"type": "array", "items": {"type": "string"}}},
          ("number", "labels")),
    _tool("remove_label", "Remove one label from an issue or pull request.",
          {"number": _NUMBER, "label": {"type": "string"}}, ("number", "label")),
    _tool("assign", "Assign a user (your own login, or @me) to an issue or pull request.",
          {"number": _NUMBER, "user": {"type": "string"}}, ("number", "user")),
    _tool("comment", "Comment on an issue or pull request.",
          {"number": _NUMBER, "body": {"type": "string"}}, ("number", "body")),
    _tool("list_labels", "List all labels.", {}),
    _tool("create_label", "Create a label.",
          {"name": {"type": "string"}, "color": {"type": "string", "description": "#rrggbb"},
           "description": {"type": "string"}}, ("name", "color")),
    _tool("list_pulls", "List pull requests by state.",
          {"state": {"type": "string", "enum": ["open", "closed", "merged", "all"]}}),
    _tool("show_pull", "One pull request with body, labels, comments and reviews.",
          {"number": _NUMBER}, ("number",)),
    _tool("merge_pull", "Merge an open pull request.", {"number": _NUMBER}, ("number",)),
    _tool("review_pull", "Review a pull request.",
          {"number": _NUMBER, "kind": {"type": "string",
                                       "enum": ["approve", "comment", "request_changes"]},
           "body": {"type": "string"}}, ("number", "kind")),
)

_BY_NAME = {tool.name: tool for tool in FUNCTIONS}


def _typed(function: str, key: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """Check one argument against its schema's type; integers may arrive as strings."""
    kind = schema.get("type")
    if kind == "integer":
        if isinstance(value, bool):
            raise ValueError(f"{function}: {key} must be an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{function}: {key} must be an integer") from None
    if kind == "array":
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{function}: {key} must be a list of strings")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"{function}: {key} must be a string")
        if "enum" in schema and value not in schema["enum"]:
            raise ValueError(f"{function}: {key} must be one of {', '.join(schema['enum'])}")
    return value


def call(tracker: Tracker, name: str, arguments: Mapping[str, Any]) -> str:
    """Run one function call; a bad call raises ValueError with a one-line message."""
    tool = _BY_NAME.get(name)
    if tool is None:
        raise ValueError(f"unknown function {name!r}")
    if not isinstance(arguments, Mapping):
        raise ValueError("arguments must be a JSON object")
    allowed = set(tool.parameters["properties"])
    unknown = sorted(set(arguments) - allowed)
    missing = [r for r in tool.parameters["required"] if r not in arguments]
    if unknown or missing:
        raise ValueError(f"{name}: " + "; ".join(
            ([f"unknown arguments {unknown}"] if unknown else [])
            + ([f"missing arguments {missing}"] if missing else [])))
    kwargs = dict(arguments)
    for key, value in kwargs.items():
        kwargs[key] = _typed(name, key, value, tool.parameters["properties"][key])
    try:
        return dumps(getattr(tracker, name)(**kwargs))
    except TrackerError as error:
        raise ValueError(str(error)) from None
    except TypeError as error:
        raise ValueError(f"{name}: {error}") from None

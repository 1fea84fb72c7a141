"""The tracker's REST API (the `http` arm): JSON over HTTP on a loopback port.

One server per trial, bound to 127.0.0.1 only. In a trial it runs as its own process
(`python -m benchwarden.suites.arms.tracker.server --database DB --port N`) inside the
trial's boundary, so only the agent's commands, in the same network namespace, can
reach it; `TrackerServer` (a daemon thread) serves tests and library use. `GET /`
lists the routes.
Errors answer `{"error": "..."}` with 400/404/405; nothing here raises into the harness.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from benchwarden.suites.arms.tracker.operations import Tracker, TrackerError

ROUTES_HELP = {
    "GET /user": "your login",
    "GET /issues?state=open|closed|all&label=NAME": "list issues",
    "POST /issues": '{"title": ..., "body": ..., "labels": [...]}',
    "GET /issues/N": "one issue with comments",
    "PATCH /issues/N": '{"title": ..., "body": ..., "state": "open"|"closed"}',
    "POST /issues/N/comments": '{"body": ...}',
    "POST /issues/N/labels": '{"labels": [...]}',
    "DELETE /issues/N/labels/NAME": "remove a label",
    "POST /issues/N/assignees": '{"assignees": ["login" or "@me"]}',
    "GET /labels": "list labels",
    "POST /labels": '{"name": ..., "color": "#rrggbb", "description": ...}',
    "GET /pulls?state=open|closed|merged|all": "list pull requests",
    "GET /pulls/N": "one pull request with comments and reviews",
    "PATCH /pulls/N": '{"state": "open"|"closed"}',
    "POST /pulls/N/merge": "merge",
    "POST /pulls/N/reviews": '{"kind": "approve"|"comment"|"request_changes", "body": ...}',
    "POST /pulls/N/comments": '{"body": ...}',
}


class _NotFound(Exception):
    pass


def _dispatch(tracker: Tracker, method: str, path: str, query: dict[str, str],
              body: dict[str, Any]) -> Any:
    parts = [unquote(p) for p in path.split("/") if p]
    number = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    # The item routes ("N" in the shape) match only when the path named a number.
    item = number if number is not None else 0
    routes: dict[tuple[str, str], Callable[[], Any]] = {
        ("GET", ""): lambda: {"routes": ROUTES_HELP},
        ("GET", "user"): tracker.whoami,
        ("GET", "issues"): lambda: tracker.list_issues(query.get("state", "open"),
                                                       query.get("label")),
        ("POST", "issues"): lambda: tracker.create_issue(
            str(body.get("title", "")), str(body.get("body", "")), list(body.get("labels") or [])),
        ("GET", "labels"): tracker.list_labels,
        ("POST", "labels"): lambda: tracker.create_label(
            str(body.get("name", "")), str(body.get("color", "")),
            str(body.get("description", ""))),
        ("GET", "pulls"): lambda: tracker.list_pulls(query.get("state", "open")),
        ("GET", "issues/N"): lambda: tracker.show_issue(item),
        ("PATCH", "issues/N"): lambda: _patch(tracker, item, body, "issue"),
        ("POST", "issues/N/comments"): lambda: tracker.comment(item, str(body.get("body", ""))),
        ("POST", "issues/N/labels"): lambda: tracker.add_labels(
            item, list(body.get("labels") or [])),
        ("DELETE", "issues/N/labels/NAME"): lambda: tracker.remove_label(item, parts[3]),
        ("POST", "issues/N/assignees"): lambda: _assign(tracker, item, body),
        ("GET", "pulls/N"): lambda: tracker.show_pull(item),
        ("PATCH", "pulls/N"): lambda: _patch(tracker, item, body, "pull"),
        ("POST", "pulls/N/merge"): lambda: tracker.merge_pull(item),
        ("POST", "pulls/N/reviews"): lambda: tracker.review_pull(
            item, str(body.get("kind", "")), str(body.get("body", ""))),
        ("POST", "pulls/N/comments"): lambda: (
            tracker.show_pull(item), tracker.comment(item, str(body.get("body", ""))))[1],
    }
    shape = "/".join(["N" if i == 1 and number is not None else
                      ("NAME" if i == 3 else p) for i, p in enumerate(parts)])
    handler = routes.get((method, shape))
    if handler is None:
        if any(s == shape for _, s in routes):
            raise TrackerError(f"method {method} is not allowed on /{path.strip('/')}")
        raise _NotFound(f"no route /{path.strip('/')}; GET / lists the routes")
    return handler()


def _patch(tracker: Tracker, number: int | None, body: dict[str, Any], kind: str) -> Any:
    assert number is not None
    if kind == "pull":
        tracker.show_pull(number)
    else:
        tracker.show_issue(number)
    if "title" in body or "body" in body:
        tracker._edit(number, kind, body.get("title"), body.get("body"))
    if "state" in body:
        tracker.set_state(number, str(body["state"]))
    unknown = sorted(set(body) - {"title", "body", "state"})
    if unknown:
        raise TrackerError(f"unknown fields {unknown}")
    return tracker.show_pull(number) if kind == "pull" else tracker.show_issue(number)


def _assign(tracker: Tracker, number: int | None, body: dict[str, Any]) -> Any:
    assert number is not None
    users = body.get("assignees") or ([body["user"]] if "user" in body else [])
    if not users:
        raise TrackerError('give {"assignees": ["login"]}')
    result = None
    for user in users:
        result = tracker.assign(number, str(user))
    return result


class _Handler(BaseHTTPRequestHandler):
    tracker: Tracker
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep the harness's output clean
        pass

    def _answer(self, status: int, value: Any) -> None:
        data = (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
        except ValueError as error:
            self._answer(400, {"error": f"invalid JSON body: {error}"})
            return
        try:
            self._answer(200, _dispatch(self.tracker, self.command, url.path, query, body))
        except _NotFound as error:
            self._answer(404, {"error": str(error)})
        except TrackerError as error:
            status = 404 if str(error).startswith("there is no") else 400
            self._answer(status, {"error": str(error)})
        except (TypeError, ValueError, KeyError) as error:
            self._answer(400, {"error": f"bad request: {error}"})

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


class TrackerServer:
    """A running REST server; `stop()` is idempotent."""

    def __init__(self, tracker: Tracker) -> None:
        handler = type("BoundHandler", (_Handler,), {"tracker": tracker})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="tracker-rest", daemon=True)
        self._thread.start()
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an IPv4 address: ("127.0.0.1", port)
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    """Serve one tracker database on 127.0.0.1:PORT until killed (the trial's service,
    started by the supervisor inside the trial's boundary)."""
    import argparse

    parser = argparse.ArgumentParser(prog="tracker-server")
    parser.add_argument("--database", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="agent")
    args = parser.parse_args(argv)
    handler = type("BoundHandler", (_Handler,), {"tracker": Tracker(args.database, args.user)})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

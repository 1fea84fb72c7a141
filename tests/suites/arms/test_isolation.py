"""Isolation: every command name is found, whatever the shell structure; fail closed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.suites.arms.isolation import (
    ALWAYS_DENIED,
    BASE_UTILITIES,
    NetworkChannel,
    audit_transcript,
    check_command,
    check_function_call,
    command_names,
    permitted_names,
)
from benchwarden.suites.arms.tasks import Arm

CLI = Arm("cli", "shell", "", allowed_commands=BASE_UTILITIES | {"tracker"})
HTTP = Arm("http", "shell", "", allowed_commands=BASE_UTILITIES | {"curl"},
           network_commands=frozenset({"curl"}))
TOOLS = Arm("tools", "functions", "")


@pytest.mark.parametrize("command, names", [
    ("tracker issue list", ["tracker"]),
    ("tracker issue list | grep crash | wc -l", ["tracker", "grep", "wc"]),
    ("tracker issue close 2; tracker issue show 2", ["tracker", "tracker"]),
    ("ls && cat x || echo no", ["ls", "cat", "echo"]),
    ("(cd /; ls)", ["cd", "ls"]),
    ("{ echo a; echo b; }", ["echo", "echo"]),
    ("echo $(whoami)", ["echo", "whoami"]),
    ("echo `id`", ["echo", "id"]),
    ("diff <(ls) <(pwd)", ["diff", "ls", "pwd"]),
    ("for i in 1 2; do tracker issue show $i; done", ["tracker"]),
    ("if true; then head x; fi", ["true", "head"]),
    ("cat > out.txt <<EOF\nhello\nEOF", ["cat"]),
    ("echo hi > $(mktemp)", ["echo", "mktemp"]),
    ("'py'thon -V", ["python"]),
])
def test_every_command_name_is_found(command, names):
    found, problems = command_names(command)
    assert found == names
    assert problems == []


@pytest.mark.parametrize("command, fragment", [
    ("python3 -c 'print(1)'", "'python3' is never allowed"),
    ("tracker issue list | python3 -m json.tool", "'python3' is never allowed"),
    ("tracker issue list && $(echo sh)", "computed"),
    ("echo `perl -e 1`", "'perl' is never allowed"),
    ("cat <(node -e 1)", "'node' is never allowed"),
    ("echo x | bash", "'bash' is never allowed"),
    ("(sh -c ls)", "'sh' is never allowed"),
    ("env ls", "'env' is never allowed"),
    ("ls | xargs rm", "'xargs' is never allowed"),
    ("find . -exec rm {} ;", "'find' is never allowed"),
    ("sed -i s/a/b/ f", "'sed' is never allowed"),
    ("awk '{print}' f", "'awk' is never allowed"),
    ("/usr/bin/curl http://x", "names a path"),
    ("./tracker issue list", "names a path"),
    ("curl http://127.0.0.1:1/", "'curl' is never allowed"),
    ("wget http://x", "'wget' is never allowed"),
    ("PATH=/tmp tracker issue list", "environment assignment"),
    ("$CMD issue list", "computed"),
    ("f() { ls; }; f", "function definitions"),
    ("echo hi > /dev/tcp/127.0.0.1/80", "/dev/tcp"),
    ("echo $((1 + 2))", "cannot read"),
    ("echo 'unterminated", "cannot read"),
    ("", "empty command"),
    ("git status", "'git' is never allowed"),
    ("nohup tracker issue list", "'nohup' is never allowed"),
    ("eval tracker issue list", "'eval' is never allowed"),
    ("frobnicate", "not on arm cli's allow-list"),
])
def test_forbidden_commands_are_denied_with_a_reason(command, fragment):
    decision = check_command(command, CLI)
    assert not decision.allowed
    assert fragment in decision.message


def test_the_http_arm_may_use_curl_and_only_curl():
    assert check_command("curl -s \"$TRACKER_URL/issues\" | jq length", HTTP).allowed
    assert not check_command("wget -q -O- \"$TRACKER_URL/issues\"", HTTP).allowed
    assert not check_command("tracker issue list", HTTP).allowed
    assert "curl" in permitted_names(HTTP) and "curl" not in permitted_names(CLI)


def test_an_allow_list_cannot_reenable_an_interpreter():
    careless = Arm("careless", "shell", "", allowed_commands=frozenset({"python3", "ls"}))
    assert permitted_names(careless) == {"ls"}
    assert not check_command("python3 -V", careless).allowed


def test_function_arms_have_no_shell_and_only_their_functions():
    assert not check_command("ls", TOOLS).allowed
    assert check_function_call("close_issue", TOOLS, ["close_issue"]).allowed
    assert not check_function_call("shell", TOOLS, ["close_issue"]).allowed
    assert not check_function_call("close_issue", CLI, ["close_issue"]).allowed


def test_audit_flags_executed_leaks_and_skips_denied_attempts():
    transcript = [
        {"kind": "shell", "command": "tracker issue list"},
        {"kind": "shell", "command": "python3 -c 1", "denied": True},
        {"kind": "shell", "command": "tracker issue list | sh"},
        {"kind": "function", "name": "close_issue"},
        {"kind": "other", "name": "WebFetch"},
    ]
    findings = audit_transcript(transcript, CLI, [])
    assert [f.index for f in findings] == [2, 3, 4]
    assert "'sh' is never allowed" in findings[0].reason


# test, [, printf and sort restrict some of their arguments (test_escapes.py covers them)
_ALLOWED = sorted(BASE_UTILITIES - {"[", "test", "printf", "sort"})
_DENIED = sorted(ALWAYS_DENIED - {".", "[", "time", "coproc"})
_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)


@st.composite
def shell_lines(draw, forbidden: str | None):
    """Random nests of pipelines, lists, subshells and substitutions of allowed names,
    with one forbidden name hidden somewhere when asked."""
    def simple(name: str) -> str:
        return " ".join([name, *draw(st.lists(_words, max_size=3))])

    pieces = [simple(draw(st.sampled_from(_ALLOWED))) for _ in range(draw(st.integers(1, 4)))]
    if forbidden is not None:
        pieces.insert(draw(st.integers(0, len(pieces))), simple(forbidden))
    line = pieces[0]
    for piece in pieces[1:]:
        shape = draw(st.sampled_from(["{a} | {b}", "{a}; {b}", "{a} && {b}", "{a} || {b}",
                                      "({a}) | {b}", "{a} $({b})", "{a} `{b}`",
                                      "{a} <({b})", "{{ {a}; }} && {b}"]))
        line = shape.format(a=line, b=piece)
    return line


@settings(max_examples=150, deadline=None)
@given(shell_lines(None))
def test_compositions_of_allowed_names_are_allowed(line):
    assert check_command(line, CLI).allowed, line


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_forbidden_name_anywhere_is_denied(data):
    forbidden = data.draw(st.sampled_from(_DENIED))
    line = data.draw(shell_lines(forbidden))
    decision = check_command(line, CLI)
    assert not decision.allowed, line
    assert forbidden in decision.names or "cannot read" in decision.message, line


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_never_crashes_the_gate(text):
    decision = check_command(text, CLI)
    assert decision.allowed == (not decision.reasons)
    if decision.allowed:
        assert decision.names and all(n in permitted_names(CLI) for n in decision.names)


# -- the http arm's curl reaches only its own channel -------------------------------------------
ORIGIN = "http://127.0.0.1:43117"
CHANNEL = NetworkChannel.of([ORIGIN + "/"], {"TRACKER_URL": ORIGIN, "PATH": "/usr/bin"})


def test_the_channel_knows_its_origin_and_the_variables_that_hold_it():
    assert CHANNEL.origins == (ORIGIN,)
    assert CHANNEL.variables == frozenset({"TRACKER_URL"})
    assert NetworkChannel.of([], {"TRACKER_URL": ORIGIN}) == NetworkChannel()


@pytest.mark.parametrize("command", [
    'curl -s "$TRACKER_URL/issues?state=open" | jq length',
    'curl -s ${TRACKER_URL}/issues',
    f"curl -s {ORIGIN}/issues/2",
    f"curl -sX PATCH {ORIGIN}/issues/2 -d '{{\"state\": \"closed\"}}'",
    "curl -s -X POST \"$TRACKER_URL/issues/5/comments\" -H 'Content-Type: application/json' "
    "-d '{\"body\": \"see http://example.com\"}'",
    f"curl --url {ORIGIN}/labels -o labels.json",
    f"curl --url={ORIGIN}/labels",
])
def test_curl_to_the_trial_server_is_allowed(command):
    decision = check_command(command, HTTP, CHANNEL)
    assert decision.allowed, decision.message


@pytest.mark.parametrize("command, fragment", [
    ("curl -s http://example.com/", "may reach only http://127.0.0.1:43117, not 'http://example.com/'"),
    ("curl example.com", "not 'example.com'"),
    ("curl -s http://127.0.0.1:54329/", "not 'http://127.0.0.1:54329/'"),
    (f"curl -s {ORIGIN}.evil.test/", "not"),  # a prefix of the host is not the origin
    ('curl -s "$HOME/x"', "not '$HOME/x'"),
    ('curl -s "$(cat target)"', "not"),
    (f"curl -x http://proxy:3128 {ORIGIN}/issues", "option -x would reroute"),
    (f"curl -sx http://proxy:3128 {ORIGIN}/issues", "option -sx would reroute"),
    (f"curl --resolve tracker:80:10.0.0.1 {ORIGIN}/", "option --resolve would reroute"),
    (f"curl -K cfg {ORIGIN}/", "option -K would reroute"),
    ("curl --url http://example.com", "not 'http://example.com'"),
    (f"ls && curl -s {ORIGIN}/ && echo $(curl -s http://example.com)", "not 'http://example.com'"),
])
def test_curl_anywhere_else_is_denied(command, fragment):
    decision = check_command(command, HTTP, CHANNEL)
    assert not decision.allowed
    assert fragment in decision.message


def test_without_a_channel_curl_is_gated_by_name_only():
    assert check_command("curl -s http://example.com/", HTTP).allowed


def test_the_audit_applies_the_same_channel():
    transcript = [{"kind": "shell", "command": f"curl -s {ORIGIN}/issues"},
                  {"kind": "shell", "command": "curl -s http://example.com/"}]
    findings = audit_transcript(transcript, HTTP, (), CHANNEL)
    assert [finding.index for finding in findings] == [1]
    assert audit_transcript(transcript, HTTP, ()) == []

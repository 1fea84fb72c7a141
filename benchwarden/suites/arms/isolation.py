"""Isolation: an arm reaches the system only through its own channel.

Shell commands are parsed with bashlex (never by hand) and every command name is
collected: pipelines, lists (`;`, `&&`, `||`), subshells and brace groups, loops and
conditionals, `$( )`, backticks, process substitution and words inside redirections.
A command is allowed only when every name is on the arm's allow-list and none is on
the always-denied list.

Invariants:
- Fail closed: a command bashlex cannot parse, a command name that is computed
  (`$CMD`, `$(...)`), a name containing `/`, an environment assignment before a
  command, a function definition and a redirection to `/dev/tcp` or `/dev/udp` are
  all denied.
- The same `check_command` decides before a call runs and in the post-run audit, so
  the gate and the audit cannot drift apart.
- A network tool reaches only the arm's own channel: with a `NetworkChannel` (the
  trial's origins, e.g. the tracker's loopback URL), every destination of the tool must
  lie under an origin, literally or through a variable that holds one (`$TRACKER_URL/…`),
  and options that reroute traffic (proxies, `--resolve`, `--connect-to`, config files,
  unix sockets) are denied.
- Pure: nothing here runs a command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import bashlex
import bashlex.errors

from benchwarden.suites.arms.model import Arm

# Harmless text and file utilities a shell arm may use besides its own program.
BASE_UTILITIES: frozenset[str] = frozenset({
    "cat", "echo", "printf", "head", "tail", "grep", "egrep", "fgrep", "wc", "sort",
    "uniq", "cut", "tr", "paste", "column", "comm", "diff", "nl", "fold", "fmt", "rev",
    "tac", "jq", "ls", "pwd", "date", "true", "false", "test", "[", "seq", "tee",
    "basename", "dirname", "mkdir", "touch", "which", "sleep", "expr", "join",
})

INTERPRETERS = frozenset({
    "python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs",
    "deno", "bun", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "R", "julia",
    "java", "jshell", "osascript", "irb", "gawk", "awk", "mawk", "nawk", "sed", "ed",
    "ex", "vi", "vim", "nvim", "emacs", "sqlite3", "psql", "mysql", "bc", "dc", "gdb",
    "make", "cmake", "gcc", "cc", "g++", "clang", "go", "cargo", "rustc", "pip", "pip3",
    "npm", "npx", "uv", "uvx", "pipx", "poetry",
})
SHELLS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox",
    "rbash", "pwsh", "powershell", "script",
})
LAUNCHERS = frozenset({
    "env", "xargs", "find", "exec", "eval", "source", ".", "command", "builtin",
    "nohup", "timeout", "sudo", "su", "doas", "nice", "ionice", "time", "watch",
    "parallel", "setsid", "strace", "ltrace", "chroot", "unshare", "nsenter", "flock",
    "stdbuf", "chrt", "taskset", "runuser", "systemd-run", "at", "batch", "crontab",
    "trap", "alias", "export", "declare", "typeset", "set", "unset", "enable", "hash",
    "coproc", "fc", "history", "ssh-agent", "dbus-launch", "expect", "tmux", "screen",
})
NETWORK_TOOLS = frozenset({
    "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp",
    "ftp", "rsync", "http", "https", "httpie", "xh", "aria2c", "lynx", "w3m", "links",
    "openssl", "dig", "nslookup", "host", "ping", "git", "gh", "tea", "docker",
    "podman", "kubectl",
})
ALWAYS_DENIED: frozenset[str] = INTERPRETERS | SHELLS | LAUNCHERS | NETWORK_TOOLS


# curl options whose next word is a value, not a destination (short ones also as the last
# letter of a cluster such as `-sX POST`).
_CURL_VALUE_OPTIONS = frozenset({
    "-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "--data-ascii", "--json",
    "-H", "--header", "-X", "--request", "-o", "--output", "-w", "--write-out", "-u", "--user",
    "-A", "--user-agent", "-e", "--referer", "-b", "--cookie", "-c", "--cookie-jar", "-F",
    "--form", "--form-string", "-m", "--max-time", "--connect-timeout", "-T", "--upload-file",
    "-r", "--range", "-C", "--continue-at", "--retry", "--retry-delay", "--retry-max-time",
    "-D", "--dump-header", "--limit-rate", "-Y", "--speed-limit", "-y", "--speed-time",
    "-z", "--time-cond", "--max-filesize", "--oauth2-bearer", "--variable", "--url-query",
    "--max-redirs", "--expect100-timeout", "--keepalive-time",
})
_CURL_SHORT_VALUE_LETTERS = frozenset(option[1] for option in _CURL_VALUE_OPTIONS
                                      if len(option) == 2)
# Options that would send traffic somewhere else than the URL says, or read more options.
_CURL_REROUTING_OPTIONS = frozenset({
    "-x", "--proxy", "--preproxy", "--noproxy", "--socks4", "--socks4a", "--socks5",
    "--socks5-hostname", "--proxy1.0", "-K", "--config", "--resolve", "--connect-to",
    "--unix-socket", "--abstract-unix-socket", "--doh-url", "--interface", "--dns-servers",
})
_CURL_REROUTING_LETTERS = frozenset({"x", "K"})


@dataclass(frozen=True)
class NetworkChannel:
    """Where an arm's network tools may go in one trial. Empty: not restricted."""

    origins: tuple[str, ...] = ()
    """URL prefixes, e.g. `http://127.0.0.1:43117`."""
    variables: frozenset[str] = frozenset()
    """Environment variables of the agent whose value is one of the origins."""

    @classmethod
    def of(cls, origins: Iterable[str], agent_env: Mapping[str, str]) -> "NetworkChannel":
        cleaned = tuple(origin.rstrip("/") for origin in origins if origin)
        variables = frozenset(name for name, value in agent_env.items()
                              if value.rstrip("/") in cleaned)
        return cls(cleaned, variables)

    def allows(self, destination: str) -> bool:
        for origin in self.origins:
            if destination == origin or destination.startswith((origin + "/", origin + "?")):
                return True
        for name in self.variables:
            for lead in (f"${name}", f"${{{name}}}"):
                if destination == lead or destination.startswith((lead + "/", lead + "?")):
                    return True
        return False


def _command_nodes(node: Any) -> Iterator[Any]:
    """Every `command` node of a bashlex tree, substitutions included."""
    if getattr(node, "kind", None) == "command":
        yield node
    for attribute in ("parts", "list"):
        for child in getattr(node, attribute, []) or []:
            yield from _command_nodes(child)
    for attribute in ("command", "output"):
        child = getattr(node, attribute, None)
        if child is not None and hasattr(child, "kind"):
            yield from _command_nodes(child)


def _destination_problems(tool: str, words: Sequence[Any], channel: NetworkChannel) -> list[str]:
    """Why the arguments of network tool `tool` may leave the channel (empty: they do not).
    Every positional word is a destination (curl takes a bare `host` as a URL too)."""
    where = " or ".join(channel.origins)
    problems: list[str] = []

    def destination(text: str) -> None:
        if not channel.allows(text):
            problems.append(f"{tool} may reach only {where}, not {text!r}")

    expecting: str | None = None  # "value" or "destination": what the next word is
    for word in words:
        text = word.word
        if expecting is not None:
            if expecting == "destination":
                destination(text)
            expecting = None
            continue
        if text.startswith("-") and len(text) > 1 and not getattr(word, "parts", None):
            name, has_value, value = text.partition("=")
            cluster = "" if text.startswith("--") else text[1:]
            if name in _CURL_REROUTING_OPTIONS or set(cluster) & _CURL_REROUTING_LETTERS:
                problems.append(f"{tool} option {name} would reroute traffic off the arm's channel")
            elif name == "--url":
                if has_value:
                    destination(value)
                else:
                    expecting = "destination"
            elif not has_value and (name in _CURL_VALUE_OPTIONS
                                    or (cluster and cluster[-1] in _CURL_SHORT_VALUE_LETTERS)):
                expecting = "value"
            continue
        destination(text)
    return problems


@dataclass(frozen=True)
class CommandCheck:
    """The gate's decision about one shell command."""

    allowed: bool
    names: tuple[str, ...]
    """Every command name found, in order of appearance (empty when unparseable)."""
    reasons: tuple[str, ...] = ()
    """Why it was denied, one line each."""

    @property
    def message(self) -> str:
        if self.allowed:
            return "allowed"
        return "denied: " + "; ".join(self.reasons)


def permitted_names(arm: Arm) -> frozenset[str]:
    """What a shell arm may run: its allow-list, minus every always-denied name except
    the arm's own network channel."""
    denied = ALWAYS_DENIED - arm.network_commands
    return frozenset(arm.allowed_commands) - denied


class _Unsafe(Exception):
    pass


def _walk(node: Any, names: list[str], problems: list[str]) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        _command(node, names, problems)
        return
    if kind == "function":
        problems.append("function definitions are not allowed")
    if kind == "redirect":
        _redirect(node, names, problems)
        return
    if kind == "word":
        for part in getattr(node, "parts", []) or []:
            _walk(part, names, problems)
        return
    if kind in ("commandsubstitution", "processsubstitution"):
        _walk(node.command, names, problems)
        return
    for attribute in ("parts", "list"):
        for child in getattr(node, attribute, []) or []:
            _walk(child, names, problems)
    command = getattr(node, "command", None)
    if command is not None and hasattr(command, "kind"):
        _walk(command, names, problems)


def _redirect(node: Any, names: list[str], problems: list[str]) -> None:
    target = getattr(node, "output", None)
    if target is not None and hasattr(target, "kind"):
        word = getattr(target, "word", "")
        if isinstance(word, str) and word.startswith(("/dev/tcp", "/dev/udp")):
            problems.append(f"redirection to {word} opens a network connection")
        _walk(target, names, problems)


def _command(node: Any, names: list[str], problems: list[str]) -> None:
    name_seen = False
    for part in node.parts:
        kind = getattr(part, "kind", None)
        if kind == "assignment":
            if not name_seen:
                problems.append(f"environment assignment {part.word!r} before a command")
            for inner in getattr(part, "parts", []) or []:
                _walk(inner, names, problems)
        elif kind == "word" and not name_seen:
            name_seen = True
            if getattr(part, "parts", None):
                problems.append(f"command name {part.word!r} is computed, not literal")
                for inner in part.parts:
                    _walk(inner, names, problems)
            else:
                names.append(part.word)
        else:
            _walk(part, names, problems)


def _parse(command: str) -> list[Any]:
    """bashlex trees of a shell command; raises `_Unsafe` when it cannot be parsed."""
    if not command.strip():
        raise _Unsafe("empty command")
    if "\x00" in command:
        raise _Unsafe("command contains a NUL byte")
    try:
        return bashlex.parse(command)
    except (bashlex.errors.ParsingError, NotImplementedError, AssertionError,
            IndexError, ValueError, TypeError, AttributeError) as error:
        detail = " ".join(str(error).split())[:120] or type(error).__name__
        raise _Unsafe(f"the shell parser cannot read this command ({detail})") from None


def _names_in(trees: Sequence[Any]) -> tuple[list[str], list[str]]:
    names: list[str] = []
    problems: list[str] = []
    for tree in trees:
        _walk(tree, names, problems)
    return names, problems


def command_names(command: str) -> tuple[list[str], list[str]]:
    """(command names, structural problems) of a shell command; raises `_Unsafe` when
    the command cannot be parsed."""
    return _names_in(_parse(command))


def check_command(command: str, arm: Arm,
                  channel: NetworkChannel = NetworkChannel()) -> CommandCheck:
    """Allow a shell command for `arm` only when every command name in it is permitted
    and, when `channel` names origins, every network tool stays on them."""
    if arm.channel != "shell":
        return CommandCheck(False, (), (f"arm {arm.name} has no shell",))
    try:
        trees = _parse(command)
    except _Unsafe as unsafe:
        return CommandCheck(False, (), (str(unsafe),))
    names, problems = _names_in(trees)
    reasons = list(problems)
    allowed = permitted_names(arm)
    for name in names:
        if "/" in name:
            reasons.append(f"{name!r} names a path (command names containing / are denied)")
        elif name in ALWAYS_DENIED and name not in arm.network_commands:
            reasons.append(f"{name!r} is never allowed (interpreter, shell, launcher or "
                           "network tool)")
        elif name not in allowed:
            reasons.append(f"{name!r} is not on arm {arm.name}'s allow-list")
    if channel.origins and arm.network_commands:
        for tree in trees:
            for node in _command_nodes(tree):
                words = [part for part in node.parts if getattr(part, "kind", None) == "word"]
                if words and words[0].word in arm.network_commands:
                    reasons.extend(_destination_problems(words[0].word, words[1:], channel))
    if not names and not reasons:
        reasons.append("no command found")
    unique = tuple(dict.fromkeys(reasons))
    return CommandCheck(not unique, tuple(names), unique)


def check_function_call(name: str, arm: Arm, function_names: Iterable[str]) -> CommandCheck:
    if arm.channel != "functions":
        return CommandCheck(False, (name,), (f"arm {arm.name} has no function tools",))
    if name not in set(function_names):
        return CommandCheck(False, (name,), (f"{name!r} is not one of arm {arm.name}'s "
                                              "functions",))
    return CommandCheck(True, (name,))


@dataclass(frozen=True)
class AuditFinding:
    index: int
    """Position of the entry in the transcript."""
    entry: Mapping[str, Any]
    reason: str


def audit_transcript(transcript: Sequence[Mapping[str, Any]], arm: Arm,
                     function_names: Iterable[str],
                     channel: NetworkChannel = NetworkChannel()) -> list[AuditFinding]:
    """Re-check every call that ran. A finding is a leak: the trial is invalid.

    Entries the gate denied (`denied: true`) did not run and reached nothing, so they
    are not leaks; they are counted separately on the record.
    """
    functions = tuple(function_names)
    findings: list[AuditFinding] = []
    for index, entry in enumerate(transcript):
        if entry.get("denied"):
            continue
        kind = entry.get("kind")
        if kind == "shell":
            decision = check_command(str(entry.get("command", "")), arm, channel)
        elif kind == "function":
            decision = check_function_call(str(entry.get("name", "")), arm, functions)
        else:
            decision = CommandCheck(False, (), (
                f"tool {entry.get('name', kind)!r} is outside arm {arm.name}'s channel",))
        if not decision.allowed:
            findings.append(AuditFinding(index, dict(entry), decision.message))
    return findings

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
- Substitutions are found wherever bash would run them, not only where bashlex puts a
  node: bashlex leaves the inside of `${...}` and of here-documents as raw text, so
  that text is parsed again (`${x:-$(cmd)}`, `${x/$(cmd)/}`, `<<EOF ... $(cmd)`), and
  single quotes inside `${...}` are treated as not quoting (inside double quotes bash
  runs `"${x:-'$(cmd)'}"`). Forms whose meaning cannot be read statically are denied
  with their reason: arithmetic (`$((...))`, `$[...]`), indirect expansion (`${!x}`),
  transformations (`${x@P}` runs a prompt expansion), array subscripts and computed
  substring offsets (both are arithmetic that re-evaluates variables), and the builtin
  forms that assign or test a subscripted name (`printf -v`, `test -v`).
- Options of allowed programs that run another program are denied, with whatever
  could produce them (`sort --compress-program=sh` and its abbreviations, braces,
  globs and computed words given to sort; `curl --engine`).
- The same `check_command` decides before a call runs and in the post-run audit, so
  the gate and the audit cannot drift apart.
- A network tool reaches only the arm's own channel: with a `NetworkChannel` (the
  trial's origins, e.g. the tracker's loopback URL), every destination of the tool must
  lie under an origin, literally or through a variable that holds one (`$TRACKER_URL/…`),
  and options that reroute traffic (proxies, `--resolve`, `--connect-to`, config files,
  unix sockets) are denied.
- An MCP call is in an `mcp` arm's channel only when it names one of the trial's MCP
  servers (and, at the gate, a tool that server listed); on any other arm it is a leak.
- Pure: nothing here runs a command.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bashlex
import bashlex.errors

from benchwarden.suites.arms.tasks import Arm

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
    def of(cls, origins: Iterable[str], agent_env: Mapping[str, str]) -> NetworkChannel:
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


# What bashlex raises on text it cannot read (all mean: deny).
_PARSER_ERRORS = (bashlex.errors.ParsingError, NotImplementedError, AssertionError, IndexError,
                  ValueError, TypeError, AttributeError, RecursionError)


def _walk(node: Any, names: list[str], problems: list[str], depth: int = 0,
          commands: list[Any] | None = None) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        _command(node, names, problems, depth, commands)
        return
    if kind == "function":
        problems.append("function definitions are not allowed")
    if kind == "redirect":
        _redirect(node, names, problems, depth, commands)
        return
    if kind == "parameter":
        _parameter(str(getattr(node, "value", "") or ""), names, problems, depth, commands)
        return
    if kind == "heredoc":
        _heredoc(str(getattr(node, "value", "") or ""), names, problems, depth, commands)
        return
    if kind == "tilde":
        # bashlex keeps `~$(cmd)` whole as a tilde prefix; bash runs the substitution
        value = str(getattr(node, "value", "") or "")[1:]
        _reparse("echo _" + value.replace("#", "_"), value, "a ~ expansion", names,
                 problems, depth, commands)
        return
    if kind not in _KNOWN_KINDS:
        problems.append(f"the shell construct {kind!r} cannot be checked")
        return
    if kind == "word":
        parts = getattr(node, "parts", []) or []
        for part in parts:
            _walk(part, names, problems, depth, commands)
        text = str(getattr(node, "word", "") or "")
        if not parts and any(mark in text for mark in _HIDING_MARKS):
            # Either quoted text, or a form bashlex flattened (it reads `~$(cmd 'a')` as
            # one plain word): judge what would run if it were not quoted.
            _reparse(None, text, f"the word {text[:40]!r}", names, problems, depth, commands)
        return
    if kind in ("commandsubstitution", "processsubstitution"):
        _walk(node.command, names, problems, depth, commands)
        return
    for attribute in ("parts", "list"):
        for child in getattr(node, attribute, []) or []:
            _walk(child, names, problems, depth, commands)
    command = getattr(node, "command", None)
    if command is not None and hasattr(command, "kind"):
        _walk(command, names, problems, depth, commands)
    heredoc = getattr(node, "heredoc", None)
    if heredoc is not None and hasattr(heredoc, "kind"):
        _walk(heredoc, names, problems, depth, commands)


def _redirect(node: Any, names: list[str], problems: list[str], depth: int,
              commands: list[Any] | None = None) -> None:
    target = getattr(node, "output", None)
    if target is not None and hasattr(target, "kind"):
        word = getattr(target, "word", "")
        if isinstance(word, str) and word.startswith(("/dev/tcp", "/dev/udp")):
            problems.append(f"redirection to {word} opens a network connection")
        _walk(target, names, problems, depth, commands)
    heredoc = getattr(node, "heredoc", None)
    if heredoc is not None and hasattr(heredoc, "kind"):
        _walk(heredoc, names, problems, depth, commands)


# Every node kind bashlex produces that the walk understands; anything else is refused.
_KNOWN_KINDS = frozenset({"command", "pipeline", "list", "compound", "if", "for", "while",
                          "until", "function", "word", "parameter", "tilde", "heredoc",
                          "commandsubstitution", "processsubstitution", "assignment",
                          "redirect", "reservedword", "operator", "pipe"})
# Text that starts a substitution bash would run; raw text holding one is parsed again.
_SUBSTITUTION_MARKS = ("$", "`", "<(", ">(")
_MAX_DEPTH = 8
_PARAMETER_NAME = re.compile(r"#?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-]|-)")
_SUBSTRING = re.compile(r"\s*-?\s*[0-9]+\s*(:\s*-?\s*[0-9]+\s*)?")
_OPERATORS = (":-", ":=", ":+", ":?", "##", "%%", "//", "/#", "/%", "^^", ",,",
              "-", "=", "+", "?", "#", "%", "/", "^", ",")


def _parameter(value: str, names: list[str], problems: list[str], depth: int,
              commands: list[Any] | None = None) -> None:
    """Check the raw text of one `${...}` (bashlex does not parse inside it)."""
    shown = "${" + value + "}"
    if not value:
        return  # `$'...'`/`$"..."` quoting read by bashlex as an empty parameter: no expansion
    if value.startswith("!") and value != "!":  # `$!` is the last background job's pid
        problems.append(f"indirect expansion {shown} is not allowed (what it reads cannot be "
                        "checked)")
        return
    match = _PARAMETER_NAME.match(value)
    if match is None:
        problems.append(f"parameter expansion {shown} cannot be read")
        return
    rest = value[match.end():]
    if not rest:
        return
    if rest.startswith("["):
        problems.append(f"array subscript in {shown} is not allowed (subscripts are arithmetic "
                        "and re-evaluate variables)")
        return
    if rest.startswith("@"):
        problems.append(f"transformation in {shown} is not allowed (${{x@P}} runs the "
                        "substitutions in a value)")
        return
    if rest.startswith(":") and not rest.startswith((":-", ":=", ":+", ":?")):
        if not _SUBSTRING.fullmatch(rest[1:]):
            problems.append(f"substring offsets in {shown} must be plain numbers (they are "
                            "arithmetic and re-evaluate variables)")
        return
    operator = next((op for op in _OPERATORS if rest.startswith(op)), None)
    if operator is None:
        problems.append(f"parameter expansion {shown} cannot be read")
        return
    operand = rest[len(operator):]
    # `_` glues the operand to a word and `#` is never a comment inside ${...}: neither
    # may hide a substitution from the second parse.
    _reparse("echo _" + operand.replace("#", "_"), operand, shown, names, problems, depth,
             commands)


def _heredoc(value: str, names: list[str], problems: list[str], depth: int,
              commands: list[Any] | None = None) -> None:
    """A here-document's body (unquoted delimiter: bash expands it) is parsed again as the
    inside of double quotes."""
    body = value.rsplit("\n", 1)[0] if "\n" in value else value
    if not any(mark in body for mark in ("$", "`")):
        return
    _reparse('echo "' + body.replace('"', '\\"') + '"', body, "a here-document", names,
             problems, depth, commands)


_HIDING_MARKS = ("$(", "`", "<(", ">(", "${")


def _reparse(exact: str | None, raw: str, where: str, names: list[str], problems: list[str],
             depth: int, commands: list[Any] | None = None) -> None:
    """Parse text bashlex left unparsed and walk it; fail closed when it cannot.

    Two readings, both must pass (`exact` may be None: only the second): `exact` (the
    text as bash most likely reads it, every
    name in it judged like the command's own) and `raw` with every quote removed and
    `#` and newlines neutralised, so no quoting, comment or line break can hide a
    substitution; only what lies inside substitutions is judged in that second reading
    (an over-approximation: what it finds may be denied although bash would not run it).
    """
    if depth >= _MAX_DEPTH:
        problems.append(f"substitutions nested too deeply in {where}")
        return
    if exact is not None and any(mark in exact for mark in _SUBSTITUTION_MARKS):
        try:
            trees = bashlex.parse(exact)
        except _PARSER_ERRORS as error:
            problems.append(f"the substitution inside {where} cannot be read ("
                            f"{_parser_detail(error)}); denied")
            return
        found: list[str] = []
        inner_commands: list[Any] = []
        for tree in trees:
            _walk(tree, found, problems, depth + 1, inner_commands)
        names.extend(found[1:])  # the first name is the `echo` this function put in front
        if commands is not None:
            commands.extend(inner_commands[1:])
    if not any(mark in raw for mark in _HIDING_MARKS):
        return
    stripped = ("echo _" + raw.replace("'", "").replace('"', "").replace("#", "_")
                .replace("\n", ";"))
    try:
        trees = bashlex.parse(stripped)
    except _PARSER_ERRORS as error:
        problems.append(f"the substitution inside {where} cannot be read without its quotes ("
                        f"{_parser_detail(error)}); denied")
        return
    extra: list[str] = []
    for tree in trees:
        _substitutions_only(tree, extra, problems, depth + 1, commands)
    names.extend(name for name in extra if name not in names)


def _substitutions_only(node: Any, names: list[str], problems: list[str], depth: int,
                        commands: list[Any] | None) -> None:
    """Walk only what lies inside substitutions and parameter expansions of a tree."""
    kind = getattr(node, "kind", None)
    if kind in ("commandsubstitution", "processsubstitution"):
        _walk(node.command, names, problems, depth, commands)
        return
    if kind == "parameter":
        _parameter(str(getattr(node, "value", "") or ""), names, problems, depth, commands)
        return
    for attribute in ("parts", "list"):
        for child in getattr(node, attribute, []) or []:
            _substitutions_only(child, names, problems, depth, commands)
    for attribute in ("command", "output", "heredoc"):
        child = getattr(node, attribute, None)
        if child is not None and hasattr(child, "kind"):
            _substitutions_only(child, names, problems, depth, commands)


def _parser_detail(error: BaseException) -> str:
    detail = " ".join(str(error).split())[:120] or type(error).__name__
    if isinstance(error, NotImplementedError) and "arithmetic" in detail:
        return f"{detail}: $((...)) and $[...] cannot be checked; use expr"
    return detail


# Builtin options that assign to or test a name whose subscript bash evaluates.
_SUBSCRIPT_OPTIONS = {"printf": ("-v",), "test": ("-v", "-R"), "[": ("-v", "-R")}
# Allowed programs with an option that runs (or loads) another program, and whether the
# program accepts abbreviated long options (GNU getopt_long does: `--compress-prog=sh`).
_PROGRAM_OPTIONS = {"sort": ("compress-program", True), "curl": ("engine", False)}
_EXPANDING = ("{", "*", "?", "[")


def _program_option_problems(name: str, words: Sequence[Any]) -> list[str]:
    """Arguments that could make `name` run another program: the option itself (or an
    abbreviation of it), or a word bash turns into other words (braces, globs; for
    programs that take abbreviations, also any computed word)."""
    option, abbreviates = _PROGRAM_OPTIONS[name]
    problems: list[str] = []
    for word in words:
        text = word.word
        computed = bool(getattr(word, "parts", None))
        option_like = text.startswith("-")
        if (option_like or abbreviates) and any(mark in text for mark in _EXPANDING):
            problems.append(f"{name} argument {text!r} expands to other words (braces or "
                            "globs could produce an option that runs a program)")
        elif abbreviates and computed:
            problems.append(f"{name} argument {text!r} is computed (it could become "
                            f"--{option})")
        elif text.startswith("--"):
            given = text[2:].split("=", 1)[0]
            if given == option or (abbreviates and len(given) >= 2 and option.startswith(given)):
                problems.append(f"{name} --{option} runs another program")
    return problems


def _command(node: Any, names: list[str], problems: list[str], depth: int = 0,
          commands: list[Any] | None = None) -> None:
    if commands is not None:
        commands.append(node)
    name_seen = False
    name = ""
    for part in node.parts:
        kind = getattr(part, "kind", None)
        if kind == "assignment":
            if not name_seen:
                problems.append(f"environment assignment {part.word!r} before a command")
            for inner in getattr(part, "parts", []) or []:
                _walk(inner, names, problems, depth, commands)
        elif kind == "word" and not name_seen:
            name_seen = True
            if getattr(part, "parts", None):
                problems.append(f"command name {part.word!r} is computed, not literal")
                for inner in part.parts:
                    _walk(inner, names, problems, depth, commands)
            else:
                names.append(part.word)
                name = part.word
        else:
            if kind == "word" and any(part.word == option or
                                      (name == "printf" and part.word.startswith(option))
                                      for option in _SUBSCRIPT_OPTIONS.get(name, ())):
                problems.append(f"{name} {part.word} is not allowed (it evaluates a "
                                "subscripted name)")
            _walk(part, names, problems, depth, commands)
    if name in _PROGRAM_OPTIONS:
        words = [part for part in node.parts if getattr(part, "kind", None) == "word"][1:]
        problems.extend(_program_option_problems(name, words))


def _parse(command: str) -> list[Any]:
    """bashlex trees of a shell command; raises `_Unsafe` when it cannot be parsed."""
    if not command.strip():
        raise _Unsafe("empty command")
    if "\x00" in command:
        raise _Unsafe("command contains a NUL byte")
    try:
        return bashlex.parse(command)
    except _PARSER_ERRORS as error:
        raise _Unsafe(f"the shell parser cannot read this command ({_parser_detail(error)})") \
            from None


def _names_in(trees: Sequence[Any]) -> tuple[list[str], list[str]]:
    names, problems, _ = _scan(trees)
    return names, problems


def _scan(trees: Sequence[Any]) -> tuple[list[str], list[str], list[Any]]:
    """(command names, structural problems, every command node, reparsed ones included)."""
    names: list[str] = []
    problems: list[str] = []
    commands: list[Any] = []
    for tree in trees:
        _walk(tree, names, problems, 0, commands)
    return names, problems, commands


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
    names, problems, commands = _scan(trees)
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
        for node in commands:
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


def check_mcp_call(server: str, tool: str, arm: Arm,
                   servers: Mapping[str, Iterable[str]] | Iterable[str]) -> CommandCheck:
    """An MCP call is allowed on an `mcp` arm when `server` is one of the trial's MCP
    servers and, when `servers` maps names to the tools each listed, `tool` is listed."""
    if arm.channel != "mcp":
        return CommandCheck(False, (tool,), (f"arm {arm.name} has no MCP servers",))
    known = servers if isinstance(servers, Mapping) else {name: None for name in servers}
    if server not in known:
        return CommandCheck(False, (tool,), (f"{server!r} is not one of arm {arm.name}'s "
                                              "MCP servers",))
    listed = known[server]
    if listed is not None and tool not in set(listed):
        return CommandCheck(False, (tool,), (f"MCP server {server!r} lists no tool {tool!r}",))
    return CommandCheck(True, (tool,))


@dataclass(frozen=True)
class AuditFinding:
    index: int
    """Position of the entry in the transcript."""
    entry: Mapping[str, Any]
    reason: str


def audit_transcript(transcript: Sequence[Mapping[str, Any]], arm: Arm,
                     function_names: Iterable[str],
                     channel: NetworkChannel = NetworkChannel(),
                     mcp_servers: Iterable[str] = ()) -> list[AuditFinding]:
    """Re-check every call that ran. A finding is a leak: the trial is invalid.

    Entries the gate denied (`denied: true`) did not run and reached nothing, so they
    are not leaks; they are counted separately on the record.
    """
    functions = tuple(function_names)
    servers = tuple(mcp_servers)
    findings: list[AuditFinding] = []
    for index, entry in enumerate(transcript):
        if entry.get("denied"):
            continue
        kind = entry.get("kind")
        if kind == "shell":
            decision = check_command(str(entry.get("command", "")), arm, channel)
        elif kind == "function":
            decision = check_function_call(str(entry.get("name", "")), arm, functions)
        elif kind == "mcp":
            decision = check_mcp_call(str(entry.get("server", "")), str(entry.get("tool", "")),
                                      arm, servers)
        else:
            decision = CommandCheck(False, (), (
                f"tool {entry.get('name', kind)!r} is outside arm {arm.name}'s channel",))
        if not decision.allowed:
            findings.append(AuditFinding(index, dict(entry), decision.message))
    return findings

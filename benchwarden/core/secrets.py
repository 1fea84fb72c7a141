"""Credentials: which inputs look like one, and a scrubber that keeps the ones a run was
given out of everything it stores or prints.

The store is append-only, so a credential that reaches it can never be deleted. Three
defences, each a plain function of its input:

- `url_credential_problem(url)`: a URL with user:password@ (or a `?api_key=`-style query
  parameter) is refused; keys travel through `--api-key-env` only.
- `credential_paths(value)`: the documented rule for request fields and stored
  configuration. A key name is credential-like when, lower-cased, it contains one of
  `CREDENTIAL_NAME_PARTS` (token, key, secret, passw, auth, credential, cookie, session,
  bearer, ...), unless the part is plainly a count or kind of tokens (`tokens`,
  `token_ids`, `tokenizer`), `keyword`, `public_key` or `author`, or the whole name is in
  `NOT_CREDENTIALS` (sampling fields such as `top_k` that collide by name); a string
  value is credential-like when it matches
  `CREDENTIAL_VALUE` (`sk-...`, `Bearer ...`, `Basic ...`, a JWT, well-known token
  prefixes). Checked at any depth.
- `Scrubber`: knows the literal values of the credentials this process was given (an
  API key read from the variable `--api-key-env` names, the password of a store URL)
  and replaces each of them, and its obvious encodings (URL-encoded, base64 at any
  alignment, JSON- and HTML-escaped), with `[redacted]`.

Invariants:
- `scrub(text)` never contains a remembered secret, for any text around it (property
  tested): when the marker itself could recombine with neighbouring text into a secret,
  a marker made of characters no secret contains is used instead.
- A secret shorter than `MIN_SECRET_LENGTH` is refused, not remembered: scrubbing a
  two-letter key would rewrite ordinary words in every record.
- The process-wide scrubber (`remember`, `scrub`, `scrub_value`) is the one the store
  applies to every entry it writes and the CLI applies to everything it prints.
- `may_alter_json(data)` is False only when scrubbing the value whose compact JSON is
  `data` would change nothing: it looks for every form, and every form as a JSON string
  escapes it, in the encoded bytes. JSON escaping and UTF-8 work character by
  character, so a string holding a form encodes to bytes holding the form's encoding.
  This lets the store skip walking records that hold nothing secret-looking, never
  skip one that does.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

import msgspec

from benchwarden.core.errors import ConfigurationError

__all__ = ["CREDENTIAL_NAME_PARTS", "CREDENTIAL_VALUE", "MARKER", "MIN_SECRET_LENGTH",
           "NOT_CREDENTIALS", "Scrubber", "credential_paths", "forget_all", "may_alter_json",
           "is_credential_name", "looks_like_credential_value", "process_scrubber",
           "mask_url_passwords", "refuse_url_credentials", "remember", "scrub", "scrub_value",
           "url_credential_problem"]

MARKER = "[redacted]"
MIN_SECRET_LENGTH = 8

CREDENTIAL_NAME_PARTS = ("token", "key", "secret", "passw", "pwd", "auth", "credential",
                         "cookie", "session", "bearer", "signature", "private", "jwt")
# The parts, as found in a lower-cased name; counts and kinds of tokens (`max_tokens`,
# `stop_token_ids`, `tokenizer`), `keyword`, `public_key` and `author` are not secrets.
_CREDENTIAL_NAME = re.compile(
    r"token(?!s|_?ids?|izer|_?count)|(?<!public[_-])(?<!public)key(?!word)|secret|passw|pwd"
    r"|auth(?!or(?!i[sz]))|credential|cookie|session|bearer|signature|private|jwt")
# Request fields of OpenAI-compatible servers whose names only collide with the rule.
NOT_CREDENTIALS = frozenset({
    "max_tokens", "max_completion_tokens", "min_tokens", "max_new_tokens",
    "stop_token_ids", "skip_special_tokens", "spaces_between_special_tokens",
    "add_special_tokens", "allowed_token_ids", "truncate_prompt_tokens",
    "return_tokens_as_token_ids", "prompt_cache_key", "top_k", "n_keep", "min_keep",
    "keep_alive", "max_tokens_per_chunk",
})
CREDENTIAL_VALUE = re.compile(
    r"""^\s*(
        (?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}            # OpenAI-style keys (sk-, sk-proj-, ...)
      | (?:Bearer|Basic|Token)\s+\S{4,}             # an Authorization header value
      | eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.    # a JWT (header.payload.signature)
      | (?:ghp|gho|ghs|ghu|github_pat|glpat|hf|xox[abpr])[_-][A-Za-z0-9_\-]{8,}
      | AKIA[A-Z0-9]{12,}                           # an AWS access key id
    )""", re.VERBOSE)


# -- the rule for names and values ----------------------------------------------------------
def is_credential_name(name: str) -> bool:
    """True when a field name looks like it holds a credential (see the module docs)."""
    lowered = str(name).lower()
    if lowered in NOT_CREDENTIALS:
        return False
    return _CREDENTIAL_NAME.search(lowered) is not None


def looks_like_credential_value(value: object) -> bool:
    return isinstance(value, str) and CREDENTIAL_VALUE.match(value) is not None


def credential_paths(value: Any, path: str = "", *, for_storage: bool = False) -> list[str]:
    """Paths inside `value` (JSON-like) whose key name or string value looks like a
    credential.

    `for_storage` is the store's backstop on a run's configuration, where names are also
    the program's own keys (task ids in `task_tiers`, say): a key ending in `_env` (the
    NAME of an environment variable, such as `api_key_env`) is not one, and a
    credential-like name counts only when it holds a non-empty string (anything else
    is looked into)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            name = str(key)
            if for_storage and name.lower().endswith("_env"):
                if not isinstance(item, str):
                    found.extend(credential_paths(item, here, for_storage=True))
                continue
            holds_value = (isinstance(item, str) and item != "") if for_storage else \
                item not in (None, "", False)
            if is_credential_name(name) and holds_value:
                found.append(here)
            else:
                found.extend(credential_paths(item, here, for_storage=for_storage))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found.extend(credential_paths(item, f"{path}[{index}]", for_storage=for_storage))
    elif looks_like_credential_value(value):
        found.append(path or "<value>")
    return found


def url_credential_problem(url: str, option: str = "--url") -> str | None:
    """One line saying why `url` carries a credential, or None when it carries none."""
    try:
        parts = urlsplit(url.strip())
        username, password = parts.username, parts.password
    except ValueError:
        return None  # not a URL at all: the URL check of the caller says so
    if "@" in parts.netloc or username or password:
        return (f"{option} must not contain a user name or password (user:key@host): "
                "keys in URLs end up in logs and records; put the key in an environment "
                "variable and name it with --api-key-env")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_credential_name(name) or looks_like_credential_value(value):
            return (f"{option} must not carry a credential in its query ({name}=...); put "
                    "the key in an environment variable and name it with --api-key-env")
    if looks_like_credential_value(unquote(parts.path.strip("/"))) or any(
            looks_like_credential_value(segment) for segment in parts.path.split("/")):
        return (f"{option} must not carry a key in its path; put the key in an environment "
                "variable and name it with --api-key-env")
    return None


def refuse_url_credentials(url: str | None, option: str = "--url") -> None:
    """Raise ConfigurationError (exit 2, one line) when `url` carries a credential."""
    if url is None:
        return
    problem = url_credential_problem(url, option)
    if problem:
        raise ConfigurationError(problem)


# -- the scrubber ---------------------------------------------------------------------------
def _base64_cores(raw: bytes) -> Iterable[str]:
    """The base64 characters that depend on `raw` alone, at each of the three byte
    alignments it can sit at inside a longer encoded text (as in `Basic user:key`)."""
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + raw).decode("ascii")
            first = -(-8 * offset // 6)  # the first character with no prefix bits
            last = (8 * (offset + len(raw))) // 6  # one past the last with no padding bits
            core = encoded[first:last]
            if len(core) >= MIN_SECRET_LENGTH:
                yield core


def encodings_of(secret: str) -> set[str]:
    """`secret` and the forms it commonly takes when a server or a log echoes it."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret), html.escape(secret),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    raw = secret.encode("utf-8", "surrogatepass")
    forms.update(_base64_cores(raw))
    return {form for form in forms if form}


class Scrubber:
    """Replaces remembered secrets (and their encodings) with `[redacted]`; thread-safe."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._forms: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._fallback_marker = MARKER
        # byte strings of which one occurs in the compact JSON of any value holding a form
        # (None: a form cannot be encoded, so every value is scrubbed the long way)
        self._json_probes: tuple[bytes, ...] | None = ()
        for secret in secrets:
            self.add(secret)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def add(self, secret: str, *, source: str = "a credential") -> None:
        """Remember `secret`; refuse one too short to scrub without mangling text."""
        if not secret:
            return
        if len(secret) < MIN_SECRET_LENGTH:
            raise ConfigurationError(
                f"{source} is {len(secret)} characters long; benchwarden needs at least "
                f"{MIN_SECRET_LENGTH} to keep it out of records and output without "
                "rewriting ordinary text (use a longer key)")
        with self._lock:
            if secret in self._secrets:
                return
            self._secrets.add(secret)
            forms: set[str] = set()
            for known in self._secrets:
                forms |= encodings_of(known)
            # longest first, so a secret inside a longer encoding goes with it
            self._forms = tuple(sorted(forms, key=lambda form: (-len(form), form)))
            self._pattern = re.compile("|".join(map(re.escape, self._forms)))
            self._json_probes = _json_probes(self._forms)
            used = set("".join(self._forms))
            self._fallback_marker = next(
                (c * 3 for c in "#*~_=%!?^" + "".join(map(chr, range(0x2580, 0x25A0)))
                 if c not in used), "")

    def forget_all(self) -> None:
        with self._lock:
            self._secrets.clear()
            self._forms = ()
            self._pattern = None
            self._json_probes = ()

    def may_alter_json(self, data: bytes) -> bool:
        """False only when `scrub_value` would leave the value encoded as `data` (compact
        JSON, UTF-8) unchanged; see the module's invariants."""
        probes = self._json_probes
        if probes is None:
            return True
        return any(probe in data for probe in probes)

    def scrub(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text:
            return text
        cleaned = pattern.sub(MARKER, text)
        if pattern.search(cleaned):
            # the marker recombined with its neighbours into a secret (a secret that
            # overlaps "[redacted]"): use a marker that shares no character with any
            # secret, after which one pass leaves none (an empty marker needs repeats)
            cleaned = pattern.sub(self._fallback_marker, text)
            while pattern.search(cleaned):
                cleaned = pattern.sub(self._fallback_marker, cleaned)
        return cleaned

    def scrub_value(self, value: Any) -> Any:
        """`value` (JSON-like: mappings, lists, strings, numbers) with every string,
        keys included, scrubbed; other leaves are returned as they are."""
        if self._pattern is None:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, Mapping):
            return {self.scrub(key) if isinstance(key, str) else key: self._walk(item)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._walk(item) for item in value)
        return value


def _json_probes(forms: Iterable[str]) -> tuple[bytes, ...] | None:
    """Each form's UTF-8 bytes and those of its JSON string escape (msgspec's, the
    encoder of stored entries); None when a form has no UTF-8 encoding."""
    probes: set[bytes] = set()
    try:
        for form in forms:
            probes.add(form.encode("utf-8"))
            probes.add(msgspec.json.encode(form)[1:-1])
    except (UnicodeEncodeError, msgspec.EncodeError):
        return None
    return tuple(sorted(probes, key=lambda probe: (-len(probe), probe)))


_PROCESS = Scrubber()


def process_scrubber() -> Scrubber:
    """The scrubber of this process: what the store and the CLI apply."""
    return _PROCESS


def remember(secret: str | None, *, source: str = "a credential") -> None:
    """Note a credential this process was given, so nothing stores or prints it."""
    if secret:
        _PROCESS.add(secret, source=source)


def forget_all() -> None:
    _PROCESS.forget_all()


def scrub(text: str) -> str:
    return _PROCESS.scrub(text)


_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]*):([^\s/@]+)@")


def mask_url_passwords(text: str) -> str:
    """`scheme://user:password@host` shown as `scheme://user:***@host`: for text the
    scrubber was never told about (a store written by an older version, say)."""
    return _URL_PASSWORD.sub(r"\1:***@", text) if "@" in text else text


def scrub_value(value: Any) -> Any:
    return _PROCESS.scrub_value(value)


def may_alter_json(data: bytes) -> bool:
    """The process scrubber's `may_alter_json`: False when no remembered secret can be
    in the value whose compact JSON is `data`."""
    return bool(_PROCESS) and _PROCESS.may_alter_json(data)


Entry = TypeVar("Entry")


def scrub_entry(entry: Entry) -> Entry:
    """A run, record or run end with its free-form fields scrubbed (addresses are the
    program's own and never hold a credential)."""
    if not _PROCESS:
        return entry
    changes: dict[str, Any] = {}
    for name in ("config", "target", "host", "payload", "summary"):
        if hasattr(entry, name):
            changes[name] = _PROCESS.scrub_value(getattr(entry, name))
    return dataclasses.replace(entry, **changes) if changes else entry  # type: ignore[type-var]

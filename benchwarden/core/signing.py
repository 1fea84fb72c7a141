"""Signed result files: an Ed25519 signature over a file's exact bytes and a git sha.

The signed message is `file bytes || sha` (the sha as ASCII). The signature lives in a
sidecar `FILE.sig` holding one JSON line:
`{"v": 1, "key": "<fingerprint>", "sha": "<git sha>", "sig": "<base64>"}`, where the
fingerprint is the first 8 bytes of SHA-256 of the raw 32-byte public key, in hex.

What a valid signature proves: the file is byte-for-byte what the key holder signed,
and the key holder bound it to that commit. It does not prove who ran the benchmark
or that the numbers are honest; see docs/signatures.md.

Invariants:
- `sign_bytes` and `check_signature` are pure (no file, clock or network); the rest of
  this module is the shell around them (keys on disk, sidecars, git).
- A trusted key is identified by the fingerprint of its contents, never by its file name.
- Private keys are created owner-only (0600, folder 0700) and never overwritten.
- Verification never raises on bad input: it returns a `Verification` whose `line()`
  says in one line what was found; only `valid` is ok.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from benchwarden.core import paths
from benchwarden.core.files import write_text_atomically
from benchwarden.core.provenance import git_sha

SIDECAR_VERSION = 1
SIDECAR_SUFFIX = ".sig"
PRIVATE_KEY_NAME = "signing.key"
PUBLIC_KEY_NAME = "signing.pub"

_SHA_PATTERN = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})(?:\+dirty)?$")

Status = Literal["valid", "unsigned", "untrusted", "tampered", "malformed", "missing"]


class SigningError(Exception):
    """Signing cannot go ahead; the message is one line a person can act on."""


# --------------------------------------------------------------------------- keys


def default_key_path() -> Path:
    return paths.home() / "keys" / PRIVATE_KEY_NAME


def default_trusted_dir() -> Path:
    return paths.home() / "keys" / "trusted"


def raw_public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey) -> str:
    """First 8 bytes of SHA-256 of the raw 32-byte public key, as 16 hex digits."""
    return hashlib.sha256(raw_public_bytes(key)).digest()[:8].hex()


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def parse_public_key(data: bytes) -> Ed25519PublicKey:
    """A public key file: PEM (SubjectPublicKeyInfo) or the raw 32 bytes."""
    if len(data) == 32:
        return Ed25519PublicKey.from_public_bytes(data)
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise ValueError("not a PEM public key or 32 raw bytes") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"a {type(key).__name__}, not an Ed25519 public key")
    return key


def _write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Create `path` with `mode` from the first byte on (no window where it is wider)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)
    os.chmod(path, mode)  # the umask may have narrowed or the filesystem widened it


def _make_private_dir(folder: Path) -> None:
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        os.chmod(folder, 0o700)


def trust_public_key(key: Ed25519PublicKey, trusted_dir: Path | None = None) -> Path:
    """Add `key` to a trusted-keys folder as `<fingerprint>.pub` (PEM)."""
    if trusted_dir is None:
        folder = default_trusted_dir()
        _make_private_dir(folder.parent)
    else:
        folder = trusted_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{fingerprint(key)}.pub"
    if not target.exists():
        target.write_bytes(public_pem(key))
    return target


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey
    path: Path
    created: bool
    """True when this call generated the key."""
    warning: str | None = None
    """One line to show the user, e.g. a private key readable by others."""

    @property
    def public(self) -> Ed25519PublicKey:
        return self.private.public_key()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public)


def _public_path_for(private_path: Path) -> Path:
    if private_path.name == PRIVATE_KEY_NAME:
        return private_path.with_name(PUBLIC_KEY_NAME)
    return private_path.with_suffix(".pub")


def load_or_create_key(path: str | Path | None = None) -> SigningKey:
    """The signing key at `path`, or the default key, generated on first use.

    Only the default key is generated: an explicit path that does not exist is an error,
    so a typo never silently signs with a fresh, untrusted key. A generated key's public
    half is written beside it (`signing.pub`, PEM) and into the default trusted folder.
    """
    explicit = path is not None
    key_path = Path(path).expanduser() if path is not None else default_key_path()
    if key_path.exists():
        return _load_private_key(key_path)
    if explicit:
        raise SigningError(f"no signing key at {key_path} (only the default key "
                           f"{default_key_path()} is generated on first use)")
    _make_private_dir(key_path.parent)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    try:
        _write_new_file(key_path, pem, 0o600)
    except FileExistsError:  # another process generated it a moment ago: use theirs
        return _load_private_key(key_path)
    public_path = _public_path_for(key_path)
    if not public_path.exists():
        public_path.write_bytes(public_pem(private.public_key()))
    trust_public_key(private.public_key())
    return SigningKey(private, key_path, created=True)


def read_regular_file(path: Path) -> bytes:
    """`path`'s bytes; OSError (strerror "not a regular file") for a FIFO, socket or
    device, which a plain read waits on forever when nobody writes to it (`sign`,
    `verify` and a `*.pub` in the trusted folder all hung on a named pipe)."""
    if path.exists() and not path.is_file():
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return path.read_bytes()


def _load_private_key(key_path: Path) -> SigningKey:
    try:
        data = read_regular_file(key_path)
        key = serialization.load_pem_private_key(data, password=None)
    except OSError as error:
        raise SigningError(f"cannot read signing key {key_path}: {error.strerror}") from None
    except (ValueError, TypeError) as error:
        reason = " ".join(str(error).split()) or "unreadable"
        raise SigningError(f"signing key {key_path} is not an unencrypted PEM private "
                           f"key: {reason}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"signing key {key_path} is a {type(key).__name__}, "
                           f"not an Ed25519 key")
    warning = None
    if stat.S_IMODE(key_path.stat().st_mode) & 0o077:
        warning = (f"signing key {key_path} is readable by other users; "
                   f"restrict it with: chmod 600 {key_path}")
    return SigningKey(key, key_path, created=False, warning=warning)


def load_trusted_keys(folder: str | Path) -> tuple[dict[str, Ed25519PublicKey], list[str]]:
    """Every readable `*.pub` in `folder`, by fingerprint; plus one note per unreadable one."""
    directory = Path(folder).expanduser()
    keys: dict[str, Ed25519PublicKey] = {}
    problems: list[str] = []
    if not directory.is_dir():
        return keys, problems
    for candidate in sorted(directory.glob("*.pub")):
        try:
            key = parse_public_key(read_regular_file(candidate))
        except (OSError, ValueError) as error:
            problems.append(f"{candidate.name}: {error}")
            continue
        keys[fingerprint(key)] = key
    return keys, problems


# --------------------------------------------------------------------------- pure core


@dataclass(frozen=True)
class Sidecar:
    version: int
    key: str
    sha: str
    signature: bytes

    def to_line(self) -> str:
        return json.dumps({"v": self.version, "key": self.key, "sha": self.sha,
                           "sig": base64.b64encode(self.signature).decode("ascii")},
                          separators=(", ", ": ")) + "\n"


def signed_message(data: bytes, sha: str) -> bytes:
    return data + sha.encode("ascii")


def check_sha(sha: str, allow_dirty: bool = False) -> str:
    """A full git commit sha (40 or 64 lowercase hex digits), optionally `+dirty`."""
    candidate = sha.strip().lower() if isinstance(sha, str) else ""
    if not _SHA_PATTERN.match(candidate):
        raise SigningError(f"{sha!r} is not a full git commit sha (40 or 64 hex digits)")
    if candidate.endswith("+dirty") and not allow_dirty:
        raise SigningError(
            f"refusing to sign at {candidate}: the working tree had uncommitted changes, so "
            f"no commit reproduces this file; commit and re-run, or pass --allow-dirty")
    return candidate


def sign_bytes(data: bytes, sha: str, private: Ed25519PrivateKey) -> Sidecar:
    return Sidecar(SIDECAR_VERSION, fingerprint(private.public_key()), sha,
                   private.sign(signed_message(data, sha)))


def parse_sidecar(text: str) -> Sidecar:
    """The sidecar's one JSON line; ValueError with a one-line reason when malformed."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(f"expected one JSON line, found {len(lines)}")
    try:
        fields = json.loads(lines[0])
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg})") from None
    if not isinstance(fields, dict):
        raise ValueError("not a JSON object")
    version = fields.get("v")
    if version != SIDECAR_VERSION or isinstance(version, bool):
        raise ValueError(f"unsupported format version {version!r} (this benchwarden "
                         f"reads version {SIDECAR_VERSION})")
    key, sha, encoded = fields.get("key"), fields.get("sha"), fields.get("sig")
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{16}", key):
        raise ValueError("`key` is not a 16-hex-digit fingerprint")
    if not isinstance(sha, str) or not sha:
        raise ValueError("`sha` is missing")
    if not _SHA_PATTERN.match(sha):
        # Only a fixed-shape sha keeps `bytes || sha` unambiguous: otherwise the last
        # bytes of a file could be moved into the sha and still verify.
        raise ValueError(f"`sha` {sha[:80]!r} is not a full lowercase git commit sha")
    if not isinstance(encoded, str):
        raise ValueError("`sig` is missing")
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("`sig` is not base64") from None
    if len(signature) != 64:
        raise ValueError(f"`sig` is {len(signature)} bytes, an Ed25519 signature is 64")
    return Sidecar(version, key, sha, signature)


@dataclass(frozen=True)
class Verification:
    """What checking one file's signature found."""

    file: str
    status: Status
    detail: str = ""
    key: str | None = None
    sha: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "valid"

    def line(self) -> str:
        if self.status == "valid":
            dirty = " (from a working tree with uncommitted changes)" \
                if self.sha and self.sha.endswith("+dirty") else ""
            return (f"{self.file}: valid signature by key {self.key} at commit "
                    f"{self.sha}{dirty}")
        if self.status == "unsigned":
            return f"{self.file}: unsigned: no {self.file}{SIDECAR_SUFFIX}"
        if self.status == "untrusted":
            return f"{self.file}: signed by key {self.key}, which is not trusted{self.detail}"
        if self.status == "tampered":
            return (f"{self.file}: TAMPERED: the signature by key {self.key} does not match "
                    f"the file's bytes and recorded commit {self.sha}")
        if self.status == "malformed":
            return (
                f"{self.file}: malformed signature file {self.file}{SIDECAR_SUFFIX}: {self.detail}"
            )
        return f"{self.file}: {self.detail or 'does not exist'}"


def check_signature(name: str, data: bytes, sidecar: Sidecar,
                    trusted: Mapping[str, Ed25519PublicKey]) -> Verification:
    """Pure check of `data` against a parsed sidecar and a set of trusted keys."""
    key = trusted.get(sidecar.key)
    if key is None:
        return Verification(name, "untrusted", key=sidecar.key, sha=sidecar.sha)
    # The fingerprint names the key, but only the key itself can vouch for the bytes.
    try:
        key.verify(sidecar.signature, signed_message(data, sidecar.sha))
    except (InvalidSignature, UnicodeEncodeError):  # a non-ASCII sha was never signed
        return Verification(name, "tampered", key=sidecar.key, sha=sidecar.sha)
    return Verification(name, "valid", key=sidecar.key, sha=sidecar.sha)


# --------------------------------------------------------------------------- shell


def sidecar_path(file: str | Path) -> Path:
    path = Path(file)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def report_git_sha(data: bytes) -> tuple[bool, str | None]:
    """(is a benchwarden report, the `run.git_sha` it records)."""
    try:
        report = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False, None
    if not isinstance(report, dict) or not str(report.get("schema", "")).startswith(
            "benchwarden.report/"):
        return False, None
    run = report.get("run")
    if not isinstance(run, dict):
        return True, None
    sha = run.get("git_sha")
    return True, sha if isinstance(sha, str) and sha else None


def resolve_sha(data: bytes, explicit: str | None, allow_dirty: bool,
                cwd: Path | None = None) -> str:
    """The commit the file was produced at: `--sha`, else the report's, else HEAD."""
    if explicit is not None:
        return check_sha(explicit, allow_dirty)
    is_report, recorded = report_git_sha(data)
    if is_report:
        if recorded is None:
            raise SigningError("this report records no git sha (it was not produced in a "
                               "git checkout); name the commit with --sha")
        return check_sha(recorded, allow_dirty)
    directory = cwd or Path.cwd()
    head = git_sha(directory)
    if head is None:
        raise SigningError(f"{directory} is not in a git checkout, so the commit is "
                           f"unknown; name it with --sha")
    return check_sha(head, allow_dirty)


@dataclass(frozen=True)
class SignResult:
    file: Path
    sidecar: Path
    fingerprint: str
    sha: str
    key: SigningKey


def sign_file(file: str | Path, *, key_path: str | Path | None = None,
              sha: str | None = None, allow_dirty: bool = False,
              cwd: Path | None = None) -> SignResult:
    """Sign `file` and write `file.sig` atomically (an existing sidecar is replaced)."""
    target = Path(file).expanduser()
    try:
        data = read_regular_file(target)
    except FileNotFoundError:
        raise SigningError(f"{file} does not exist") from None
    except OSError as error:
        raise SigningError(f"cannot read {file}: {error.strerror}") from None
    commit = resolve_sha(data, sha, allow_dirty, cwd)
    key = load_or_create_key(key_path)
    sidecar = sign_bytes(data, commit, key.private)
    destination = write_text_atomically(sidecar_path(target), sidecar.to_line(), mode=0o644,
                                        encoding="ascii")
    return SignResult(target, destination, sidecar.key, commit, key)


def verify_file(file: str | Path, trusted_keys: str | Path | None = None) -> Verification:
    """Check `file` against `file.sig` and the keys in `trusted_keys`.

    With no folder given, the default trusted folder is used, which holds the key that
    `sign` generated on this machine, so sign-then-verify works out of the box. A given
    folder that does not exist raises ValueError (a usage mistake, not a verdict).
    """
    name = str(file)
    target = Path(file).expanduser()
    if trusted_keys is not None and not Path(trusted_keys).expanduser().is_dir():
        raise ValueError(f"trusted keys folder {trusted_keys} does not exist")
    folder = Path(trusted_keys).expanduser() if trusted_keys is not None \
        else default_trusted_dir()
    try:
        data = read_regular_file(target)
    except FileNotFoundError:
        return Verification(name, "missing", detail="does not exist")
    except OSError as error:
        return Verification(name, "missing", detail=f"cannot read: {error.strerror}")
    try:
        text = read_regular_file(sidecar_path(target)).decode("utf-8")
    except FileNotFoundError:
        return Verification(name, "unsigned")
    except (OSError, UnicodeDecodeError) as error:
        return Verification(name, "malformed", detail=f"cannot read it: {error}")
    try:
        sidecar = parse_sidecar(text)
    except ValueError as error:
        return Verification(name, "malformed", detail=str(error))
    trusted, problems = load_trusted_keys(folder)
    result = check_signature(name, data, sidecar, trusted)
    if result.status == "untrusted":
        where = f" (no matching key in {folder}"
        where += f"; {len(problems)} unreadable key file(s) ignored)" if problems else ")"
        return Verification(name, "untrusted", detail=where, key=result.key, sha=result.sha)
    return result

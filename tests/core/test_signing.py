"""Signatures over a file's bytes and a git sha: what verifies and what must not."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from benchwarden.core import signing

SHA = "0123456789abcdef0123456789abcdef01234567"
REPORT = json.dumps({
    "schema": "benchwarden.report/1", "suite": "retrieval", "bench_version": "3",
    "run": {"id": "retrieval-1", "git_sha": SHA}, "composite": 0.6429,
}, indent=2).encode() + b"\n"

# One key for the pure tests: generating per hypothesis example would only add time.
PRIVATE = Ed25519PrivateKey.generate()
TRUSTED = {signing.fingerprint(PRIVATE.public_key()): PRIVATE.public_key()}
SIDECAR = signing.sign_bytes(REPORT, SHA, PRIVATE)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------ pure core


def test_fingerprint_is_first_eight_bytes_of_sha256_of_raw_public_key():
    import hashlib

    raw = signing.raw_public_bytes(PRIVATE.public_key())
    assert len(raw) == 32
    assert signing.fingerprint(PRIVATE.public_key()) == hashlib.sha256(raw).hexdigest()[:16]


def test_valid_signature_verifies_and_names_key_and_sha():
    result = signing.check_signature("r.json", REPORT, SIDECAR, TRUSTED)
    assert result.ok and result.status == "valid"
    assert SIDECAR.key in result.line() and SHA in result.line()


def test_signature_covers_bytes_followed_by_sha():
    # Independent of check_signature: the public key accepts exactly bytes || sha.
    PRIVATE.public_key().verify(SIDECAR.signature, REPORT + SHA.encode())


@given(st.data())
@settings(deadline=None, max_examples=200)
def test_flipping_any_single_byte_of_the_file_fails(data):
    position = data.draw(st.integers(0, len(REPORT) - 1), label="position")
    mask = data.draw(st.integers(1, 255), label="xor mask")
    changed = bytearray(REPORT)
    changed[position] ^= mask
    result = signing.check_signature("r.json", bytes(changed), SIDECAR, TRUSTED)
    assert not result.ok and result.status == "tampered"


@given(st.data())
@settings(deadline=None, max_examples=120)
def test_changing_any_character_of_the_recorded_sha_fails(data):
    position = data.draw(st.integers(0, len(SHA) - 1), label="position")
    replacement = data.draw(st.characters(codec="utf-8").filter(lambda c: c != SHA[position]))
    forged_sha = SHA[:position] + replacement + SHA[position + 1:]
    forged = signing.Sidecar(SIDECAR.version, SIDECAR.key, forged_sha, SIDECAR.signature)
    result = signing.check_signature("r.json", REPORT, forged, TRUSTED)
    assert not result.ok and result.status == "tampered"


def test_bytes_moved_from_the_file_into_the_sha_do_not_verify(tmp_path):
    # bytes || sha is only unambiguous if the sha has a fixed shape: a sidecar whose sha
    # absorbed the file's last bytes carries a valid signature but must be refused.
    shifted_sha = REPORT[-2:].decode() + SHA
    shifted = signing.Sidecar(1, SIDECAR.key, shifted_sha, SIDECAR.signature)
    assert signing.check_signature("r", REPORT[:-2], shifted, TRUSTED).ok  # the raw risk
    (tmp_path / "r.json").write_bytes(REPORT[:-2])
    (tmp_path / "r.json.sig").write_text(shifted.to_line())
    folder = tmp_path / "keys"
    folder.mkdir()
    (folder / "k.pub").write_bytes(signing.public_pem(PRIVATE.public_key()))
    result = signing.verify_file(tmp_path / "r.json", folder)
    assert result.status == "malformed" and "not a full lowercase git commit sha" in result.line()


def test_truncated_or_extended_file_fails():
    for changed in (REPORT[:-1], REPORT + b" ", b""):
        assert signing.check_signature("r", changed, SIDECAR, TRUSTED).status == "tampered"


def test_unknown_key_is_not_trusted_even_with_a_correct_signature():
    stranger = Ed25519PrivateKey.generate()
    sidecar = signing.sign_bytes(REPORT, SHA, stranger)
    result = signing.check_signature("r.json", REPORT, sidecar, TRUSTED)
    assert result.status == "untrusted" and not result.ok
    assert sidecar.key in result.line()


def test_a_trusted_fingerprint_with_another_keys_signature_is_tampered():
    # Claiming a trusted key's fingerprint does not help: the trusted key checks the bytes.
    impostor = signing.sign_bytes(REPORT, SHA, Ed25519PrivateKey.generate())
    forged = signing.Sidecar(1, SIDECAR.key, SHA, impostor.signature)
    assert signing.check_signature("r", REPORT, forged, TRUSTED).status == "tampered"


def test_sidecar_round_trip_is_one_json_line_with_the_spec_fields():
    line = SIDECAR.to_line()
    assert line.endswith("\n") and line.count("\n") == 1
    fields = json.loads(line)
    assert set(fields) == {"v", "key", "sha", "sig"}
    assert fields["v"] == 1 and fields["sha"] == SHA
    assert len(base64.b64decode(fields["sig"])) == 64
    assert signing.parse_sidecar(line) == SIDECAR


@pytest.mark.parametrize("text, reason", [
    ("", "one JSON line"),
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"v": 2, "key": "0011223344556677", "sha": "x", "sig": ""}', "version 2"),
    ('{"v": 1, "key": "short", "sha": "x", "sig": ""}', "fingerprint"),
    ('{"v": 1, "key": "0011223344556677", "sig": ""}', "`sha`"),
    ('{"v": 1, "key": "0011223344556677", "sha": "x", "sig": ""}', "not a full lowercase git"),
    (f'{{"v": 1, "key": "0011223344556677", "sha": "{SHA}", "sig": "@@@"}}', "base64"),
    (f'{{"v": 1, "key": "0011223344556677", "sha": "{SHA}", "sig": "AAAA"}}', "3 bytes"),
])
def test_malformed_sidecars_are_named(text, reason):
    with pytest.raises(ValueError, match=reason):
        signing.parse_sidecar(text)


@pytest.mark.parametrize("sha", ["abc", SHA[:-1], SHA + "0", "g" * 40, "", SHA + "+clean"])
def test_only_full_commit_shas_are_accepted(sha):
    with pytest.raises(signing.SigningError, match="not a full git commit sha"):
        signing.check_sha(sha)


def test_dirty_sha_is_refused_unless_allowed():
    with pytest.raises(signing.SigningError, match="uncommitted changes.*--allow-dirty"):
        signing.check_sha(SHA + "+dirty")
    assert signing.check_sha(SHA + "+dirty", allow_dirty=True) == SHA + "+dirty"
    assert signing.check_sha(SHA.upper()) == SHA
    assert signing.check_sha("a" * 64) == "a" * 64


def test_report_git_sha_recognises_benchwarden_reports_only():
    assert signing.report_git_sha(REPORT) == (True, SHA)
    assert signing.report_git_sha(b'{"schema": "other/1", "run": {"git_sha": "x"}}') == (
        False,
        None,
    )
    assert signing.report_git_sha(b"\xff\xfe binary") == (False, None)
    no_sha = json.dumps({"schema": "benchwarden.report/1", "run": {"git_sha": None}}).encode()
    assert signing.report_git_sha(no_sha) == (True, None)


# ------------------------------------------------------------------ keys on disk


def test_default_key_is_generated_owner_only_and_trusted_locally():
    key = signing.load_or_create_key()
    assert key.created
    assert key.path == signing.default_key_path()
    assert mode(key.path) == 0o600
    assert mode(key.path.parent) == 0o700
    public = key.path.with_name("signing.pub")
    assert signing.fingerprint(signing.parse_public_key(public.read_bytes())) == key.fingerprint
    trusted = signing.default_trusted_dir() / f"{key.fingerprint}.pub"
    assert trusted.exists()
    again = signing.load_or_create_key()
    assert not again.created and again.fingerprint == key.fingerprint and again.warning is None


def test_explicit_missing_key_is_an_error_not_a_new_key(tmp_path):
    with pytest.raises(signing.SigningError, match="no signing key"):
        signing.load_or_create_key(tmp_path / "typo.key")
    assert not (tmp_path / "typo.key").exists()


def test_world_readable_key_warns_and_non_ed25519_key_refused(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    open_key = tmp_path / "open.key"
    open_key.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    open_key.chmod(0o644)
    assert "chmod 600" in signing.load_or_create_key(open_key).warning
    other = tmp_path / "ec.key"
    other.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    with pytest.raises(signing.SigningError, match="not an Ed25519 key"):
        signing.load_or_create_key(other)
    garbage = tmp_path / "garbage.key"
    garbage.write_text("hello")
    with pytest.raises(signing.SigningError, match="not an unencrypted PEM"):
        signing.load_or_create_key(garbage)


def test_trusted_keys_are_known_by_content_not_file_name(tmp_path):
    key = Ed25519PrivateKey.generate().public_key()
    (tmp_path / "misleading-name.pub").write_bytes(signing.public_pem(key))
    raw_key = Ed25519PrivateKey.generate().public_key()
    (tmp_path / "raw.pub").write_bytes(signing.raw_public_bytes(raw_key))
    (tmp_path / "broken.pub").write_text("nonsense")
    keys, problems = signing.load_trusted_keys(tmp_path)
    assert set(keys) == {signing.fingerprint(key), signing.fingerprint(raw_key)}
    assert len(problems) == 1 and problems[0].startswith("broken.pub")


# ------------------------------------------------------------------ files


def write_report(folder: Path, content: bytes = REPORT, name: str = "report.json") -> Path:
    path = folder / name
    path.write_bytes(content)
    return path


def test_sign_then_verify_out_of_the_box(tmp_path):
    report = write_report(tmp_path)
    signed = signing.sign_file(report)
    assert signed.sidecar == tmp_path / "report.json.sig"
    assert signed.sha == SHA  # taken from the report's run.git_sha
    result = signing.verify_file(report)
    assert result.ok, result.line()
    assert report.read_bytes() == REPORT  # signing never touches the file


def test_verify_file_outcomes(tmp_path):
    report = write_report(tmp_path)
    assert signing.verify_file(report).status == "unsigned"
    assert signing.verify_file(report).line().endswith(f"unsigned: no {report}.sig")
    signing.sign_file(report)
    report.write_bytes(REPORT.replace(b"0.6429", b"0.9429"))
    assert signing.verify_file(report).status == "tampered"
    report.write_bytes(REPORT)
    empty = tmp_path / "empty-trust"
    empty.mkdir()
    untrusted = signing.verify_file(report, empty)
    assert untrusted.status == "untrusted" and str(empty) in untrusted.line()
    (tmp_path / "report.json.sig").write_text("{oops")
    assert signing.verify_file(report).status == "malformed"
    assert signing.verify_file(tmp_path / "absent.json").status == "missing"
    with pytest.raises(ValueError, match="does not exist"):
        signing.verify_file(report, tmp_path / "no-such-folder")


def test_sha_resolution_order(tmp_path):
    report = write_report(tmp_path)
    other = "f" * 40
    assert signing.sign_file(report, sha=other).sha == other
    no_sha = write_report(tmp_path, json.dumps(
        {"schema": "benchwarden.report/1", "run": {"git_sha": None}}).encode(), "no-sha.json")
    with pytest.raises(signing.SigningError, match="records no git sha"):
        signing.sign_file(no_sha)
    dirty = write_report(tmp_path, REPORT.replace(SHA.encode(), (SHA + "+dirty").encode()),
                         "dirty.json")
    with pytest.raises(signing.SigningError, match="--allow-dirty"):
        signing.sign_file(dirty)
    assert signing.verify_file(dirty).status == "unsigned"  # refusal wrote nothing
    assert signing.sign_file(dirty, allow_dirty=True).sha == SHA + "+dirty"
    assert "uncommitted" in signing.verify_file(dirty).line()


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_non_report_file_is_bound_to_head_of_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never find an outer repo
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    tmp_path = tmp_path / "repo"
    tmp_path.mkdir()
    git(tmp_path, "init", "-q")
    (tmp_path / "tracked.txt").write_text("one\n")
    git(tmp_path, "add", "tracked.txt")
    git(tmp_path, "commit", "-q", "-m", "first")
    head = git(tmp_path, "rev-parse", "HEAD")
    artefact = tmp_path / "numbers.csv"
    artefact.write_text("a,b\n1,2\n")
    assert signing.sign_file(artefact, cwd=tmp_path).sha == head
    (tmp_path / "tracked.txt").write_text("two\n")
    with pytest.raises(signing.SigningError, match="uncommitted"):
        signing.sign_file(artefact, cwd=tmp_path)
    with pytest.raises(signing.SigningError, match="not in a git checkout"):
        signing.sign_file(artefact, cwd=outside)

"""`benchwarden sign` and `benchwarden verify FILE` through the real command line."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchwarden.cli.main import cli
from benchwarden.core import paths, signing

SHA = "89abcdef0123456789abcdef0123456789abcdef"


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def report(tmp_path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"schema": "benchwarden.report/1", "suite": "arms",
                                "bench_version": "1", "run": {"git_sha": SHA},
                                "verdict": {"kind": "pass", "reason": "ok"}}, indent=2) + "\n")
    return path


def test_sign_then_verify_works_out_of_the_box(report):
    signed = run("sign", str(report))
    assert signed.exit_code == 0, signed.output
    sidecar = json.loads(Path(f"{report}.sig").read_text())
    assert sidecar["v"] == 1 and sidecar["sha"] == SHA and len(sidecar["key"]) == 16
    assert f"key {sidecar['key']}" in signed.output and SHA in signed.output

    key_file = paths.home() / "keys" / "signing.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert (paths.home() / "keys" / "trusted" / f"{sidecar['key']}.pub").exists()

    verified = run("verify", str(report))
    assert verified.exit_code == 0, verified.output
    assert "valid signature" in verified.output
    assert sidecar["key"] in verified.output and SHA in verified.output


def test_verify_unsigned_file(report):
    result = run("verify", str(report))
    assert result.exit_code == 1
    assert result.output.strip() == f"{report}: unsigned: no {report}.sig"


def test_verify_tampered_file_and_sha(report):
    assert run("sign", str(report)).exit_code == 0
    original = report.read_bytes()
    report.write_bytes(original.replace(b'"pass"', b'"fail"'))
    tampered = run("verify", str(report))
    assert tampered.exit_code == 1 and "TAMPERED" in tampered.output

    report.write_bytes(original)
    sidecar_file = Path(f"{report}.sig")
    fields = json.loads(sidecar_file.read_text())
    fields["sha"] = "0" + fields["sha"][1:]
    sidecar_file.write_text(json.dumps(fields) + "\n")
    moved = run("verify", str(report))
    assert moved.exit_code == 1 and "TAMPERED" in moved.output


@given(st.data())
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_flipping_any_byte_fails_through_the_cli(report, data):
    if not Path(f"{report}.sig").exists():
        assert run("sign", str(report)).exit_code == 0
    original = report.read_bytes()
    position = data.draw(st.integers(0, len(original) - 1))
    changed = bytearray(original)
    changed[position] ^= data.draw(st.integers(1, 255))
    try:
        report.write_bytes(bytes(changed))
        result = run("verify", str(report))
    finally:
        report.write_bytes(original)
    assert result.exit_code == 1 and "TAMPERED" in result.output
    assert run("verify", str(report)).exit_code == 0


def test_unknown_key_fails_and_trusting_it_passes(report, tmp_path):
    signer = tmp_path / "ci.key"
    from cryptography.hazmat.primitives import serialization

    private = Ed25519PrivateKey.generate()
    signer.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                             serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
    signer.chmod(0o600)
    signed = run("sign", str(report), "--key", str(signer))
    assert signed.exit_code == 0, signed.output
    fingerprint = signing.fingerprint(private.public_key())

    unknown = run("verify", str(report))
    assert unknown.exit_code == 1
    assert f"signed by key {fingerprint}, which is not trusted" in unknown.output

    folder = tmp_path / "team-keys"
    folder.mkdir()
    (folder / "ci.pub").write_bytes(signing.public_pem(private.public_key()))
    trusted = run("verify", str(report), "--trusted-keys", str(folder))
    assert trusted.exit_code == 0 and fingerprint in trusted.output


def test_malformed_sidecar_is_one_clear_line(report):
    Path(f"{report}.sig").write_text('{"v": 9}\n')
    result = run("verify", str(report))
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "unsupported format version 9" in result.output


def test_sign_refusals_are_one_line_usage_errors(report, tmp_path):
    dirty = run("sign", str(report), "--sha", SHA + "+dirty")
    assert dirty.exit_code == 2
    assert "uncommitted changes" in dirty.output and "--allow-dirty" in dirty.output
    assert not Path(f"{report}.sig").exists()
    allowed = run("sign", str(report), "--sha", SHA + "+dirty", "--allow-dirty")
    assert allowed.exit_code == 0 and json.loads(
        Path(f"{report}.sig").read_text())["sha"] == SHA + "+dirty"

    assert run("sign", str(tmp_path / "missing.json")).exit_code == 2
    assert run("sign", str(report), "--sha", "HEAD").exit_code == 2
    assert run("sign", str(report), "--key", str(tmp_path / "nope.key")).exit_code == 2
    missing_folder = run("verify", str(report), "--trusted-keys", str(tmp_path / "nowhere"))
    assert missing_folder.exit_code == 2 and "does not exist" in missing_folder.output


def test_verify_with_nothing_given_checks_the_default_store():
    result = run("verify")
    assert result.exit_code == 2
    assert f"no store at {paths.home() / 'store.sqlite'}" in result.output
    assert not paths.home().exists()  # and creates nothing


def test_verify_checks_the_store_against_the_head_a_report_carries(tmp_path):
    from benchwarden.core.provenance import stamp_run
    from benchwarden.core.store import open_store

    store = tmp_path / "store.sqlite"
    with open_store(store) as opened:
        opened.begin_run(stamp_run(suite="demo", bench_version="1", config={}, run_id="r"))
        head = opened.head()
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "benchwarden.report/1", "run": {"git_sha": SHA},
                                  "store_head": head.to_json_dict()}))
    assert run("sign", str(report)).exit_code == 0
    both = run("verify", str(report), "--store", str(store))
    assert both.exit_code == 0 and "valid signature" in both.output
    assert f"head witness {report}: agrees" in both.output
    ahead = tmp_path / "ahead.json"
    ahead.write_text(json.dumps({"schema": "benchwarden.report/1",
                                 "store_head": {**head.to_json_dict(), "seq": head.seq + 5}}))
    result = run("verify", "--store", str(store), "--witness", str(ahead))
    assert result.exit_code == 1 and "removed from its tail" in result.output
    for bad, why in ((tmp_path / "none.json", "does not exist"), (report.with_suffix(".sig"), "")):
        refused = run("verify", "--store", str(store), "--witness", str(bad))
        assert refused.exit_code == 2 and why in refused.output

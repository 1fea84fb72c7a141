"""`benchwarden sign`: write `FILE.sig`, an Ed25519 signature binding FILE to a commit."""

from __future__ import annotations

import click

from benchwarden.cli.common import ConfigError
from benchwarden.core import signing


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", "key_path", type=click.Path(dir_okay=False), default=None,
              help="PEM Ed25519 private key (default ~/.benchwarden/keys/signing.key, "
                   "generated on first use).")
@click.option("--sha", default=None,
              help="Full git commit sha the file was produced at (default: the report's "
                   "run.git_sha, else HEAD of the current directory).")
@click.option("--allow-dirty", is_flag=True,
              help="Sign even though the sha is marked +dirty (uncommitted changes).")
def sign(file: str, key_path: str | None, sha: str | None, allow_dirty: bool) -> None:
    """Sign a result FILE: writes FILE.sig over its exact bytes and the git sha.

    A signature proves the file is unchanged and names the commit it was produced at;
    it does not prove who ran the benchmark.
    """
    try:
        result = signing.sign_file(file, key_path=key_path, sha=sha, allow_dirty=allow_dirty)
    except signing.SigningError as error:
        raise ConfigError(str(error)) from None
    if result.key.warning:
        click.echo(f"benchwarden: warning: {result.key.warning}", err=True)
    if result.key.created:
        click.echo(f"generated signing key {result.fingerprint} at {result.key.path} "
                   f"(public key beside it, trusted on this machine)", err=True)
    click.echo(f"signed {file} with key {result.fingerprint} at commit {result.sha}: "
               f"wrote {result.sidecar}")

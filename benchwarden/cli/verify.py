"""`benchwarden verify`: check a store's hash chain (`--store`) or a signed file."""

from __future__ import annotations

import click

from benchwarden.cli.common import EXIT_FAIL, ConfigError, open_store_or_exit


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--store", "store_location", default=None,
              help="Verify this store's hash chain (SQLite path or postgresql:// URL).")
@click.option("--trusted-keys", type=click.Path(file_okay=False), default=None,
              help="Folder of trusted public keys (*.pub) for checking FILE's signature.")
def verify(file: str | None, store_location: str | None, trusted_keys: str | None) -> None:
    """Verify a store's hash chain, or a signed result FILE against trusted keys."""
    if store_location is None and file is None:
        raise ConfigError("give FILE to check its signature, or --store PATH to check a store")
    failed = False
    if store_location is not None:
        with open_store_or_exit(store_location) as store:
            report = store.verify()
        click.echo(report.line())
        failed |= not report.ok
    if file is not None:
        try:
            from benchwarden.core import signing
        except ImportError:
            raise ConfigError("signature checking is not available in this build") from None
        result = signing.verify_file(file, trusted_keys)
        click.echo(result.line())
        failed |= not result.ok
    raise SystemExit(EXIT_FAIL if failed else 0)

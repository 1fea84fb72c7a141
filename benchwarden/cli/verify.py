"""`benchwarden verify`: check a store's hash chain (`--store`) or a signed file.

Exit 0 only when everything asked about checked out: an intact chain, a valid
signature by a trusted key. Unsigned, untrusted, tampered or malformed is exit 1.
"""

from __future__ import annotations

import click

from benchwarden.cli.common import EXIT_FAIL, ConfigError, open_store_or_exit
from benchwarden.core import signing


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--store", "store_location", default=None,
              help="Verify this store's hash chain (SQLite path or postgresql:// URL).")
@click.option("--trusted-keys", type=click.Path(file_okay=False), default=None,
              help="Folder of trusted public keys (*.pub, PEM or raw) for FILE's signature "
                   "(default ~/.benchwarden/keys/trusted, which holds the key `sign` made).")
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
            result = signing.verify_file(file, trusted_keys)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        click.echo(result.line())
        failed |= not result.ok
    raise SystemExit(EXIT_FAIL if failed else 0)

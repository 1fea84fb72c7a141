"""`benchwarden verify`: check a store's hash chain (`--store`) or a signed file.

Exit 0 only when everything asked about checked out: an intact chain that reaches every
head witness, a valid signature by a trusted key. Unsigned, untrusted, tampered,
malformed, a broken chain or a removed tail is exit 1. No store at the path is exit 2;
a store the OS or the database refuses (locked, damaged, not a store) is exit 4.

Verifying never creates or writes anything: the store is opened read-only.

Head witnesses (docs/verify.md): the store's own `PATH.head` is always consulted;
`--witness FILE` adds a witness file or a JSON report carrying `store_head` (a signed
report is a witness nobody can rewrite); FILE itself counts as one when it is a report
from the store being verified.
"""

from __future__ import annotations

import click
from click.core import ParameterSource

from benchwarden.cli.common import EXIT_FAIL, ConfigError, open_store_or_exit, store_option
from benchwarden.core import signing
from benchwarden.core.witness import (
    REPORT_FIELD,
    Witness,
    WitnessError,
    parse_witness_text,
    read_witness,
)


def _witnesses(paths: tuple[str, ...]) -> list[Witness]:
    found = []
    for path in paths:
        try:
            head = read_witness(path)
        except WitnessError as error:
            raise ConfigError(str(error)) from None
        if head is None:
            raise ConfigError(f"witness {path} does not exist")
        found.append(Witness(path, head))
    return found


def _report_witness(file: str) -> Witness | None:
    """FILE as a witness when it is a report that carries a store head."""
    try:
        with open(file, encoding="utf-8") as stream:
            text = stream.read()
    except (OSError, UnicodeDecodeError):
        return None
    if REPORT_FIELD not in text:
        return None
    try:
        return Witness(file, parse_witness_text(text))
    except WitnessError:
        return None


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@store_option
@click.option("--witness", "witness_paths", multiple=True, type=click.Path(dir_okay=False),
              help="A head witness to check the store against: a `.head` file or a JSON "
                   "report with `store_head` (e.g. a signed result). Repeatable.")
@click.option("--trusted-keys", type=click.Path(file_okay=False), default=None,
              help="Folder of trusted public keys (*.pub, PEM or raw) for FILE's signature "
                   "(default ~/.benchwarden/keys/trusted, which holds the key `sign` made).")
@click.pass_context
def verify(ctx: click.Context, file: str | None, store_location: str,
           witness_paths: tuple[str, ...], trusted_keys: str | None) -> None:
    """Verify a store's hash chain and head witnesses, and/or a signed result FILE.

    The store (--store, the same default as every command) is checked when no FILE is
    given, or when --store or --witness is: `verify FILE` alone checks only FILE.
    """
    store_given = ctx.get_parameter_source("store_location") is not ParameterSource.DEFAULT
    check_store = file is None or store_given or bool(witness_paths)
    witnesses = _witnesses(witness_paths)
    failed = False
    if file is not None:
        try:
            result = signing.verify_file(file, trusted_keys)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        click.echo(result.line())
        failed |= not result.ok
        if check_store:
            from_file = _report_witness(file)
            if from_file is not None:
                witnesses.append(from_file)
    if check_store:
        with open_store_or_exit(store_location, create=False) as store:
            report = store.verify(witnesses)
        for line in report.lines():
            click.echo(line)
        failed |= not report.ok
    raise SystemExit(EXIT_FAIL if failed else 0)

"""`benchwarden export`: a store's records as JSON Lines, Parquet or CSV.

The columns are documented once, in `benchwarden.core.export`; this command only
parses options and reports.
"""

from __future__ import annotations

import click

from benchwarden.cli.common import ConfigError, config_errors, open_store_or_exit, store_option
from benchwarden.core.export import FORMATS, ExportError, export_store, format_from_path


@click.command()
@store_option
@click.option("--run", "run_id", default=None,
              help="Only the records this run made (a unique prefix of its id is enough).")
@click.option("--suite", default=None, help="Only records of this suite.")
@click.option("--format", "export_format", type=click.Choice(FORMATS), default=None,
              help="Output format; by default taken from the --out suffix "
                   "(.jsonl, .parquet, .csv).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="File to write (replaced whole, never left half-written).")
@config_errors
def export(store_location: str, run_id: str | None, suite: str | None,
           export_format: str | None, out_path: str) -> None:
    """Export records with all their fields as flat, stably named columns."""
    for option, value in (("--run", run_id), ("--suite", suite)):
        if value is not None and not value.strip():
            # an unset shell variable: read as "no filter", it exported every record
            raise ConfigError(f"{option} is empty; give a run id (see `benchwarden runs`)"
                              if option == "--run" else f"{option} is empty; give a suite name")
    chosen = export_format or format_from_path(out_path)
    if chosen is None:
        raise ConfigError(f"cannot tell the format of {out_path}; give --format "
                          f"{'|'.join(FORMATS)}")
    with open_store_or_exit(store_location, create=False) as store:
        try:
            count = export_store(store, out_path, chosen, run_id=run_id, suite=suite)
        except (ExportError, OSError) as error:
            raise ConfigError(f"export failed: {error}") from None
    if count == 0:
        click.echo(f"no records matched; wrote an empty {chosen} export to {out_path}")
    else:
        click.echo(f"exported {count} record{'s' if count != 1 else ''} to {out_path} ({chosen})")

"""Command-line shell over the Python API: one thin module per command group."""

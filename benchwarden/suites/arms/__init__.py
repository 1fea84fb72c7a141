"""The `arms` suite."""

"""The `contamination` suite."""

"""The `retrieval` suite."""

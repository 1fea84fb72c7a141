"""Fakes of the services benchwarden talks to, for tests (never shipped)."""

from tests.fakes.openai_server import BEHAVIOURS, FakeOpenAIServer

__all__ = ["BEHAVIOURS", "FakeOpenAIServer"]

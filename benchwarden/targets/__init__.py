"""What benchmarks talk to: the OpenAI-compatible client and the local engine."""

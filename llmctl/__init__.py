"""llmctl: take an open LLM to a running, autoscaled OpenAI-compatible endpoint on Ray Serve."""

__version__ = "0.1.0"

"""Model backends behind one async streaming interface: vLLM (managed), OpenAI-compatible, transformers."""

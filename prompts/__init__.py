"""Prompt templates (installed as kevin_tui.prompts). Edit freely; `--prompts DIR` points at your own copy."""

"""Prompt template sets (installed as kevin_tui.prompts): one directory per set, `kevin` the default.

Edit freely; `--prompts DIR` points at your own copies of any of the files.
"""

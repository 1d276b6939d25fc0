"""The host side of the evaluator: the caller's process. It never imports torch or a candidate.

It starts the workers in their sandboxes, validates every event they send, runs the builds, keeps
the build manifest, measures the timing rounds with its own clock, and makes every verdict.
"""

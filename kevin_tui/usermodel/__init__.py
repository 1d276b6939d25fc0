"""The user's own model: turn a module into a KernelBench problem, find what is worth a kernel, and
put an accepted kernel back into the model with proof.

Host side (no torch import): `specs` (what the user typed), `bundle` (a module's source made
self-contained), `problem_text` (the KernelBench file), `runner` (talks to the worker), `apply`.
Worker side (`python -m kevin_tui.usermodel.worker`, imports torch and the user's code): `loader`,
`capture`, `profiling`, `check`.
"""

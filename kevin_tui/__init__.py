"""kevin-tui: a terminal agent for interactive GPU-kernel refinement with Kevin-32B."""

__version__ = "0.1.0"

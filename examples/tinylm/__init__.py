"""A tiny decoder-only language model: an example of a user's model for kevin-tui (see README)."""

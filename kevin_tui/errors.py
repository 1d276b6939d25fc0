"""One base class for failures the user can act on, so every front end reports them one way."""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2


class KevinError(Exception):
    """A failure with a message for the user (what happened, what to do) and the exit code it means."""

    exit_code = EXIT_FAILED

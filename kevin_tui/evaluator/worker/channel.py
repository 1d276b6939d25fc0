"""Commands in, events out, on two inherited file descriptors; the worker's stdio is not the protocol."""

from __future__ import annotations

import json
import os
from typing import Any


class Channel:
    def __init__(self, command_fd: int, event_fd: int) -> None:
        self.commands = os.fdopen(command_fd, "r", buffering=1)
        self.out = os.fdopen(event_fd, "w", buffering=1)

    def emit(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}, default=str) + "\n")
        self.out.flush()

    def next_command(self) -> dict[str, Any]:
        line = self.commands.readline()
        return json.loads(line) if line.strip() else {"cmd": "exit"}

    def expect(self, *names: str) -> dict[str, Any]:
        """The next command, which must be one of `names` (or exit, which ends the worker)."""
        command = self.next_command()
        if command["cmd"] == "exit":
            raise SystemExit(0)
        if command["cmd"] not in names:
            raise RuntimeError(f"expected a {'/'.join(names)} command, got {command['cmd']!r}")
        return command

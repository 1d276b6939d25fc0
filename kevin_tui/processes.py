"""Stopping a child and everything it started: SIGTERM to its process group, then SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_process_group(proc: subprocess.Popen, grace_s: float = 2.0) -> None:
    """For a child started with start_new_session=True: its whole group is gone when this returns."""
    pgid = proc.pid
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and group_alive(pgid):
            proc.poll()  # reap our direct child so it stops counting as alive
            time.sleep(0.05)
        if not group_alive(pgid):
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)

"""The first process of a sandbox's PID namespace, kept free of candidate code.

Killing that process makes the kernel kill every process in the namespace, so it is what the host
kills (by pidfd), what the sandbox tool's death signal reaches when kevin-tui dies (bwrap
`--die-with-parent`, `unshare --kill-child`), and what watches the lifeline. If the worker itself were
that process, candidate code could clear its death signal or stop its lifeline thread; so the worker,
started as PID 1 (bwrap `--as-pid-1`, or the unshare jail), forks first thing and its parent stays
behind as this supervisor: it only reaps, holds no descriptor but the lifeline, and is not dumpable,
so the worker (same user, no capabilities) cannot write its memory through /proc/1/mem either.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
from typing import NoReturn

PR_SET_DUMPABLE = 4


def leave_supervisor(lifeline: int) -> None:
    """Fork; the parent supervises until the worker exits (and never returns), the child returns."""
    worker = os.fork()
    if worker != 0:
        _supervise(worker, lifeline)


def _supervise(worker: int, lifeline: int) -> NoReturn:
    """Exit with the worker's status (128 + signal when it was killed), or at once when the host is gone."""
    zero = ctypes.c_ulong(0)
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, zero, zero, zero, zero)
    keep = sorted({0, 1, 2, lifeline})
    for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
        os.closerange(low + 1, high)  # the host sees the worker's pipes close when the worker exits
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(1)
            if pid == 0:
                break
            if pid == worker:
                code = os.waitstatus_to_exitcode(status)
                os._exit(128 - code if code < 0 else code)
        ready, _, _ = select.select([woken, lifeline], [], [])
        if woken in ready:
            os.read(woken, 512)
        if lifeline in ready and not os.read(lifeline, 1):
            os._exit(128 + signal.SIGKILL)  # the host is gone: this exit takes the namespace down

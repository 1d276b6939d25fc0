"""Warm worker starts for the `unshare` sandbox: the host's side of worker/nursery.py.

One nursery per worker environment (what torch reads at import differs otherwise), started on first use
and kept for the life of this process. `spawn()` hands it a worker's pipes and log and gets back a
`Spawned`, which stands in for the `subprocess.Popen` of a cold start: the same pid to find the sandbox's
first process under, the same exit status (the nursery reaps and reports it). Where a nursery cannot be
started or refuses, the worker starts cold and nothing else changes: it is only a faster way to the
same sandbox.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.protocol import COMPILE_SEED
from kevin_tui.processes import describe_exit

READY_TIMEOUT_S = 120.0  # importing torch on a loaded machine
SPAWN_TIMEOUT_S = 30.0
# Read by the worker only after it starts (or lazily by torch), so workers differing only in these share one.
PER_WORKER = frozenset({"KEVIN_WORKER_LIMITS", "KEVIN_WORKER_JAIL", COMPILE_SEED, "TORCHINDUCTOR_CACHE_DIR",
                        "TRITON_CACHE_DIR"})  # fmt: skip
DISABLE = "KEVIN_TUI_COLD_WORKERS"  # set to 1: every worker starts cold (a fresh `import torch`)


class Spawned:
    """A worker process the nursery forked, as much of `subprocess.Popen` as the host uses."""

    def __init__(self, pid: int, nursery_pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()
        self._pidfd = os.pidfd_open(pid)
        with open(f"/proc/{pid}/stat") as handle:  # still the nursery's child, not a reused pid
            parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        if parent != nursery_pid:
            os.close(self._pidfd)
            raise OSError(f"process {pid} is not the nursery's")

    def _set_exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, as the nursery reports it; if the nursery is gone, 1 once the process is."""
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def _orphaned(self) -> None:
        """The nursery died: the exit status is lost, so a watcher reports 1 once the process is gone."""

        def watch() -> None:
            with contextlib.suppress(OSError, ValueError):  # closed: the host is done with it
                select.select([self._pidfd], [], [])
            self._set_exit(1)

        threading.Thread(target=watch, name="kevin-orphan-watch", daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._pidfd)


class Nursery:
    """One nursery process and the socket to it; `spawn` may be called from any thread."""

    def __init__(self, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._replied = threading.Condition(self._lock)
        # by the id of the spawn request (its pid could be reused once it is reaped)
        self._children: dict[int, Spawned] = {}
        self._early_exits: dict[int, int] = {}  # exits read before the spawn's caller took its reply
        self._abandoned: set[int] = set()  # spawns whose caller stopped waiting: their replies and exits are dropped
        self._next_id = 0
        self._stopped = False  # by a timing, while it was still importing
        self.failed = ""
        # its own errors (an import that failed) go to an unnamed file, read if it fails; each worker's own
        # output goes to the worker's log
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (kept open for the nursery's life)
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "kevin_tui.evaluator.worker.nursery", str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=dict(env), cwd="/",
            pass_fds=(theirs.fileno(),), start_new_session=True,
        )  # fmt: skip
        theirs.close()
        self._ready = threading.Event()
        threading.Thread(target=self._read, name="kevin-nursery-reader", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            with self._lock:
                if "ready" in message:
                    self._ready.set()
                elif "failed" in message:
                    self.failed = message["failed"]
                    self._ready.set()
                elif "exited" in message:
                    ident = message["exited"]
                    child = self._children.pop(ident, None)
                    if child is not None:
                        child._set_exit(message["returncode"])
                    elif ident in self._abandoned:
                        self._abandoned.discard(ident)
                    else:
                        self._early_exits[ident] = message["returncode"]
                elif (ident := message.get("spawned", message.get("refused"))) not in self._abandoned:
                    self._replies[ident] = message
                    self._replied.notify_all()
        with self._lock:
            if not self.failed:
                with contextlib.suppress(subprocess.TimeoutExpired):  # its socket closes as it exits
                    self.proc.wait(1)
                self._log.seek(0)
                tail = self._log.read()[-600:].decode(errors="replace").strip()
                self.failed = f"the nursery {describe_exit(self.proc.poll())}" + (f": {tail}" if tail else "")
            self._ready.set()
            self._replied.notify_all()
            for child in self._children.values():
                child._orphaned()
            self._children.clear()

    def stop_while_importing(self) -> None:
        """Under _registry_lock. A nursery still importing torch takes a core: it waits while a kernel is timed
        (SIGSTOP to it alone; one that is ready forks in hundredths of a second and is left alone)."""
        if not self._ready.is_set() and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self._stopped = True

    def go_on(self) -> None:
        """Under _registry_lock."""
        if self._stopped:
            self._stopped = False
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)

    def usable(self) -> bool:
        self._ready.wait(READY_TIMEOUT_S)
        return self._ready.is_set() and not self.failed

    def spawn(
        self, role: str, env: Mapping[str, str], cwd: str, cgroups: Sequence[Path], fds: Sequence[int]
    ) -> Spawned:
        """A new worker from the nursery, with `fds` (its command, event and lifeline pipes, its log) as its
        own; OSError if the nursery cannot make one (the caller starts the worker cold)."""
        if not self.usable():
            raise OSError(self.failed or "the nursery did not start in time")
        request = {"role": role, "env": dict(env), "cwd": cwd, "cgroups": [str(g) for g in cgroups]}
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        with self._lock:
            ident = self._next_id = self._next_id + 1
            socket.send_fds(self._sock, [json.dumps({**request, "id": ident}).encode()], list(fds))
            while ident not in self._replies and not self.failed and time.monotonic() < deadline:
                self._replied.wait(max(0.0, deadline - time.monotonic()))
            reply = self._replies.pop(ident, None)
            if reply is None:
                self._abandoned.add(ident)
                raise OSError(self.failed or "the nursery did not answer")
            if "refused" in reply:
                raise OSError(f"the nursery refused: {reply['why']}")
            try:
                child = Spawned(reply["pid"], self.proc.pid)
            except OSError:  # already gone (its exit may have come first) or not the nursery's child
                if self._early_exits.pop(ident, None) is None:
                    self._abandoned.add(ident)
                raise
            if (code := self._early_exits.pop(ident, None)) is not None:
                child._set_exit(code)
            else:
                self._children[ident] = child
            return child

    def close(self) -> None:
        with self._lock:  # the reader, woken by the shutdown, then reads no log
            self.failed = self.failed or "the nursery was closed"
        with contextlib.suppress(OSError):  # shutdown, not only close: the reader's recv holds the socket open
            self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        self.proc.kill()  # it holds nothing to save, and a process that imported torch takes a second to exit
        self.proc.wait()
        self._log.close()


_nurseries: dict[tuple[tuple[str, str], ...], Nursery] = {}
_registry_lock = threading.Lock()
_timing = [False]  # a kernel is timed in this process now (workers.spares_paused)


def nursery_for(env: Mapping[str, str]) -> Nursery | None:
    """The nursery for workers with this environment (started now if there is none yet), or None where
    warm starts are switched off."""
    if os.environ.get(DISABLE) == "1":
        return None
    shared = {k: v for k, v in env.items() if k not in PER_WORKER}
    key = tuple(sorted(shared.items()))
    with _registry_lock:
        nursery = _nurseries.get(key)
        if nursery is None:  # one that failed stays failed: its workers start cold, without a new try each time
            nursery = _nurseries[key] = Nursery(shared)
            if _timing[0]:
                nursery.stop_while_importing()
        return nursery


def timing(now: bool) -> None:
    """A timing starts (True) or the last one ends: nurseries still importing stop, or go on."""
    with _registry_lock:
        _timing[0] = now
        for nursery in _nurseries.values():
            if now:
                nursery.stop_while_importing()
            else:
                nursery.go_on()


@atexit.register
def close_all() -> None:
    """Stop every nursery of this process (its workers live on, each until the host kills it)."""
    with _registry_lock:
        nurseries = list(_nurseries.values())
        _nurseries.clear()
    for nursery in nurseries:
        nursery.close()

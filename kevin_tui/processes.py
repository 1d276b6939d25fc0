"""Stopping a child and everything it started: SIGTERM to its process group, then SIGKILL."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from typing import Protocol


class Child(Protocol):
    """A started process as `subprocess.Popen` shows it (or a worker forked by the nursery)."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def describe_exit(returncode: int | None) -> str:
    """A child's exit status in words ("did not exit" for None)."""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_process_group(proc: Child, grace_s: float = 2.0) -> None:
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


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), None if gone:
    with the pid, it names a process even after the pid is reused."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None else None


def descendants(root: int) -> list[int]:
    """`root` and every process below it (by parent pid), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def cpu_seconds(root: int) -> float:
    """CPU time (user + system) used so far by `root` and its descendants, as /proc shows it."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in descendants(root):
        if (fields := _stat_fields(pid)) is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


STOPPED = (None, "T", "t", "Z", "X")  # states of a process that runs no more (None: gone)


def pause_tree(root: int, settle_s: float = 2.0) -> list[int]:
    """SIGSTOP `root` (a child of ours, not yet reaped) and every process below it; pidfds of those stopped,
    for `resume`. Each walk of /proc waits until what it stopped shows as stopped, then walks again: a
    stopped process forks no more, so the walk that finds nothing new has them all. A process that keeps
    forking faster than the walk could outrun it for a moment: for a spare (our own start-up) that costs a
    timing's quiet; for a candidate held while its outputs are read (`WorkerProcess.held`), work done in
    that moment is charged only as CPU time (README, "What remains open"). Never used to kill."""
    held: dict[int, int] = {}
    seen: set[int] = set()  # tried once each, held or not (gone, or not below root after all)
    while new := [pid for pid in descendants(root) if pid not in seen]:
        seen.update(new)
        for pid in new:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            fields = _stat_fields(pid)  # still below root (opened before it could be reaped and its pid reused)?
            if fields is None or (pid != root and int(fields[1]) not in held):
                os.close(fd)
                continue
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGSTOP)
            held[pid] = fd
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and any(process_state(pid) not in STOPPED for pid in new if pid in held):
            time.sleep(0.002)
    return list(held.values())


def process_state(pid: int) -> str | None:
    """The process's state letter in /proc/PID/stat (R, S, D, T stopped, Z ...), None if it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields is not None else None


def resume(pidfds: list[int]) -> None:
    """SIGCONT what `pause_tree` stopped, and close its pidfds."""
    for fd in pidfds:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(fd, signal.SIGCONT)
        os.close(fd)


def _namespace_pids(pid: int) -> list[str]:
    """The pid of `pid` in each PID namespace it belongs to, outermost first (NSpid of /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return line.split()[1:]
    except OSError:
        pass
    return []


def namespace_init(parent: int) -> int | None:
    """A pidfd for the child of `parent` that is the first process of a new PID namespace, or None.

    Killing that process makes the kernel kill every process in its namespace, which nothing inside can
    prevent; the pidfd keeps naming it even if its pid is reused."""
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as handle:
            children = [int(p) for p in handle.read().split()]
    except OSError:
        children = [pid for pid in descendants(parent) if (f := _stat_fields(pid)) is not None and int(f[1]) == parent]
    for child in children:
        if _namespace_pids(child)[-1:] != ["1"] or len(_namespace_pids(child)) < 2:
            continue
        try:
            fd = os.pidfd_open(child)
        except OSError:
            continue
        fields = _stat_fields(child)  # still the same process (opened before it could be reaped and reused)?
        if fields is not None and int(fields[1]) == parent and _namespace_pids(child)[-1:] == ["1"]:
            return fd
        os.close(fd)
    return None


def kill_namespace(pidfd: int, timeout_s: float = 5.0) -> bool:
    """SIGKILL the namespace's first process through its pidfd and wait until it has exited, which the
    kernel lets it do only once every other process of the namespace is gone. True if it did in time."""
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    readable, _, _ = select.select([pidfd], [], [], timeout_s)
    return bool(readable)

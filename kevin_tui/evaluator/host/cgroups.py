"""A cgroup per worker, where this machine lets us make one: a process cap and a memory cap.

The kernel exempts root from RLIMIT_NPROC, so a fork bomb run by root is stopped by `pids.max`; and
RLIMIT_DATA counts only a process's own heap, not what it writes to a tmpfs (/tmp, /dev/shm) or what
its children hold, so the memory of the whole sandbox is capped by the memory controller, which
charges tmpfs pages to the group that wrote them. Both work with cgroup v1 (one hierarchy per
controller, the group made under our own) and v2 (one group, where the root delegates the controller).
Where cgroups are not writable (an unprivileged user without delegation) the rlimits remain.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max")}  # v1, v2
ACCOUNTING = "cpuacct"  # v1's CPU-time counter; a v2 group counts in its own cpu.stat
FREEZER = "freezer"  # v1's hierarchy that stops a group at once; a v2 group has its own cgroup.freeze
FREEZE_FILES = {"freezer.state": ("FROZEN", "THAWED"), "cgroup.freeze": ("1", "0")}  # v1, v2


@dataclass(frozen=True)
class Parent:
    """Where one controller's groups are made, and whether it is cgroup v2."""

    path: Path
    v2: bool


def _own_path(controller: str) -> str | None:
    """Our own cgroup in a v1 `controller` hierarchy (from /proc/self/cgroup), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return None


def _writable(path: Path) -> bool:
    return (path / "cgroup.procs").exists() and os.access(path, os.W_OK)


def parent_for(controller: str) -> Parent | None:
    """Where a group with `controller` can be made here, or None."""
    v1 = CGROUP_ROOT / controller
    own = _own_path(controller)
    if own is not None and _writable(v1 / own.lstrip("/")):
        return Parent(v1 / own.lstrip("/"), v2=False)
    try:
        delegated = (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return Parent(CGROUP_ROOT, v2=True) if controller in delegated and _writable(CGROUP_ROOT) else None


class ResourceGroup:
    """The cgroups of one worker: caps its process count and its memory (tmpfs included), lets the host
    stop every process in it at once (the freezer), and kill them all."""

    def __init__(self, processes: int, memory: int) -> None:
        self.paths: list[Path] = []
        name = f"{_prefix()}{os.getpid()}-{secrets.token_hex(4)}"
        made: dict[Path, Path] = {}  # parent -> group (v2: one group holds both controllers)
        for controller, value in (("pids", processes), ("memory", memory)):
            parent = parent_for(controller)
            if parent is None:
                continue
            path = made.get(parent.path) or parent.path / name
            try:
                path.mkdir(exist_ok=True)
                (path / LIMIT_FILES[controller][parent.v2]).write_text(str(value))
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            made[parent.path] = path
        # CPU time of every process that ever ran in the group, and the file that freezes it: v1 hierarchies of
        # their own, else the v2 group's own files
        self.cpu_usage = _v1_group_file(made, name, ACCOUNTING, "cpuacct.usage")
        self.freezer = _v1_group_file(made, name, FREEZER, "freezer.state")
        self.paths = list(dict.fromkeys(made.values()))
        self.cpu_usage = self.cpu_usage or self._v2_file("cpu.stat")
        self.freezer = self.freezer or self._v2_file("cgroup.freeze")

    def _v2_file(self, filename: str) -> Path | None:
        return next((path / filename for path in self.paths if (path / filename).exists()), None)

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside the groups (the shell moves itself in, then becomes the command)."""
        if not self.paths:
            return command
        moves = " && ".join(f'echo $$ > "${index + 1}/cgroup.procs"' for index in range(len(self.paths)))
        count = len(self.paths)
        return ["sh", "-c", f'{moves} && shift {count} && exec "$@"', "sh", *map(str, self.paths), *command]

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) of every process that ran in the group so far, those that already
        exited included (a walk of /proc misses a short-lived process between two looks); None without."""
        if self.cpu_usage is None:
            return None
        try:
            text = self.cpu_usage.read_text()
        except OSError:
            return None
        if self.cpu_usage.name == "cpuacct.usage":
            return int(text) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None

    def freeze(self, settle_s: float = 2.0) -> bool:
        """Every process of the group stopped at once, whatever it forks or however it detached itself (a
        walk of the process tree can be outrun by a fork and misses a `setsid` daemon's reparenting); False
        where this machine has no freezer or it did not settle in time (the group is thawed again)."""
        if self.freezer is None:
            return False
        try:
            self.freezer.write_text(FREEZE_FILES[self.freezer.name][0])
        except OSError:
            return False
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            if self._frozen():
                return True
            time.sleep(0.0005)
        self.thaw()
        return False

    def _frozen(self) -> bool:
        assert self.freezer is not None
        try:
            if self.freezer.name == "freezer.state":
                return self.freezer.read_text().strip() == "FROZEN"
            return "frozen 1" in (self.freezer.parent / "cgroup.events").read_text().splitlines()
        except OSError:
            return False

    def thaw(self) -> None:
        if self.freezer is not None:
            thaw(self.freezer.parent)

    def out_of_memory(self) -> bool:
        """True if the memory controller had to kill a process of this group."""
        for path in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError):
                    for line in (path / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value) > 0:
                            return True
        return False

    def kill_all(self) -> None:
        for path in self.paths:
            kill_members(path)
        self.thaw()  # after the signals: a frozen process acts on them once thawed, and runs only to die
        for path in self.paths:
            empty(path)


def _v1_group_file(made: dict[Path, Path], name: str, controller: str, filename: str) -> Path | None:
    """`filename` of this worker's group in the v1 hierarchy `controller` (made, and added to `made`), or None."""
    parent = parent_for(controller)
    if parent is None or parent.v2:
        return None
    path = made.get(parent.path) or parent.path / name
    try:
        path.mkdir(exist_ok=True)
    except OSError:
        return None
    made[parent.path] = path
    return path / filename


def thaw(group: Path) -> None:
    """Let a frozen group run again (a frozen process acts on a SIGKILL only once thawed)."""
    for name, (_, thawed) in FREEZE_FILES.items():
        with contextlib.suppress(OSError):
            (group / name).write_text(thawed)


def kill_members(group: Path) -> bool:
    """SIGKILL every process in `group`; False when there is none (or no group)."""
    try:
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return False
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return bool(pids)


def empty(group: Path) -> None:
    """SIGKILL every process in `group` until none is left, then remove the group."""
    for _ in range(50):
        if not kill_members(group):
            break
        thaw(group)  # a frozen group's own processes (the freezer hierarchy): after the signals
        time.sleep(0.02)
    deadline = time.monotonic() + 5  # a killed process can hold its group a moment longer on a busy machine
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def _prefix() -> str:
    """kevin-tui-<our PID namespace>-: the owner's pid in a group's name means something only there."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"kevin-tui-{namespace}-"


def _owner_alive(group: Path) -> bool:
    """The kevin-tui process named in a group's name still runs (or cannot be told)."""
    try:
        os.kill(int(group.name.split("-")[3]), 0)
    except (IndexError, ValueError, PermissionError):
        return True
    except ProcessLookupError:
        return False
    return True


def sweep_orphans() -> None:
    """Kill what is left in the groups of a kevin-tui of this PID namespace that died without emptying them
    (SIGKILLed, say, with a sandbox whose first process a candidate kept alive), and remove those groups."""
    for controller in (FREEZER, *LIMIT_FILES, ACCOUNTING):  # thawed first: the others' processes die then
        parent = parent_for(controller)
        if parent is None:
            continue
        for path in parent.path.glob(f"{_prefix()}*"):
            if path.is_dir() and not _owner_alive(path):
                empty(path)

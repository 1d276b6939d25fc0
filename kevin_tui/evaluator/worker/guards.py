"""Tripwires inside the candidate worker, for the cheats that do not bother to hide.

A candidate runs in this process, so it could replace the functions that time or check it. We record
the identity of each such function before the candidate is imported and compare after every step,
and look for Python threads and child processes still alive after forward returns. A candidate that
has read this file can defeat all of it; that is why nothing the host decides rests on it (the host
checks outputs in the reference worker and timings against its own clock). It stays because it names
the plain cheats precisely, at no cost.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

WATCHED = (
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.synchronize", "torch.cuda.current_stream",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close",
    "torch.manual_seed", "torch.save", "torch.Tensor.clone", "torch.Tensor.cpu",
    "torch.Tensor.to", "torch.Tensor.detach", "torch.Tensor.__eq__", "torch.nn.Module.__call__",
    "json.dumps", "os.write", "builtins.isinstance", "builtins.type",
    # the worker's own checks and recorders: rebinding them is how a candidate would silence them
    "kevin_tui.evaluator.worker.candidate.aliases", "kevin_tui.evaluator.worker.candidate.snapshot",
    "kevin_tui.evaluator.worker.candidate.write_record", "kevin_tui.evaluator.worker.common.same",
    "kevin_tui.evaluator.worker.common.same_values", "kevin_tui.evaluator.worker.capture.aliases",
    "kevin_tui.evaluator.worker.capture.snapshot", "kevin_tui.evaluator.worker.timing_loop.aliases",
    "kevin_tui.evaluator.worker.timing_loop.Timer.round", "kevin_tui.evaluator.worker.timing_loop.Timer._call",
    "kevin_tui.evaluator.worker.tensorfile.write", "kevin_tui.evaluator.worker.inputs.TimedInputs.args",
    "kevin_tui.evaluator.worker.inputs.draw_on", "kevin_tui.evaluator.worker.guards.RoundWatch.check",
)  # fmt: skip


def _locate(dotted: str) -> tuple[Any, str]:
    """(the object holding the last attribute, that attribute's name) for a dotted path."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            holder = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            holder = getattr(holder, attr)
        return holder, parts[-1]
    raise ImportError(dotted)


def _current(holder: Any, attr: str) -> Any:
    if isinstance(holder, type):
        return holder.__dict__.get(attr)
    return getattr(holder, attr, None)


class IdentityGuard:
    """Remembers watched functions; `replaced()` names any that are no longer the same object.

    The holders are found once (imports are slow); each check is then a few attribute lookups, cheap
    enough to run inside a timing round."""

    def __init__(self) -> None:
        import torch

        self.watched = []
        for name in WATCHED:
            holder, attr = _locate(name)
            self.watched.append((name, holder, attr, _current(holder, attr)))
        self.disabled_code = torch._disable_dynamo(_locate).__code__  # the code of every such wrapper

    def replaced(self) -> list[str]:
        return [name for name, holder, attr, original in self.watched
                if (now := _current(holder, attr)) is not original and not self.rewrapped(now, original)]  # fmt: skip

    def rewrapped(self, now: Any, original: Any) -> bool:
        """`now` is torch._disable_dynamo's wrapper around exactly `original`, which calls it: what importing
        torch._dynamo does to torch.manual_seed (torch/_dynamo/__init__.py). Workers import dynamo only when
        their evaluation compiles, so an honest candidate's custom op, torch.compile or torch.compiler.disable
        does it."""
        if getattr(now, "__code__", None) is not self.disabled_code:
            return False
        cells = dict(zip(self.disabled_code.co_freevars, now.__closure__ or (), strict=False))
        return "fn" in cells and cells["fn"].cell_contents is original


def child_pids() -> set[int]:
    pids: set[int] = set()
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            pids.update(int(p) for p in task.read_text().split())
        except OSError:
            continue
    return pids


BUSY_WINDOW_S = 0.02
BUSY_CPU_S = 0.005


def busy(threads: list[threading.Thread]) -> list[threading.Thread]:
    """The threads that use the CPU over a short window (an idle pool waiting for work does not)."""
    clocks = []
    for thread in threads:
        if thread.ident is None:  # not started
            continue
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            clocks.append((thread, clock, time.clock_gettime(clock)))
        except (OSError, AttributeError):
            continue
    if not clocks:
        return []
    time.sleep(BUSY_WINDOW_S)
    found = []
    for thread, clock, before in clocks:
        try:
            if time.clock_gettime(clock) - before > BUSY_CPU_S:
                found.append(thread)
        except OSError:
            continue  # it ended meanwhile
    return found


class LeftoverGuard:
    """Python threads still working, and child processes still alive, after a forward call returned.

    A thread started during forward that sits idle afterwards (a persistent pool) is fine."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        self.children = child_pids()

    def leftovers(self) -> list[str]:
        new = [t for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        found = [f"thread {t.name!r}" for t in busy(new)]
        found += [f"child process {pid}" for pid in sorted(child_pids() - self.children)]
        return found


class RoundWatch:
    """The tripwires of a timing round, checked at its end inside the host's window, by both workers alike (the
    reference's findings are not used: it runs them so both windows hold the same steps). Checked after the reply,
    they were the candidate's alone and still charged to it (~0.9 ms a round here): the host freezes the candidate
    on the reply, so they ran on in its next window or in the CPU time charged up to the freeze."""

    def __init__(self, identity: IdentityGuard) -> None:
        self.identity = identity
        self.before = LeftoverGuard()

    def check(self) -> tuple[list[str], list[str]]:
        """(watched functions replaced, threads and processes left working since the last check); the snapshot
        for the next round is taken at once."""
        found = self.identity.replaced(), self.before.leftovers()
        self.before = LeftoverGuard()
        return found


def _last_pid() -> int | None:
    """The last id (of a thread or a process) allocated in this PID namespace, where it is the sandbox's own (this
    worker's parent is its first process): any task started there since moves it."""
    if os.getppid() != 1:
        return None
    try:
        return int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except (OSError, ValueError):
        return None


def _other_processes() -> set[int]:
    """Every process but this one and its sandbox's first process (the supervisor), where the namespace is the
    sandbox's own: a child, or a `setsid` daemon reparented to the supervisor."""
    if os.getppid() != 1:
        return child_pids()
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()} - {1, os.getpid()}


def _python_threads() -> set[tuple[int, int | None]]:
    """Every Python thread as its ident and, where threading knows it, its kernel id: an ident is an address, which a
    thread started after another ended takes at once (a thread the worker had when the snapshot was taken, gone since,
    hid the candidate's pool thread that took its ident); the kernel's ids are not reused so soon."""
    native = {thread.ident: thread.native_id for thread in threading.enumerate()}
    return {(ident, native.get(ident)) for ident in sys._current_frames()}


def _executable_files() -> set[str]:
    """The files this process has mapped executable, as /proc/self/maps names them (a deleted file or a memfd with
    its ` (deleted)`)."""
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return set()
    found = set()
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and not fields[5].startswith("["):
            found.add(fields[5])
    return found


def _on_a_writable_file_system(name: str) -> bool:
    """Whether a mapped file could have been made in the sandbox: one on a file system mounted writable (its
    scratch, /tmp, /dev/shm), deleted, a memfd, or one that cannot be looked at. The sandbox's system directories and
    the copies of the host's builds are mounted read-only."""
    if not name.startswith("/") or name.endswith(" (deleted)"):
        return True
    try:
        return not os.statvfs(name).f_flag & os.ST_RDONLY
    except OSError:
        return True


# torch.compile's and Triton's own caches in the candidate's sandbox (host/sandbox.py): a library mapped from one of
# them while the worker ran torch.compile is the compiler's; Triton's launchers are excepted only on a GPU, where
# Triton can run (with Triton merely imported, a library the candidate built in /tmp/triton passed on the CPU).
COMPILER_CACHES = ("/tmp/inductor/", "/tmp/triton/")
TRITON_CACHE = "/tmp/triton/"


class Elsewhere:
    """Where PyTorch could run beside a forward call unseen by the op count, a dispatch mode that sees only the
    thread it is entered on: Python threads of the candidate's (a pool started at import), other processes, and any
    thread or process started during the counted call (seen in the PID namespace's last id, so a thread started and
    joined inside forward shows too); and code the host never built nor read (`unbuilt_libraries`). Made before the
    candidate is imported: the worker's own threads, processes and libraries are known."""

    def __init__(self, built: Callable[[], set[str]] = set) -> None:
        """`built`: the paths of the libraries the host built for the candidate, as they were loaded."""
        self.threads = _python_threads()
        self.processes = _other_processes()
        self.libraries = _executable_files()
        self.built = built
        self.compilers: set[str] = set()  # libraries torch.compile mapped from its caches while the worker ran it

    def compiling(self, call: Callable[[], T]) -> T:
        """`call()`, a step in which the worker runs torch.compile: the libraries it maps from the compilers'
        caches meanwhile are theirs."""
        before = _executable_files()
        try:
            return call()
        finally:
            self.compilers |= {n for n in _executable_files() - before if n.startswith(COMPILER_CACHES)}

    def unbuilt_libraries(self, triton_runs: bool = False) -> list[str]:
        """Libraries mapped executable since the candidate was imported that neither the host built nor the
        sandbox's read-only system holds: a library the candidate compiled itself (a fresh copy of
        torch.utils.cpp_extension exec'd from its file builds past the worker's load_inline) or wrote from its own
        bytes. Its source was never read by the host's scans nor its symbols by `nm`, and what it calls past the
        dispatcher (`at::cpu::clamp_min`: PyTorch's own kernel) no op count sees: under --strict that ReLU was
        `correct`. Only in a sandbox (the worker's parent is its first process): without one, every file system is
        writable. `triton_runs`: Triton can run here (a GPU), so its launchers in its cache are its own."""
        if os.getppid() != 1:
            return []
        built = {os.path.realpath(p) for p in self.built()}
        exempt = (TRITON_CACHE,) if triton_runs and "triton" in sys.modules else ()
        found = []
        for name in sorted(_executable_files() - self.libraries - self.compilers):
            if os.path.realpath(name) in built or name.startswith(exempt) or not _on_a_writable_file_system(name):
                continue
            found.append(name)
        return found

    def around(self, call: Callable[[], T], triton_runs: bool = False) -> tuple[T, list[str]]:
        """`call()`, and what of the candidate's could have run PyTorch beside it or unseen inside it."""
        before = _last_pid()
        result = call()
        found = []
        if before is not None and _last_pid() != before:
            found.append("a thread or process was started during the counted call")
        here = threading.get_ident()
        if threads := {t for t in _python_threads() - self.threads if t[0] != here}:
            found.append(f"{len(threads)} Python thread(s) of the candidate's alive")
        if processes := _other_processes() - self.processes:
            found.append(f"{len(processes)} other process(es) alive beside the worker")
        if libraries := self.unbuilt_libraries(triton_runs):
            found.append(f"{len(libraries)} library(ies) the host never built run in the worker: "
                         f"{', '.join(n[-120:] for n in libraries[:3])}")  # fmt: skip
        return result, found

"""Worker processes as the host sees them: started in a sandbox, spoken to over two pipes, killed whole.

Generated code runs only in these processes. Whatever it does (segfault, os._exit, an endless loop,
children of its own, garbage on the event pipe), the host gets a validated event, a `WorkerGone`, a
`WorkerTimeout` or a `ProtocolViolation`, and `kill()` takes everything the worker started down: in a
sandbox, by killing the first process of its PID namespace through a pidfd the host opened before
any candidate code ran, which nothing inside can undo.
Each event is stamped with the host's clock when it arrives, which is what timing checks rely on.
A spare (a worker started ahead of its candidate, which has run nothing but our own start-up) is paused
while a kernel is timed in this process (`spares_paused`), so its import never competes with a timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui.evaluator.host import nursery as nurseries
from kevin_tui.evaluator.host.cgroups import ResourceGroup
from kevin_tui.evaluator.host.nursery import Nursery, Spawned, nursery_for
from kevin_tui.evaluator.host.sandbox import Bind, Limits, Sandbox, package_root, seccomp_memfd, system_binds
from kevin_tui.evaluator.host.scratch import disk_usage, open_log, read_plain, remove_tree
from kevin_tui.evaluator.protocol import MAX_EVENT_BYTES, ProtocolViolation, encode, parse_event
from kevin_tui.processes import (
    cpu_seconds,
    describe_exit,
    kill_namespace,
    kill_process_group,
    namespace_init,
    pause_tree,
    resume,
)

EXIT_GRACE_S = 5.0  # for a worker asked to exit, before it is killed
SCRATCH_POLL_S = 0.2  # how often a watched worker's scratch is measured
MAX_SCRATCH_ENTRIES = 20_000
MAX_QUEUED_EVENTS = 10_000
# The bytes of the events read and not yet taken: each may be 1 MB (MAX_EVENT_BYTES), and a candidate's thread writing
# valid ones while the host waited on its build or the judge queued up to 10,000 of them, 10 GB of the host's memory.
MAX_QUEUED_BYTES = 64 << 20
_live: set[WorkerProcess] = set()  # started and not yet killed: what kill_workers_under can reach
_live_lock = threading.Lock()
_spares: set[WorkerProcess] = set()  # held as spares, not yet claimed: what spares_paused pauses
_spare_lock = threading.Lock()
_timings = [0]  # how many timings run now, under _spare_lock


class WorkerGone(Exception):
    """The worker exited or was killed before answering."""

    def __init__(self, returncode: int | None, message: str) -> None:
        super().__init__(message)
        self.returncode = returncode


class WorkerTimeout(Exception):
    pass


@dataclass
class Arrived:
    """An event and the host's clock (time.perf_counter) when its line was read."""

    event: dict[str, Any]
    at: float
    size: int = 0  # the bytes of its line, held by the host until it is taken


class Queued:
    """The bytes of a worker's events read and not yet taken (its reader adds, the host's taking subtracts)."""

    def __init__(self) -> None:
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, size: int) -> bool:
        """Count `size` more (fewer, when negative); False when that is more than MAX_QUEUED_BYTES."""
        with self._lock:
            self.bytes += size
            return self.bytes <= MAX_QUEUED_BYTES


class WorkerProcess:
    """One worker: JSON commands on one pipe, validated JSON events on another, the rest in a log."""

    def __init__(
        self,
        role: str,
        scratch: Path,
        env: dict[str, str],
        sandbox: Sandbox,
        binds: list[Bind],
        limits: Limits,
        prefix: Sequence[str] = (),
    ) -> None:
        """`prefix`: a tool the worker runs under, inside the sandbox (Nsight Compute)."""
        self.role = role
        self.wrapped = sandbox.kind != "off"  # bwrap and unshare report a signal as exit code 128 + signal
        self.log_path = scratch / f"{role}.log"
        self.scratch = scratch
        self.over_scratch = ""  # why the host killed it for what it wrote into its scratch ("" if it did not)
        scratch.mkdir(parents=True, exist_ok=True)
        fds = self._new_pipes()
        # -P: the working directory (the worker's scratch) is never on the import path, so nothing written
        # there can stand in for a module the worker imports.
        if prefix and sandbox.kind == "unshare":  # the tool must run in the jail the worker sees (worker/launch.py)
            prefix = [sys.executable, "-P", "-m", "kevin_tui.evaluator.worker.launch", *prefix]
        main = [*prefix, sys.executable, "-P", "-m", "kevin_tui.evaluator.worker.main", role]
        env = {**env, "PYTHONPATH": str(package_root()), "KEVIN_WORKER_LIMITS": json.dumps(limits.as_dict())}
        all_binds = [*system_binds(), *binds, Bind(str(scratch), writable=True)]
        jail_root = scratch / ".jail-root"
        if spec := sandbox.jail_spec(all_binds, str(scratch), str(jail_root)):
            jail_root.mkdir(exist_ok=True)
            env["KEVIN_WORKER_JAIL"] = json.dumps(spec)
        self._teardown_lock = threading.Lock()
        self._killed = False
        self._teardown: list[threading.Thread] = []
        self._paused: list[int] = []  # pidfds of its processes while a timing has it stopped (a spare only)
        self.group = ResourceGroup(limits.processes, limits.memory)
        filter_fd = seccomp_memfd() if sandbox.kind == "bwrap" else None
        passed = fds if filter_fd is None else (*fds, filter_fd)
        # the scratch may be one a candidate wrote before (a tool's run after its own): never follow its log
        log = open_log(self.log_path)
        try:
            nursery = nursery_for(env) if sandbox.kind == "unshare" and not prefix else None
            warm = self._warm(nursery, env, (*fds, log)) if nursery else None
            if nursery and warm is None:  # a fork the nursery made too late may hold those pipes: new ones
                for fd in (*fds, self._command_write, self._event_read, self._lifeline):
                    os.close(fd)
                passed = fds = self._new_pipes()  # (a filter is bwrap's, and bwrap is never warm)
            argv = [*main, *map(str, fds)]
            self.proc: subprocess.Popen[bytes] | Spawned = warm or subprocess.Popen(
                self.group.wrap(sandbox.command(argv, all_binds, str(scratch), filter_fd)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=scratch,
                env=env,
                pass_fds=passed,
                start_new_session=True,
            )
        finally:
            for fd in (*passed, log):
                os.close(fd)
        self._init_pidfd = -1  # the sandbox's first process, found before any command is sent (-2: none, or gone)
        self._commands = os.fdopen(self._command_write, "wb", buffering=0)
        with _live_lock:
            _live.add(self)
        self.events: queue.Queue[Arrived | ProtocolViolation | EOFError] = queue.Queue(MAX_QUEUED_EVENTS)
        self._queued = Queued()
        self.started = threading.Event()
        threading.Thread(target=self._read, name=f"kevin-{role}-reader", daemon=True).start()

    def _new_pipes(self) -> tuple[int, int, int]:
        """The worker's ends of its command, event and lifeline pipes; the host keeps the others."""
        command_read, self._command_write = os.pipe()
        self._event_read, event_write = os.pipe()
        lifeline_read, self._lifeline = os.pipe()  # never written: the worker sees EOF when the host dies
        return command_read, event_write, lifeline_read

    def _warm(self, nursery: Nursery, env: dict[str, str], fds: tuple[int, ...]) -> Spawned | None:
        """The worker forked from the nursery (host/nursery.py), or None to start it cold: the same sandbox,
        made by the same jail, without a fresh `import torch`. `fds`: its pipes, then its log."""
        try:
            return nursery.spawn(self.role, env, str(self.scratch), self.group.paths, fds)
        except OSError as exc:
            with contextlib.suppress(OSError):  # into the log already opened without following a link
                os.write(fds[-1], f"kevin-tui: started cold ({exc})\n".encode())
            return None

    def hold_as_spare(self) -> None:
        """Mark a worker that has run only our own start-up as a spare: paused (SIGSTOP) while any kernel is
        timed in this process, now too if one is, until `claim()`."""
        with _spare_lock:
            _spares.add(self)
            if _timings[0]:
                self._pause()

    def claim(self) -> None:
        """The spare goes to its one candidate: never paused again, resumed if it is now."""
        with _spare_lock:
            _spares.discard(self)
            self._resume()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The worker and every process it started stopped (its cgroup frozen, else SIGSTOP to its process
        tree, from outside) while the host reads what it handed over: a file it still holds (an open
        descriptor, a mapping, a lease) cannot change under the reader, and no work it does after its reply
        can land there untimed."""
        if self.alive() and self.group.freeze():
            try:
                yield
            finally:
                self.group.thaw()
            return
        stopped = pause_tree(self.proc.pid) if self.alive() else []
        try:
            yield
        finally:
            resume(stopped)

    def _pause(self) -> None:
        """Under _spare_lock. A spare that has finished starting waits idle on its pipe: nothing to pause."""
        if self._killed or self._paused or self.started.is_set() or self.proc.returncode is not None:
            return
        self._paused = pause_tree(self.proc.pid)

    def _resume(self) -> None:
        """Under _spare_lock."""
        paused, self._paused = self._paused, []
        resume(paused)

    def watch_scratch(self, limit: int, directory: Path | None = None) -> None:
        """Kill the worker once its scratch holds more than `limit` bytes or `MAX_SCRATCH_ENTRIES` entries, and
        empty it but for its log: the scratch lies on the host's disk, which nothing else bounds (the file-size
        limit is per file). Measured from outside every `SCRATCH_POLL_S`, so it overshoots by at most what the
        worker writes in that time. `directory`: another one of the worker's to watch instead (a builder's build
        directory, which its caller removes), left as it is when it goes over."""
        root = directory or self.scratch
        where = "its scratch directory" if directory is None else "its build directory"

        def watch() -> None:
            while not self._killed:
                try:
                    used = disk_usage(root, MAX_SCRATCH_ENTRIES)
                except OSError:  # the host's own shortage (descriptors, memory): measured again, nobody's verdict
                    time.sleep(SCRATCH_POLL_S)
                    continue
                if used is not None and used <= limit:
                    time.sleep(SCRATCH_POLL_S)
                    continue
                size = (f"more than {MAX_SCRATCH_ENTRIES} entries or directories nested too deep to measure"
                        if used is None else f"{used / 2**20:.0f} MB")  # fmt: skip
                self.over_scratch = f"it wrote {size} into {where} (at most {limit / 2**20:.0f} MB)"
                self.kill()
                if directory is None:
                    self.empty_scratch()
                return

        threading.Thread(target=watch, name=f"kevin-{self.role}-scratch", daemon=True).start()

    def empty_scratch(self) -> None:
        """Once the killed worker is gone, remove everything in its scratch but its log, on a thread: what a
        candidate wrote there is no longer needed, and an evaluator (a batch) lives for many candidates."""
        started = list(self._teardown)

        def empty() -> None:
            for thread in started:
                thread.join(30)
            with contextlib.suppress(OSError):
                for entry in list(self.scratch.iterdir()):
                    if entry.name == self.log_path.name:
                        continue
                    remove_tree(entry)

        self._in_background(empty)

    def _read(self) -> None:
        with os.fdopen(self._event_read, "rb") as stream:
            while True:
                line = stream.readline(MAX_EVENT_BYTES + 1)
                at = time.perf_counter()
                if not line:
                    break
                try:
                    event = parse_event(self.role, line.rstrip(b"\n"))
                    if event["event"] == "started" and not self.started.is_set():
                        self.started.set()
                        continue
                    if not self._queued.add(len(line)):
                        raise ProtocolViolation(f"more than {MAX_QUEUED_BYTES >> 20} MB of events the host had not "
                                                "asked for yet")  # fmt: skip
                    self.events.put(Arrived(event, at, len(line)), timeout=5)
                except ProtocolViolation as exc:
                    self._put_last(exc)
                    return
                except queue.Full:
                    self._put_last(ProtocolViolation("more events than the host will queue"))
                    return
                except Exception as exc:  # never a dead reader the host waits on until its deadline
                    self._put_last(ProtocolViolation(f"an event the host could not read ({type(exc).__name__})"))
                    return
        self.started.set()
        self._put_last(EOFError())

    def _put_last(self, item: ProtocolViolation | EOFError) -> None:
        with contextlib.suppress(queue.Full):
            self.events.put(item, timeout=5)

    def _hold_namespace(self, wait_s: float) -> None:
        """Open a pidfd for the sandbox's first process, waiting up to `wait_s` for it to be made. Done before
        the first command goes out, so before any candidate code runs: the host's kill then depends on
        nothing the candidate can reach (a process group it can leave, a death signal it can clear, a
        cgroup, the lifeline)."""
        if not self.wrapped or self._init_pidfd != -1:
            return
        deadline = time.monotonic() + wait_s
        while (fd := namespace_init(self.proc.pid)) is None and self.alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        self._init_pidfd = -2 if fd is None else fd

    @property
    def holds_namespace(self) -> bool:
        """True while the host holds a pidfd for this sandbox's first process (its kill needs nothing else)."""
        return self._init_pidfd >= 0

    def send(self, message: dict[str, Any]) -> float:
        """Send one command; the host's clock just before it went out."""
        self._hold_namespace(10.0)
        at = time.perf_counter()
        with contextlib.suppress(ValueError, OSError):  # it died; the next event() reports how
            self._commands.write(encode(message))
        return at

    def arrival(self, timeout: float) -> Arrived:
        """The next event with its arrival time, or WorkerTimeout / WorkerGone / ProtocolViolation."""
        try:
            item = self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise WorkerTimeout(f"no answer within {timeout:.0f} s") from None
        if isinstance(item, ProtocolViolation):
            self._put_last(item)
            raise item
        if isinstance(item, EOFError):
            self._put_last(item)
            code = self.returncode()
            raise WorkerGone(code, f"the worker {describe_exit(code)}")
        self._queued.add(-item.size)
        return item

    def wait_started(self, timeout: float) -> None:
        """Wait until the worker has imported what it needs (torch): that time is nobody's fault."""
        deadline = time.monotonic() + timeout
        while not self.started.wait(0.1):
            if not self.alive() or time.monotonic() > deadline:
                return  # the next event() says what happened

    def returncode(self) -> int | None:
        """The worker's exit status, as Popen reports it (negative: killed by that signal)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if self.wrapped and 128 < code < 128 + 65:
            return -(code - 128)
        return code

    def event(self, timeout: float) -> dict[str, Any]:
        return self.arrival(timeout).event

    def cpu_seconds(self) -> float:
        """CPU time used so far by the worker and everything it started (inside its sandbox): the cgroup's
        count where there is one (it keeps the time of processes that already exited), else /proc's."""
        counted = self.group.cpu_seconds()
        return counted if counted is not None else cpu_seconds(self.proc.pid)

    def log_tail(self, chars: int = 4000) -> str:
        return read_plain(self.log_path, chars, tail=True).decode(errors="replace")  # a link there is not followed

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the sandbox's first process by pidfd (the kernel then kills every process of its PID
        namespace, whatever they did to escape the other ways) and the whole process group now (the only way
        without a sandbox; nothing in it needs a chance to clean up, and the reference is asked to exit by
        close()); making sure it is gone (the namespace empty, its cgroups swept, the worker reaped) happens
        on a thread, so the caller goes on at once: `reaped()` waits for it. A second kill does nothing."""
        with _live_lock:
            _live.discard(self)
        with self._teardown_lock:
            if self._killed:
                return
            self._killed = True
            self._hold_namespace(0.0)
            if self._init_pidfd >= 0:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self._init_pidfd, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.group.thaw()  # frozen (held), the processes would act on the signal only once thawed
            with contextlib.suppress(OSError):  # unsent bytes to a dead process: nothing to save
                self._commands.close()
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
            with _spare_lock:  # a stopped process dies of SIGKILL all the same: its pidfds are only closed
                _spares.discard(self)
                for fd in self._paused:
                    os.close(fd)
                self._paused = []
            self._in_background(self._reap)

    def _reap(self) -> None:
        if self._init_pidfd >= 0:
            kill_namespace(self._init_pidfd)  # returns once the namespace is empty
            os.close(self._init_pidfd)
            self._init_pidfd = -2  # killed: never looked for again
        kill_process_group(self.proc, 0.0)
        if isinstance(self.proc, Spawned):
            self.proc.close()
        self.group.kill_all()

    def close(self) -> None:
        """Ask politely, then make sure: the worker has a few seconds to exit before kill(), on a thread."""
        self.send({"cmd": "exit"})

        def exit_then_kill() -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=EXIT_GRACE_S)
            self.kill()

        self._in_background(exit_then_kill)

    def _in_background(self, work: Callable[[], None]) -> None:
        # not a daemon: an exiting host still waits for its workers to be gone
        thread = threading.Thread(target=work, name=f"kevin-{self.role}-teardown")
        self._teardown.append(thread)
        thread.start()

    def reaped(self, timeout: float | None = None) -> bool:
        """Wait until kill() (or close()) has taken every process of the worker down; True once it has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._teardown):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._killed and not any(t.is_alive() for t in self._teardown)


@contextlib.contextmanager
def spares_paused() -> Iterator[None]:
    """While a kernel is timed: every spare still starting is stopped, and resumed once no timing runs (on
    2 cores its torch import would take a core from the timing), and so is a nursery still importing. Nests,
    and spans every evaluator here."""
    with _spare_lock:
        _timings[0] += 1
        if _timings[0] == 1:
            nurseries.timing(True)
            for spare in _spares:
                spare._pause()
    try:
        yield
    finally:
        with _spare_lock:
            _timings[0] -= 1
            if not _timings[0]:
                nurseries.timing(False)
                for spare in _spares:
                    spare._resume()


def kill_workers_under(root: Path) -> None:
    """Kill every live worker whose scratch is under `root`, whichever thread is waiting on it: an
    evaluator closing mid-build (the user quit) ends its builds now instead of waiting them out; the
    waiting thread gets WorkerGone."""
    with _live_lock:
        doomed = [w for w in _live if w.log_path.is_relative_to(root)]
    for worker in doomed:
        worker.kill()

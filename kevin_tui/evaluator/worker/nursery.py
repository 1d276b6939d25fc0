"""`python -P -m kevin_tui.evaluator.worker.nursery`: a process that has imported torch and every worker role
once, and forks each new worker from that state, so a worker is ready in a few hundredths of a second
instead of the ~3 CPU-seconds of `import torch` (most of the test suite's CPU, and seconds of every turn).

It runs only our own code, with the workers' allow-listed environment, and never runs a worker's commands:
it hears only spawn requests from the host (its socket, SEQPACKET, the worker's pipes and log passed as
descriptors) and answers with the new process's pid and, later, its exit status. Each fork then does what
the `unshare` tool does for a cold worker — its own session, its cgroups, new user, PID, mount, network,
IPC and UTS namespaces, uid 0 mapped to the host user — and becomes the first process of its PID namespace,
where `worker/main.py` enters the jail (mounts, locks, filter) before any candidate code runs, exactly as a
cold worker does. The nursery runs no Python thread (a fork could inherit a lock such a thread held); the
one native thread `import torch` leaves (numpy's OpenBLAS server) is shut down by OpenBLAS's own fork
handler, and a fork has a single thread, as entering a new user namespace requires.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import Any, NoReturn

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
PR_SET_PDEATHSIG = 1
MAX_REQUEST_BYTES = 1 << 20
FDS_PER_WORKER = 4  # its command pipe, event pipe, lifeline, and log (stdout and stderr)


def prepare() -> None:
    """What every worker imports before its first command, imported once here (worker/main.py's list)."""
    from kevin_tui.evaluator.worker.allocator import steady

    steady()  # before torch allocates anything: every worker forked from here has this heap policy
    from kevin_tui.evaluator.protocol import WITH_DYNAMO

    if os.environ.get(WITH_DYNAMO):
        import torch._dynamo  # noqa: F401
    import kevin_tui.evaluator.worker.builder
    import kevin_tui.evaluator.worker.candidate
    import kevin_tui.evaluator.worker.main
    import kevin_tui.evaluator.worker.reference  # noqa: F401


def serve(sock: socket.socket) -> None:
    """Answer spawn requests until the host closes its end; report each child's exit as it happens."""
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}  # pid: the host's id of its spawn request
    while True:
        ready: list[int] = []
        with contextlib.suppress(InterruptedError):
            ready, _, _ = select.select([sock.fileno(), woken], [], [])
        if woken in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(woken, 512)
        _report_exits(sock, children)
        if sock.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST_BYTES, FDS_PER_WORKER)
        except InterruptedError:
            continue
        if not data:
            return  # the host is gone: the children live on, each watching its own lifeline
        request = json.loads(data)
        if len(fds) != FDS_PER_WORKER or threading.active_count() != 1:
            why = "a Python thread in the nursery" if len(fds) == FDS_PER_WORKER else "descriptors missing"
            _send(sock, {"refused": request["id"], "why": why})
        else:
            pid = os.fork()
            if pid == 0:
                _become_worker(request, fds, sock, (woken, wake))
            children[pid] = request["id"]
            _send(sock, {"spawned": request["id"], "pid": pid})
        for fd in fds:
            os.close(fd)


def _report_exits(sock: socket.socket, children: dict[int, int]) -> None:
    """Each exit under the id of the request that made the child, which no later child shares (a pid can be)."""
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            _send(sock, {"exited": children.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the host is gone: nothing to tell
        sock.send(json.dumps(message).encode())


def _become_worker(request: dict[str, Any], fds: list[int], sock: socket.socket, wakeup: tuple[int, int]) -> NoReturn:
    """In the fork: the cold path's `sh` (cgroups), `unshare` and `python -m worker.main`, in that order."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        commands, events, lifeline, log = fds
        os.dup2(log, 1)
        os.dup2(log, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        keep = {0, 1, 2, commands, events, lifeline}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        os.setsid()
        for group in request["cgroups"]:
            with open(os.path.join(group, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _enter_namespaces()
        worker = os.fork()
        if worker == 0:
            _run_worker(request["role"], (commands, events, lifeline))
        for fd in (commands, events, lifeline):
            os.close(fd)  # the host must see the worker's pipes close when it exits, not when this does
        _exit_as(worker)
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            print(f"kevin-tui nursery: could not start the worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(127)


def _enter_namespaces() -> None:
    """`unshare --user --map-root-user --pid --mount --net --ipc --uts`: uid and gid 0 inside map to ours."""
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(NAMESPACES) != 0:
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                       ("/proc/self/gid_map", f"0 {gid} 1")):  # fmt: skip
        with open(path, "w") as handle:
            handle.write(text)


def _run_worker(role: str, fds: tuple[int, int, int]) -> NoReturn:
    """The first process of the new PID namespace: worker/main.py from here on (jail, supervisor, role)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)  # `unshare --kill-child`
    import random

    random.seed()  # not the nursery's state, shared by every fork of it
    if numpy := sys.modules.get("numpy"):
        numpy.random.seed()
    from kevin_tui.evaluator.worker.main import main

    sys.argv = ["kevin_tui.evaluator.worker.main", role, *map(str, fds)]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # what a cold worker's interpreter would print before exiting (a jail that failed)
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _exit_as(worker: int) -> NoReturn:
    """Wait for the worker and exit as `unshare --fork` does: its code, or 128 + the signal that killed it."""
    while True:
        try:
            _, status = os.waitpid(worker, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def main() -> None:
    prepare()
    sock = socket.socket(fileno=int(sys.argv[1]))
    import torch

    if threading.active_count() != 1 or torch.cuda.is_initialized():  # CUDA cannot be used again in a fork
        why = "CUDA initialised" if torch.cuda.is_initialized() else "a Python thread"
        _send(sock, {"failed": f"{why} while importing the workers' modules; workers start cold"})
        return
    _send(sock, {"ready": os.getpid()})
    serve(sock)


if __name__ == "__main__":
    main()

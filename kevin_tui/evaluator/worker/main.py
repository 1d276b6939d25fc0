"""Entry point of every worker: `python -m kevin_tui.evaluator.worker.main ROLE CMD_FD EVENT_FD LIFELINE_FD`.

Before anything else it enters the jail (when the sandbox is the `unshare` fallback: mounts, locks,
filter), leaves a supervisor behind as the namespace's first process (worker/supervisor.py), applies
the resource limits, sets the C allocator as every worker has it (worker/allocator.py) and starts
watching its lifeline, a pipe only the host holds open: when the host dies, even by SIGKILL, the worker
takes its whole process group down. That is a courtesy: in a sandbox, the host's kill and the host's
death reach the namespace's first process, which candidate code never runs in. Then it reads its first
command and runs its role. Whatever happens, it reports an event rather than dying silently.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading

from kevin_tui.evaluator.worker.allocator import steady as steady_allocator

LIMITS = {"memory": resource.RLIMIT_DATA, "processes": resource.RLIMIT_NPROC,
          "files": resource.RLIMIT_NOFILE, "file_size": resource.RLIMIT_FSIZE}  # fmt: skip


def apply_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        kind = LIMITS[name]
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


def watch_lifeline(fd: int) -> None:
    def watch() -> None:
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="kevin-lifeline", daemon=True).start()


def main() -> None:
    role, command_fd, event_fd, lifeline_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if jail := os.environ.pop("KEVIN_WORKER_JAIL", None):
        from kevin_tui.evaluator.worker.jail import enter

        enter(json.loads(jail))
    if os.getpid() == 1:  # the first process of the sandbox's PID namespace: leave it to a supervisor
        from kevin_tui.evaluator.worker.supervisor import leave_supervisor

        leave_supervisor(lifeline_fd)
    apply_limits(json.loads(os.environ.pop("KEVIN_WORKER_LIMITS", "{}")))
    steady_allocator()  # before torch allocates anything: the same heap behaviour in every worker
    watch_lifeline(lifeline_fd)
    from kevin_tui.evaluator.protocol import WITH_DYNAMO
    from kevin_tui.evaluator.worker.channel import Channel

    channel = Channel(command_fd, event_fd)
    try:
        if os.environ.pop(WITH_DYNAMO, ""):  # its evaluation compiles: import it now, not in a timed phase
            import torch._dynamo  # noqa: F401
        # Import torch before the first command arrives, so a spare worker is ready when it does.
        if role == "reference":
            from kevin_tui.evaluator.worker.reference import run_reference as run
        elif role == "builder":
            from kevin_tui.evaluator.worker.builder import run_builder as run
        else:
            from kevin_tui.evaluator.worker.candidate import run_candidate as run
        channel.emit("started")
        request = channel.next_command()
        if request["cmd"] != "exit":
            run(request, channel)
    except SystemExit:
        raise
    except BaseException as exc:  # report, never die silently
        from kevin_tui.evaluator.worker.common import EnvironmentProblem, short_traceback

        if isinstance(exc, EnvironmentProblem):
            channel.emit("environment_error", message=str(exc))
        else:
            channel.emit("crash", message=f"{type(exc).__name__}: {exc}"[:2000], traceback=short_traceback(exc))
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()

"""`python -m kevin_tui.evaluator.worker.launch TOOL ARGS... WORKER...`: in the `unshare` sandbox, enter
the jail first and then run a profiling tool (Nsight Compute, compute-sanitizer) in it, so that the tool
and the worker it starts share one view of the file system (its /tmp, /dev/shm) and a working loopback.

bubblewrap gives both by itself (the tool is simply the first word of the sandboxed command, and it
brings loopback up in its network namespace). Without this launcher the unshare fallback would run the
tool outside the jail the worker builds for itself, and loopback would stay down, which is where
Nsight Compute's front end and the process it profiles talk to each other. Loopback in a network
namespace of its own reaches nothing outside it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import sys

SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP, IFF_RUNNING = 0x1, 0x40
IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags in the union (40 bytes in all)


def loopback_up() -> None:
    """Bring `lo` up in this (new, empty) network namespace: the root of its user namespace may."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(IFREQ, b"lo", 0)
        _, flags = struct.unpack(IFREQ, fcntl.ioctl(sock, SIOCGIFFLAGS, request))
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP | IFF_RUNNING))


def main() -> None:
    argv = sys.argv[1:]
    if not argv:
        raise SystemExit("usage: python -m kevin_tui.evaluator.worker.launch TOOL [ARGS...]")
    loopback_up()
    if jail := os.environ.pop("KEVIN_WORKER_JAIL", None):  # popped: the worker must not enter it again
        from kevin_tui.evaluator.worker.jail import enter

        enter(json.loads(jail))
    os.execve(argv[0], argv, dict(os.environ))


if __name__ == "__main__":
    main()

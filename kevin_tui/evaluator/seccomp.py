"""The system-call filter every sandboxed worker runs under, assembled here as classic BPF.

A worker needs files, memory, threads, pipes and its GPU; it never needs to mount, change namespace,
trace another process, load BPF or kernel modules, touch the kernel keyring or the clock. Those calls
are how a process with a user namespace of its own undoes its sandbox (remount a read-only bind
writable, make a nested namespace with fresh capabilities, attach to its parent) or reaches the
kernel's least-audited code, so the filter answers EPERM to each of them, and to `clone` with any
namespace flag. `clone3` gets ENOSYS: its flags live in memory the filter cannot read, and the C
library then falls back to `clone`. So does every call newer than this table (above `NEWEST`), as on a
kernel without it: the kernel keeps adding to the mount API (`open_tree_attr`, 6.15) and to what a process
may learn of namespaces, which a deny-list cannot know of. An AF_VSOCK socket is refused as by a kernel
without vsock: it reaches the hypervisor (a VM's host, WSL's Windows), which no network namespace cuts off.
A call from another ABI (32-bit `int 0x80` or x32 on x86-64), whose numbers mean other calls, kills the
process.

No dependency: the same bytes go to bubblewrap (`--seccomp FD`) and to `install()`, which the
`unshare` jail calls itself after `no_new_privs`, before any candidate code runs.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# name: (x86_64, aarch64) numbers, from asm/unistd_64.h and asm-generic/unistd.h (None: no such call)
DENIED: dict[str, tuple[int | None, int | None]] = {
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "move_mount": (429, 429), "open_tree": (428, 428), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "unshare": (272, 97), "setns": (308, 268),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264), "fanotify_init": (300, 262),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60), "syslog": (103, 116),
    "lookup_dcookie": (212, 18), "vhangup": (153, 58), "uselib": (134, None), "iopl": (172, None),
    "ioperm": (173, None), "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171),
    "clock_adjtime": (305, 266), "sethostname": (170, 161), "setdomainname": (171, 162),
}  # fmt: skip
NEWEST = 466  # removexattrat (Linux 6.13); the same number on both: new calls share one numbering since 424
CLONE = (56, 220)
SOCKET = (41, 198)
AF_VSOCK = 40
CLONE3 = (435, 435)
IOCTL = (16, 29)
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TTY_INJECTION = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX: type into a terminal the worker shares
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column in the tables, AUDIT_ARCH_*
X32_BIT = 0x40000000

BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0, OFFSET_ARG1 = 0, 4, 16, 24  # struct seccomp_data (low words, little-endian)

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class SeccompError(Exception):
    pass


def program(machine: str | None = None) -> bytes:
    """The filter for this machine's architecture, as the array of `struct sock_filter` the kernel takes."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise SeccompError(f"no system-call filter for {machine}")
    column, audit_arch = ARCHES[machine]
    denied = sorted({number for numbers in DENIED.values() if (number := numbers[column]) is not None})
    # Instructions (code, jump-if-true, jump-if-false, k), where a jump names a label; a str is a label.
    code: list[str | tuple[int, str | int, str | int, int]] = [
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        (BPF_JEQ_K, 0, "kill", audit_arch),
        (BPF_LD_W_ABS, 0, 0, OFFSET_NR),
    ]
    if machine == "x86_64":
        code.append((BPF_JGE_K, "kill", 0, X32_BIT))
    code.append((BPF_JGE_K, "nosys", 0, NEWEST + 1))
    code += [(BPF_JEQ_K, "deny", 0, number) for number in denied]
    code += [
        (BPF_JEQ_K, "clone", 0, CLONE[column]),
        (BPF_JEQ_K, "nosys", 0, CLONE3[column]),
        (BPF_JEQ_K, "ioctl", 0, IOCTL[column]),
        (BPF_JEQ_K, "socket", 0, SOCKET[column]),
        (BPF_RET_K, 0, 0, RET_ALLOW),
        "clone", (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0), (BPF_JSET_K, "deny", "allow", NAMESPACE_FLAGS),
        "ioctl", (BPF_LD_W_ABS, 0, 0, OFFSET_ARG1), (BPF_JEQ_K, "deny", 0, TTY_INJECTION[0]),
        (BPF_JEQ_K, "deny", "allow", TTY_INJECTION[1]),
        "socket", (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0), (BPF_JEQ_K, "no_family", "allow", AF_VSOCK),
        "allow", (BPF_RET_K, 0, 0, RET_ALLOW),
        "deny", (BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM),
        "nosys", (BPF_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        "no_family", (BPF_RET_K, 0, 0, RET_ERRNO | errno.EAFNOSUPPORT),
        "kill", (BPF_RET_K, 0, 0, RET_KILL_PROCESS),
    ]  # fmt: skip
    labels: dict[str, int] = {}
    instructions: list[tuple[int, str | int, str | int, int]] = []
    for entry in code:
        if isinstance(entry, str):
            labels[entry] = len(instructions)
        else:
            instructions.append(entry)

    def offset(target: str | int, at: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        if not 0 <= jump < 256:
            raise SeccompError(f"jump to {target} out of range")
        return jump

    return b"".join(
        struct.pack("<HBBI", op, offset(jt, at), offset(jf, at), k) for at, (op, jt, jf, k) in enumerate(instructions)
    )


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(libc: ctypes.CDLL | None = None) -> None:
    """Set `no_new_privs` and load the filter into this process; every thread and child started after
    this inherits it, and nothing can remove it."""
    libc = libc or ctypes.CDLL(None, use_errno=True)
    filters = program()
    buffer = ctypes.create_string_buffer(filters, len(filters))
    fprog = _SockFprog(len(filters) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    zero = ctypes.c_ulong(0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0:
        raise SeccompError(f"no_new_privs: {errno.errorcode.get(ctypes.get_errno(), '?')}")
    if libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), zero, zero) != 0:
        raise SeccompError(f"seccomp: {errno.errorcode.get(ctypes.get_errno(), '?')}")

"""The file-system view of a sandboxed worker when bubblewrap is not installed.

`unshare` (util-linux) puts the worker in fresh user, PID, mount, network and IPC namespaces; this
module then does, with the mount(2) and pivot_root(2) system calls, what bubblewrap would: a new
root on a tmpfs holding only the bind mounts the host asked for (read-only unless marked otherwise),
a private /proc (read-only once the jail is locked), /tmp and HOME, a few device nodes, and the old
root detached. Then it locks what it built, as bubblewrap does: a nested user and mount namespace
(the kernel locks every mount inherited into it, so no remount can make a read-only bind writable or
uncover what a mount hides), every capability dropped, `no_new_privs`, and the system-call filter
of kevin_tui/evaluator/seccomp.py. It runs first thing in the worker, before anything reads a file
or imports torch; the candidate's code only ever runs after it.
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path
from typing import Any

from kevin_tui.evaluator import seccomp

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]  # fmt: skip


def _read_only(target: str) -> None:
    """Make a mount and everything under it read-only (mount_setattr, Linux 5.12+; else the top only)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    result = _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                           ctypes.sizeof(attr))  # fmt: skip
    if result == 0:
        return
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    stat = os.statvfs(target)
    for st_flag, ms_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if stat.f_flag & st_flag:
            flags |= ms_flag
    _mount(None, target, None, flags)


def _placeholder(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()


def enter(spec: dict[str, Any]) -> None:
    """Build the new root described by `spec` (from the host's sandbox), move into it and lock it."""
    root = spec["new_root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m")
    for directory in ("/dev/shm", "/tmp"):  # first: scratch directories may be bound inside /tmp
        os.makedirs(root + directory, exist_ok=True)
        _mount("tmpfs", root + directory, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['tmp_bytes']}")
    for source, target, mode in spec["binds"]:
        if not os.path.exists(source):
            continue
        inside = root + target
        _placeholder(source, inside)
        _mount(source, inside, None, MS_BIND | MS_REC)
        if mode == "ro":
            _read_only(inside)
    os.makedirs(root + "/dev", exist_ok=True)
    for name in DEVICES + tuple(spec.get("devices", ())):
        source = name if name.startswith("/") else f"/dev/{name}"
        if os.path.exists(source):
            _placeholder(source, root + source)
            _mount(source, root + source, None, MS_BIND)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    old = root + "/.old-root"
    os.makedirs(old, exist_ok=True)
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise JailError(f"pivot_root: unknown system call number on {platform.machine()}")
    _check(_libc.syscall(number, root.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount the old root")
    os.rmdir("/.old-root")
    os.makedirs(spec["home"], exist_ok=True)
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(spec["chdir"])
    lock()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def lock() -> None:
    """Make the mounts just built unchangeable from inside, and give up every privilege (see the module
    docstring). Must run while the process has a single thread (unshare of a user namespace requires it)."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare a nested user namespace")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")
    # The last write to /proc: where the host runs as root, uid 0 here is the host's root to every uid check,
    # and a sysctl checks nothing else (core_pattern names a program the kernel runs as root outside every
    # namespace), nor do /proc/irq and /proc/bus/pci. A worker only reads it.
    _read_only("/proc")
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    zero = ctypes.c_ulong(0)
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), zero, zero, zero), f"drop capability {cap}")
    _check(_libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), zero, zero, zero), "clear ambient")
    header, data = _CapHeader(CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    seccomp.install(_libc)

"""Evaluation scratch directories, the one way the host touches files in them, and the sweep that removes
those whose owner died.

Each evaluator keeps its inputs, outputs and logs in a temporary directory (hundreds of MB on
large problems) and removes it on `close()`. A caller killed with SIGKILL never gets there, so
each directory records its owner (pid and the process's start time, which survives pid reuse)
and the next evaluator on the machine removes directories whose owner is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import weakref
from pathlib import Path

from kevin_tui.evaluator.host.cgroups import sweep_orphans
from kevin_tui.evaluator.protocol import ProtocolViolation
from kevin_tui.processes import process_start

PREFIX = "kevin-eval-"
OWNER_FILE = ".owner"


def make_scratch() -> Path:
    """A fresh scratch directory stamped with its owner; stale ones from dead owners are swept first, and
    so are the cgroups (and any process still in them) of a dead kevin-tui."""
    sweep_stale(Path(tempfile.gettempdir()))
    sweep_orphans()
    scratch = Path(tempfile.mkdtemp(prefix=PREFIX))
    (scratch / OWNER_FILE).write_text(f"{os.getpid()} {process_start(os.getpid())}\n")
    return scratch


def owner_alive(scratch: Path) -> bool:
    """True while the process that made `scratch` runs (or when that cannot be told: keep it)."""
    try:
        pid_text, start = (scratch / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # not ours, or being written this instant
    return process_start(pid) == start


def sweep_stale(directory: Path) -> list[Path]:
    """Remove scratch directories under `directory` whose owner has died; return those removed."""
    removed = []
    for scratch in directory.glob(f"{PREFIX}*"):
        if scratch.is_dir() and not owner_alive(scratch):
            shutil.rmtree(scratch, ignore_errors=True)
            removed.append(scratch)
    return removed


def given_dir(worker_scratch: Path) -> Path:
    """The directory the host fills for the candidate worker whose scratch is `worker_scratch`, bound
    read-only into its sandbox: a private copy of the problem file, and only the libraries built for it
    (not the build cache, where every build's sources and libraries lie)."""
    return worker_scratch.with_name(worker_scratch.name + "-given")


def hand_out(library: Path, worker_scratch: Path) -> Path:
    """Copy a verified library to where that worker can load it, in a directory named like its build's,
    and return the path the worker is told. A copy, not a hard link: a link would change the cached
    file's ctime, which the broker's tamper check watches."""
    target = given_dir(worker_scratch) / library.parent.name / library.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(library, target)
    return target


def disk_usage(root: Path, max_entries: int) -> int | None:
    """Bytes on disk under `root` (links not followed, sparse files as what they hold), or None when it holds
    more than `max_entries` entries: the walk stops there, so a directory of a million empty files costs no
    more to look at than one of `max_entries`."""
    total, seen, pending = 0, 0, [root]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:  # gone meanwhile: nothing there
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return None
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(Path(entry.path))
    return total


PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


def plain_name(name: str) -> bool:
    """A file name the host may use in a worker's directory: no separator, no `..`, nothing hidden."""
    return PLAIN_NAME.fullmatch(name) is not None


class WorkerFiles:
    """One worker's directory as the host touches it: the only way the host moves, writes or reads a file
    there. Every name is the host's (a path a worker reports must be exactly the one expected), every
    operation goes through a descriptor of the directory opened when the host made it (so a directory
    swapped for a link later changes nothing) and refuses links and files with other names (hard links)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        weakref.finalize(self, os.close, self.fd)

    def path(self, name: str) -> Path:
        return self.root / name

    def name_of(self, reported: str, expected: str | None = None) -> str:
        """The name of the file `reported`, which must lie directly in this directory (and be `expected`)."""
        path = Path(reported)
        if path.parent != self.root or not plain_name(path.name) or expected not in (None, path.name):
            what = f"the file {expected}" if expected else "a file"
            raise ProtocolViolation(f"{reported[:120]!r} is not {what} in the worker's own directory")
        return path.name

    def _own_file(self, name: str) -> os.stat_result:
        try:
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            raise ProtocolViolation(f"the worker reported {name}, which does not exist") from None
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise ProtocolViolation(f"{name} is not a plain file of its own (a link?)")
        return info

    def move_to(self, reported: str, target: WorkerFiles, name: str, expected: str | None = None) -> Path:
        """Move the file a worker reported out of its reach into `target` as `name`; its new path."""
        source = self.name_of(reported, expected)
        info = self._own_file(source)
        os.rename(source, name, src_dir_fd=self.fd, dst_dir_fd=target.fd)
        if os.stat(name, dir_fd=target.fd, follow_symlinks=False).st_ino != info.st_ino:
            raise ProtocolViolation(f"{source} was swapped while it was being taken")
        return target.path(name)

    def read(self, reported: str, expected: str | None = None) -> bytes:
        name = self.name_of(reported, expected)
        self._own_file(name)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ProtocolViolation(f"{name} is not a plain file")
            return handle.read()

    def write(self, name: str, data: bytes) -> Path:
        """A new file of the host's in this directory (whatever stood under that name is replaced, not followed)."""
        if not plain_name(name):
            raise ValueError(f"not a plain file name: {name!r}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return self.path(name)


def open_log(path: Path) -> int:
    """A descriptor appending to the log `path` in a worker's directory, which that worker could write: no link
    is followed and only a plain file of its own is appended to; anything else standing under the name (a link
    to a file of the host's, a FIFO, a hard link) is replaced by a new file."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(path, flags, 0o644)
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.open(path, flags | os.O_EXCL, 0o644)


def _plain_file(path: Path) -> int | None:
    """A descriptor reading `path` in a worker's directory if it is a plain file of its own there, else None: a
    link is not followed (the worker could point its log at a file of the host's) and nothing blocks (a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            return fd
    os.close(fd)
    return None


def read_plain(path: Path, limit: int, *, tail: bool) -> bytes:
    """The last (`tail`) or first `limit` bytes of the log `path` in a worker's directory, b"" unless it is a
    plain file there: a worker's own log is read from its end, a tool's from its start."""
    if (fd := _plain_file(path)) is None:
        return b""
    try:
        return os.pread(fd, limit, max(0, os.fstat(fd).st_size - limit) if tail else 0)
    except OSError:
        return b""
    finally:
        os.close(fd)

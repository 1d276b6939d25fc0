"""Evaluation scratch directories, the one way the host touches files in them, and the sweep that removes
those whose owner died.

Each evaluator keeps its inputs, outputs and logs in a temporary directory (hundreds of MB on
large problems) and removes it on `close()`. A caller killed with SIGKILL never gets there, so
each directory records its owner (pid and the process's start time, which survives pid reuse)
and the next evaluator on the machine removes directories whose owner is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterator
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
            remove_tree(scratch)
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


# What a walk of a worker's scratch may meet that is no fault: something that was there a moment ago and is gone.
# Anything else it cannot look into is taken for over the bound (a path past PATH_MAX, ENAMETOOLONG, hid 1 GB).
VANISHED = (FileNotFoundError, NotADirectoryError)
# The host's own shortage, not the worker's doing: raised, so that the watcher measures again rather than kill for it.
HOST_SHORT = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64  # nested deeper than this, a scratch is not measured: over the bound (2 descriptors a level)


def disk_usage(root: Path, max_entries: int) -> int | None:
    """Bytes on disk under `root` (links not followed, sparse files as what they hold), or None when it holds
    more than `max_entries` entries, directories nested over `MAX_DEPTH` deep or one the walk cannot read: the
    walk stops there, so a directory of a million empty files costs no more to look at than one of `max_entries`,
    and nothing the worker wrote counts as nothing. The host's own shortage (descriptors, memory) raises OSError.
    Walked by descriptor (each directory opened relative to its parent), so no path grows with the depth: by path,
    files below PATH_MAX's reach went unseen and each level cost a lookup of every level above it (a 2,000-deep
    chain took 3.6 s a poll)."""
    stack: list[tuple[int, Iterator[os.DirEntry[str]]]] = []
    total, seen = 0, 0
    try:
        stack.append(_listed(os.open(root, DIRECTORY)))
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                _close(*stack.pop())
                continue
            seen += 1
            if seen > max_entries:
                return None
            try:
                info = entry.stat(follow_symlinks=False)
                total += info.st_blocks * 512
                if not stat.S_ISDIR(info.st_mode):
                    continue
                if len(stack) >= MAX_DEPTH:
                    return None
                stack.append(_listed(os.open(entry.name, DIRECTORY, dir_fd=fd)))
            except VANISHED:
                continue
    except VANISHED:
        return 0
    except OSError as exc:
        if exc.errno in HOST_SHORT:
            raise
        return None
    finally:
        for item in stack:
            _close(*item)
    return total


def _listed(fd: int) -> tuple[int, Iterator[os.DirEntry[str]]]:
    """The directory `fd` and an iterator over its entries (`fd` closed if that cannot be made)."""
    try:
        return fd, os.scandir(fd)
    except OSError:
        os.close(fd)
        raise


def _close(fd: int, entries: Iterator[os.DirEntry[str]]) -> None:
    entries.close()  # type: ignore[attr-defined]
    os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, whatever its depth or its paths' length, never following a link
    and never raising (what cannot be removed stays). A worker's scratch holds what its candidate made:
    `shutil.rmtree` recurses once a level (Python 3.11), and 3,000 nested directories made it raise
    RecursionError, which `ignore_errors` does not cover (`eval` ended in a traceback, the tree stayed). One
    descriptor is held at a time: the walk goes down by name and back up by `..`, checked to be the directory
    it came from."""
    try:
        fd = os.open(path, DIRECTORY)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    above: list[tuple[str, int, int]] = []  # (name, device, inode) of each directory the walk is inside
    stuck: set[tuple[int, int]] = set()  # directories that could not be removed: not entered again
    while True:
        child = _first_child_directory(fd, stuck)
        if child is not None:
            info = os.fstat(fd)
            above.append((child[0], info.st_dev, info.st_ino))
            os.close(fd)
            fd = child[1]
            continue
        if not above:
            os.close(fd)
            break
        name, device, inode = above.pop()
        try:
            parent = os.open("..", DIRECTORY, dir_fd=fd)
        except OSError:
            os.close(fd)
            return
        here = os.fstat(fd)
        os.close(fd)
        fd = parent
        reached = os.fstat(fd)
        if (reached.st_dev, reached.st_ino) != (device, inode):  # moved meanwhile: stop where it is
            os.close(fd)
            return
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            stuck.add((here.st_dev, here.st_ino))
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _first_child_directory(fd: int, stuck: set[tuple[int, int]]) -> tuple[str, int] | None:
    """Unlink every non-directory in the directory `fd`; the first subdirectory not in `stuck`, opened, or None."""
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=fd)
                    continue
                info = entry.stat(follow_symlinks=False)
                if (info.st_dev, info.st_ino) not in stuck:
                    return entry.name, os.open(entry.name, DIRECTORY, dir_fd=fd)
    return None


PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


def plain_name(name: str) -> bool:
    """A file name the host may use in a worker's directory: no separator, no `..`, nothing hidden."""
    return PLAIN_NAME.fullmatch(name) is not None


class InTheWay(ProtocolViolation):
    """The worker whose directory the host moves or writes a file into got in its way: something of its own stood
    under the file's name (a directory where its next input goes), or the file was gone or replaced as it landed."""


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
        """Move the file a worker reported out of its reach into `target` as `name`; its new path. A rename that
        fails, or lands another file, is the doing of a worker, never the host's error: `InTheWay` where it is the
        target's worker's (`clear_way`; what stands at `name` once the rename is done), else a ProtocolViolation."""
        source = self.name_of(reported, expected)
        info = self._own_file(source)
        try:
            os.rename(source, name, src_dir_fd=self.fd, dst_dir_fd=target.fd)
        except OSError as exc:
            target.clear_way(name, exc)
            raise ProtocolViolation(f"{source} could not be taken ({exc.strerror})") from None
        try:
            landed = os.stat(name, dir_fd=target.fd, follow_symlinks=False).st_ino
        except OSError:
            landed = None
        if landed != info.st_ino:
            raise InTheWay(f"{source} was swapped while it was being taken, or {name} as soon as it landed")
        return target.path(name)

    def read(self, reported: str, expected: str | None = None) -> bytes:
        name = self.name_of(reported, expected)
        self._own_file(name)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ProtocolViolation(f"{name} is not a plain file")
            return handle.read()

    def clear_way(self, name: str, exc: OSError) -> None:
        """Raise `InTheWay` where something stands under `name` here, which is what the host's `exc` met (a source
        that vanished, ENOENT, is not the target's doing)."""
        if exc.errno == errno.ENOENT:
            return
        with contextlib.suppress(OSError):
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            raise InTheWay(f"{name} in the worker's own directory is something the host cannot replace, which the "
                           f"worker put there ({exc.strerror})")  # fmt: skip

    def remove(self, name: str) -> None:
        """Remove `name` from this directory if it is there (a link itself, never what it points to; whatever the
        worker put there that is no file is left for its scratch's bound and removal)."""
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=self.fd)

    def write(self, name: str, data: bytes) -> Path:
        """A new file of the host's in this directory (whatever stood under that name is replaced, not followed)."""
        if not plain_name(name):
            raise ValueError(f"not a plain file name: {name!r}")
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)
        except OSError as exc:
            self.clear_way(name, exc)
            raise
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

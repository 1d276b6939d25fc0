"""Accepted kernels land in git, and nothing else moves.

The commit is built with git's plumbing on a temporary index (read-tree HEAD, add the blobs,
write-tree, commit-tree, update-ref with the old value as a guard), so whatever the user has
staged, changed or left untracked is never touched: only the committed files' entries in the real
index are updated, to match the new HEAD. Undo is the reverse, and only while our commit is
still HEAD and its files are as we committed them.

A commit says what it holds in trailers: files kevin-tui wrote (`Kevin-Kernel`, the kernel;
`Kevin-Apply`, the helper that installs it in a model) and files committed as they were found
(`Kevin-With`: a problem file kevin-tui generated earlier). Undo puts written files back as they
were (or removes them) and leaves found files on disk, as they were before the commit.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kevin_tui import kernelbench
from kevin_tui.errors import KevinError
from kevin_tui.problem import problem_origin

KERNEL_TRAILER = "Kevin-Kernel"
APPLY_TRAILER = "Kevin-Apply"
WRITTEN_TRAILERS = (KERNEL_TRAILER, APPLY_TRAILER)  # files kevin-tui wrote in the commit
WITH_TRAILER = "Kevin-With"  # files committed as they were found
FALLBACK_IDENTITY = ("kevin-tui", "kevin-tui@localhost")
IN_PROGRESS = {
    "MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert",
    "rebase-merge": "a rebase", "rebase-apply": "a rebase or git am", "BISECT_LOG": "a bisect",
}  # fmt: skip
ZERO_SHA = "0" * 40


class GitProblem(KevinError):
    """Git could not take the kernel; the message says why and what to do. Nothing was changed."""


class NotARepository(GitProblem):
    pass


@dataclass
class AcceptInfo:
    """What the commit message and the file header say about the kernel."""

    module: str
    speedup: float | None = None
    speedup_compile: float | None = None
    device: str = ""
    model: str | None = None
    session_id: str | None = None
    turn: int | None = None


@dataclass
class Accepted:
    commit: str | None  # None when only the file was written (no git)
    path: Path
    notice: str = ""

    def summary(self) -> str:
        if self.commit is None:
            return f"wrote {self.path} (no git)"
        return f"committed {self.commit[:10]} ({self.path})" + (f"; {self.notice}" if self.notice else "")


def accept_beside(
    problem_path: Path, source: str, info: AcceptInfo, name: str | None = None, git: bool = True, init: bool = False
) -> Accepted:
    """Write an accepted kernel beside its problem module and, unless `git` is False, commit that file
    alone — with the problem file when kevin-tui generated it from a module of yours and it is not
    committed as it is, so the verdict can be reproduced. Raises GitProblem (NotARepository when
    there is no repository and `init` is False)."""
    path = kernel_path_for(problem_path, name)
    if git:
        generated = problem_path.exists() and problem_origin(problem_path.read_text()) is not None
        return KernelRepo.find(path, init=init).accept_kernel(path, source, info, [problem_path] if generated else [])
    try:
        path.write_text(kernel_file_text(source, info))
    except OSError as exc:
        raise GitProblem(f"cannot write {path}: {exc.strerror or exc}") from None
    return Accepted(None, path)


def _git():
    try:
        import git
    except ImportError as exc:  # GitPython raises ImportError when no git binary is found
        raise GitProblem(f"git is not available ({exc}); install git, or use --no-git to only write the file") from None
    return git


def kernel_path_for(problem_path: Path, name: str | None = None) -> Path:
    """Where the accepted kernel goes: beside the module, `<module>_kernel.py` unless named; for a
    problem shipped inside kevin-tui (`kernelbench:...`), in the current directory instead."""
    directory = Path.cwd() if kernelbench.is_shipped(problem_path) else problem_path.parent
    return directory / (name or f"{problem_path.stem}_kernel.py")


def _speed(info: AcceptInfo) -> str:
    parts = []
    if info.speedup is not None:
        parts.append(f"{info.speedup:.2f}x vs eager")
    if info.speedup_compile is not None:
        parts.append(f"{info.speedup_compile:.2f}x vs torch.compile")
    return ", ".join(parts) or "speedup not measured"


def kernel_file_text(source: str, info: AcceptInfo) -> str:
    """The candidate with a short header saying where it came from."""
    lines = [
        f"# Kevin kernel for {info.module}: {_speed(info)}",
        f"# session {info.session_id or '-'}, turn {info.turn if info.turn is not None else '-'}, "
        f"device {info.device or '-'}, accepted {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "# written by kevin-tui; `kevin-tui undo` takes it back while it is the last commit",
    ]
    return "\n".join(lines) + "\n" + source.rstrip("\n") + "\n"


def commit_message(info: AcceptInfo, relative: str, with_files: tuple[str, ...] = ()) -> str:
    """Says what the kernel is and how fast, and never calls a slower kernel faster."""
    turn = f" (turn {info.turn})" if info.turn is not None else ""
    trailers = {
        "Session": info.session_id,
        "Turn": info.turn,
        "Speedup": _speed(info),
        "Model": info.model,
        "Device": info.device or None,
        KERNEL_TRAILER: relative,
    }
    body = "\n".join([*(f"{k}: {v}" for k, v in trailers.items() if v is not None),
                      *(f"{WITH_TRAILER}: {f}" for f in with_files)])  # fmt: skip
    if info.speedup is None:
        summary = f"feat({info.module}): Kevin kernel, speed not measured{turn}"
        what = f"a replacement for {info.module}.Model (its speed was not measured)"
    elif info.speedup >= 1:
        summary = f"perf({info.module}): Kevin kernel, {info.speedup:.2f}x vs eager{turn}"
        what = f"a faster {info.module}.Model"
    else:
        summary = f"feat({info.module}): Kevin kernel, {info.speedup:.2f}x vs eager{turn}"
        what = f"a replacement for {info.module}.Model, slower than eager PyTorch where it was measured"
    return f"{summary}\n\nAccepted in kevin-tui: {relative} defines ModelNew, {what}.\n\n{body}\n"


class KernelRepo:
    """The user's repository, handled with care: one file in, one file out, nothing else."""

    def __init__(self, repo: Any) -> None:
        self.repo = repo
        self.root = Path(repo.working_tree_dir)

    @classmethod
    def find(cls, path: Path, init: bool = False) -> KernelRepo:
        git = _git()
        directory = path if path.is_dir() else path.parent
        try:
            return cls(git.Repo(directory, search_parent_directories=True))
        except git.InvalidGitRepositoryError:
            if not init:
                raise NotARepository(
                    f"{directory} is not in a git repository: run `git init` there (or pass --git-init), "
                    "or use --no-git to only write the kernel file"
                ) from None
        except git.NoSuchPathError:
            raise GitProblem(f"{directory} does not exist") from None
        try:
            return cls(git.Repo.init(directory))
        except (OSError, git.GitCommandError) as exc:
            raise GitProblem(f"cannot create a git repository in {directory}: {exc}") from None

    # -- helpers ----------------------------------------------------------

    def _run(self, *args: str, env: dict[str, str] | None = None) -> str:
        git = _git()
        try:
            return self.repo.git.execute(["git", *args], env=env, strip_newline_in_stdout=True)
        except git.GitCommandError as exc:
            detail = (exc.stderr or "").strip().strip("'").strip() or str(exc)
            raise GitProblem(f"git {args[0]} failed: {detail}") from None

    def _check_state(self) -> None:
        git_dir = Path(self.repo.git_dir)
        for name, what in IN_PROGRESS.items():
            if (git_dir / name).exists():
                raise GitProblem(f"{what} is in progress in {self.root}: finish or abort it first")
        if self.repo.head.is_detached:
            raise GitProblem(f"HEAD is detached in {self.root}: check out a branch first")

    def _head(self) -> str | None:
        return self.repo.head.commit.hexsha if self.repo.head.is_valid() else None

    def _identity_env(self) -> tuple[dict[str, str], str]:
        """The user's identity as git itself resolves it; a labelled fallback when it has none."""
        try:
            self._run("var", "GIT_AUTHOR_IDENT")
            self._run("var", "GIT_COMMITTER_IDENT")
            return {}, ""
        except GitProblem:
            pass
        name = self._config("user.name") or FALLBACK_IDENTITY[0]
        email = self._config("user.email") or FALLBACK_IDENTITY[1]
        env = {
            "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
        }  # fmt: skip
        notice = f"no git identity configured; committed as {name} <{email}> (set user.name and user.email)"
        return env, notice

    def _config(self, key: str) -> str:
        try:
            return self._run("config", "--get", key).strip()
        except GitProblem:
            return ""

    def relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            raise GitProblem(f"{path} is outside the repository at {self.root}") from None

    # -- accept and undo --------------------------------------------------

    def accept_kernel(self, path: Path, source: str, info: AcceptInfo, found: Sequence[Path] = ()) -> Accepted:
        """Write the candidate (with its header) to `path` and commit that file, and those of `found`
        that differ from HEAD as they are on disk."""
        relative = self.relative(path)
        with_files = self.changed(found)
        message = commit_message(info, relative, tuple(self.relative(f) for f in with_files))
        return self.commit_files({path: kernel_file_text(source, info)}, with_files, message)

    def changed(self, paths: Sequence[Path]) -> list[Path]:
        """Those of `paths` whose content on disk is not what HEAD holds (untracked ones included)."""
        head = self._head()
        found = []
        for path in paths:
            relative = self.relative(path)
            committed = self._run("ls-tree", head, "--", relative).split() if head else []
            if not committed or committed[2] != self._run("hash-object", "--", relative):
                found.append(path)
        return found

    def commit_files(self, written: dict[Path, str], found: list[Path], message: str) -> Accepted:
        """Write each of `written` and commit them with `found` as they are on disk; the first written
        file is the one reported."""
        self._check_state()
        for path, text in written.items():
            try:
                path.write_text(text)
            except OSError as exc:
                raise GitProblem(f"cannot write {path}: {exc.strerror or exc}") from None
        entries = [
            (self.relative(p), self._run("hash-object", "-w", "--", self.relative(p))) for p in [*written, *found]
        ]
        parent = self._head()
        identity, notice = self._identity_env()
        with tempfile.TemporaryDirectory(prefix="kevin-commit-") as tmp:
            index_env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._run("read-tree", *([parent] if parent else ["--empty"]), env=index_env)
            for relative, blob in entries:
                self._run("update-index", "--add", "--cacheinfo", f"100644,{blob},{relative}", env=index_env)
            tree = self._run("write-tree", env=index_env)
            message_file = Path(tmp) / "message"
            message_file.write_text(message)
            parents = ["-p", parent] if parent else []
            commit = self._run("commit-tree", tree, *parents, "-F", str(message_file), env=identity)
        self._run("update-ref", "-m", "kevin-tui: accept kernel", "HEAD", commit, parent or ZERO_SHA)
        for relative, blob in entries:
            self._run("update-index", "--add", "--cacheinfo", f"100644,{blob},{relative}")
        return Accepted(commit, next(iter(written)), notice)

    def undo(self) -> str:
        """Take the last accept (or apply) back, if it is still HEAD and its files are untouched; else
        explain."""
        self._check_state()
        head = self._head()
        if head is None:
            raise GitProblem("the repository has no commits: nothing to undo")
        commit = self.repo.commit(head)
        written = re.findall(rf"^(?:{'|'.join(WRITTEN_TRAILERS)}): (.+)$", commit.message, re.M)
        found = re.findall(rf"^{WITH_TRAILER}: (.+)$", commit.message, re.M)
        if not written:
            raise GitProblem(
                f"HEAD ({head[:8]} {commit.summary!r}) is not a kevin-tui accept: something was committed "
                "after it, so undo will not rewrite history (use `git revert` on the kevin-tui commit)"
            )
        for relative in (r.strip() for r in [*written, *found]):
            path = self.root / relative
            committed = self._run("rev-parse", f"{head}:{relative}")
            current = self._run("hash-object", "--", relative) if path.exists() else None
            staged = self._run("ls-files", "-s", "--", relative).split()
            if current != committed or (staged and staged[1] != committed):
                raise GitProblem(f"{relative} was changed since it was accepted: commit or discard that change first")
        parent = commit.parents[0].hexsha if commit.parents else None
        if parent:
            self._run("update-ref", "-m", "kevin-tui: undo accept", "HEAD", parent, head)
        else:
            self._run("update-ref", "-m", "kevin-tui: undo accept", "-d", "HEAD", head)
        said = [self._restore(r.strip(), parent, keep=False) for r in written]
        said += [self._restore(r.strip(), parent, keep=True) for r in found]
        return f"undid {head[:8]}: " + "; ".join(said)

    def _restore(self, relative: str, parent: str | None, keep: bool) -> str:
        """Put one file of an undone commit back as it was before it: its parent version, or (written
        by kevin-tui) removed, or (found on disk) left there, untracked again."""
        path = self.root / relative
        before = self._run("ls-tree", parent, "--", relative).split() if parent else []
        if parent and before:
            mode, blob = before[0], before[2]
            if not keep:
                path.write_bytes(self.repo.odb.stream(bytes.fromhex(blob)).read())
                os.chmod(path, 0o755 if mode == "100755" else 0o644)
            self._run("update-index", "--add", "--cacheinfo", f"{mode},{blob},{relative}")
            if keep:
                return f"{relative} is committed as in {parent[:8]} again (the file is left as it is)"
            return f"{relative} is back to its version in {parent[:8]}"
        self._run("update-index", "--force-remove", "--", relative)
        if keep:
            return f"{relative} is no longer committed (the file is left as it is)"
        path.unlink(missing_ok=True)
        return f"removed {relative}, which it had added"

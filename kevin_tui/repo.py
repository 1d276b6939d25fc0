"""Accepted kernels land in git, and nothing else moves.

The commit is built with git's plumbing on a temporary index (read-tree HEAD, add one blob,
write-tree, commit-tree, update-ref with the old value as a guard), so whatever the user has
staged, changed or left untracked is never touched: only the kernel file's entry in the real
index is updated, to match the new HEAD. Undo is the reverse, and only while our commit is
still HEAD and the kernel file is as we committed it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kevin_tui.errors import KevinError

KERNEL_TRAILER = "Kevin-Kernel"
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
    alone. Raises GitProblem (NotARepository when there is no repository and `init` is False)."""
    path = kernel_path_for(problem_path, name)
    if git:
        return KernelRepo.find(path, init=init).accept_kernel(path, source, info)
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
    """Where the accepted kernel goes: beside the module, `<module>_kernel.py` unless named."""
    return problem_path.parent / (name or f"{problem_path.stem}_kernel.py")


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


def commit_message(info: AcceptInfo, relative: str) -> str:
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
    body = "\n".join(f"{k}: {v}" for k, v in trailers.items() if v is not None)
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

    def accept_kernel(self, path: Path, source: str, info: AcceptInfo) -> Accepted:
        """Write the candidate (with its header) to `path` and commit that file alone."""
        self._check_state()
        relative = self.relative(path)
        return self._commit_file(path, relative, kernel_file_text(source, info), commit_message(info, relative))

    def _commit_file(self, path: Path, relative: str, text: str, message: str) -> Accepted:
        try:
            path.write_text(text)
        except OSError as exc:
            raise GitProblem(f"cannot write {path}: {exc.strerror or exc}") from None
        blob = self._run("hash-object", "-w", "--", relative)
        parent = self._head()
        identity, notice = self._identity_env()
        with tempfile.TemporaryDirectory(prefix="kevin-commit-") as tmp:
            index_env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._run("read-tree", *([parent] if parent else ["--empty"]), env=index_env)
            self._run("update-index", "--add", "--cacheinfo", f"100644,{blob},{relative}", env=index_env)
            tree = self._run("write-tree", env=index_env)
            message_file = Path(tmp) / "message"
            message_file.write_text(message)
            parents = ["-p", parent] if parent else []
            commit = self._run("commit-tree", tree, *parents, "-F", str(message_file), env=identity)
        self._run("update-ref", "-m", "kevin-tui: accept kernel", "HEAD", commit, parent or ZERO_SHA)
        self._run("update-index", "--add", "--cacheinfo", f"100644,{blob},{relative}")
        return Accepted(commit, path, notice)

    def undo(self) -> str:
        """Take the last accept back, if it is still HEAD and its file is untouched; else explain."""
        self._check_state()
        head = self._head()
        if head is None:
            raise GitProblem("the repository has no commits: nothing to undo")
        commit = self.repo.commit(head)
        match = re.search(rf"^{KERNEL_TRAILER}: (.+)$", commit.message, re.M)
        if match is None:
            raise GitProblem(
                f"HEAD ({head[:8]} {commit.summary!r}) is not a kevin-tui accept: something was committed "
                "after it, so undo will not rewrite history (use `git revert` on the kevin-tui commit)"
            )
        relative = match[1].strip()
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
        before = self._run("ls-tree", parent, "--", relative).split() if parent else []
        if before:
            mode, _, blob = before[0], before[1], before[2]
            path.write_bytes(self.repo.odb.stream(bytes.fromhex(blob)).read())
            os.chmod(path, 0o755 if mode == "100755" else 0o644)
            self._run("update-index", "--add", "--cacheinfo", f"{mode},{blob},{relative}")
            return f"undid {head[:8]}: {relative} is back to its version in {parent[:8]}"
        path.unlink(missing_ok=True)
        self._run("update-index", "--force-remove", "--", relative)
        return f"undid {head[:8]}: removed {relative}, which it had added"

"""Accept and undo in real git repositories in temporary directories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kevin_tui.repo import AcceptInfo, GitProblem, KernelRepo, NotARepository, kernel_path_for

INFO = AcceptInfo(
    module="my_module",
    speedup=2.31,
    speedup_compile=1.4,
    device="NVIDIA H200",
    model="cognition-ai/Kevin-32B",
    session_id="s-42",
    turn=3,
)
KERNEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture(autouse=True)
def isolated_git_config(tmp_path_factory, monkeypatch):
    """No global or system git config leaks into these tests."""
    empty = tmp_path_factory.mktemp("gitconfig") / "config"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, identity: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    if identity:
        git(path, "config", "user.name", "Ada Lovelace")
        git(path, "config", "user.email", "ada@example.com")
    (path / "my_module.py").write_text("class Model: pass\n")
    (path / "a.py").write_text("a = 1\n")
    (path / "b.py").write_text("b = 1\n")
    git(path, "add", ".")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "commit", "-q", "-m", "initial"], cwd=path, check=True, env=env)
    return path


def make_dirty(repo: Path) -> None:
    (repo / "a.py").write_text("a = 2  # staged\n")
    git(repo, "add", "a.py")
    (repo / "a.py").write_text("a = 3  # staged, then changed again\n")
    (repo / "b.py").write_text("b = 2  # unstaged\n")
    (repo / "d.py").write_text("d = 1  # new and staged\n")
    git(repo, "add", "d.py")
    (repo / "notes.txt").write_bytes(b"untracked \x00 bytes\n")


def snapshot(repo: Path, kernel: str) -> dict[str, object]:
    files = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file() and p.name != kernel}
    return {
        "files": files,
        "staged": git(repo, "diff", "--cached", "--binary", "HEAD", "--", ".", f":!{kernel}"),
        "unstaged": git(repo, "diff", "--binary", "--", ".", f":!{kernel}"),
        "index": [line for line in git(repo, "ls-files", "-s").splitlines() if not line.endswith(kernel)],
        "status": [line for line in git(repo, "status", "--porcelain").splitlines() if kernel not in line],
    }


def accept(repo: Path, source: str = KERNEL):
    path = kernel_path_for(repo / "my_module.py")
    return KernelRepo.find(path).accept_kernel(path, source, INFO)


def test_clean_repo_commit_has_message_trailers_and_only_the_kernel(tmp_path):
    repo = make_repo(tmp_path / "r")
    result = accept(repo)
    assert git(repo, "rev-parse", "HEAD").strip() == result.commit
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("perf(my_module): Kevin kernel, 2.31x vs eager (turn 3)\n")
    for trailer in (
        "Session: s-42",
        "Turn: 3",
        "Speedup: 2.31x vs eager, 1.40x vs torch.compile",
        "Model: cognition-ai/Kevin-32B",
        "Device: NVIDIA H200",
        "Kevin-Kernel: my_module_kernel.py",
    ):
        assert trailer in message
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["my_module_kernel.py"]
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Ada Lovelace <ada@example.com>"
    assert git(repo, "status", "--porcelain") == ""
    text = (repo / "my_module_kernel.py").read_text()
    assert text.startswith("# Kevin kernel for my_module: 2.31x vs eager, 1.40x vs torch.compile")
    assert "session s-42, turn 3, device NVIDIA H200" in text and text.endswith(KERNEL)


def test_staged_unstaged_and_untracked_work_survive_byte_for_byte(tmp_path):
    repo = make_repo(tmp_path / "r")
    make_dirty(repo)
    before = snapshot(repo, "my_module_kernel.py")
    accept(repo)
    assert snapshot(repo, "my_module_kernel.py") == before
    assert git(repo, "diff", "--name-only", "HEAD~1", "HEAD").split() == ["my_module_kernel.py"]
    assert "my_module_kernel.py" not in git(repo, "status", "--porcelain")
    KernelRepo.find(repo).undo()
    assert snapshot(repo, "my_module_kernel.py") == before


def test_accepting_again_replaces_the_file_with_a_new_commit(tmp_path):
    repo = make_repo(tmp_path / "r")
    first = accept(repo)
    second = accept(repo, KERNEL.replace("pass", "x = 2"))
    assert second.commit != first.commit
    assert git(repo, "rev-parse", "HEAD~1").strip() == first.commit
    assert "x = 2" in (repo / "my_module_kernel.py").read_text()


def test_undo_removes_a_new_kernel_and_restores_a_replaced_one(tmp_path):
    repo = make_repo(tmp_path / "r")
    initial = git(repo, "rev-parse", "HEAD").strip()
    accept(repo)
    accept(repo, KERNEL.replace("pass", "x = 2"))
    message = KernelRepo.find(repo).undo()
    assert "back to its version" in message
    assert "x = 2" not in (repo / "my_module_kernel.py").read_text()
    assert git(repo, "status", "--porcelain") == ""
    assert "removed my_module_kernel.py" in KernelRepo.find(repo).undo()
    assert not (repo / "my_module_kernel.py").exists()
    assert git(repo, "rev-parse", "HEAD").strip() == initial
    assert git(repo, "status", "--porcelain") == ""


def test_a_file_committed_as_found_is_left_on_disk_by_undo(tmp_path):
    repo = make_repo(tmp_path / "r")
    (repo / "a.py").write_text("a = 2  # changed by the user, committed with the kernel\n")
    kernels = KernelRepo.find(repo)
    kernels.accept_kernel(kernel_path_for(repo / "my_module.py"), KERNEL, INFO, [repo / "a.py", repo / "b.py"])
    assert "Kevin-With: a.py" in git(repo, "log", "-1", "--format=%B") and "b.py" not in git(repo, "show", "--stat")
    message = kernels.undo()
    assert "a.py is committed as in" in message and "the file is left as it is" in message
    assert (repo / "a.py").read_text().startswith("a = 2")  # the user's version stays on disk
    assert git(repo, "diff", "--cached", "--name-only") == "" and git(repo, "diff", "--name-only") == "a.py\n"


def test_undo_refused_after_the_user_committed_on_top(tmp_path):
    repo = make_repo(tmp_path / "r")
    accept(repo)
    (repo / "a.py").write_text("a = 5\n")
    git(repo, "commit", "-qam", "user work")
    head = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(GitProblem, match="not a kevin-tui accept"):
        KernelRepo.find(repo).undo()
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert (repo / "my_module_kernel.py").exists()


def test_undo_refused_when_the_kernel_was_edited(tmp_path):
    repo = make_repo(tmp_path / "r")
    accept(repo)
    (repo / "my_module_kernel.py").write_text("# my own tweak\n")
    with pytest.raises(GitProblem, match="changed since it was accepted"):
        KernelRepo.find(repo).undo()
    assert (repo / "my_module_kernel.py").read_text() == "# my own tweak\n"


def test_not_a_repository_then_git_init(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "my_module.py").write_text("class Model: pass\n")
    with pytest.raises(NotARepository, match="git init"):
        accept(plain)
    path = kernel_path_for(plain / "my_module.py")
    result = KernelRepo.find(path, init=True).accept_kernel(path, KERNEL, INFO)
    assert git(plain, "rev-parse", "HEAD").strip() == result.commit
    assert git(plain, "show", "--name-only", "--format=", "HEAD").split() == ["my_module_kernel.py"]
    assert "?? my_module.py" in git(plain, "status", "--porcelain")  # the user's file is left untracked
    assert "removed" in KernelRepo.find(plain).undo()


def test_detached_head_and_merge_in_progress_are_refused_and_nothing_moves(tmp_path):
    repo = make_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(GitProblem, match="detached"):
        accept(repo)
    git(repo, "checkout", "-q", "main")
    head = git(repo, "rev-parse", "HEAD").strip()
    (Path(repo) / ".git" / "MERGE_HEAD").write_text(head + "\n")
    with pytest.raises(GitProblem, match="merge is in progress"):
        accept(repo)
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert not (repo / "my_module_kernel.py").exists()


def test_missing_identity_uses_a_clear_fallback(tmp_path):
    repo = make_repo(tmp_path / "r", identity=False)
    result = accept(repo)
    assert "no git identity" in result.notice
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "kevin-tui <kevin-tui@localhost>"


def test_unwritable_kernel_path_is_a_clear_error(tmp_path):
    repo = make_repo(tmp_path / "r")
    path = repo / "missing_dir" / "k.py"
    with pytest.raises(GitProblem, match="cannot write"):
        KernelRepo.find(repo).accept_kernel(path, KERNEL, INFO)
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"


def test_no_git_binary_is_a_clear_error(tmp_path):
    code = (
        "from pathlib import Path\nfrom kevin_tui.repo import KernelRepo, GitProblem\n"
        "try:\n    KernelRepo.find(Path('.'))\nexcept GitProblem as e:\n    print(e)\n"
    )
    env = {**os.environ, "GIT_PYTHON_GIT_EXECUTABLE": "/nonexistent/git", "GIT_PYTHON_REFRESH": "error"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "git is not available" in out.stdout, out.stderr


def test_commit_wording_follows_the_interval_and_undo_outside_a_repository_advises_nothing_it_rejects(tmp_path):
    """Before: 1.32x with a 95% interval of 0.64-2.72x was committed as "a faster my_module.Model", and
    `undo` outside a repository advised --git-init, which undo rejects."""
    from dataclasses import replace

    repo = make_repo(tmp_path / "r")
    path = kernel_path_for(repo / "my_module.py")
    noisy = replace(INFO, speedup=1.32, speedup_interval=(0.64, 2.72))
    KernelRepo.find(path).accept_kernel(path, KERNEL, noisy)
    message = git(repo, "log", "-1", "--format=%B")
    assert "faster" not in message and message.startswith("feat(my_module): Kevin kernel, no measurable difference")
    assert "Speedup: 1.32x vs eager (95% interval 0.64-2.72x)" in message
    solid = replace(INFO, speedup=1.32, speedup_interval=(1.2, 1.4))
    KernelRepo.find(path).accept_kernel(path, KERNEL + "# again\n", solid)
    assert "a faster my_module.Model" in git(repo, "log", "-1", "--format=%B")

    plain = tmp_path / "plain"
    plain.mkdir()
    undo = subprocess.run([sys.executable, "-m", "kevin_tui", "undo", str(plain)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})  # fmt: skip
    assert undo.returncode != 0 and "not in a git repository" in undo.stderr and "--git-init" not in undo.stderr

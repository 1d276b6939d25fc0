"""Worker processes: spawned, in their own process group, with a reduced environment.

Generated code runs only in these processes. Whatever it does (segfault,
os._exit, an endless loop, children of its own), the caller gets an event or a
`WorkerGone` and `kill()` takes the whole process group down.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kevin_tui.processes import kill_process_group

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|_PAT$|^PAT_",
    re.IGNORECASE,
)
ALLOWED_NAMES = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "SHELL",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "XDG_CACHE_HOME",
}  # fmt: skip
ALLOWED_PREFIXES = (
    "LC_",
    "CUDA_",
    "TORCH_",
    "NVIDIA_",
    "NCCL_",
    "CUBLAS_",
    "CUDNN_",
    "TRITON_",
    "KEVIN_WORKER_",
)
DEFAULT_CUDA_HOME = Path("/usr/local/cuda")
DEFAULT_ARCH_WITHOUT_GPU = "9.0"
KILL_GRACE_S = 2.0


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def worker_env(base: dict[str, str] | None = None, gpu_visible: bool | None = None) -> dict[str, str]:
    """An allow-listed environment with nothing credential-like in it.

    It also fixes two traps of CUDA machines: the `nvcc` on PATH may be a
    wrapper from another toolkit (so CUDA_HOME points at the real one), and
    without a visible GPU torch cannot guess the architecture to build for.
    """
    base = dict(os.environ if base is None else base)
    env = {
        k: v
        for k, v in base.items()
        if (k in ALLOWED_NAMES or k.startswith(ALLOWED_PREFIXES)) and not is_secret_name(k)
    }
    if "CUDA_HOME" not in env and "CUDA_PATH" not in env and (DEFAULT_CUDA_HOME / "bin" / "nvcc").exists():
        env["CUDA_HOME"] = str(DEFAULT_CUDA_HOME)
    if gpu_visible is None:
        gpu_visible = Path("/dev/nvidia0").exists()
    if not gpu_visible:
        env.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_WITHOUT_GPU)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class WorkerGone(Exception):
    """The worker exited or was killed before answering."""

    def __init__(self, returncode: int | None, message: str) -> None:
        super().__init__(message)
        self.returncode = returncode


class WorkerTimeout(Exception):
    pass


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class WorkerProcess:
    """One worker: JSON commands on its stdin, JSON events on its stdout, the rest in a log.

    Without a request it starts anyway and waits for one: that is how a spare worker imports torch
    ahead of time.
    """

    def __init__(
        self, role: str, request: dict[str, Any] | None, cwd: Path, log_path: Path, env: dict[str, str]
    ) -> None:
        self.log_path = log_path
        cwd.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kevin_tui.evaluator.worker", role],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=cwd,
                env={**env, "PYTHONPATH": _package_root_path(env)},
                start_new_session=True,
            )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"kevin-{role}-reader", daemon=True).start()
        if request is not None:
            self.send(request)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.put(event)
        self.events.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it died; the next event() reports how

    def event(self, timeout: float) -> dict[str, Any]:
        """The next event, or WorkerTimeout / WorkerGone."""
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise WorkerTimeout(f"no answer within {timeout:.0f} s") from None
        if event is None:
            self.events.put(None)
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            raise WorkerGone(code, f"the worker {describe_exit(code)}")
        return event

    def log_tail(self, chars: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode(errors="replace")

    def kill(self) -> None:
        """SIGTERM the whole process group, then SIGKILL whatever is left."""
        kill_process_group(self.proc, KILL_GRACE_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # unsent bytes to a dead process: nothing to save
                    stream.close()

    def close(self) -> None:
        """Ask politely, then make sure."""
        self.send({"cmd": "exit"})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.kill()


def _package_root_path(env: dict[str, str]) -> str:
    """Make sure the worker imports this same kevin_tui, even from a source checkout."""
    root = str(Path(__file__).resolve().parents[2])
    existing = env.get("PYTHONPATH", "")
    return root if not existing else f"{root}{os.pathsep}{existing}"

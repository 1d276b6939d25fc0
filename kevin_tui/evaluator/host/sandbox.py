"""The sandbox every worker runs in: what it may see, what it may write, and how much it may use.

Three ways to make it: our own jail in fresh namespaces (kevin_tui/evaluator/worker/jail.py; `unshare`, the
first choice where the kernel lets an unprivileged process make namespaces, because its workers are forked
warm from a nursery that has imported torch once: host/nursery.py), bubblewrap (`bwrap`, which starts
every worker afresh), or none. Either of the first two gives the worker its own
user, PID, mount, network and IPC namespaces — no network, no view of or signal to any process
outside, every descendant killed with the sandbox — a private /proc (read-only), /tmp and HOME, a read-only
file system holding only the system directories, the Python environment, the CUDA toolkit and what
its role needs (its scratch directory read-write). Resource limits apply in all three. When there is
no sandbox, every verdict says so, with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kevin_tui.evaluator import seccomp

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|_PAT$|^PAT_",
    re.IGNORECASE,
)
ALLOWED_NAMES = {
    "PATH", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "SHELL", "LD_LIBRARY_PATH", "LIBRARY_PATH",
    "CPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
    "KEVIN_TUI_PCH_MAX_GB",  # read by the builder, which keeps the precompiled headers under it
}  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "CUDA_", "TORCH_", "NVIDIA_", "NCCL_", "CUBLAS_", "CUDNN_", "TRITON_")
DEFAULT_CUDA_HOME = Path("/usr/local/cuda")
DEFAULT_ARCH_WITHOUT_GPU = "9.0"
SANDBOX_HOME = "/tmp/home"
SYSTEM_PATHS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/ld.so.conf",
    "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
    "/etc/localtime", "/etc/os-release", "/sys",
)  # fmt: skip
MODES = ("auto", "required", "bwrap", "unshare", "off")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def worker_env(base: dict[str, str] | None = None, gpu_visible: bool | None = None) -> dict[str, str]:
    """An allow-listed environment with nothing credential-like in it, and a private HOME and TMPDIR.

    It also fixes two traps of CUDA machines: the `nvcc` on PATH may be a wrapper from another
    toolkit (so CUDA_HOME points at the real one), and without a visible GPU torch cannot guess the
    architecture to build for.
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
        gpu_visible = bool(gpu_devices())
    if not gpu_visible:
        env.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_WITHOUT_GPU)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads must not spin while the other side is timed
    # A fixed malloc policy in every worker: glibc's adaptive mmap threshold otherwise depends on each
    # process's history, and one side can page-fault every output while the other reuses its heap.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 30))
    env |= {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": SANDBOX_HOME, "TMPDIR": "/tmp",
            "TRITON_CACHE_DIR": "/tmp/triton", "TORCHINDUCTOR_CACHE_DIR": "/tmp/inductor"}  # fmt: skip
    return env


def gpu_devices() -> list[str]:
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) + ([str(dev / "dri")] if (dev / "dri").exists() else [])


def memory_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 << 30


@dataclass
class Limits:
    """Resource limits of one worker: a fork bomb or a 50 GB allocation is an error, not a frozen machine."""

    memory: int = field(default_factory=lambda: memory_total() // 2)
    processes: int = 4096
    files: int = 4096
    file_size: int = 8 << 30

    def as_dict(self) -> dict[str, int]:
        return {"memory": self.memory, "processes": self.processes, "files": self.files, "file_size": self.file_size}


@dataclass(frozen=True)
class Bind:
    path: str
    writable: bool = False


def package_root() -> Path:
    return Path(__file__).resolve().parents[3]


def python_paths() -> list[str]:
    """What the worker's Python needs to see: its installation and site-packages, not the user's project."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_path("stdlib"), sysconfig.get_path("purelib"),
             sysconfig.get_path("platlib")}  # fmt: skip
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry) and Path(entry).is_dir():
            found.add(entry)
    return sorted({os.path.realpath(p) for p in found if p and Path(p).exists()})


def system_binds() -> list[Bind]:
    """Read-only binds every role gets: the system, Python, kevin_tui itself, the CUDA toolkit."""
    paths = [p for p in SYSTEM_PATHS if os.path.exists(p)] + python_paths()
    paths.append(str(package_root() / "kevin_tui"))
    cuda = os.environ.get("CUDA_HOME") or (str(DEFAULT_CUDA_HOME) if DEFAULT_CUDA_HOME.exists() else None)
    if cuda and os.path.exists(cuda):
        paths.append(os.path.realpath(cuda))
    if compiler := shutil.which(os.environ.get("CXX", "c++")):
        paths.append(os.path.dirname(os.path.realpath(compiler)))
    return [Bind(p) for p in dict.fromkeys(paths)]


@dataclass(frozen=True)
class Sandbox:
    kind: str  # "bwrap", "unshare" or "off"
    reason: str = ""

    def describe(self) -> str:
        return self.kind if self.kind != "off" else f"off ({self.reason})"

    def command(self, argv: list[str], binds: list[Bind], chdir: str, seccomp_fd: int | None = None) -> list[str]:
        """The command line that runs `argv` in this sandbox (bwrap loads the filter from `seccomp_fd`; the
        unshare jail installs it itself)."""
        if self.kind == "bwrap":
            return bwrap_command(argv, binds, chdir, seccomp_fd)
        if self.kind == "unshare":
            return unshare_command(argv)
        return argv

    def jail_spec(self, binds: list[Bind], chdir: str, jail_root: str) -> dict | None:
        """For the unshare fallback: what the worker's jail mounts (None for the other kinds)."""
        if self.kind != "unshare":
            return None
        return {
            "new_root": jail_root,
            "binds": [[b.path, b.path, "rw" if b.writable else "ro"] for b in binds],
            "devices": gpu_devices(),
            "tmp_bytes": TMP_BYTES,
            "home": SANDBOX_HOME,
            "chdir": chdir,
        }


TMP_BYTES = 2 << 30


def seccomp_memfd() -> int:
    """A file descriptor holding the system-call filter, for bwrap's `--seccomp FD` (it reads it to EOF)."""
    fd = os.memfd_create("kevin-seccomp", 0)
    os.write(fd, seccomp.program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_command(argv: list[str], binds: list[Bind], chdir: str, seccomp_fd: int | None) -> list[str]:
    # As root, bwrap skips the user namespace unless told, and the kernel exempts root from the process
    # limit outside one: ask for it explicitly then.
    user = ["--unshare-user"] if os.geteuid() == 0 else []
    # --as-pid-1: the worker starts as the namespace's first process and leaves its own supervisor there
    # (worker/supervisor.py), which, unlike bwrap's reaper, candidate code cannot write into.
    command = ["bwrap", "--unshare-all", *user, "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
               "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--dir", SANDBOX_HOME, "--proc", "/proc",
               "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm"]  # fmt: skip
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    for device in gpu_devices():
        command += ["--dev-bind", device, device]
    for bind in binds:
        command += ["--bind" if bind.writable else "--ro-bind", bind.path, bind.path]
    # /proc read-only too: the jail's reason (worker/jail.py, lock), which bwrap's own cover of /proc misses
    return [*command, "--remount-ro", "/", "--remount-ro", "/proc", "--chdir", chdir, "--", *argv]


def unshare_command(argv: list[str]) -> list[str]:
    return ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount", "--net",
            "--ipc", "--uts", "--", *argv]  # fmt: skip


@functools.cache
def _works(kind: str) -> str | None:
    """None if `kind` can start a process here, else why not."""
    tool = "bwrap" if kind == "bwrap" else "unshare"
    if shutil.which(tool) is None:
        return f"{tool} is not installed"
    with tempfile.TemporaryDirectory(prefix="kevin-sandbox-probe-") as scratch:
        binds = [*system_binds(), Bind(scratch, writable=True)]
        argv = [sys.executable, "-c", "import kevin_tui.evaluator.worker.main"]
        sandbox = Sandbox(kind)
        env = {**worker_env(), "PYTHONPATH": str(package_root())}
        if spec := sandbox.jail_spec(binds, scratch, os.path.join(scratch, "root")):
            os.mkdir(spec["new_root"])
            argv = [sys.executable, "-c", "import json, os; from kevin_tui.evaluator.worker.jail import enter; "
                    "enter(json.loads(os.environ['KEVIN_WORKER_JAIL']))"]  # fmt: skip
            env["KEVIN_WORKER_JAIL"] = json.dumps(spec)
        filter_fd = seccomp_memfd() if kind == "bwrap" else None
        try:
            command = sandbox.command(argv, binds, scratch, filter_fd)
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                                    env=env, pass_fds=() if filter_fd is None else (filter_fd,))  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{tool} failed: {exc}"
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
    if result.returncode != 0:
        return f"{tool} cannot make a sandbox here: {result.stderr.strip()[-300:]}"
    return None


class SandboxUnavailable(Exception):
    """`--sandbox required` was asked for and no sandbox can be made on this machine."""


def choose(mode: str = "auto") -> Sandbox:
    """The best sandbox this machine allows, per the user's `--sandbox` choice (or exactly the kind named)."""
    if mode == "off":
        return Sandbox("off", "--sandbox off")
    if mode in ("bwrap", "unshare"):
        if why := _works(mode):
            raise SandboxUnavailable(f"--sandbox {mode}: {why}")
        return Sandbox(mode)
    if not sys.platform.startswith("linux"):
        reasons = [f"{sys.platform} has no Linux namespaces"]
    else:
        reasons = []
        for kind in ("unshare", "bwrap"):  # the jail first: the same walls, and its workers start warm
            why = _works(kind)
            if why is None:
                return Sandbox(kind)
            reasons.append(why)
    reason = "; ".join(reasons)
    if mode == "required":
        raise SandboxUnavailable(f"--sandbox required, but no sandbox can be made here: {reason}")
    return Sandbox("off", reason)

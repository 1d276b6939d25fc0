"""Run the sandbox probes against today's evaluator, with fake targets planted in a temp dir.

    python3 tests/candidates/sandbox/run_sandbox.py [NAME ...]

What it plants (all under one mkdtemp, removed at the end): a fake HOME with .netrc and
.ssh/id_ed25519, a write target, a working directory, a loopback listener, a daemon pid file, and
environment variables (KEVIN_TEST_PLANTED_KEY and a fake OPENAI_API_KEY among them). It then
re-executes itself with that environment, so that /proc/<pid>/environ of the worker's parent holds
them, and judges each probe with an Evaluator (CPU, no timing), printing the verdict, the loot
lines the probe wrote to its worker log, and the side effects seen from outside. Every side effect
is undone: markers deleted, the daemon killed by the pid it wrote.

kill_caller.py runs last, under a throwaway `sh -c 'python3 -m kevin_tui eval ...'` whose
environment carries KEVIN_REDTEAM_THROWAWAY=1 (the probe signals nothing without it).
fork_bomb_guarded.py and allocate_50gb_guarded.py run unarmed: they report limits and fork/allocate
nothing. Never set KEVIN_REDTEAM_ARMED=1 on a shared machine.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
from kevin_tui import kernelbench  # noqa: E402

PROBLEM = kernelbench.root() / "level1" / "19_ReLU.py"
SAFE = [
    "read_caller_environ", "read_home_secrets", "loopback_connect", "write_outside_scratch",
    "setsid_daemon", "judge_memory_writable", "fork_bomb_guarded", "allocate_50gb_guarded",
]  # fmt: skip


def plant_and_reexec() -> None:
    base = Path(tempfile.mkdtemp(prefix="kevin-redteam-sbx-"))
    home, target, cwd, tmp = base / "home", base / "target", base / "cwd", base / "tmp"
    for d in (home / ".ssh", target, cwd, tmp):
        d.mkdir(parents=True)
    (home / ".netrc").write_text("machine example.invalid login redteam password FAKE-NETRC-PASSWORD-0001\n")
    (home / ".ssh" / "id_ed25519").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-REDTEAM-ED25519-KEY-NOT-A-REAL-KEY\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "KEVIN_TEST_PLANTED_KEY": "fake-planted-key-4f1e2d",
        "OPENAI_API_KEY": "sk-fake-redteam-0000",
        "KEVIN_TEST_LOOPBACK_PORT": str(port),
        "KEVIN_TEST_WRITE_TARGET": str(target),
        "KEVIN_REDTEAM_DAEMON_PIDFILE": str(base / "daemon.pid"),
        "KEVIN_REDTEAM_BASE": str(base),
    }
    env.pop("KEVIN_REDTEAM_ARMED", None)
    os.chdir(cwd)
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


class Listener:
    def __init__(self, port: int) -> None:
        self.received: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            with conn:
                self.received.append(conn.recv(4096).decode(errors="replace").strip())


def loot(log: Path | None) -> list[str]:
    if log is None or not log.exists():
        return []
    return [line for line in log.read_text(errors="replace").splitlines() if "kevin-redteam" in line]


def is_our_worker(pid: int) -> bool:
    try:
        return b"kevin_tui.evaluator.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def judge_safe(name: str, base: Path, listener: Listener) -> None:
    sys.path.insert(0, str(ROOT))
    from kevin_tui.evaluator import Evaluator
    from kevin_tui.evaluator import EvalOptions
    from kevin_tui.problem import load_problem

    source = (HERE / f"{name}.py").read_text()
    options = EvalOptions(device="cpu", timing=False, cache_dir=base / "cache")
    with Evaluator(load_problem(PROBLEM), options, prespawn=False) as evaluator:
        verdict = evaluator.evaluate(source)
        lines = loot(evaluator.last_log)
    print(f"{name} -> {verdict.status.value}: {verdict.message}")
    for line in lines:
        print(f"    log: {line}")
    if name == "loopback_connect":
        print(f"    listener received: {listener.received or 'nothing'}")
        listener.received.clear()
    if name == "write_outside_scratch":
        for d in (Path(os.environ["KEVIN_TEST_WRITE_TARGET"]), base / "cache" / "builds", Path.cwd()):
            for marker in d.glob("kevin-redteam-was-here-*") if d.exists() else []:
                print(f"    found outside scratch: {marker}")
                marker.unlink()
    if name == "setsid_daemon":
        pidfile = Path(os.environ["KEVIN_REDTEAM_DAEMON_PIDFILE"])
        if pidfile.exists():
            pid = int(pidfile.read_text())
            alive = is_our_worker(pid)
            print(f"    daemon {pid} alive after the evaluation finished: {alive}")
            if alive:
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)
                print(f"    killed daemon {pid}; still there: {is_our_worker(pid)}")
            pidfile.unlink()


def judge_kill_caller(base: Path) -> None:
    env = {**os.environ, "KEVIN_REDTEAM_THROWAWAY": "1", "PYTHONPATH": str(ROOT)}
    command = (
        f"{sys.executable} -m kevin_tui eval {PROBLEM} {HERE / 'kill_caller.py'} --device cpu --no-timing "
        f"--json --cache-dir {base / 'cache'}; echo \"kevin-tui exited with $?\""
    )
    proc = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=300)
    print(f"kill_caller -> throwaway sh exited with {proc.returncode} "
          f"({'killed by SIGKILL' if proc.returncode == -signal.SIGKILL else 'not killed'}); "
          f"stdout: {proc.stdout.strip()[:300] or '(nothing: no verdict)'}")
    time.sleep(3)  # the workers notice their parent is gone within 0.5 s
    leftovers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and is_our_worker(int(entry)):
            try:
                if os.readlink(f"/proc/{entry}/cwd").startswith(str(base)):
                    leftovers.append(int(entry))
            except OSError:
                continue
    print(f"    workers of the killed kevin-tui still running: {leftovers or 'none'}")
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    stale = [str(p) for p in (base / "tmp").glob("kevin-eval-*")]
    print(f"    scratch left behind by the killed kevin-tui (inputs.pt etc.): {stale or 'none'}")


def main() -> None:
    if "KEVIN_REDTEAM_BASE" not in os.environ:
        plant_and_reexec()
    base = Path(os.environ["KEVIN_REDTEAM_BASE"])
    names = sys.argv[1:] or [*SAFE, "kill_caller"]
    listener = Listener(int(os.environ["KEVIN_TEST_LOOPBACK_PORT"]))
    try:
        for name in names:
            if name == "kill_caller":
                judge_kill_caller(base)
            else:
                judge_safe(name, base, listener)
    finally:
        os.chdir("/")
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Running the worker (kevin_tui.usermodel.worker) from kevin-tui, which never imports torch itself.

Your model runs in a child process in its own process group, with your project directory as its
working directory: a crash, a hang (killed after `timeout_s`) or a print in your code cannot reach
kevin-tui. Not sandboxed: it is your own code, run the way you run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kevin_tui
from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.processes import kill_process_group

DEFAULT_TIMEOUT_S = 900.0


class UserModelProblem(KevinError):
    """Your module, its arguments or its inputs cannot work; the message says why in one line."""

    exit_code = EXIT_USAGE


def run_worker(command: str, request: dict[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """The worker's answer to `command`; UserModelProblem when it reports a fault or dies."""
    package_root = str(Path(kevin_tui.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kevin_tui.usermodel.worker", command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process)
        raise UserModelProblem(f"{command}: your model ran past {timeout_s:.0f} s and was stopped") from None
    except BaseException:
        kill_process_group(process)
        raise
    try:
        answer = json.loads(out)
    except json.JSONDecodeError:
        tail = "\n".join(err.strip().splitlines()[-8:])
        raise UserModelProblem(f"{command}: the worker died (exit {process.returncode})\n{tail}") from None
    if "error" in answer:
        raise UserModelProblem(answer["error"])
    return answer

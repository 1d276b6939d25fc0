"""torch's ninja step, run so that the compiler's output reaches the builder's log as it is printed.

torch (cpp_extension._run_ninja_build) either captures ninja's output until the build ends, or, verbose,
prints it to stdout and leaves it out of the error. This runs the same command with its output read
line by line: each line goes into the log at once, stamped with the worker's elapsed seconds (the app
tails that log under the build phase), and the output is kept for the error torch would raise, whose
compiler messages the host parses. The output is the candidate's text: the log gets at most
MAX_LOG_LINES lines of at most MAX_LINE characters, control characters dropped; the kept output is
bounded too, and a line without an end is read in bounded pieces.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import IO

from kevin_tui.evaluator.compiler_output import printable
from kevin_tui.evaluator.worker.common import STARTED

MAX_LINE = 240  # characters of one line in the log (nvcc's own command lines run to thousands)
MAX_LOG_LINES = 400  # lines of compiler output in the log per build; the rest is counted
MAX_KEPT = 1 << 20  # bytes of output kept for the error (the host parses its first errors)
READ_CHUNK = 1 << 16


def log_line(text: str) -> str:
    """One line of compiler output as the log shows it: printable, bounded, stamped."""
    clean = printable(text.rstrip("\r\n"))
    if len(clean) > MAX_LINE:
        clean = clean[: MAX_LINE - 1] + "…"
    return f"[{time.monotonic() - STARTED:5.1f} s] | {clean}"


def stream_output(pipe: IO[bytes], log: IO[str]) -> bytes:
    """Copy `pipe` into `log` line by line as it comes (bounded); return what was kept of it."""
    kept = bytearray()
    shown = hidden = 0
    while chunk := pipe.readline(READ_CHUNK):
        if len(kept) < MAX_KEPT:
            kept += chunk[: MAX_KEPT - len(kept)]
        if shown < MAX_LOG_LINES:
            print(log_line(chunk.decode(errors="replace")), file=log, flush=True)
            shown += 1
        else:
            hidden += 1
    if hidden:
        print(f"[{time.monotonic() - STARTED:5.1f} s] | … {hidden} more lines of compiler output not shown here",
              file=log, flush=True)  # fmt: skip
    return bytes(kept)


def run_ninja_streamed(build_directory: str, verbose: bool, error_prefix: str) -> None:
    """A drop-in for cpp_extension._run_ninja_build (same command, same error), output streamed."""
    from torch.utils import cpp_extension

    command = ["ninja", "-v"]
    if (workers := cpp_extension._get_num_workers(verbose)) is not None:
        command += ["-j", str(workers)]
    sys.stderr.flush()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=build_directory, env=os.environ.copy()
    )
    assert process.stdout is not None
    with process.stdout:
        output = stream_output(process.stdout, sys.stderr)
    if process.wait() != 0:
        raise RuntimeError(f"{error_prefix}: {output.decode(errors='replace')}")

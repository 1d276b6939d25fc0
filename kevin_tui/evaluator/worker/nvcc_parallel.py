"""nvcc with its host and device passes run side by side (used in place of nvcc in build.ninja).

nvcc runs its steps one after the other: preprocess for the device, preprocess for the host, cudafe++
(host front end, ~13 s on a light-prelude cuda.cu), cicc (device front end and optimiser, ~12 s),
ptxas, fatbinary, then g++ on cudafe++'s output (~10 s). The device chain (preprocess, cicc, ptxas,
fatbinary) and the host chain (preprocess, cudafe++) are independent but for one file: the module id
that cudafe++ writes and cicc reads. That id is a hash of the translation unit, and cicc computes the
same one when asked (`--gen_module_id_file`), so here each chain makes its own copy and the final g++
runs only when the two are byte-identical: every step then ran nvcc's own command (from
`nvcc --dryrun`, same flags) on the same inputs, so the machine code is nvcc's. The output is shown
as nvcc shows it: each step's in nvcc's order, up to the first that fails, with that step's status.
Anything unexpected (a step nvcc did not list for one arch, other ids, a dry run that fails) runs plain
nvcc instead, so this can only save time. Standard library only: it runs as a script under ninja.

    python3 nvcc_parallel.py /path/to/nvcc <nvcc arguments>
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
DEPENDENCIES = re.compile(r"^-- Filter Dependencies -- > (.+)$")
MODULE_ID = re.compile(r'--module_id_file_name "([^"]+)"')
DEVICE_TOOLS = frozenset({"ptxas", "fatbinary"})
HOST_COMPILERS = frozenset({"gcc", "g++", "c++", "cc"})


@dataclass
class Step:
    """One of nvcc's commands (shell text, as the dry run prints it) and what became of it."""

    index: int
    command: str
    returncode: int | None = None  # None: not run (skipped after an earlier step failed)
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class Plan:
    environment: dict[str, str]  # with nvcc's variables (PATH, CICC_PATH...), as nvcc runs its steps
    host: list[Step]  # host preprocessing, cudafe++
    device: list[Step]  # device preprocessing, cicc, ptxas, fatbinary (per arch)
    final: Step  # g++ of cudafe++'s output, which includes cicc's stub and the fatbinary
    module_ids: list[tuple[Path, Path]]  # cudafe++'s id file, and each cicc's own copy


def tool(command: str) -> str:
    try:
        words = shlex.split(command)
    except ValueError:
        return ""
    return os.path.basename(words[0]) if words else ""


def output_of(args: list[str]) -> str | None:
    """The value of nvcc's -o (the object a depfile names), if given once."""
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-o", "--output-file")]
    return values[0] if len(values) == 1 else None


def plan(nvcc: str, args: list[str], scratch: Path) -> Plan | None:
    """nvcc's own steps for these arguments, split into the two chains; None if they are not the
    one-source, one-object shape this knows (then nvcc runs as it is)."""
    dry = subprocess.run(
        [nvcc, "--dryrun", *args], capture_output=True, text=True, env={**os.environ, "TMPDIR": str(scratch)}
    )
    if dry.returncode != 0:
        return None
    assignments, commands, depfile = [], [], None
    for line in dry.stderr.splitlines():
        if not line.startswith("#$ "):
            return None
        text = line[3:]
        if ASSIGNMENT.match(text):
            assignments.append(text)
        elif match := DEPENDENCIES.match(text):
            depfile = match[1]
        else:
            commands.append(text)
    if not commands or tool(commands[-1]) not in HOST_COMPILERS or " -E " in commands[-1]:
        return None
    environment = {**os.environ, **dict(a.split("=", 1) for a in assignments)}  # raw values, as nvcc sets them
    host: list[Step] = []
    device: list[Step] = []
    module_ids: list[tuple[Path, Path]] = []
    host_id = None
    for index, command in enumerate(commands[:-1]):
        name = tool(command)
        ids = MODULE_ID.findall(command)
        if name in HOST_COMPILERS and " -E " in command and "-D__CUDA_ARCH__=" not in command:
            if host:
                return None
            if depfile is not None:  # nvcc's own dependency file: the same preprocessing writes it
                if (target := output_of(args)) is None:
                    return None
                command += f" -MD -MF {shlex.quote(depfile)} -MT {shlex.quote(target)}"
            host.append(Step(index, command))
        elif name == "cudafe++" and len(host) == 1 and len(ids) == 1 and "--gen_module_id_file" in command:
            host_id = ids[0]
            host.append(Step(index, command))
        elif name == "cicc" and host_id is not None and ids == [host_id] and "--gen_module_id_file" not in command:
            own = f"{host_id}.cicc{len(module_ids)}"
            module_ids.append((Path(host_id), Path(own)))
            device.append(Step(index, MODULE_ID.sub(f'--gen_module_id_file --module_id_file_name "{own}"', command)))
        elif name == "rm":  # nvcc's own removal of a scratch file, which may not have been made
            device.append(Step(index, "rm -f -- " + command.removeprefix("rm ")))
        elif name in DEVICE_TOOLS or (name in HOST_COMPILERS and "-D__CUDA_ARCH__=" in command and " -E " in command):
            device.append(Step(index, command))
        else:
            return None
    if len(host) != 2 or not module_ids:
        return None
    return Plan(environment, host, device, Step(len(commands) - 1, commands[-1]), module_ids)


class Runner:
    """Runs the chains; a failing step stops every later one (in nvcc's order), as nvcc would."""

    def __init__(self, environment: dict[str, str]) -> None:
        self.environment = environment
        self.lock = threading.Lock()
        self.failed_at: int | None = None
        self.running: dict[int, subprocess.Popen[bytes]] = {}

    def run(self, step: Step) -> bool:
        with self.lock:
            if self.failed_at is not None and self.failed_at < step.index:
                return False
            process = subprocess.Popen(
                ["/bin/sh", "-c", step.command], env=self.environment,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            self.running[step.index] = process
        step.stdout, step.stderr = process.communicate()
        with self.lock:
            del self.running[step.index]
            killed = self.failed_at is not None and self.failed_at < step.index
            if not killed:
                step.returncode = process.returncode
                if process.returncode != 0 and (self.failed_at is None or step.index < self.failed_at):
                    self.failed_at = step.index
                    for index, other in self.running.items():
                        if index > step.index:
                            other.kill()
        return step.returncode == 0

    def chain(self, steps: list[Step]) -> None:
        all(self.run(step) for step in steps)  # stops at the first failure


def show(steps: list[Step]) -> int | None:
    """Print each step's output in nvcc's order; the status of the first failure (None: none failed)."""
    for step in sorted(steps, key=lambda s: s.index):
        if step.returncode is None:
            continue
        sys.stdout.buffer.write(step.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(step.stderr)
        sys.stderr.flush()
        if step.returncode != 0:
            return step.returncode
    return None


def run_parallel(the_plan: Plan) -> int | None:
    """The build's status, or None where the module ids differ (nothing printed: run nvcc)."""
    runner = Runner(the_plan.environment)
    threads = [threading.Thread(target=runner.chain, args=(chain,)) for chain in (the_plan.host, the_plan.device)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    steps = the_plan.host + the_plan.device
    if runner.failed_at is None and not all(same_file(a, b) for a, b in the_plan.module_ids):
        return None
    status = show(steps)
    if status is not None:
        return status
    runner.run(the_plan.final)
    return show([the_plan.final]) or 0


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def main(argv: list[str]) -> int:
    nvcc, args = argv[0], argv[1:]
    try:
        with tempfile.TemporaryDirectory(prefix="nvcc-parallel-", ignore_cleanup_errors=True) as scratch:
            the_plan = plan(nvcc, args, Path(scratch))
            status = run_parallel(the_plan) if the_plan is not None else None
            if status is not None:
                return status
            if the_plan is not None:
                print("note: nvcc_parallel: the two passes' module ids differ; running nvcc as it is", file=sys.stderr)
    except Exception as exc:  # this driver's own fault must never fail a build that nvcc would pass
        print(f"note: nvcc_parallel: {type(exc).__name__}: {exc}; running nvcc as it is", file=sys.stderr)
    return subprocess.run([nvcc, *args]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What the trust machinery costs, and how much a speedup can be trusted, measured in one run.

    python3 bench/trust_bench.py --baseline 74007a8     # warm evaluation now vs an earlier commit, interleaved
    python3 bench/trust_bench.py --sandbox              # sandbox cost per worker start and per evaluation
    python3 bench/trust_bench.py --aa 10                # identical kernels: how often is a difference claimed?
    python3 bench/trust_bench.py --baseline REV --aa 10 --repetitions 3   # both, A/A at REV too, in one run
    python3 bench/trust_bench.py --evidence             # profile + other sizes on vs off, warm, interleaved
    python3 bench/trust_bench.py --figures              # the evidence for ReLU, softmax and a GEMM on this machine

Every comparison alternates the two sides within this run (this machine is shared and noisy), and
prints medians and ratios, not pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin_tui import kernelbench  # noqa: E402  (the problems ship in the package: a clone stands alone)

DEFAULT_PROBLEM = kernelbench.root() / "level1" / "19_ReLU.py"
DEFAULT_CANDIDATE = REPO / "tests" / "candidates" / "relu_cpp.py"
SAME_AS_REFERENCE = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n"
)

# Runs in a subprocess with PYTHONPATH at some checkout: one cold evaluation, then `warm` timed ones.
EVALUATE = """
import json, sys, time
from pathlib import Path
from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.problem import load_problem
problem, candidate, cache = sys.argv[1:4]
warm, extra = int(sys.argv[4]), json.loads(sys.argv[5])
source = Path(candidate).read_text()
started = time.perf_counter()
with Evaluator(load_problem(problem), EvalOptions(device="cpu", cache_dir=Path(cache), **extra)) as ev:
    ev.evaluate(source)  # cold: the reference worker and the first candidate worker start now
    first = time.perf_counter() - started
    totals = []
    for _ in range(warm):
        time.sleep(1.0)  # let the spare worker start, as the loop does while the model generates
        started = time.perf_counter()
        verdict = ev.evaluate(source)
        totals.append(time.perf_counter() - started)
print(json.dumps({"first": first, "totals": totals, "status": verdict.status.value, "phases": verdict.phases_s}))
"""


# Runs in a subprocess with PYTHONPATH at some checkout: `count` A/A evaluations, one JSON line each.
SAME_AT = """
import json, sys
from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.problem import load_problem
problem, device, count, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with Evaluator(load_problem(problem), EvalOptions(device=device)) as evaluator:
    for _ in range(count):
        verdict = evaluator.evaluate(source)
        measured = verdict.details.get("measured_speedup", verdict.speedup)
        print(json.dumps({"speedup": verdict.speedup, "interval": verdict.speedup_interval, "measured": measured,
                          "bias": verdict.details["process_bias"]}), flush=True)
"""


def run_at(checkout: Path, script: str, *argv: str) -> str:
    """`script` run by this Python with `checkout` as the kevin_tui it imports; its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True, text=True, env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin",
                                             "CUDA_HOME": "/usr/local/cuda"}, cwd=checkout,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"a run at {checkout} failed:\n{out.stderr[-3000:]}")
    return out.stdout


@contextlib.contextmanager
def checkout_of(rev: str) -> Iterator[Path]:
    """A detached checkout of `rev`, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old), rev], check=True)
        try:
            yield old
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], check=False)


def evaluate_at(checkout: Path, problem: Path, candidate: Path, cache: Path, warm: int, extra: dict) -> dict:
    stdout = run_at(checkout, EVALUATE, str(problem), str(candidate), str(cache), str(warm), json.dumps(extra))
    return json.loads(stdout.strip().splitlines()[-1])


def baseline(args: argparse.Namespace, old: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, list[float]] = {"baseline": [], "now": []}
        statuses = {}
        for repetition in range(args.repetitions):
            for label, checkout in (("baseline", old), ("now", REPO))[:: 1 if repetition % 2 == 0 else -1]:
                cache = Path(tmp) / f"cache-{label}"
                result = evaluate_at(checkout, args.problem, args.candidate, cache, args.warm, {})
                runs[label] += result["totals"]
                statuses[label] = result["status"]
    old_s, new_s = statistics.median(runs["baseline"]), statistics.median(runs["now"])
    print(f"warm evaluation of {args.candidate.name} on the CPU, {len(runs['now'])} each, interleaved:")
    print(f"  baseline {args.baseline}: median {old_s:.2f} s  [{statuses['baseline']}]")
    print(f"  now:              median {new_s:.2f} s  [{statuses['now']}]")
    print(f"  ratio now / baseline: {new_s / old_s:.2f}x (goal <= 1.2)")


def sandbox_cost(args: argparse.Namespace) -> None:
    from kevin_tui.evaluator.host.cgroups import ResourceGroup
    from kevin_tui.evaluator.host.sandbox import (
        Bind,
        Limits,
        Sandbox,
        choose,
        package_root,
        seccomp_memfd,
        system_binds,
        worker_env,
    )

    kinds = ["off", "bwrap", "unshare"]
    for kind in kinds[1:]:
        choose(kind)  # fails loudly if this machine cannot make it
    starts: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as scratch:
        binds = [*system_binds(), Bind(scratch, writable=True)]
        env = {**worker_env(), "PYTHONPATH": str(package_root())}
        for _ in range(args.repetitions * 3):
            for kind in kinds:
                sandbox = Sandbox(kind)
                argv = [sys.executable, "-c", "pass"]
                spec = sandbox.jail_spec(binds, scratch, str(Path(scratch) / f"root-{kind}"))
                if spec:
                    Path(spec["new_root"]).mkdir(exist_ok=True)
                    argv = [sys.executable, "-c", "import json, os; from kevin_tui.evaluator.worker.jail import enter; "
                            "enter(json.loads(os.environ['KEVIN_WORKER_JAIL']))"]  # fmt: skip
                    env["KEVIN_WORKER_JAIL"] = json.dumps(spec)
                started = time.perf_counter()  # what a worker start does: its cgroups, its filter, the sandbox
                group = ResourceGroup(Limits().processes, Limits().memory)
                filter_fd = seccomp_memfd() if kind == "bwrap" else None
                command = group.wrap(sandbox.command(argv, binds, scratch, filter_fd))
                passed = () if filter_fd is None else (filter_fd,)
                subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL, pass_fds=passed)
                group.kill_all()
                if filter_fd is not None:
                    os.close(filter_fd)
                starts[kind].append(time.perf_counter() - started)
                env.pop("KEVIN_WORKER_JAIL", None)
    bare = statistics.median(starts["off"])
    print(f"starting a Python process, {len(starts['off'])} each, interleaved (median):")
    for kind in kinds:
        cost = statistics.median(starts[kind])
        print(f"  {kind:<8} {cost * 1e3:7.1f} ms   sandbox cost {max(0.0, cost - bare) * 1e3:6.1f} ms (goal < 100 ms)")
    totals: dict[str, list[float]] = {k: [] for k in kinds}
    firsts: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        for repetition in range(args.repetitions):
            for kind in kinds if repetition % 2 == 0 else kinds[::-1]:
                result = evaluate_at(
                    REPO, args.problem, args.candidate, Path(tmp) / "cache", args.warm, {"sandbox": kind}
                )
                totals[kind] += result["totals"]
                firsts[kind].append(result["first"])
    for label, runs in (("cold (new evaluator: reference and candidate workers start)", firsts),
                        ("warm", totals)):  # fmt: skip
        print(f"{label} evaluation of {args.candidate.name}, {len(runs['off'])} each, interleaved (median):")
        for kind in kinds:
            median = statistics.median(runs[kind])
            print(f"  {kind:<8} {median:.2f} s   ({median / statistics.median(runs['off']):.2f}x off)")


def aa(args: argparse.Namespace, old: Path | None) -> None:
    """Identical kernels (the candidate is the reference): the speedups reported, and how often the
    interval wrongly excludes 1.0. With a baseline, its checkout's too, in alternating blocks of evaluations
    (each block a new evaluator), so both see the same load."""
    sides = [("now", REPO)] + ([(f"baseline {args.baseline}", old)] if old is not None else [])
    blocks = min(args.repetitions, args.aa) if old is not None else 1
    results: dict[str, list[dict]] = {label: [] for label, _ in sides}
    loads: dict[str, list[float]] = {label: [] for label, _ in sides}
    for block in range(blocks):
        count = args.aa // blocks + (block < args.aa % blocks)
        for label, checkout in sides[:: 1 if block % 2 == 0 else -1]:
            loads[label].append(os.getloadavg()[0])
            stdout = run_at(checkout, SAME_AT, str(args.problem), args.device, str(count), SAME_AS_REFERENCE)
            for line in stdout.strip().splitlines():
                result = json.loads(line)
                results[label].append(result)
                (low, high), bias = result["interval"], result["bias"]
                print(f"  {label}: {result['speedup']:.3f}x (measured {result['measured']:.3f}x)  [{low:.3f}, "
                      f"{high:.3f}]  process difference {bias:.3f}", flush=True)  # fmt: skip
            loads[label].append(os.getloadavg()[0])
    for label, _ in sides:
        speedups = [r["speedup"] for r in results[label]]
        measured = statistics.median(r["measured"] for r in results[label])
        claimed = sum(not (r["interval"][0] <= 1.0 <= r["interval"][1]) for r in results[label])
        print(
            f"identical kernel, {label}, {len(speedups)} evaluations: median {statistics.median(speedups):.3f}x "
            f"(measured {measured:.3f}x), range {min(speedups):.3f}-{max(speedups):.3f}x; interval excluded 1.0 "
            f"in {claimed} of {len(speedups)} (goal: at most 1 in 10); 1-min load {min(loads[label]):.2f}-"
            f"{max(loads[label]):.2f} on {os.cpu_count()} cores"
        )


def evidence_cost(args: argparse.Namespace) -> None:
    """What the profile and the other-sizes check add to a warm evaluation (goal: under +25%)."""
    totals: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        for repetition in range(args.repetitions):
            for label in ("off", "on") if repetition % 2 == 0 else ("on", "off"):
                extra = {"profile": label == "on", "shapes": "warn" if label == "on" else "off"}
                result = evaluate_at(REPO, args.problem, args.candidate, Path(tmp) / "cache", args.warm, extra)
                totals[label] += result["totals"]
    off, on = statistics.median(totals["off"]), statistics.median(totals["on"])
    print(f"warm evaluation of {args.candidate.name}, {len(totals['on'])} each, interleaved (median):")
    print(f"  evidence off {off:.2f} s, on {on:.2f} s: +{(on / off - 1) * 100:.0f}% (goal < +25%)")


FIGURES = (
    ("level1/19_ReLU.py", "relu_cpp.py"),
    ("level1/23_Softmax.py", "honest/softmax_online.py"),
    ("level2/12_Gemm_Multiply_LeakyReLU.py", "honest/gemm_pretransposed.py"),
)


def figures(args: argparse.Namespace) -> None:
    """Every piece of evidence a verdict carries, for three KernelBench problems with honest C++ kernels."""
    from kevin_tui.evaluator import EvalOptions, Evaluator
    from kevin_tui.evaluator.report import evidence_lines
    from kevin_tui.problem import load_problem

    for problem, candidate in FIGURES:
        options = EvalOptions(device=args.device, profile=True, shapes="warn")
        with Evaluator(load_problem(kernelbench.root() / problem), options) as evaluator:
            verdict = evaluator.evaluate((REPO / "tests" / "candidates" / candidate).read_text())
        print(f"{problem} with {candidate}: {verdict.status.value}: {verdict.message}")
        print(f"  clock: {verdict.clock}; sandbox: {verdict.sandbox}")
        for line in evidence_lines(verdict.evidence):
            print(line)
        check = verdict.evidence.get("clock_check", {})
        if check:
            seen, reported, bias = check["host_per_call_ms"], check["per_call_ms"], check["process_bias"]
            print(f"  host clock: {seen:.4f} ms per call seen, {reported:.4f} reported; process difference {bias:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", type=Path, default=DEFAULT_PROBLEM)
    parser.add_argument("--candidate", type=Path, default=DEFAULT_CANDIDATE)
    parser.add_argument("--baseline", metavar="REV", help="compare warm evaluation with this commit")
    parser.add_argument("--sandbox", action="store_true", help="what the sandbox costs")
    parser.add_argument(
        "--aa", type=int, default=0, metavar="N", help="N evaluations of a kernel identical to the reference"
    )
    parser.add_argument("--device", default="cpu", help="for --aa and --figures: cpu or cuda")
    parser.add_argument("--evidence", action="store_true", help="what the profile and other sizes cost")
    parser.add_argument("--figures", action="store_true", help="the evidence for ReLU, softmax and a GEMM")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--warm", type=int, default=3, help="warm evaluations per run")
    args = parser.parse_args()
    with checkout_of(args.baseline) if args.baseline else contextlib.nullcontext() as old:
        if old is not None:
            baseline(args, old)
        if args.sandbox:
            sandbox_cost(args)
        if args.aa:
            aa(args, old)
        if args.evidence:
            evidence_cost(args)
        if args.figures:
            figures(args)


if __name__ == "__main__":
    main()

"""Figures for your-own-model support, on examples/tinylm, all measured in one run.

- profile: the model's plain per-call time beside its time under torch.profiler with kevin-tui's
  module ranges (the profiler's overhead), and the whole `kevin-tui profile` command beside a plain
  process that imports torch, builds the model and calls it once;
- the example kernel alone (the evaluator's speedup on the extracted problem) and in the model
  (`kevin-tui apply --check`: end to end before and after, with its interval);
- training with it installed (the same check): the training step's (forward and backward) speedup
  with the recompute backward, and the backward's cost beside eager's (the step less the forward,
  both interleaved in the same run), and what autograd saves per call.

    python3 bench/usermodel_bench.py [--device cpu|cuda] [--tokens 4,64] [--layers 2]

On a CPU every process gets the evaluator's thread count (half the cores), so the kernel alone and
in the model run alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kevin_tui.evaluator import EvalOptions, Evaluator  # noqa: E402
from kevin_tui.evaluator.host.evaluator import worker_threads  # noqa: E402
from kevin_tui.problem import load_problem  # noqa: E402

KERNELS = {"cpu": "gelu_gate_cpp.py", "cuda": "gelu_gate_cuda.py"}


def run(repo: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--tokens", default="4,64", help="batch,sequence of the token input (default 4,64)")
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    threads = str(worker_threads())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": threads}
    tokens = f"tokens=int64[{args.tokens}]~randint(0,1000)"
    with tempfile.TemporaryDirectory(prefix="kevin-usermodel-bench-") as directory:
        repo = Path(directory)
        shutil.copytree(ROOT / "examples" / "tinylm", repo / "tinylm")
        for command in (["init", "-q"], ["add", "."], ["-c", "user.name=bench", "-c", "user.email=b@b", "commit",
                                                       "-qm", "tinylm"]):  # fmt: skip
            subprocess.run(["git", *command], cwd=repo, check=True)
        shape = ", ".join(args.tokens.split(","))
        plain = (f"import torch; from tinylm.model import build_model; "
                 f"build_model({args.layers}).to('{args.device}')(torch.randint(0, 1000, ({shape},), "
                 f"device='{args.device}'))")  # fmt: skip
        _, plain_s = run(repo, "-c", plain, env=env)
        profiled, profile_s = run(repo, "-m", "kevin_tui", "profile", "tinylm/model.py:build_model", "--init",
                                  f"layers={args.layers}", "--input", tokens, "--device", args.device, "--json",
                                  "--extract", "GeluGate", env=env)  # fmt: skip
        report = json.loads(profiled.stdout)
        problem = load_problem(repo / "problems" / "blocks_GeluGate.py")
        kernel = repo / "problems" / "blocks_GeluGate_kernel.py"
        shutil.copyfile(ROOT / "examples" / "kernels" / KERNELS[args.device], kernel)
        with Evaluator(problem, EvalOptions(device=args.device), prespawn=False) as evaluator:
            alone = evaluator.evaluate(kernel.read_text())
        checked, _ = run(repo, "-m", "kevin_tui", "apply", str(kernel.relative_to(repo)), "--check", "--device",
                         args.device, "--json", "--no-git", env=env)  # fmt: skip
        check = json.loads(checked.stdout)["check"]
    first = report["modules"][0]
    print(f"tinylm ({args.layers} layers, tokens [{args.tokens}]) on {report['gpu'] or args.device}, "
          f"{threads} thread(s) per process")  # fmt: skip
    print(f"profile: plain call {report['plain_ms']:.3f} ms, under the profiler {report['profiled_ms']:.3f} ms "
          f"({report['profiled_ms'] / report['plain_ms'] - 1:+.0%}); `kevin-tui profile` took {profile_s:.1f} s "
          f"beside {plain_s:.1f} s for a plain process that builds the model and calls it once")  # fmt: skip
    print(f"  hottest: {first['name']} ({len(first['paths'])}x), {first['share']:.0%} of the model, "
          f"max gain {1 / (1 - first['share']):.2f}x")  # fmt: skip
    low, high = alone.speedup_interval or (None, None)
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None else ""
    print(f"kernel alone: {alone.status.value}, {alone.speedup or 0:.2f}x vs eager{interval} "
          f"({alone.candidate_ms or 0:.3f} ms vs {alone.reference_ms or 0:.3f} ms)")  # fmt: skip
    if check["passed"]:
        low, high = check["interval"]
        print(f"in the model: {check['before_ms']:.3f} ms before, {check['after_ms']:.3f} ms after: "
              f"{check['speedup']:.2f}x [{low:.2f}, {high:.2f}] over {check['rounds']} interleaved rounds "
              f"(largest output difference {check['max_abs_diff']:.2g})")  # fmt: skip
        if step := check.get("training", {}).get("step"):
            training = check["training"]
            low, high = step["interval"]
            backward = (step["after_ms"] - check["after_ms"]) / (step["before_ms"] - check["before_ms"])
            saved = f"{training['saved_before_bytes'] / 1e6:.3g} MB -> {training['saved_after_bytes'] / 1e6:.3g} MB"
            print(f"training step ({training['backward']} backward): {step['before_ms']:.3f} ms before, "
                  f"{step['after_ms']:.3f} ms after: {step['speedup']:.2f}x [{low:.2f}, {high:.2f}]; the backward "
                  f"(step less forward) costs {backward:.2f}x eager's; saved for backward {saved}")  # fmt: skip
    else:
        print(f"in the model: check FAILED: {check['message']}")


if __name__ == "__main__":
    main()

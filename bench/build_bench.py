"""What building real-pattern kernels costs, and how much disk the precompiled headers take.

    python3 bench/build_bench.py --patterns            # CUDA kernels: kevin-tui cold build vs a plain load_inline
    python3 bench/build_bench.py --pch 20 --flag-sets 6 --cap-gb 2   # 20 kernels, 6 sets of flags: PCH disk use

--patterns builds each kernel from cold (a new source), interleaved: with kevin-tui as the loop does
(light CUDA headers, the precompiled torch/extension.h for the kernel's flags, built once beforehand
and reported apart; a spare candidate worker ready) and with a plain
`torch.utils.cpp_extension.load_inline` in a fresh process and directory (its torch import
included, as a naive harness pays it), and prints the ratio (goal: kevin-tui at least 5x faster)
and which headers kevin-tui used.
--pch evaluates N new C++ kernels, each under one of K sets of `-D` flags (kernel i uses set i mod K);
each set needs its own precompiled header (~750 MB), and the cache's size is printed after each
kernel (goal: bounded by the cap).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eval_bench import unique_source  # noqa: E402  (this directory is on the path)

from kevin_tui.evaluator import EvalOptions, Evaluator  # noqa: E402
from kevin_tui.evaluator.host.cache import usage  # noqa: E402
from kevin_tui.evaluator.host.sandbox import worker_env  # noqa: E402
from kevin_tui.problem import load_problem  # noqa: E402

RELU = REPO.parent / "shared" / "kernelbench" / "level1" / "19_ReLU.py"
CANDIDATES = REPO / "tests" / "candidates"
SPARE_READY_S = 8.0
PATTERNS = (
    CANDIDATES / "relu_cuda.py",
    CANDIDATES / "realpattern" / "tensor_operators_in_host_code.py",
)
PLAIN = """
import sys, time
source = open(sys.argv[1]).read()
started = time.perf_counter()
namespace = {"__name__": "candidate"}  # its load_inline is torch's own, building into TORCH_EXTENSIONS_DIR
exec(compile(source, sys.argv[1], "exec"), namespace)
print(time.perf_counter() - started)
"""


def plain_build(source: str, tmp: Path) -> float:
    path = tmp / "candidate.py"
    path.write_text(source)
    env = {**worker_env(), "HOME": str(tmp), "TORCH_EXTENSIONS_DIR": str(tmp / "ext"), "PYTHONPATH": str(REPO)}
    env["TMPDIR"] = str(tmp)
    out = subprocess.run([sys.executable, "-c", PLAIN, str(path)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"plain load_inline failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def kevin_build(evaluator: Evaluator, source: str) -> tuple[float, str, str]:
    """One evaluation as the loop sees it: the spare candidate worker (torch imported) is ready, since
    the next reply takes longer to generate than a worker takes to start."""
    time.sleep(SPARE_READY_S)
    started = time.perf_counter()
    verdict = evaluator.evaluate(source)
    seconds = time.perf_counter() - started
    headers = ",".join(b.get("headers", "?") for b in verdict.details.get("builds", [])) or "none"
    return seconds, headers, verdict.status.value


def relu_evaluator(cache: Path) -> Evaluator:
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=cache)
    evaluator = Evaluator(load_problem(RELU), options)
    evaluator.reference_ready()
    return evaluator


def patterns(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, relu_evaluator(Path(tmp) / "cache") as evaluator:
        for path in PATTERNS:
            source = path.read_text()
            # Untimed: the precompiled header for this kernel's flags, built once per machine and flag set.
            first_s, _, _ = kevin_build(evaluator, unique_source(source, f"{os.getpid()}-{path.stem}-pch"))
            print(f"  {path.name}: first build with its flags (makes their precompiled header): {first_s:.1f} s")
            kevin_s, plain_s = [], []
            for repetition in range(args.repetitions):
                tag = f"{os.getpid()}-{path.stem}-{repetition}"
                for side in ("kevin", "plain") if repetition % 2 == 0 else ("plain", "kevin"):
                    if side == "kevin":
                        seconds, headers, status = kevin_build(evaluator, unique_source(source, tag + "k"))
                        kevin_s.append(seconds)
                    else:
                        with tempfile.TemporaryDirectory() as plain_tmp:
                            plain_s.append(plain_build(unique_source(source, tag + "p"), Path(plain_tmp)))
            rows.append((path.name, statistics.median(kevin_s), statistics.median(plain_s), headers, status))
    print(f"cold builds, {args.repetitions} each, interleaved (median; CUDA built for TORCH_CUDA_ARCH_LIST):")
    for name, kevin_s, plain_s, headers, status in rows:
        print(f"  {name:<36} kevin-tui {kevin_s:6.1f} s [{headers} headers, {status}]  plain {plain_s:6.1f} s  "
              f"-> {plain_s / kevin_s:.1f}x (goal >= 5x)")  # fmt: skip
    light = sum(1 for row in rows if row[3] == "light")
    print(f"  built with the light headers: {light} of {len(rows)}")


def pch(args: argparse.Namespace) -> None:
    os.environ["KEVIN_TUI_PCH_MAX_GB"] = str(args.cap_gb)
    source = (CANDIDATES / "relu_cpp.py").read_text()
    with tempfile.TemporaryDirectory() as tmp, relu_evaluator(Path(tmp) / "cache") as evaluator:
        cache = Path(tmp) / "cache"
        sets = args.flag_sets or args.pch
        print(f"{args.pch} kernels over {sets} sets of compiler flags, PCH cap {args.cap_gb} GB:")
        for index in range(args.pch):
            flags = f'extra_cflags=["-O2", "-DKEVIN_BENCH_VARIANT={index % sets}"]'
            variant = unique_source(source.replace('extra_cflags=["-O2"]', flags), f"{os.getpid()}-{index}")
            seconds, _, status = kevin_build(evaluator, variant)
            found = usage(cache)["pch"]
            print(f"  kernel {index + 1:2d}: {status}, {seconds:5.1f} s; precompiled headers: {found.entries}, "
                  f"{found.bytes / (1 << 30):.2f} GB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patterns", action="store_true")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--pch", type=int, default=0, metavar="N")
    parser.add_argument("--flag-sets", type=int, default=0, metavar="K", help="distinct flag sets (default N)")
    parser.add_argument("--cap-gb", type=float, default=2.0)
    args = parser.parse_args()
    if args.patterns:
        patterns(args)
    if args.pch:
        pch(args)


if __name__ == "__main__":
    main()

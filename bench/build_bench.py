"""What building real-pattern kernels costs, and how much disk the precompiled headers take.

    python3 bench/build_bench.py --patterns            # CUDA kernels: kevin-tui cold build vs a plain load_inline
    python3 bench/build_bench.py --patterns --baseline /tmp/base   # ... and another checkout's kevin-tui, interleaved
    python3 bench/build_bench.py --pch 20 --flag-sets 6 --cap-gb 2   # 20 kernels, 6 sets of flags: PCH disk use

--patterns builds each kernel from cold (a new source), interleaved: with kevin-tui as the loop does
(light CUDA headers, the precompiled torch/extension.h for the kernel's flags, built once beforehand
and reported apart; a spare candidate worker ready) and with a plain
`torch.utils.cpp_extension.load_inline` in a fresh process and directory (its torch import
included, as a naive harness pays it), and prints the ratio (goal: kevin-tui at least 5x faster)
and which headers kevin-tui used. Only the kernel's CUDA source changes between its builds (a comment),
as between Kevin's turns; its declarations stay, so the binding unit built with the header is reused.
Each kevin-tui runs in a process of its own (`--serve`, with that checkout's code first on the path),
so --baseline DIR (e.g. `git archive <commit> | tar -x -C DIR`) is measured in the same run, in turn.
--pch evaluates N new C++ kernels, each under one of K sets of `-D` flags (kernel i uses set i mod K);
each set needs its own precompiled header (~750 MB), and the cache's size is printed after each
kernel (goal: bounded by the cap).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = Path(os.environ.get("KEVIN_TUI_BENCH_CODE", REPO))  # whose kevin_tui a --serve process measures
sys.path.insert(0, str(CODE))

from kevin_tui import kernelbench  # noqa: E402
from kevin_tui.evaluator import EvalOptions, Evaluator  # noqa: E402
from kevin_tui.evaluator.host.cache import usage  # noqa: E402
from kevin_tui.evaluator.host.sandbox import worker_env  # noqa: E402
from kevin_tui.evaluator.worker.builder import wheel_cuda_dirs  # noqa: E402
from kevin_tui.problem import load_problem  # noqa: E402

RELU = kernelbench.root() / "level1" / "19_ReLU.py"
CANDIDATES = REPO / "tests" / "candidates"
SPARE_READY_S = 8.0
PATTERNS = (
    CANDIDATES / "relu_cuda.py",
    CANDIDATES / "realpattern" / "tensor_operators_in_host_code.py",
    CANDIDATES / "realpattern" / "dispatch_stream_guard_cuda.py",
)
PLAIN = """
import sys, time
source = open(sys.argv[1]).read()
started = time.perf_counter()
namespace = {"__name__": "candidate"}  # its load_inline is torch's own, building into TORCH_EXTENSIONS_DIR
exec(compile(source, sys.argv[1], "exec"), namespace)
print(time.perf_counter() - started)
"""


def unique_source(source: str, tag: str) -> str:
    """eval_bench's, imported only here: importing it puts this checkout's kevin_tui first on the path,
    which a --serve process for another checkout must not do."""
    from eval_bench import unique_source as unique  # this directory is on the path

    return unique(source, tag)


def plain_build(source: str, tmp: Path) -> float:
    path = tmp / "candidate.py"
    path.write_text(source)
    env = {**worker_env(), "HOME": str(tmp), "TORCH_EXTENSIONS_DIR": str(tmp / "ext"), "PYTHONPATH": str(REPO)}
    env["TMPDIR"] = str(tmp)
    if not (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cublas_v2.h").exists():
        env["CPATH"] = os.pathsep.join(wheel_cuda_dirs()[0])  # as kevin-tui's builder does (toolkit_fallbacks)
    out = subprocess.run([sys.executable, "-c", PLAIN, str(path)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"plain load_inline failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def kevin_build(evaluator: Evaluator, source: str) -> dict[str, object]:
    """One evaluation as the loop sees it: the spare candidate worker (torch imported) is ready, since
    the next reply takes longer to generate than a worker takes to start."""
    time.sleep(SPARE_READY_S)
    started = time.perf_counter()
    verdict = evaluator.evaluate(source)
    seconds = time.perf_counter() - started
    builds = verdict.details.get("builds", [])
    return {
        "seconds": seconds, "build_s": sum(b.get("seconds", 0.0) for b in builds), "status": verdict.status.value,
        "headers": ",".join(b.get("headers", "?") for b in builds) or "none",
        "binding": ",".join(b.get("binding", "") for b in builds) or "-",
    }  # fmt: skip


def relu_evaluator(cache: Path) -> Evaluator:
    options = EvalOptions(device="cpu", timing=False, shapes="off", profile=False, cache_dir=cache)
    evaluator = Evaluator(load_problem(RELU), options)
    evaluator.reference_ready()
    return evaluator


def serve(cache: Path) -> None:
    """Evaluate each source file named on stdin; one JSON line of figures each on stdout."""
    with relu_evaluator(cache) as evaluator:
        import kevin_tui

        print(json.dumps({"ready": kevin_tui.__file__}), flush=True)
        for line in sys.stdin:
            print(json.dumps(kevin_build(evaluator, Path(line.strip()).read_text())), flush=True)


class Side:
    """A kevin-tui checkout evaluating in its own `--serve` process."""

    def __init__(self, label: str, code: Path, tmp: Path, cache: Path) -> None:
        self.label, self.tmp = label, tmp
        env = {**os.environ, "KEVIN_TUI_BENCH_CODE": str(code), "PYTHONPATH": str(code)}
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", str(cache)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        print(f"  {label}: kevin-tui from {self._answer()['ready']}", flush=True)

    def _answer(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.label} kevin-tui process ended (exit {self.process.wait()})")
        return json.loads(line)

    def evaluate(self, source: str, tag: str) -> dict[str, object]:
        path = self.tmp / f"{self.label}-{tag}.py"
        path.write_text(source)
        assert self.process.stdin is not None
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=120)


def patterns(args: argparse.Namespace) -> None:
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        codes = {"kevin": REPO, **({"base": args.baseline.resolve()} if args.baseline else {})}
        cache = args.cache or tmp / "cache"  # shared: one precompiled header; sources differ, so builds do too
        sides = {label: Side(label, code, tmp, cache) for label, code in codes.items()}
        try:
            for path in PATTERNS:
                source = path.read_text()
                for label, side in sides.items():
                    # Untimed: the precompiled header for this kernel's flags, made once per machine and flag set.
                    first = side.evaluate(unique_source(source, f"{os.getpid()}-{path.stem}-pch"), f"{path.stem}-pch")
                    print(f"  {path.name} [{label}]: first build with its flags (makes their precompiled header): "
                          f"{first['seconds']:.1f} s", flush=True)  # fmt: skip
                order = ["plain", *sides]
                for repetition in range(args.repetitions):
                    tag = f"{os.getpid()}-{path.stem}-{repetition}"
                    for name in order[repetition % len(order) :] + order[: repetition % len(order)]:
                        if name == "plain":
                            with tempfile.TemporaryDirectory() as plain_tmp:
                                seconds = plain_build(unique_source(source, tag + "p"), Path(plain_tmp))
                            row: dict[str, object] = {"seconds": seconds, "build_s": seconds}
                        else:
                            row = sides[name].evaluate(unique_source(source, f"{tag}-{name}"), f"{tag}-{name}")
                        results.setdefault((path.name, name), []).append(row)
                        print(f"    {path.name} {name}: {row}", flush=True)
        finally:
            for side in sides.values():
                side.close()
    print(f"cold builds, {args.repetitions} each, interleaved (median; CUDA built for TORCH_CUDA_ARCH_LIST):")
    for path in PATTERNS:
        plain_s = statistics.median(float(r["seconds"]) for r in results[(path.name, "plain")])  # type: ignore[arg-type]
        print(f"  {path.name}: plain load_inline {plain_s:.1f} s")
        for label in ("base", "kevin"):
            rows = results.get((path.name, label))
            if not rows:
                continue
            whole = statistics.median(float(r["seconds"]) for r in rows)  # type: ignore[arg-type]
            build = statistics.median(float(r["build_s"]) for r in rows)  # type: ignore[arg-type]
            print(f"    {label:<5} build {build:5.1f} s = {build / plain_s:.2f}x of plain (goal <= 0.2x); "
                  f"whole evaluation {whole:5.1f} s = {whole / plain_s:.2f}x  "
                  f"[{rows[-1]['headers']} headers, binding {rows[-1]['binding']}, {rows[-1]['status']}]")  # fmt: skip


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
            row = kevin_build(evaluator, variant)
            found = usage(cache)["pch"]
            print(f"  kernel {index + 1:2d}: {row['status']}, {row['seconds']:5.1f} s; "
                  f"precompiled headers: {found.entries}, {found.bytes / (1 << 30):.2f} GB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patterns", action="store_true")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another checkout of kevin-tui to measure in the same run")
    parser.add_argument("--cache", type=Path, help="--patterns: a build cache to keep (default: a temporary one)")
    parser.add_argument("--serve", type=Path, metavar="CACHE", help=argparse.SUPPRESS)
    parser.add_argument("--pch", type=int, default=0, metavar="N")
    parser.add_argument("--flag-sets", type=int, default=0, metavar="K", help="distinct flag sets (default N)")
    parser.add_argument("--cap-gb", type=float, default=2.0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
    if args.patterns:
        patterns(args)
    if args.pch:
        pch(args)


if __name__ == "__main__":
    main()

"""Evaluation cost, cold and warm, beside a plain load_inline + allclose of the same candidate.

    python3 bench/eval_bench.py                          # C++ candidate on the CPU (g++)
    python3 bench/eval_bench.py --candidate tests/candidates/relu_cuda.py --device cuda

"Plain" is what a naive harness does: import the candidate (load_inline builds into a fresh torch
extensions directory), run ModelNew and Model once, torch.allclose. "Cold" is kevin-tui with an empty
build cache; "warm" is the same source again. Figures are ratios against the plain run measured here,
in the same run, since absolute times on shared machines are noisy.

    python3 bench/eval_bench.py --cache-dir C --baseline /tmp/base --repetitions 3   # against another checkout
    python3 bench/eval_bench.py --cache-dir C --spare-workers 1 2 --repetitions 3      # one spare against two

"Overhead" is what an evaluation costs beyond building and measuring (its total less the build,
check, judge and timing phases): starting, loading and reaping workers. "Back to back" evaluates
the same source again and again with no pause (batch mode, a retry, edit and re-evaluate); the
first of them follows a cold one whose build the next worker's start could overlap, the later ones
are the steady state. With --baseline DIR (e.g. `git archive <commit> | tar -x -C DIR`) each side's
kevin-tui runs in a process of its own with that checkout's code, the sides alternating repetition
by repetition, sharing the build cache; medians are printed side by side. With two --spare-workers
counts, this checkout runs with each, alternating the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE_ENV = "KEVIN_BENCH_CODE"  # the checkout whose kevin_tui a --serve process measures
sys.path.insert(0, os.environ.get(CODE_ENV, str(REPO)))

from kevin_tui import kernelbench  # noqa: E402
from kevin_tui.evaluator import EvalOptions, Evaluator  # noqa: E402
from kevin_tui.evaluator.host.sandbox import worker_env  # noqa: E402
from kevin_tui.problem import load_problem  # noqa: E402

DEFAULT_PROBLEM = kernelbench.root() / "level1" / "19_ReLU.py"
DEFAULT_CANDIDATE = REPO / "tests" / "candidates" / "relu_cpp.py"
PAUSE_S = 5.0
BACK_TO_BACK = 3

PLAIN = textwrap.dedent(
    """
    import importlib.util, sys, time, torch
    t0 = time.perf_counter()
    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    problem = load(sys.argv[1], "problem")
    t1 = time.perf_counter()
    candidate = load(sys.argv[2], "candidate")
    t2 = time.perf_counter()
    device = sys.argv[3]
    ok = None
    if device != "none":  # "none": a CUDA candidate on a machine without a GPU, built only
        init = problem.get_init_inputs()
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        new, ref = candidate.ModelNew(*init).to(device), problem.Model(*init).to(device)
        ok = torch.allclose(new(*inputs), ref(*inputs), atol=1e-2, rtol=1e-2)
    t3 = time.perf_counter()
    print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {ok}")
    """
)


def unique_source(source: str, tag: str) -> str:
    """The candidate with a comment in its first C++ source string, which makes its build hash (and
    torch's own extension cache) new, so 'cold' really is cold."""
    marker = '= """\n'
    if marker not in source:
        raise SystemExit('the candidate has no C++ source string opening with = """')
    return source.replace(marker, f"{marker}// bench {tag}\n", 1)


def plain_run(problem: Path, source: str, device: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "candidate.py"
        cand.write_text(source)
        env = {**worker_env(), "TORCH_EXTENSIONS_DIR": str(Path(tmp) / "ext")}
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", PLAIN, str(problem), str(cand), device],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(f"plain load_inline run failed:\n{out.stderr[-3000:]}")
        total = time.perf_counter() - started
    out = out.stdout.split()
    return {
        "total": total,
        "import_torch_and_problem": float(out[0]),
        "build": float(out[1]),
        "check": float(out[2]),
    }


def kevin_run(evaluator: Evaluator, source: str) -> dict[str, float]:
    started = time.perf_counter()
    verdict = evaluator.evaluate(source)
    total = time.perf_counter() - started
    phases = verdict.phases_s
    headers = ",".join(b.get("headers", "?") for b in verdict.details.get("builds", [])) or "no"
    times = {k: phases.get(k, 0.0) for k in ("build", "check", "judge", "time")}
    # what the evaluation costs beyond building and measuring: starting, loading, reaping workers (goal <= 1 s)
    overhead = total - sum(times.values())
    return {"total": total, "status": verdict.status.value, "headers": headers, **times, "overhead": overhead}


def kevin_runs(args: argparse.Namespace, tag: str, cache: Path) -> dict[str, dict[str, float]]:
    """One evaluator's sequence: the reference's start, a first build (the PCH), a cold source, then
    the same source back to back, then once more after a pause (the spare worker ready)."""
    source = unique_source(args.candidate.read_text(), tag)
    options = EvalOptions(device=args.device, cache_dir=cache, spare_workers=args.spare_workers[0])
    runs: dict[str, dict[str, float]] = {}
    with Evaluator(load_problem(args.problem), options) as evaluator:
        started = time.perf_counter()
        evaluator.reference_ready()
        runs["reference start"] = {"total": time.perf_counter() - started}
        runs["first ever (builds the PCH)"] = kevin_run(
            evaluator, unique_source(args.candidate.read_text(), tag + "-f")
        )
        runs["cold (new source)"] = kevin_run(evaluator, source)
        for index in range(1, BACK_TO_BACK + 1):
            runs[f"warm, back to back #{index}"] = kevin_run(evaluator, source)
        time.sleep(PAUSE_S)  # in the loop, generating the next reply takes far longer than this
        runs[f"warm after {PAUSE_S:.0f} s (spare worker ready)"] = kevin_run(evaluator, source)
    return runs


def print_runs(label: str, runs: dict[str, dict[str, float]]) -> None:
    for name, run in runs.items():
        if "overhead" not in run:
            print(f"  {label} {name}: {run['total']:.1f} s")
            continue
        print(
            f"  {label} {name}: total {run['total']:.1f} s [{run['status']}, {run['headers']} headers] = "
            f"build {run['build']:.1f} s, check {run['check']:.2f} s, judge {run['judge']:.2f} s, "
            f"timing {run['time']:.2f} s; overhead {run['overhead']:.2f} s (goal <= 1 s)"
        )


def serve(args: argparse.Namespace) -> None:
    """--serve: this checkout's (KEVIN_BENCH_CODE's) runs as one JSON line on stdout."""
    with tempfile.TemporaryDirectory() as cache:
        runs = kevin_runs(args, args.serve, args.cache_dir or Path(cache))
    print(json.dumps(runs))


def side_runs(
    code: Path, spares: int | None, args: argparse.Namespace, tag: str, cache: Path
) -> dict[str, dict[str, float]]:
    command = [sys.executable, __file__, "--serve", tag, "--problem", str(args.problem), "--candidate",
               str(args.candidate), "--device", args.device, "--cache-dir", str(cache)]  # fmt: skip
    if spares is not None:
        command += ["--spare-workers", str(spares)]
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, CODE_ENV: str(code)})
    if out.returncode != 0:
        raise SystemExit(f"the kevin-tui run of {code} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(args: argparse.Namespace) -> None:
    """Both checkouts (or this one with two spare counts), alternating, the same cache; medians per run of
    the sequence, side by side."""
    if args.baseline:
        spares = args.spare_workers[0]
        sides = {"base": (args.baseline.resolve(), spares), "now": (REPO, spares)}
    else:
        sides = {f"{n} spare{'s' * (n != 1)}": (REPO, n) for n in args.spare_workers}
    found: dict[str, list[dict[str, dict[str, float]]]] = {label: [] for label in sides}
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache_dir or Path(tmp)
        for repetition in range(args.repetitions):
            for label in list(sides)[:: 1 if repetition % 2 == 0 else -1]:
                tag = f"{os.getpid()}-{time.time_ns()}-{label.replace(' ', '')}"
                runs = side_runs(*sides[label], args, tag, cache)
                found[label].append(runs)
                print(f"repetition {repetition + 1}, {label} ({sides[label][0]}):", flush=True)
                print_runs(label, runs)
    print(f"medians of {args.repetitions} repetitions, interleaved (total / overhead, s):")
    for name in next(iter(found.values()))[0]:
        cells = []
        for label in sides:
            key = "overhead" if "overhead" in found[label][0][name] else "total"
            totals = statistics.median(r[name]["total"] for r in found[label])
            extra = statistics.median(r[name][key] for r in found[label])
            cells.append(f"{label} {totals:5.1f}" + (f" / {extra:4.2f}" if key == "overhead" else ""))
        print(f"  {name:<40} " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", type=Path, default=DEFAULT_PROBLEM)
    parser.add_argument("--candidate", type=Path, default=DEFAULT_CANDIDATE)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cache-dir", type=Path, help="a build cache to use (default: a new, empty one)")
    parser.add_argument("--baseline", type=Path, help="another checkout of kevin-tui to measure in the same run")
    parser.add_argument("--repetitions", type=int, default=3, help="with two sides: runs of each side")
    parser.add_argument("--spare-workers", type=int, nargs="+", default=[None], metavar="N",
                        help="spare workers (default: kevin-tui's); two counts: measure both, interleaved")  # fmt: skip
    parser.add_argument("--serve", metavar="TAG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return
    if len(args.spare_workers) > 2 or (args.baseline and len(args.spare_workers) > 1):
        parser.error("--spare-workers: one count, or two without --baseline")
    if args.baseline or len(args.spare_workers) == 2:
        compare(args)
        return
    tag = f"{os.getpid()}-{time.time_ns()}"
    source = unique_source(args.candidate.read_text(), tag)
    plain_device = "none" if args.device == "cpu" and "cuda_sources" in source else args.device

    print(f"candidate {args.candidate.name} on {args.device}; problem {args.problem.name}")
    plain = plain_run(args.problem, unique_source(args.candidate.read_text(), tag + "-plain"), plain_device)
    print(f"plain load_inline + allclose: total {plain['total']:.1f} s (build {plain['build']:.1f} s, "
          f"check {plain['check']:.2f} s)")  # fmt: skip

    with tempfile.TemporaryDirectory() as cache:
        runs = kevin_runs(args, tag, args.cache_dir or Path(cache))
    print_runs("kevin", runs)
    cold, warm = runs["cold (new source)"], runs[f"warm after {PAUSE_S:.0f} s (spare worker ready)"]
    print(f"ratio cold build / plain build: {cold['build'] / plain['build']:.2f} (goal <= 0.5)")
    print(f"ratio cold total / warm total: {cold['total'] / warm['total']:.1f}x (goal >= 10x)")


if __name__ == "__main__":
    main()

"""Kernels judged per minute by `kevin-tui batch` beside the sequential way, in the same run.

    python3 bench/batch_bench.py [--problems 5] [--trajectories 2] [--turns 3] [--delay 2 6 12] [--rounds 1]

Both modes run the same problems (tests/batch_problems.py: KernelBench level 1 with scripted
Kevin-style replies whose verdicts are known), with the same scripted backend, each reply taking a
fixed generation time (--delay), and the real evaluator on the CPU. The baseline is how
KernelBench's scripts work: one problem and one trajectory at a time, each turn generated then
judged, with one evaluator per problem (the driver and gate `kevin-tui optimize` uses). Batch
mode is `kevin-tui batch`: every trajectory in flight at once, builds apart, one kernel timed at a
time on the CPU. Modes alternate round by round; the verdicts of both must be the same. Goal:
batch >= 3x the baseline's kernels per minute on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin_tui.batch.results import turn_records  # noqa: E402
from kevin_tui.batch.runner import run_batch, trajectory_backend  # noqa: E402
from kevin_tui.config import BatchConfig, ProblemConfig, RunConfig  # noqa: E402
from kevin_tui.device_gate import DeviceGate  # noqa: E402
from kevin_tui.driver import Driver  # noqa: E402
from kevin_tui.evaluator import EvalOptions  # noqa: E402
from kevin_tui.models.backends import scripted_config  # noqa: E402
from kevin_tui.models.base import Sampling  # noqa: E402
from kevin_tui.models.factory import open_backend  # noqa: E402
from kevin_tui.run import open_problem  # noqa: E402
from kevin_tui.session import load_session  # noqa: E402
from tests.batch_problems import PLANS, write_script  # noqa: E402

Verdicts = dict[tuple[str, int], list[str]]


def configs(work: Path, args: argparse.Namespace, delay: float) -> tuple[BatchConfig, tuple]:
    plans = PLANS[: args.problems]
    script = write_script(work / "script.json", plans, args.turns)
    backend = scripted_config(script, delay=delay, sampling=Sampling(seed=0))
    evaluation = EvalOptions(device="cpu", timing_trials=10, shapes="off", trials=2, cache_dir=work / "cache")
    problem = ProblemConfig(trajectories=args.trajectories, evaluation=evaluation)
    config = BatchConfig(backend=backend, problem=problem, problems=tuple(p.path for p in plans), turns=args.turns,
                         concurrency=16, live=False, progress_every=3600)  # fmt: skip
    return config, plans


def verdicts_of(sessions: Path) -> Verdicts:
    found: Verdicts = {}
    for path in sessions.glob("*.jsonl"):
        key, trajectory = path.stem.rsplit(".t", 1)
        found[(key, int(trajectory))] = [r.verdict.status.value for r in turn_records(load_session(path))]
    return found


async def sequential(config: BatchConfig, plans: tuple, sessions: Path) -> None:
    """One problem, then one trajectory, at a time: generate a turn, judge it, next turn."""
    async with open_backend(config.backend) as backend:
        for plan in plans:
            problem = replace(config.problem, problem=plan.path, sessions_dir=sessions, trajectories=1)
            async with open_problem(problem) as scope:
                for trajectory in range(config.problem.trajectories):
                    mine = replace(scope, session_id=f"{plan.key}.t{trajectory:02d}")
                    run = RunConfig(backend=trajectory_backend(config, trajectory), problem=problem)
                    async with Driver.attach(run, lambda report: None, mine, backend, DeviceGate(False)) as driver:
                        for _ in range(config.turns):
                            await driver.advance()
                        await driver.finish()


def measure(mode: str, config: BatchConfig, plans: tuple, out: Path) -> tuple[float, Verdicts]:
    started = time.perf_counter()
    if mode == "sequential":
        asyncio.run(sequential(config, plans, out / "sessions"))
    else:
        code, _ = asyncio.run(run_batch(replace(config, out=out)))
        assert code == 0, f"batch run failed ({code})"
    return time.perf_counter() - started, verdicts_of(out / "sessions")


def compare(args: argparse.Namespace, work: Path, delay: float) -> tuple[float, float]:
    """The best seconds of each mode at one generation time; exits if their verdicts differ."""
    config, plans = configs(work, args, delay)
    kernels = len(plans) * args.trajectories * args.turns
    print(f"batch bench: {len(plans)} problems x {args.trajectories} trajectories x {args.turns} turns = "
          f"{kernels} kernels, {delay:.1f} s to generate each reply, evaluation on the CPU "
          f"({os.cpu_count()} cores)")  # fmt: skip
    times: dict[str, list[float]] = {"sequential": [], "batch": []}
    verdicts: dict[str, Verdicts] = {}
    for round_ in range(args.rounds):
        for mode in ("sequential", "batch"):
            seconds, found = measure(mode, config, plans, work / f"{delay:g}s-{mode}-{round_}")
            times[mode].append(seconds)
            assert verdicts.setdefault(mode, found) == found, f"{mode}: verdicts changed between rounds"
            print(f"  round {round_ + 1} {mode:<10} {seconds:7.1f} s  {60 * kernels / seconds:6.1f} kernels/min",
                  flush=True)  # fmt: skip
    if verdicts["sequential"] != verdicts["batch"]:
        print(f"verdicts DIFFERENT at {delay:g} s per reply: {verdicts}")
        sys.exit(1)
    return min(times["sequential"]), min(times["batch"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=5)
    parser.add_argument("--trajectories", type=int, default=2)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--delay", type=float, nargs="+", default=[2.0, 6.0, 12.0],
                        help="seconds each reply takes to generate (several: each in turn)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    kernels = min(args.problems, len(PLANS)) * args.trajectories * args.turns
    with tempfile.TemporaryDirectory(prefix="kevin-batch-bench-") as tmp:
        work = Path(tmp)
        os.environ["KEVIN_TUI_CACHE_DIR"] = str(work / "cache")
        best = {delay: compare(args, work, delay) for delay in args.delay}
    print(f"\n{kernels} kernels per mode, same verdicts in both; kernels per minute (best of {args.rounds}):")
    print(f"{'s per reply':>12}{'sequential':>12}{'batch':>9}{'ratio':>8}")
    for delay, (base, batch) in best.items():
        print(f"{delay:>12g}{60 * kernels / base:>12.1f}{60 * kernels / batch:>9.1f}{base / batch:>7.2f}x")


if __name__ == "__main__":
    main()

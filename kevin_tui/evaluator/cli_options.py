"""Command-line options for the evaluator, shared by `kevin-tui eval` and `kevin-tui optimize`."""

from __future__ import annotations

import argparse
from pathlib import Path

from kevin_tui.evaluator.evaluator import EvalOptions


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def add_eval_options(parser: argparse.ArgumentParser, device_aliases: tuple[str, ...] = ()) -> None:
    """The evaluator's options, shared by `eval` and `optimize`."""
    defaults = EvalOptions()
    parser.add_argument(
        "--device",
        *device_aliases,
        dest="device",
        default="auto",
        help="where kernels are checked and timed: auto, cpu, cuda or cuda:N (default: auto)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=defaults.timeout_s,
        metavar="SECONDS",
        help=f"limit for running the candidate, per phase (default {defaults.timeout_s:.0f})",
    )
    parser.add_argument(
        "--build-timeout",
        type=positive_float,
        default=defaults.build_timeout_s,
        metavar="SECONDS",
        help=f"limit for importing and building it (default {defaults.build_timeout_s:.0f})",
    )
    parser.add_argument(
        "--trials",
        type=positive_int,
        default=defaults.trials,
        help=f"correctness trials with fresh inputs (default {defaults.trials})",
    )
    parser.add_argument(
        "--timing-trials",
        type=positive_int,
        default=None,
        metavar="N",
        help="timed calls (default: adaptive, at least 10 on CPU, 100 on CUDA)",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (default per dtype)")
    parser.add_argument("--rtol", type=float, default=None, help="relative tolerance (default per dtype)")
    parser.add_argument("--strict", action="store_true", help="static-check findings make the verdict 'rejected'")
    parser.add_argument("--no-timing", action="store_true", help="check correctness only")
    baseline = parser.add_mutually_exclusive_group()
    baseline.add_argument(
        "--compile-baseline",
        dest="compile_baseline",
        action="store_true",
        default=None,
        help="also time the reference under torch.compile (default on CUDA)",
    )
    baseline.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false")
    parser.add_argument("--cache-dir", type=Path, default=None, help="where builds are kept")


def options_from(args: argparse.Namespace) -> EvalOptions:
    options = EvalOptions(
        device=args.device,
        trials=args.trials,
        timeout_s=args.timeout,
        build_timeout_s=args.build_timeout,
        strict=args.strict,
        seed=args.seed,
        timing=not args.no_timing,
        timing_trials=args.timing_trials,
        compile_baseline=args.compile_baseline,
        atol=args.atol,
        rtol=args.rtol,
    )
    if args.cache_dir is not None:
        options.cache_dir = args.cache_dir
    return options

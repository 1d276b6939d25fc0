"""Command-line options for the evaluator, shared by `kevin-tui eval` and `kevin-tui optimize`."""

from __future__ import annotations

import argparse
from pathlib import Path

from kevin_tui.evaluator.host.evaluator import EvalOptions
from kevin_tui.evaluator.host.sandbox import MODES
from kevin_tui.evaluator.host.sanitizer import AT_ACCEPT, TOOLS, parse_choice


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


def memory_size(text: str) -> int:
    """'16G', '512M', '2048' (bytes)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("B")
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 16G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return int(value)


def sanitize_choice(text: str) -> str:
    try:
        return parse_choice(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for weights and inputs (default: a fresh secret per run, recorded in the verdict; "
        "a fixed seed lets a candidate predict its inputs)",
    )
    parser.add_argument(
        "--sandbox",
        choices=MODES,
        default="auto",
        help="run workers in a sandbox: auto (bwrap, else unshare, else off with the reason shown), required, "
        "bwrap, unshare or off (default auto)",
    )
    parser.add_argument(
        "--memory-limit",
        type=memory_size,
        default=None,
        metavar="SIZE",
        help="memory each worker may allocate, e.g. 16G (default: half of this machine's memory)",
    )
    parser.add_argument(
        "--shapes",
        choices=["off", "warn", "strict"],
        default="warn",
        help="after a correct verdict, try other input sizes the problem allows (batch halved and doubled, odd "
        "sizes): a failure there is a shape_specialised warning, or incorrect under strict (default warn)",
    )
    parser.add_argument(
        "--no-profile",
        dest="profile",
        action="store_false",
        help="skip the profile of a correct kernel (where its time goes, custom-kernel coverage)",
    )
    parser.add_argument(
        "--ncu",
        default="auto",
        metavar="auto|off|PATH",
        help="with the profile, on CUDA: an Nsight Compute digest per kernel (occupancy, memory and compute "
        "throughput, top stalls, registers, shared memory) when ncu is installed and may read the GPU's "
        "counters (default auto)",
    )
    parser.add_argument(
        "--sanitize",
        type=sanitize_choice,
        default=AT_ACCEPT,
        metavar="accept|off|all|TOOL,...",
        help=f"on CUDA, one forward call under compute-sanitizer ({', '.join(TOOLS)}); any finding makes the "
        "verdict incorrect. accept: every tool when a kernel is accepted, before it is committed; a list: those "
        "tools after every correct verdict (slow: a worker per tool); off: never (default accept)",
    )
    parser.add_argument(
        "--no-near-duplicates",
        dest="near_duplicates",
        action="store_false",
        help="skip the trials that repeat an earlier input with a few elements changed "
        "(for problems whose inputs must keep a structure kevin-tui cannot see)",
    )
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


def options_from(args: argparse.Namespace, peaks: dict[str, dict] | None = None) -> EvalOptions:
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
        near_duplicates=args.near_duplicates,
        shapes=args.shapes,
        profile=args.profile,
        ncu=args.ncu,
        sanitize=args.sanitize,
        sandbox=args.sandbox,
        memory_limit=args.memory_limit,
        peaks=peaks or None,
    )
    if args.cache_dir is not None:
        options.cache_dir = args.cache_dir
    return options

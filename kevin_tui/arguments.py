"""The command line's flags, and the typed configuration built from them and the config files.

This module and cli.py are the only ones that know argparse: everything below gets a `RunConfig`
(kevin_tui.config) or an `EvalOptions`, built here once, and never sees the Namespace.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from kevin_tui import kernelbench
from kevin_tui.config import BatchConfig, ProblemConfig, RunConfig, Settings
from kevin_tui.evaluator import EvalOptions
from kevin_tui.evaluator.host.options import default_cache_dir
from kevin_tui.evaluator.host.sandbox import MODES
from kevin_tui.evaluator.host.sanitizer import AT_ACCEPT
from kevin_tui.evaluator.host.sanitizer import TOOLS as SANITIZER_TOOLS
from kevin_tui.evaluator.host.sanitizer import parse_choice as parse_sanitize
from kevin_tui.models.base import DEFAULT_MAX_TOKENS, DEFAULT_MODEL, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, Sampling
from kevin_tui.models.factory import BackendConfig, backend_names
from kevin_tui.models.registry import kinds
from kevin_tui.protocol.prompt import DEFAULT_BUDGET
from kevin_tui.protocol.templates import DEFAULT_SET, PROJECT_DIR, SETS, project_prompts
from kevin_tui.usermodel.problems import wants_problem
from kevin_tui.usermodel.specs import ModelSpec

EVAL_EPILOG = """\
exit codes: 0 correct; 3 compiled (built, but no CUDA device to run it);
1 any other verdict; 2 the problem file is unusable; 4 this machine cannot
evaluate it (CPU-only torch, no nvcc, no such device)."""


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


def count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
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
        return parse_sanitize(text)
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
        help=f"limit for importing and building it, all its builds together (default {defaults.build_timeout_s:.0f})",
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
        help="run workers in a sandbox: auto (unshare, else bwrap, else off with the reason shown), required, "
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
        "--spare-workers",
        type=count,
        default=None,
        metavar="N",
        help="candidate workers started ahead, torch imported, so the next evaluation need not wait for one "
        "(default: 2 on 4 cores or more, else 1; 0: none)",
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
        help=f"on CUDA, one forward call under compute-sanitizer ({', '.join(SANITIZER_TOOLS)}); any finding makes "
        "the verdict incorrect. accept: every tool when a kernel is accepted, before it is committed; a list: "
        "those tools after every correct verdict (slow: a worker per tool); off: never (default accept)",
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
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also run a correct candidate's ModelNew under torch.compile and judge that output too: a kernel "
        "that works only eagerly fails, and its graph breaks are reported",
    )
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


PROBLEM_HELP = "a problem file (KernelBench form), or a shipped one: kernelbench:level1/19"


def problem_argument(text: str) -> str:
    """A problem as typed: `kernelbench:level1/19` becomes the shipped file, anything else stays as it is."""
    if not kernelbench.is_name(text):
        return text
    try:
        return str(kernelbench.resolve_one(text))
    except kernelbench.KernelBenchNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def problems_argument(text: str) -> list[Path]:
    """batch's problems: a file, or a `kernelbench:` name, which may stand for a whole level."""
    if not kernelbench.is_name(text):
        return [Path(text)]
    try:
        return kernelbench.resolve(text)
    except kernelbench.KernelBenchNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """The model flags every backend shares, then each registered backend's own, in a group of its own."""
    group = parser.add_argument_group("model")
    backends = "; ".join(f"{kind.name}: {kind.summary}" for kind in kinds())
    group.add_argument("--backend", choices=backend_names(), default="auto",
                       help=f"auto: openai with --server, vllm with a GPU; without either, say what to do. "
                       f"{backends}")  # fmt: skip
    group.add_argument("--model", default=DEFAULT_MODEL, help=f"model id or local directory (default {DEFAULT_MODEL})")
    group.add_argument("--server", metavar="URL", help="an OpenAI-compatible server (API key from KEVIN_TUI_API_KEY)")
    group.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    group.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    group.add_argument("--top-p", type=float, default=DEFAULT_TOP_P)
    group.add_argument("--sampling-seed", type=int, default=None)
    for kind in kinds():
        if kind.options is None or not kind.flags:
            continue
        own = parser.add_argument_group(f"--backend {kind.name}")
        defaults = kind.options()
        for name, option in kind.flags.items():
            default = getattr(defaults, name)
            if option.action:
                own.add_argument(option.flag, dest=name, action=option.action, help=option.help)
            else:
                own.add_argument(option.flag, dest=name, type=option.type, default=default, choices=option.choices,
                                 help=option.help)  # fmt: skip


def add_module_options(parser: argparse.ArgumentParser, what: str) -> None:
    """How to build and feed a module of yours (kevin_tui.usermodel.specs has the syntax)."""
    group = parser.add_argument_group(what)
    group.add_argument("--init", metavar="ARGS", help="constructor (or factory) arguments, e.g. dim=1024,hidden=4096")
    group.add_argument(
        "--input",
        action="append",
        metavar="SPEC",
        help="an input: NAME=DTYPE[SHAPE], e.g. x=float32[8,128,1024] or tokens=int64[4,512]~randint(0,32000) "
        "(randn, normal(m,s), uniform(a,b)); repeat for more",
    )
    group.add_argument("--mode", choices=["train", "eval"], help="run the module in this mode (default: as built)")


def add_prompt_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="prompt token budget (default 8192)")
    parser.add_argument("--prompts", type=Path, default=None,
                        help="a template set (kevin, kevin-tui) or a directory of templates to use "
                        f"(default: ./{PROJECT_DIR}/ when there is one, else kevin)")  # fmt: skip


def prompts_of(args: argparse.Namespace) -> Path | None:
    """--prompts (or the config's `prompts`), else the project's ./prompts/, else None: the shipped set."""
    return Path(args.prompts) if args.prompts else project_prompts()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kevin-tui", description="Interactive GPU-kernel refinement with Kevin-32B.")
    sub = parser.add_subparsers(dest="command", required=True)

    p_demo = sub.add_parser(
        "demo",
        help="the app offline: a shipped problem, recorded Kevin replies, real builds on the CPU",
        description="Open the app on a shipped ReLU problem in a temporary git repository, with Kevin-format "
        "replies replayed by the scripted backend and the real evaluator on the CPU: watch a build, a "
        "check and a timing, continue, and accept a kernel. Needs no GPU, model or network.",
    )
    p_demo.add_argument("--dir", type=Path, help="where to put the demo repository (default: a new temporary one)")
    p_demo.add_argument("--script-rate", type=float, default=60.0, help="chunks streamed per second (default 60)")

    p_eval = sub.add_parser(
        "eval",
        help="judge one candidate kernel against its reference",
        description="Build, check and time CANDIDATE (defines ModelNew) against PROBLEM (defines Model, "
        "get_inputs, get_init_inputs), in an isolated worker process.",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_eval.add_argument("problem", type=problem_argument, help=PROBLEM_HELP)
    p_eval.add_argument("candidate", help="the candidate module defining ModelNew")
    add_eval_options(p_eval)
    p_eval.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    accept = p_eval.add_argument_group("accepting a correct candidate")
    accept.add_argument(
        "--accept", action="store_true", help="if correct, write it beside the problem module and commit it alone"
    )
    accept.add_argument("--accept-slower", action="store_true", help="with --accept: even if it is slower than eager")
    accept.add_argument("--kernel-name", metavar="FILE", help="kernel file name (default: <module>_kernel.py)")
    accept.add_argument("--no-git", action="store_true", help="only write the kernel file")
    accept.add_argument("--git-init", action="store_true", help="create a git repository if there is none")

    p_ask = sub.add_parser(
        "ask",
        help="one turn: prompt Kevin with PROBLEM and stream the reply",
        description="Build the first-turn prompt for PROBLEM, stream the reasoning (stderr) and the answer "
        "(stdout), and parse the kernel. The quickest check that a model server works with kevin-tui.",
    )
    p_ask.add_argument("problem", type=problem_argument, help=PROBLEM_HELP)
    add_backend_options(p_ask)
    add_prompt_options(p_ask)
    p_ask.add_argument("--save", metavar="FILE", help="write the parsed kernel to FILE")

    p_opt = sub.add_parser(
        "optimize",
        help="refine a kernel for PROBLEM turn by turn (--headless: without the TUI)",
        description="Kevin proposes, kevin-tui builds, checks and times, and the history feeds the next turn. "
        "Every step is saved to a session file as it happens.",
    )
    p_opt.add_argument(
        "problem",
        nargs="?",
        type=problem_argument,
        help="a problem file (KernelBench form), a shipped one (kernelbench:level1/19), or a module of yours: "
        "FILE.py:Class (or FILE.py with one nn.Module class) with --init and --input, written as a problem under "
        "--problems-dir",
    )
    p_opt.add_argument("--headless", action="store_true", help="run --turns turns without asking anything")
    p_opt.add_argument("--inline-editor", action="store_true", help="TUI: edit kernels inside the app, not in $EDITOR")
    p_opt.add_argument("--turns", type=positive_int, default=8, help="headless: turns to run (default 8)")
    p_opt.add_argument("--candidates", type=positive_int, default=1, help="replies sampled per turn; the best goes on")
    p_opt.add_argument(
        "--trajectories",
        type=positive_int,
        default=1,
        help="independent chains refined side by side (Kevin's evaluation ran 16)",
    )
    p_opt.add_argument("--note", action="append", help="headless: a note for the next turn (repeat for later turns)")
    p_opt.add_argument("--resume", metavar="ID", help="continue a session: its id, 'last', or its file")
    p_opt.add_argument("--sessions-dir", type=Path, default=Path("sessions"), help="where sessions are saved")
    p_opt.add_argument("--json", action="store_true", help="headless: one JSON object per turn")
    p_opt.add_argument("--accept", choices=["best"], help="headless: commit the best correct kernel at the end")
    p_opt.add_argument(
        "--accept-slower", action="store_true", help="with --accept: even if it is slower than the reference"
    )
    p_opt.add_argument("--git-init", action="store_true", help="with --accept: create a git repository if needed")
    add_module_options(p_opt, "a module of yours (FILE.py:Class; or [problem] in kevin-tui.toml)")
    p_opt.add_argument("--problems-dir", type=Path, default=Path("problems"), help="where problems are written")
    p_opt.add_argument("--backward", action="store_true",
                       help="with FILE.py:Class: the problem is the backward of the module, its vector-Jacobian "
                       "product (inputs and grad_output in, gradients of inputs and parameters out)")  # fmt: skip
    add_prompt_options(p_opt)
    add_eval_options(p_opt, device_aliases=("--eval-device",))
    add_backend_options(p_opt)

    p_batch = sub.add_parser(
        "batch",
        help="Kevin's evaluation protocol over many problems, with the paper's table (and `batch report RUN`)",
        description="Run K trajectories of N turns on each PROBLEM with one model, as Kevin was evaluated "
        "(16 x 8), every request in flight at once up to --concurrency, kernels built in parallel and timed one "
        "at a time per evaluation device. Each trajectory is a session file in --out; --resume continues a "
        "killed run. `kevin-tui batch report RUN [RUN]` prints and writes the report (two runs side by side).",
    )
    p_batch.add_argument("problems", nargs="*", type=problems_argument,
                         help="problem files (KernelBench form), or shipped ones: kernelbench:level1 (a level), "
                         "kernelbench:level2/12 (one)")  # fmt: skip
    p_batch.add_argument("--out", type=Path, help="the run directory (default runs/batch-<date>)")
    p_batch.add_argument("--resume", type=Path, metavar="RUN", help="continue the run in RUN where it stopped")
    p_batch.add_argument("--trajectories", type=positive_int, default=16, help="per problem (default 16, as Kevin)")
    p_batch.add_argument("--turns", type=positive_int, default=8, help="per trajectory (default 8, as Kevin)")
    p_batch.add_argument("--concurrency", type=positive_int, default=16, help="replies streaming at once (default 16)")
    p_batch.add_argument("--build-jobs", type=positive_int, default=None, help="kernels building at once (default: "
                         "the CPU count)")  # fmt: skip
    p_batch.add_argument("--open-problems", type=positive_int, default=None,
                         help="problems open at once (default: enough to fill --concurrency)")  # fmt: skip
    p_batch.add_argument("--eval-while-generating", action="store_true",
                         help="time kernels on the model's GPU while it generates (faster, noisier)")  # fmt: skip
    p_batch.add_argument("--ray", metavar="ADDRESS", help="evaluate as Ray tasks: 'local' (a new local instance), "
                         "'auto' (the running cluster) or a Ray address (needs kevin-tui[ray])")  # fmt: skip
    p_batch.add_argument("--export", type=Path, metavar="FILE", help="write every turn as RL training data (JSONL)")
    shown = p_batch.add_mutually_exclusive_group()
    shown.add_argument("--live", dest="live", action="store_true", default=None, help="the live display")
    shown.add_argument("--no-live", dest="live", action="store_false", help="plain progress lines")
    p_batch.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                         help="seconds between progress lines without the live display (default 30)")  # fmt: skip
    add_prompt_options(p_batch)
    add_eval_options(p_batch, device_aliases=("--eval-devices",))
    add_backend_options(p_batch)

    p_prof = sub.add_parser(
        "profile",
        help="where your model's time goes, and the parts worth a kernel as problem files",
        description="Run your model (a factory function or a module class, with --init and --input) under "
        "torch.profiler and rank your modules and torch's operators by self time, with their share of the "
        "model's time and the most the model could gain from each (Amdahl). --extract writes the problem "
        "of the rows you pick, with the shapes and dtypes seen, ready for `kevin-tui optimize`. In a terminal "
        "without --print, the table opens in the app: space picks rows, x extracts them.",
    )
    p_prof.add_argument("target", help="FILE.py:build_model (returns an nn.Module) or FILE.py:Class")
    add_module_options(p_prof, "the model")
    p_prof.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda when there is one)")
    p_prof.add_argument("--calls", type=positive_int, default=5, help="profiled calls (default 5)")
    p_prof.add_argument(
        "--extract", action="append", metavar="ROW", help="write this row's problem: rank or class name"
    )
    p_prof.add_argument("--backward", action="store_true",
                        help="also time each module's backward alone; --extract then writes its backward problem "
                        "too (the vector-Jacobian product, as optimize FILE.py:Class --backward does)")  # fmt: skip
    p_prof.add_argument("--problems-dir", type=Path, default=Path("problems"), help="where problems are written")
    p_prof.add_argument("--print", action="store_true", help="print the tables instead of opening the app")
    p_prof.add_argument("--json", action="store_true", help="print the profile as one JSON object")

    p_apply = sub.add_parser(
        "apply",
        help="install an accepted kernel in your model; --check proves it end to end",
        description="Write a helper beside KERNEL whose install(model) swaps each instance of the original class "
        "for ModelNew with the same state dict (KEVIN_TUI_KERNELS=off turns it off), and commit it. --check runs "
        "your whole model before and after on the profile's inputs (or MODEL with --input): outputs within "
        "tolerance and the end-to-end times; a failed check writes nothing and exits 1.",
    )
    p_apply.add_argument("kernel", type=Path, help="the accepted kernel, e.g. problems/blocks_GeluGate_kernel.py")
    p_apply.add_argument("--problem", type=Path, help="its problem file (default: the kernel's name without _kernel)")
    p_apply.add_argument("--check", nargs="?", const="", metavar="MODEL",
                         help="check the whole model: FILE.py:build_model (default: the model the problem was "
                         "profiled in, else its module alone)")  # fmt: skip
    add_module_options(p_apply, "the model to check (with --check MODEL)")
    p_apply.add_argument("--device", default="auto", help="where the check runs (default: cuda when there is one)")
    p_apply.add_argument("--rounds", type=positive_int, default=20, help="interleaved timing rounds (default 20)")
    p_apply.add_argument("--rtol", type=float, help="relative tolerance (default: by dtype, float32 1e-4)")
    p_apply.add_argument("--atol", type=float, help="absolute tolerance (default: rtol times the largest output)")
    p_apply.add_argument(
        "--steps",
        type=int,
        default=3,
        metavar="K",
        help="optimizer steps of SGD and of AdamW compared with and without the kernel (default 3; 0: none)",
    )
    p_apply.add_argument("--no-compile", action="store_true", help="do not check torch.compile(model)")
    p_apply.add_argument("--backward-kernel", type=Path, metavar="KERNEL",
                         help="a kernel for the block's backward problem (optimize --backward), installed with the "
                         "forward's; needs --check")  # fmt: skip
    p_apply.add_argument("--no-git", action="store_true", help="only write the helper")
    p_apply.add_argument("--git-init", action="store_true", help="create a git repository if there is none")
    p_apply.add_argument("--sessions-dir", type=Path, default=Path("sessions"), help="where the kernel's session is")
    p_apply.add_argument("--json", action="store_true", help="print the result as one JSON object")

    p_replay = sub.add_parser("replay", help="walk through a saved session (no model, no GPU needed)")
    p_replay.add_argument("file", type=Path, help="a session file (sessions/<id>.jsonl)")
    p_replay.add_argument("--headless", action="store_true", help="print the turns instead of opening the TUI")
    p_replay.add_argument("--json", action="store_true", help="one JSON object per turn")
    p_replay.add_argument("--reeval", action="store_true", help="re-run every kernel here; old and new side by side")
    p_replay.add_argument("--device", default="auto")

    p_sessions = sub.add_parser("sessions", help="list saved sessions")
    p_sessions.add_argument("--sessions-dir", type=Path, default=Path("sessions"))

    p_undo = sub.add_parser(
        "undo",
        help="take back the last accepted kernel",
        description="Remove the last kevin-tui commit, only while it is still HEAD and its kernel file is "
        "unchanged, and put the kernel file back as it was (deleted if it was new). Nothing else moves.",
    )
    p_undo.add_argument("path", nargs="?", type=Path, default=Path("."), help="a path inside the repository")

    p_cache = sub.add_parser("cache", help="show or clean the build cache (builds and precompiled headers)")
    p_cache.add_argument("--clean", choices=["builds", "pch", "all"], help="remove that part of the cache")
    p_cache.add_argument("--cache-dir", type=Path, default=None, help="the cache to use (default ~/.cache/kevin-tui)")

    p_prompts = sub.add_parser("prompts", help="the prompt templates: `prompts export` writes them to edit")
    actions = p_prompts.add_subparsers(dest="action", required=True)
    p_export = actions.add_parser(
        "export",
        help=f"write the templates into DIR (default ./{PROJECT_DIR}/, which kevin-tui then uses when run here); "
        "files already there are kept",
    )
    p_export.add_argument("directory", nargs="?", type=Path, default=Path(PROJECT_DIR), metavar="DIR")
    p_export.add_argument("--set", dest="template_set", choices=SETS, default=DEFAULT_SET,
                          help=f"the set to start from (default {DEFAULT_SET})")  # fmt: skip
    return parser


def apply_settings(parser: argparse.ArgumentParser, settings: Settings) -> list[str]:
    """Config-file values become the defaults of every subcommand that has the option (flags still
    win); returns the settings no subcommand knows. argparse has no public list of a parser's
    options, hence `_actions` (here, and nowhere below the command line)."""
    used: set[str] = set()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for sub in subcommands.choices.values():
        dests = {a.dest for a in sub._actions}
        known = {k: v for k, v in settings.values.items() if k in dests}
        sub.set_defaults(**known)
        used.update(known)
    return sorted(set(settings.values) - used)


def module_spec(args: argparse.Namespace, settings: Settings) -> ModelSpec | None:
    """The module of yours `optimize` should make a problem of (FILE.py:Class, or the [problem] table),
    flags winning over the table; None when the problem is a problem file already."""
    table = settings.problem
    target = args.problem or table.get("module")
    if target is None or not wants_problem(target):
        return None
    fallback = table if target == table.get("module") else {}
    init = args.init if args.init is not None else fallback.get("init")
    return ModelSpec.parse(target, init, args.input or fallback.get("inputs"), args.mode or fallback.get("mode"))


def check_spec(args: argparse.Namespace) -> ModelSpec | bool:
    """What `apply --check` runs: a model named with its specs, True for the recorded one, False: no check."""
    if args.check is None:
        return False
    if not args.check:
        return True
    return ModelSpec.parse(args.check, args.init, args.input, args.mode)


def given_options(args: argparse.Namespace) -> set[str]:
    """The options of this command line that differ from the parser's defaults: what a resume keeps
    from the command line instead of the run's record."""
    defaults = vars(build_parser().parse_args([args.command]))
    return {name for name, value in vars(args).items() if name in defaults and defaults[name] != value}


def eval_options(args: argparse.Namespace, settings: Settings) -> EvalOptions:
    """The evaluation options of any command that evaluates (eval, optimize, batch), from its flags
    (the config file's values are their defaults, see apply_settings) and the config's [peaks]."""
    return EvalOptions(
        device=args.device,
        trials=args.trials,
        timeout_s=args.timeout,
        build_timeout_s=args.build_timeout,
        strict=args.strict,
        seed=args.seed,
        timing=not args.no_timing,
        compiled=args.compiled,
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
        spare_workers=args.spare_workers,
        peaks=settings.peaks or None,
        cache_dir=args.cache_dir or default_cache_dir(),
    )


def backend_config(args: argparse.Namespace) -> BackendConfig:
    options = {
        kind.name: kind.options(**{name: getattr(args, name) for name in kind.flags})
        for kind in kinds()
        if kind.options is not None and kind.flags
    }
    return BackendConfig(
        backend=args.backend,
        model=args.model,
        server=args.server,
        sampling=Sampling(args.temperature, args.top_p, args.max_tokens, args.sampling_seed),
        options=options,
    )


def run_config(args: argparse.Namespace, settings: Settings) -> RunConfig:
    """The typed configuration of an `optimize` run, built once."""
    problem = ProblemConfig(
        problem=Path(args.problem) if args.problem else None,
        resume=args.resume,
        sessions_dir=Path(args.sessions_dir),
        budget=args.budget,
        prompts=prompts_of(args),
        candidates=args.candidates,
        trajectories=args.trajectories,
        evaluation=eval_options(args, settings),
    )
    return RunConfig(
        backend=backend_config(args),
        problem=problem,
        turns=args.turns,
        notes=tuple(args.note or ()),
        accept=args.accept,
        accept_slower=args.accept_slower,
        git_init=args.git_init,
        json=args.json,
        inline_editor=args.inline_editor,
        keys=dict(settings.keys),
    )


def build_report_parser() -> argparse.ArgumentParser:
    """`kevin-tui batch report RUN [RUN]`: parsed apart, since `batch` itself takes problem files."""
    parser = argparse.ArgumentParser(
        prog="kevin-tui batch report",
        description="Print a batch run's report (Kevin's Table 1: best@k and avg@k correctness, mean and geometric-"
        "mean speedup, fast_p; per problem; best speedup by turn) and write it as Markdown, CSV, JSON and a PNG plot. "
        "With two runs, side by side.",
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="one run directory, or two to compare")
    parser.add_argument(
        "--out", type=Path, help="where to write the files (default RUN/report, or RUN/report-vs-OTHER)"
    )
    parser.add_argument("--export", type=Path, metavar="FILE", help="also write the first run's turns as RL data")
    return parser


def batch_config(args: argparse.Namespace, settings: Settings) -> BatchConfig:
    """The typed configuration of a `batch` run, built once."""
    problem = ProblemConfig(
        budget=args.budget,
        prompts=prompts_of(args),
        trajectories=args.trajectories,
        evaluation=eval_options(args, settings),
    )
    out = args.resume or args.out or Path("runs") / f"batch-{datetime.now():%Y%m%d-%H%M%S}"
    return BatchConfig(
        backend=backend_config(args),
        problem=problem,
        problems=tuple(path for named in args.problems for path in named),
        turns=args.turns,
        out=out,
        resume=args.resume is not None,
        concurrency=args.concurrency,
        build_jobs=args.build_jobs or 0,
        eval_devices=tuple(d.strip() for d in args.device.split(",") if d.strip()),
        eval_while_generating=args.eval_while_generating,
        open_problems=args.open_problems or 0,
        ray=args.ray,
        export=args.export,
        live=args.live,
        progress_every=args.progress_every,
    )

"""Command line: eval, ask, optimize (headless), replay, sessions, undo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kevin_tui.config import ConfigError, apply_config, load_config
from kevin_tui.evaluator import EnvironmentProblem, Evaluator
from kevin_tui.evaluator.cli_options import add_eval_options, options_from, positive_int
from kevin_tui.evaluator.report import render
from kevin_tui.evaluator.verdict import (
    EXIT_CANNOT_EVALUATE_HERE,
    EXIT_OTHER,
    EXIT_PROBLEM_UNUSABLE,
    Status,
    Verdict,
)
from kevin_tui.models.factory import add_backend_options
from kevin_tui.problem import Problem, ProblemError, load_problem
from kevin_tui.protocol.prompt import DEFAULT_BUDGET
from kevin_tui.repo import AcceptInfo, GitProblem, KernelRepo, kernel_file_text, kernel_path_for

EVAL_EPILOG = """\
exit codes: 0 correct; 3 compiled (built, but no CUDA device to run it);
1 any other verdict; 2 the problem file is unusable; 4 this machine cannot
evaluate it (CPU-only torch, no nvcc, no such device)."""


def problem_or_report(path: str) -> Problem | None:
    """The problem, or None after saying on stderr what is wrong with the file."""
    try:
        return load_problem(path)
    except ProblemError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        return None


def cmd_eval(args: argparse.Namespace) -> int:
    if (problem := problem_or_report(args.problem)) is None:
        return EXIT_PROBLEM_UNUSABLE
    try:
        source = Path(args.candidate).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"kevin-tui: cannot read candidate {args.candidate}: {exc}", file=sys.stderr)
        return EXIT_PROBLEM_UNUSABLE

    def progress(phase: str, detail: str) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r\033[K{phase}… {detail}", end="", file=sys.stderr, flush=True)

    try:
        with Evaluator(problem, options_from(args), on_progress=progress, prespawn=False) as evaluator:
            verdict = evaluator.evaluate(source)
    except ProblemError as exc:
        print(f"\nkevin-tui: {exc}", file=sys.stderr)
        return EXIT_PROBLEM_UNUSABLE
    except EnvironmentProblem as exc:
        print(f"\nkevin-tui: cannot evaluate here: {exc}", file=sys.stderr)
        return EXIT_CANNOT_EVALUATE_HERE
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    output = verdict.to_dict()
    code = verdict.exit_code
    if args.accept:
        if verdict.status is Status.CORRECT:
            accepted = accept_candidate(problem.path, source, verdict, args)
            output["accepted"] = accepted
            code = EXIT_OTHER if "error" in accepted else code
        else:
            output["accepted"] = {"error": f"not accepted: the verdict is {verdict.status.value}"}
    if args.json:
        print(json.dumps(output))
    else:
        print(render(verdict, Path(args.candidate).name))
        if accepted_report := output.get("accepted"):
            print(f"  accept: {accepted_report.get('error') or accepted_report['summary']}")
    return code


def accept_candidate(problem_path: Path, source: str, verdict: Verdict, args: argparse.Namespace) -> dict:
    """Write (and unless --no-git, commit) a correct candidate beside the problem module."""
    info = AcceptInfo(
        module=problem_path.stem,
        speedup=verdict.speedup,
        speedup_compile=verdict.speedup_compile,
        device=verdict.details.get("environment", {}).get("gpu") or verdict.device,
    )
    path = kernel_path_for(problem_path, args.kernel_name)
    if args.no_git:
        try:
            path.write_text(kernel_file_text(source, info))
        except OSError as exc:
            return {"error": f"cannot write {path}: {exc.strerror or exc}"}
        return {"path": str(path), "commit": None, "summary": f"wrote {path} (--no-git)"}
    try:
        result = KernelRepo.find(path, init=args.git_init).accept_kernel(path, source, info)
    except GitProblem as exc:
        return {"error": str(exc)}
    summary = f"committed {result.commit[:10]} ({path})" + (f"; {result.notice}" if result.notice else "")
    return {"path": str(path), "commit": result.commit, "summary": summary}


def cmd_undo(args: argparse.Namespace) -> int:
    try:
        print(KernelRepo.find(Path(args.path)).undo())
    except GitProblem as exc:
        print(f"kevin-tui: cannot undo: {exc}", file=sys.stderr)
        return EXIT_OTHER
    return 0


def cmd_ask_entry(args: argparse.Namespace) -> int:
    from kevin_tui.ask import cmd_ask

    if (problem := problem_or_report(args.problem)) is None:
        return EXIT_PROBLEM_UNUSABLE
    return cmd_ask(args, problem)


def cmd_optimize(args: argparse.Namespace) -> int:
    if not args.problem and not args.resume:
        print("kevin-tui: optimize needs a problem file (or --resume)", file=sys.stderr)
        return EXIT_PROBLEM_UNUSABLE
    if args.headless:
        import asyncio

        from kevin_tui.headless import run_headless

        return asyncio.run(run_headless(args))
    if not args.resume and problem_or_report(args.problem) is None:  # before the full-screen app opens
        return EXIT_PROBLEM_UNUSABLE
    from kevin_tui.tui.app import KevinApp

    KevinApp(args=args).run()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from kevin_tui.session import SessionError, load_session

    try:
        session = load_session(Path(args.file))
    except SessionError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        return EXIT_PROBLEM_UNUSABLE
    if args.headless or args.json:
        from kevin_tui.headless import replay_headless

        if session.warning:
            print(f"kevin-tui: {session.warning}", file=sys.stderr)
        return replay_headless(session, args)
    from kevin_tui.tui.app import KevinApp

    KevinApp(session=session).run()
    return 0


def cmd_sessions_entry(args: argparse.Namespace) -> int:
    from kevin_tui.headless import cmd_sessions

    return cmd_sessions(args)


def cmd_cache(args: argparse.Namespace) -> int:
    from kevin_tui.evaluator.host import cache
    from kevin_tui.evaluator.host.evaluator import default_cache_dir

    root = args.cache_dir or default_cache_dir()
    if args.clean:
        parts = cache.PARTS if args.clean == "all" else (args.clean,)
        freed = cache.clean(root, parts)
        print(f"removed {', '.join(parts)}: {freed / (1 << 20):.1f} MB freed")
    print(cache.describe(root))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kevin-tui", description="Interactive GPU-kernel refinement with Kevin-32B.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_eval = sub.add_parser(
        "eval",
        help="judge one candidate kernel against its reference",
        description="Build, check and time CANDIDATE (defines ModelNew) against PROBLEM (defines Model, "
        "get_inputs, get_init_inputs), in an isolated worker process.",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_eval.add_argument("problem", help="the reference module (KernelBench form)")
    p_eval.add_argument("candidate", help="the candidate module defining ModelNew")
    add_eval_options(p_eval)
    p_eval.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    accept = p_eval.add_argument_group("accepting a correct candidate")
    accept.add_argument(
        "--accept",
        action="store_true",
        help="if correct, write it beside the problem module and commit that file alone",
    )
    accept.add_argument("--kernel-name", metavar="FILE", help="kernel file name (default: <module>_kernel.py)")
    accept.add_argument("--no-git", action="store_true", help="only write the kernel file")
    accept.add_argument("--git-init", action="store_true", help="create a git repository if there is none")
    p_eval.set_defaults(func=cmd_eval)

    p_ask = sub.add_parser(
        "ask",
        help="one turn: prompt Kevin with PROBLEM and stream the reply",
        description="Build the first-turn prompt for PROBLEM, stream the reasoning (stderr) and the answer "
        "(stdout), and parse the kernel. The quickest check that a model server works with kevin-tui.",
    )
    p_ask.add_argument("problem", help="the reference module (KernelBench form)")
    add_backend_options(p_ask)
    p_ask.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="prompt token budget (default 8192)")
    p_ask.add_argument("--prompts", type=Path, default=None, help="a directory of prompt templates to use")
    p_ask.add_argument("--save", metavar="FILE", help="write the parsed kernel to FILE")
    p_ask.set_defaults(func=cmd_ask_entry)

    p_opt = sub.add_parser(
        "optimize",
        help="refine a kernel for PROBLEM turn by turn (--headless: without the TUI)",
        description="Kevin proposes, kevin-tui builds, checks and times, and the history feeds the next turn. "
        "Every step is saved to a session file as it happens.",
    )
    p_opt.add_argument("problem", nargs="?", help="the reference module (KernelBench form)")
    p_opt.add_argument("--headless", action="store_true", help="run --turns turns without asking anything")
    p_opt.add_argument("--inline-editor", action="store_true", help="TUI: edit kernels inside the app, not in $EDITOR")
    p_opt.add_argument("--turns", type=positive_int, default=8)
    p_opt.add_argument("--candidates", type=positive_int, default=1, help="replies sampled per turn; the best goes on")
    p_opt.add_argument(
        "--trajectories",
        type=positive_int,
        default=1,
        help="independent chains refined side by side (Kevin's evaluation ran 16)",
    )
    p_opt.add_argument("--note", action="append", help="a note for the next turn (repeat for later turns)")
    p_opt.add_argument("--resume", metavar="ID", help="continue a session: its id, 'last', or its file")
    p_opt.add_argument("--sessions-dir", default="sessions", help="where sessions are saved (default: sessions/)")
    p_opt.add_argument("--json", action="store_true", help="headless: one JSON object per turn")
    p_opt.add_argument("--accept", choices=["best"], help="headless: commit the best correct kernel at the end")
    p_opt.add_argument("--git-init", action="store_true", help="with --accept: create a git repository if needed")
    p_opt.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="prompt token budget (default 8192)")
    p_opt.add_argument("--prompts", type=Path, default=None, help="a directory of prompt templates to use")
    add_eval_options(p_opt, device_aliases=("--eval-device",))
    add_backend_options(p_opt)
    p_opt.set_defaults(func=cmd_optimize)

    p_replay = sub.add_parser("replay", help="walk through a saved session (no model, no GPU needed)")
    p_replay.add_argument("file", help="a session file (sessions/<id>.jsonl)")
    p_replay.add_argument("--headless", action="store_true", help="print the turns instead of opening the TUI")
    p_replay.add_argument("--json", action="store_true", help="one JSON object per turn")
    p_replay.add_argument("--reeval", action="store_true", help="re-run every kernel here; old and new side by side")
    p_replay.add_argument("--device", default="auto")
    p_replay.set_defaults(func=cmd_replay)

    p_sessions = sub.add_parser("sessions", help="list saved sessions")
    p_sessions.add_argument("--sessions-dir", default="sessions")
    p_sessions.set_defaults(func=cmd_sessions_entry)

    p_undo = sub.add_parser(
        "undo",
        help="take back the last accepted kernel",
        description="Remove the last kevin-tui commit, only while it is still HEAD and its kernel file is "
        "unchanged, and put the kernel file back as it was (deleted if it was new). Nothing else moves.",
    )
    p_undo.add_argument("path", nargs="?", default=".", help="a path inside the repository (default: .)")
    p_undo.set_defaults(func=cmd_undo)

    p_cache = sub.add_parser("cache", help="show or clean the build cache (builds and precompiled headers)")
    p_cache.add_argument("--clean", choices=["builds", "pch", "all"], help="remove that part of the cache")
    p_cache.add_argument("--cache-dir", type=Path, default=None, help="the cache to use (default ~/.cache/kevin-tui)")
    p_cache.set_defaults(func=cmd_cache)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"kevin-tui: bad configuration file: {exc}", file=sys.stderr)
        sys.exit(EXIT_PROBLEM_UNUSABLE)
    for key in apply_config(parser, config):
        print(f"kevin-tui: ignoring unknown setting {key!r} in {', '.join(config['_sources'])}", file=sys.stderr)
    args = parser.parse_args(argv)
    args.keys = config.get("keys", {})
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        print("\nkevin-tui: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)

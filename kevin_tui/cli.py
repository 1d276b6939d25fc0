"""Command line: demo, eval, ask, optimize (app or headless), profile, apply, replay, sessions, undo.

Flags and config files become a typed configuration here (kevin_tui.arguments) and go no further
as a Namespace. What can be checked without running anything is checked before an app opens: the
problem's shape (from its syntax tree), the session to resume, whether any model can run here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from kevin_tui.arguments import (
    apply_settings,
    backend_config,
    batch_config,
    build_parser,
    build_report_parser,
    check_spec,
    eval_options,
    given_options,
    module_spec,
    prompts_of,
    run_config,
)
from kevin_tui.batch.manifest import Manifest
from kevin_tui.config import RunConfig, Settings, load_settings
from kevin_tui.errors import EXIT_USAGE, KevinError
from kevin_tui.evaluator import EnvironmentProblem, Evaluator
from kevin_tui.evaluator.host.sanitizer import first_finding
from kevin_tui.evaluator.report import render
from kevin_tui.evaluator.verdict import EXIT_CANNOT_EVALUATE_HERE, EXIT_OTHER, Status
from kevin_tui.models.factory import launch_difference, relaunched
from kevin_tui.problem import load_problem
from kevin_tui.protocol.templates import PROJECT_DIR, load_templates, prompts_change
from kevin_tui.repo import GitProblem, undo_last_accept
from kevin_tui.session import find_session, load_session
from kevin_tui.usermodel.specs import ModelSpec


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    problem = load_problem(args.problem)
    try:
        source = Path(args.candidate).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"kevin-tui: cannot read candidate {args.candidate}: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def progress(phase: str, detail: str) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r\033[K{phase}… {detail}", end="", file=sys.stderr, flush=True)

    options = eval_options(args, settings)
    sanitized = None
    try:
        with Evaluator(problem, options, on_progress=progress, prespawn=False) as evaluator:
            verdict = evaluator.evaluate(source)
            if args.accept and verdict.status is Status.CORRECT:  # the gate, before anything is committed
                from kevin_tui.driver import accept_gate

                gate = accept_gate(evaluator, source, verdict, options.sanitize)
                sanitized = gate() if gate else None
    except EnvironmentProblem as exc:
        print(f"\nkevin-tui: cannot evaluate here: {exc}", file=sys.stderr)
        return EXIT_CANNOT_EVALUATE_HERE
    if not args.json and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)
    output = verdict.to_dict()
    code = verdict.exit_code
    if args.accept and sanitized and (finding := first_finding(sanitized)):
        output["accepted"] = {"error": f"not accepted: {finding.describe()}"}
        code = EXIT_OTHER
    elif args.accept:
        from kevin_tui.driver import AcceptRequest, accept_kernel, interval_of

        result = accept_kernel(
            AcceptRequest(
                problem=problem.path, code=source, what=Path(args.candidate).name, status=verdict.status.value,
                speedup=verdict.speedup, speedup_compile=verdict.speedup_compile,
                speedup_interval=interval_of(verdict),
                device=verdict.details.get("environment", {}).get("gpu") or verdict.device,
                slower_ok=args.accept_slower, git_init=args.git_init, git=not args.no_git, name=args.kernel_name,
            )
        )  # fmt: skip
        if (accepted := result.accepted) is not None:
            output["accepted"] = {"path": str(accepted.path), "commit": accepted.commit,
                                  "summary": accepted.summary()}  # fmt: skip
        else:
            output["accepted"] = {"error": result.outcome.without_dialog}
            if verdict.status is Status.CORRECT:
                code = EXIT_OTHER
    if args.json:
        print(json.dumps(output))
    else:
        print(render(verdict, Path(args.candidate).name))
        if accepted_report := output.get("accepted"):
            print(f"  accept: {accepted_report.get('error') or accepted_report['summary']}")
    return code


def cmd_undo(args: argparse.Namespace, settings: Settings) -> int:
    try:
        print(undo_last_accept(args.path))
    except GitProblem as exc:
        print(f"kevin-tui: cannot undo: {exc}", file=sys.stderr)
        return EXIT_OTHER
    return 0


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.ask import ask_once

    problem = load_problem(args.problem)
    config = backend_config(args)
    config.resolve()  # no model here: say so at once
    return ask_once(problem, config, args.budget, prompts_of(args), args.save)


def cmd_optimize(args: argparse.Namespace, settings: Settings) -> int:
    config = run_config(args, settings)
    module = None if config.problem.resume else module_spec(args, settings)
    if config.problem.problem is None and config.problem.resume is None and module is None:
        print("kevin-tui: optimize needs a problem file, a module of yours (FILE.py:Class) or --resume",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if config.problem.resume:
        config = resumed_launch(config, args)
    config.backend.resolve()  # no GPU and no server: said now, not after a model start
    if not config.problem.resume:
        if module is not None:  # your module becomes a problem file, proven by running both
            from kevin_tui.usermodel.problems import make_problem

            path, said = make_problem(module, config.problem.evaluation.device, args.problems_dir, args.backward)
            print(f"kevin-tui: {said}", file=sys.stderr)
            config = replace(config, problem=replace(config.problem, problem=path))
        assert config.problem.problem is not None  # given, or just made from the module
        load_problem(config.problem.problem)  # its shape, from the syntax tree; it runs inside the app
    if args.headless:
        import asyncio

        from kevin_tui.headless import run_headless

        return asyncio.run(run_headless(config))
    from kevin_tui.tui.app import KevinApp

    app = KevinApp(config=config)
    app.run()
    if where := app.where_said():
        print(f"kevin-tui: {where}", file=sys.stderr)
    return 0


def resumed_launch(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    """A resumed session starts the backend it was started with (flags given now win), and says so
    when the prompt set is not the one it was written with."""
    assert config.problem.resume is not None
    header = load_session(find_session(config.problem.sessions_dir, config.problem.resume)).header
    before = {"backend": header.backend, "model": header.model} if header.backend != "scripted" else {}
    recorded = header.launch or before  # a session from before launches were recorded: its backend and model
    backend = relaunched(config.backend, recorded, given_options(args))
    if taken := launch_difference(config.backend, backend):
        print(f"kevin-tui: resuming as the session was started: {' '.join(taken)}", file=sys.stderr)
    if change := prompts_change(header.prompts_version, header.prompts_files, load_templates(config.problem.prompts)):
        print(f"kevin-tui: resuming with other prompts: {change} (--prompts chooses the set)", file=sys.stderr)
    return replace(config, backend=backend)


def cmd_profile(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.usermodel.profile_report import extract, profile, render

    spec = ModelSpec.parse(args.target, args.init, args.input, args.mode)
    if sys.stdout.isatty() and not (args.print or args.json or args.extract):
        from kevin_tui.tui.profile_screen import ProfileApp

        app = ProfileApp(spec, args.device, args.calls, args.problems_dir)
        app.run()
        print("\n".join(app.said) or "kevin-tui profile: nothing extracted")
        return 0
    print(f"kevin-tui: profiling {spec.describe()}…", file=sys.stderr)
    report = profile(spec, args.device, args.calls, args.problems_dir, args.backward)
    if args.json:
        print(json.dumps(asdict(report), default=str))
    else:
        print(render(report))
    for line in extract(report.pick(args.extract), args.problems_dir) if args.extract else []:
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_apply(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.usermodel.apply import CheckOptions, apply_kernel, record_in_session

    options = CheckOptions(args.device, args.rounds, args.rtol, args.atol, args.steps, not args.no_compile)
    check = check_spec(args)
    if check is not False:
        print(f"kevin-tui: checking {args.kernel} in your model…", file=sys.stderr)
    applied = apply_kernel(args.kernel, args.problem, check, options, git=not args.no_git, git_init=args.git_init,
                           backward_kernel=args.backward_kernel)  # fmt: skip
    session = record_in_session(applied, args.sessions_dir) if applied.passed is not False else None
    if args.json:
        print(json.dumps({**asdict(applied), "passed": applied.passed, "session": session}, default=str))
    else:
        print("\n".join(applied.lines()) + (f"\nrecorded in {session}" if session else ""))
    return EXIT_OTHER if applied.passed is False or applied.error else 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.demo import prepare_demo
    from kevin_tui.tui.app import KevinApp

    config, directory = prepare_demo(args.dir, args.script_rate, keys=settings.keys)
    app = KevinApp(config=config, title="demo")
    app.run()
    if said := app.where_said():
        print(f"kevin-tui demo: {said}")
    print(f"kevin-tui demo: the repository and the session are in {directory} (delete it when done)")
    return 0


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    session = load_session(args.file)
    if args.headless or args.json:
        from kevin_tui.headless import replay_headless

        if session.warning:
            print(f"kevin-tui: {session.warning}", file=sys.stderr)
        return replay_headless(session, args.json, args.device if args.reeval else None)
    from kevin_tui.tui.app import KevinApp

    KevinApp(session=session).run()
    return 0


def cmd_batch(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from kevin_tui.batch.cli import run_batch_command

    if args.resume and args.problems:
        print("kevin-tui: --resume takes its problems from the run; give no problem files", file=sys.stderr)
        return EXIT_USAGE
    if not args.resume and not args.problems:
        print("kevin-tui: batch needs problem files (or --resume RUN)", file=sys.stderr)
        return EXIT_USAGE
    config = batch_config(args, settings)
    if args.resume:  # the run's own backend, unless flags given now say otherwise
        launch = Manifest.load(args.resume).protocol.get("launch", {})
        config = replace(config, backend=relaunched(config.backend, launch, given_options(args)))
    config.backend.resolve()  # no GPU and no server: said now, before anything starts
    return asyncio.run(run_batch_command(config))


def cmd_batch_report(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.batch.cli import report_command

    return report_command(args.runs, args.out, args.export)


def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.headless import list_sessions

    return list_sessions(args.sessions_dir)


def cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.evaluator.host import cache
    from kevin_tui.evaluator.host.options import default_cache_dir

    root = args.cache_dir or default_cache_dir()
    if args.clean:
        parts = cache.PARTS if args.clean == "all" else (args.clean,)
        freed = cache.clean(root, parts)
        print(f"removed {', '.join(parts)}: {freed / (1 << 20):.1f} MB freed")
    print(cache.describe(root))
    return 0


def cmd_prompts(args: argparse.Namespace, settings: Settings) -> int:
    from kevin_tui.protocol.templates import export_templates

    written, kept = export_templates(args.directory, args.template_set)
    for path in written:
        print(f"wrote {path}")
    for path in kept:
        print(f"kept {path} (it was there already; remove it to get the shipped text)")
    if args.directory.resolve() == (Path.cwd() / PROJECT_DIR).resolve():
        print(f"kevin-tui uses ./{PROJECT_DIR}/ when run from {Path.cwd()} (--prompts names others)")
    else:
        print(f'use them with --prompts {args.directory}, or `prompts = "{args.directory}"` in kevin-tui.toml')
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "demo": cmd_demo, "eval": cmd_eval, "ask": cmd_ask, "optimize": cmd_optimize, "replay": cmd_replay,
    "sessions": cmd_sessions, "undo": cmd_undo, "cache": cmd_cache, "batch": cmd_batch,
    "batch-report": cmd_batch_report, "profile": cmd_profile, "apply": cmd_apply, "prompts": cmd_prompts,
}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    try:
        settings = load_settings()
    except KevinError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    for key in apply_settings(parser, settings):
        print(f"kevin-tui: ignoring unknown setting {key!r} in {', '.join(settings.sources)}", file=sys.stderr)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["batch", "report"]:
        args = build_report_parser().parse_args(argv[2:])
        args.command = "batch-report"
    else:
        args = parser.parse_args(argv)
    try:
        code = COMMANDS[args.command](args, settings)
    except KevinError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("\nkevin-tui: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)

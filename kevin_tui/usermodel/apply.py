"""`kevin-tui apply KERNEL [--check MODEL]`: an accepted kernel, installed in your model, with proof.

Apply writes a small helper beside the kernel (`<problem>_apply.py`, from install_template.py) whose
`install(model)` swaps each instance of the original class for ModelNew with the same state dict,
and which KEVIN_TUI_KERNELS=off turns off. With `--check`, the worker runs your whole model before
and after install, on the profile's inputs (or the ones given): outputs within tolerance, and the
end-to-end times. A failed check writes nothing. The helper is committed (with the kernel and its
problem file if they are not committed as they are), with the check's figures in the message; the
kernel's session, when there is one, records it too.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui.problem import Problem, load_problem, top_level_names
from kevin_tui.repo import APPLY_TRAILER, WITH_TRAILER, GitProblem, KernelRepo
from kevin_tui.session.events import ApplyEvent
from kevin_tui.session.writer import SessionWriter
from kevin_tui.usermodel.runner import UserModelProblem, run_worker
from kevin_tui.usermodel.specs import ModelSpec

TEMPLATE = Path(__file__).with_name("install_template.py")
SETTING = re.compile(r"^(KERNEL|PROBLEM|CLASS|SOURCE|BACKWARD|BACKWARD_KERNEL|MODES) = .*?(  # .*)$", re.M)
# The kernel file's header is its first two lines, which kevin-tui wrote (repo.kernel_file_text); what follows is the
# candidate's text, which may hold lines of the same form: with no speed measured ("speedup not measured") a search of
# the whole file read a kernel's own "# Kevin kernel for m: 50.00x vs eager" into the apply commit (redteam15).
KERNEL_SPEEDUP = re.compile(r"# Kevin kernel for .*?: ([\d.]+)x vs eager")
KERNEL_SESSION = re.compile(r"# session (\S+), turn")


def kernel_header(text: str) -> tuple[str, str]:
    """The two lines kevin-tui wrote at the top of an accepted kernel file: what it is and how fast, and its session."""
    lines = [*text.split("\n", 2)[:2], "", ""]  # as written: "\n" ends a line, not every character splitlines takes
    return lines[0], lines[1]


@dataclass(frozen=True)
class CheckOptions:
    device: str = "auto"
    rounds: int = 20
    rtol: float | None = None
    atol: float | None = None
    steps: int = 3  # optimizer steps of SGD and AdamW compared (0: none)
    compile: bool = True  # check torch.compile(model) too


@dataclass
class Applied:
    kernel: Path
    helper: Path
    check: dict[str, Any] | None  # the worker's figures; None when not checked
    model: str | None  # what was checked
    commit: str | None = None
    notice: str = ""
    error: str | None = None  # why it was not committed

    @property
    def passed(self) -> bool | None:
        return None if self.check is None else bool(self.check["passed"])

    def lines(self) -> list[str]:
        """What happened, for the terminal and the app."""
        if self.check is not None and not self.check["passed"]:
            return [*check_lines(self.check, self.model or ""), f"not installed: nothing was written to {self.helper}"]
        said = [f"helper {self.helper}: `from {_dotted(self.helper)} import install; model = install(model)` "
                "(KEVIN_TUI_KERNELS=off turns it off)"]  # fmt: skip
        if self.check is not None:
            said += check_lines(self.check, self.model or "")
        if self.commit:
            said.append(f"committed {self.commit[:10]}" + (f"; {self.notice}" if self.notice else ""))
        if self.error:
            said.append(f"not committed: {self.error}")
        return said

    def event(self) -> ApplyEvent:
        return ApplyEvent(kernel=str(self.kernel), helper=str(self.helper), commit=self.commit, model=self.model,
                          passed=self.passed, check=self.check or {})  # fmt: skip


def _dotted(path: Path) -> str:
    try:
        relative = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        relative = Path(path.name)
    return ".".join(relative.with_suffix("").parts)


def check_lines(check: dict[str, Any], model: str) -> list[str]:
    swapped = f"{len(check['swapped'])} swapped ({', '.join(check['swapped'])})" if check.get("swapped") else ""
    lines = [f"check: {model} on {check.get('device', '?')}" + (f", {swapped}" if swapped else "")]
    lines += [f"  left as it is: {why}" for why in check.get("left", [])]
    if not check["passed"]:
        return [*lines, *(training_lines(check["training"]) if check.get("training") else []),
                f"  FAILED: {check['message']}"]  # fmt: skip
    lines.append(f"  outputs match (largest difference {check['max_abs_diff']:.3g})")
    lines += [f"    not compared at {why}" for why in check.get("fresh_skipped", [])]
    if why := check.get("other_mode"):
        lines.append(f"  the kernel runs in {check['modes'][0]} mode only: {why}; in the other the helper runs your "
                     "module's own forward")  # fmt: skip
    lines.append(f"  end to end: {check['before_ms']:.3f} ms before, {check['after_ms']:.3f} ms after "
                 f"(median of {check['rounds']} interleaved rounds): {speed_text(check)}")  # fmt: skip
    return lines + training_lines(check.get("training"))


def training_lines(training: dict[str, Any] | None) -> list[str]:
    """The training proof's figures (see kevin_tui.usermodel.training_check)."""
    if not training:
        return ["  training: not checked (no parameter needs a gradient and no input is floating)"]
    lines = []
    if training["backward"] == "kernel":
        lines.append("  backward: the kernel's own (its gradients match the model's)")
    elif training["backward"] == "backward_kernel":
        lines.append("  backward: the backward kernel (a second operator, its gradients compared below)")
    else:
        lines.append("  backward: recomputes the original block under autograd (gradients exactly the model's)")
        if "own_backward" in training:
            lines.append(f"    the kernel's own backward is {training['own_backward']}")
    if "max_grad_diff" in training:
        also = "".join(f"; {label}" for label in training.get("fresh", []))
        lines.append(f"  gradients match: {training['compared']} parameters and inputs (largest difference "
                     f"{training['max_grad_diff']:.3g}), on the check's inputs{also}")  # fmt: skip
        lines += [f"    not compared at {why}" for why in training.get("fresh_skipped", [])]
    if "saved_before_bytes" in training:
        lines.append(f"  saved for backward per call: {training['saved_before_bytes'] / 1e6:.3g} MB before, "
                     f"{training['saved_after_bytes'] / 1e6:.3g} MB after")  # fmt: skip
    for name, figures in training.get("steps", {}).items():
        losses = ", ".join(f"{a:.6g}/{b:.6g}" for a, b in zip(figures["losses_before"], figures["losses_after"],
                                                                strict=True))  # fmt: skip
        lines.append(f"  {training['step_count']} {name} steps: losses before/after {losses}; parameters after "
                     f"within {figures['max_param_diff']:.3g}")  # fmt: skip
    if compiled := training.get("compiled"):
        if "error" in compiled:
            lines.append(f"  torch.compile: fails: {compiled['error']}")
        else:
            lines.append(f"  torch.compile: {compiled['graph_breaks']} graph breaks, output within "
                         f"{compiled['max_abs_diff']:.3g}" + (f", gradients within {compiled['max_grad_diff']:.3g}"
                                                              if "max_grad_diff" in compiled else "")
                         + (f" (torch.compile alone differs from eager by {compiled['compile_itself']:.3g})"
                            if "compile_itself" in compiled else ""))  # fmt: skip
    if step := training.get("step"):
        lines.append(f"  training step (forward and backward): {step['before_ms']:.3f} ms before, "
                     f"{step['after_ms']:.3f} ms after: {speed_text(step)}")  # fmt: skip
    return lines


def speed_text(check: dict[str, Any]) -> str:
    """The end-to-end speedup with its interval; "no measurable difference" when that holds 1."""
    low, high = check["interval"]
    interval = f"95% interval {low:.2f}-{high:.2f}"
    if low <= 1 <= high:
        return f"no measurable difference ({check['speedup']:.2f}x, {interval})"
    return f"{check['speedup']:.2f}x ({interval})"


def verdict(check: dict[str, Any]) -> str:
    """faster, slower or same, end to end (by the interval)."""
    low, high = check["interval"]
    return "faster" if low > 1 else "slower" if high < 1 else "same"


def problem_of(kernel: Path, problem: Path | None = None) -> Problem:
    """The generated problem a kernel was made for: `x_kernel.py` is for `x.py` unless named."""
    found = load_problem(problem or kernel.with_name(kernel.name.removesuffix("_kernel.py") + ".py"))
    origin_of(found)
    return found


def origin_of(problem: Problem) -> dict[str, Any]:
    """Where the problem came from; raises when kevin-tui did not write it from a module of yours."""
    origin = problem.origin
    if origin is None:
        raise UserModelProblem(f"{problem.path} was not written by kevin-tui from a module of yours, so which class "
                               "the kernel replaces is unknown (make the problem with `kevin-tui optimize "
                               "FILE.py:Class` or `kevin-tui profile --extract`)")  # fmt: skip
    return origin


def helper_path(problem: Path) -> Path:
    return problem.with_name(f"{problem.stem}_apply.py")


def helper_text(
    kernel: Path, problem: Problem, backward: str = "recompute", backward_kernel: Path | None = None,
    modes: tuple[str, ...] = ("train", "eval"),
) -> str:  # fmt: skip
    """install_template.py with this kernel's settings; `backward` is "kernel" only once the check
    has matched the kernel's own gradients to the reference's. `modes`: where the kernel runs; unchecked, in both (as
    the kernel is unproven in your model anyway), checked, in those the check proved."""
    origin = origin_of(problem)
    helper_dir = problem.path.parent
    source = problem.path.parent / origin["root"] / origin["class_file"]
    settings = {
        "KERNEL": repr(os.path.relpath(kernel.resolve(), helper_dir.resolve())),
        "PROBLEM": repr(problem.path.name),
        "CLASS": repr(origin["class"]),
        "SOURCE": repr(os.path.relpath(source.resolve(), helper_dir.resolve())),
        "BACKWARD": repr("backward_kernel" if backward_kernel else backward),
        "BACKWARD_KERNEL": repr(backward_kernel and os.path.relpath(backward_kernel.resolve(), helper_dir.resolve())),
        "MODES": repr(tuple(modes)),
    }
    text = SETTING.sub(lambda m: f"{m[1]} = {settings[m[1]]}{m[2]}", TEMPLATE.read_text())
    header = (
        f"# Written by kevin-tui apply for {kernel.name}; `kevin-tui undo` takes it back while it is the last commit"
    )
    return f"{header}\n{text}"


def check_model(problem: Problem, given: ModelSpec | None) -> ModelSpec:
    """What --check runs: the model given, else the one the problem was profiled in, else its module alone."""
    if given is not None:
        return given
    origin = origin_of(problem)
    recorded = origin.get("model") or {
        "target": origin["target"],
        "init": ",".join(f"{k}={v}" for k, v in origin["init"].items()),
        "inputs": origin["inputs"],
        "mode": None if origin["training"] else "eval",
    }
    file, _, name = recorded["target"].rpartition(":") if ":" in recorded["target"] else (recorded["target"], "", "")
    path = os.path.relpath((problem.path.parent / origin["root"] / file).resolve(), Path.cwd())
    target = f"{path}:{name}" if name else path
    return ModelSpec.parse(target, recorded.get("init"), recorded.get("inputs"), recorded.get("mode"))


def apply_kernel(
    kernel: Path,
    problem: Path | None = None,
    check: ModelSpec | bool = False,
    options: CheckOptions = CheckOptions(),
    git: bool = True,
    git_init: bool = False,
    backward_kernel: Path | None = None,
) -> Applied:
    """Write the helper, check it when asked (a failure writes nothing and raises nothing: see
    `passed`), and commit it unless `git` is False. `backward_kernel`, a kernel for the block's
    backward problem, is installed with the forward's, and only with a check."""
    for path in (kernel, backward_kernel) if backward_kernel else (kernel,):
        if not path.is_file() or "ModelNew" not in top_level_names_of(path):
            raise UserModelProblem(f"{path}: no such kernel file (one that defines ModelNew)")
    if backward_kernel and check is False:
        raise UserModelProblem("a backward kernel is installed only once --check has compared its gradients with "
                               "your model's: add --check")  # fmt: skip
    found = problem_of(kernel, problem)
    helper = helper_path(found.path)
    text = helper_text(kernel, found, backward_kernel=backward_kernel)
    applied = Applied(kernel, helper, None, None)
    before = helper.read_text() if helper.exists() else None
    helper.write_text(text)
    if check is not False:
        spec = check_model(found, check if isinstance(check, ModelSpec) else None)
        applied.model = spec.describe()
        request = {**spec.request(), "helper": str(helper.resolve()), "device": options.device,
                   "rounds": options.rounds, "rtol": options.rtol, "atol": options.atol, "steps": options.steps,
                   "compile": options.compile, "backward_kernel": backward_kernel is not None}  # fmt: skip
        try:
            applied.check = run_worker("check", request)
        finally:
            if not applied.check or not applied.check["passed"]:
                _put_back(helper, before)
        if not applied.check["passed"]:
            return applied
        backward = applied.check.get("training", {}).get("backward", "recompute")
        text = helper_text(kernel, found, backward, backward_kernel, tuple(applied.check["modes"]))
        helper.write_text(text)
    if git:
        try:
            repo = KernelRepo.find(helper, init=git_init)
            with_files = repo.changed([kernel, found.path, *with_backward(backward_kernel)])
            relative = [repo.relative(f) for f in with_files]
            done = repo.commit_files({helper: text}, with_files, commit_message(applied, found, kernel, relative,
                                                                               repo.relative(helper)))  # fmt: skip
            applied.commit, applied.notice = done.commit, done.notice
        except GitProblem as exc:
            applied.error = str(exc)
    return applied


def with_backward(backward_kernel: Path | None) -> list[Path]:
    """A backward kernel and its problem (`x_backward_kernel.py` is for `x_backward.py`), where they are."""
    if backward_kernel is None:
        return []
    problem = backward_kernel.with_name(backward_kernel.name.removesuffix("_kernel.py") + ".py")
    return [backward_kernel, *([problem] if problem.exists() else [])]


def top_level_names_of(path: Path) -> set[str]:
    try:
        return top_level_names(ast.parse(path.read_text()))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return set()


def _put_back(helper: Path, before: str | None) -> None:
    if before is None:
        helper.unlink(missing_ok=True)
    else:
        helper.write_text(before)


def commit_message(applied: Applied, problem: Problem, kernel: Path, with_files: list[str], helper: str) -> str:
    """Says what was installed where, and how fast end to end; never calls it faster when it is not."""
    origin = origin_of(problem)
    name = origin["class"]
    check = applied.check
    alone = KERNEL_SPEEDUP.match(kernel_header(kernel.read_text())[0])
    if check is None:
        summary = f"feat({name}): install Kevin kernel, not checked in a model"
    elif verdict(check) == "faster":
        summary = f"perf({name}): Kevin kernel installed, {check['speedup']:.2f}x end to end"
    elif verdict(check) == "slower":
        summary = f"feat({name}): Kevin kernel installed, {check['speedup']:.2f}x end to end (slower)"
    else:
        summary = f"feat({name}): Kevin kernel installed, no measurable difference end to end"
    what = (f"kevin-tui apply: {helper} swaps each {name} ({origin['class_file']}) for ModelNew from "
            f"{kernel.name}, carrying its state dict; KEVIN_TUI_KERNELS=off turns it off.")  # fmt: skip
    body = check_lines(check, applied.model or "") if check else ["Not checked: run kevin-tui apply --check"]
    if alone:
        body.append(f"Kernel alone: {alone[1]}x vs eager")
    trailers = [f"{APPLY_TRAILER}: {helper}", *(f"{WITH_TRAILER}: {f}" for f in with_files)]
    return "\n".join([summary, "", what, "", *body, "", *trailers]) + "\n"


def record_in_session(applied: Applied, sessions_dir: Path) -> Path | None:
    """Append the apply to the session the kernel was accepted in, when that session is here."""
    match = KERNEL_SESSION.match(kernel_header(applied.kernel.read_text())[1])
    path = sessions_dir / f"{match[1]}.jsonl" if match and match[1] != "-" else None
    if path is None or not path.exists():
        return None
    writer = SessionWriter(path)
    try:
        writer.write(applied.event())
    finally:
        writer.close()
    return path

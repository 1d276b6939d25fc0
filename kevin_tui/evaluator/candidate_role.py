"""The candidate worker: build, run and time untrusted generated code.

Every terminal outcome is one `final` event carrying a status; a correct run
ends with `checked` (outputs saved for the reference worker to judge) and,
when asked, `timed`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator import worker as w
from kevin_tui.evaluator.build import BuildTracker, EnvironmentProblem, is_build_failure
from kevin_tui.evaluator.compiler_output import SourceMap, first_errors
from kevin_tui.evaluator.guards import IdentityGuard, LeftoverGuard
from kevin_tui.evaluator.judge import flatten
from kevin_tui.evaluator.timing import TimingPlan, time_call


class Verdict(Exception):
    """Ends the run with a status (raised from deep inside, caught once)."""

    def __init__(self, status: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details


def build_failure(exc: BaseException, tracker: BuildTracker, source: str) -> Verdict | None:
    """A compile_error verdict when `exc` came from building or loading an extension."""
    if not tracker.records or not is_build_failure(exc):
        return None
    text = str(exc)
    loading = isinstance(exc, ImportError)
    files = tracker.records[-1].files if tracker.records else {}
    errors = first_errors(text, SourceMap(source, files))
    first = errors[0]["message"] if errors else text.strip().splitlines()[-1][:200]
    what = "loading the built extension failed" if loading else "the build failed"
    return Verdict("compile_error", f"{what}: {first}", compiler_errors=errors, log=text[-6000:])


def type_name(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def record_output(output: Any) -> list[dict[str, Any]]:
    """Plain data for the judge; a tensor subclass is named, never trusted with its own methods."""
    leaves = []
    for leaf in flatten(output):
        if type(leaf) is torch.Tensor:
            leaves.append({"type_name": "torch.Tensor", "value": leaf.detach().cpu(), "device": str(leaf.device)})
        elif isinstance(leaf, torch.Tensor):
            leaves.append({"type_name": type_name(leaf), "value": None, "device": None})
        elif isinstance(leaf, w.PLAIN_TYPES):
            leaves.append({"type_name": type_name(leaf), "value": leaf, "device": None})
        else:
            leaves.append({"type_name": type_name(leaf), "value": repr(leaf)[:200], "device": None})
    return leaves


class CandidateRun:
    def __init__(self, request: dict[str, Any], channel: w.Channel) -> None:
        self.request = request
        self.channel = channel
        self.device = request["device"]
        self.source = Path(request["candidate_path"]).read_text()
        self.tracker = BuildTracker(Path(request["build_root"]))
        self.checks: list[dict[str, Any]] = []

    def check(self, name: str, passed: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "passed": passed, "detail": detail})

    def phase(self, name: str) -> None:
        self.channel.emit("phase", phase=name)

    def guarded(self, what: str, fn, on_error: str = "runtime_error"):
        try:
            return fn()
        except (Verdict, EnvironmentProblem):
            raise
        except BaseException as exc:
            failure = build_failure(exc, self.tracker, self.source)
            if failure:
                raise failure from exc
            raise Verdict(
                on_error,
                f"{what} raised {type(exc).__name__}: {str(exc)[:300]}",
                traceback=w.short_traceback(exc),
            ) from exc

    def verify_untouched(self, identity: IdentityGuard, leftover: LeftoverGuard | None, when: str) -> None:
        """Raise `rejected` if a watched function was replaced or work was left running."""
        if replaced := identity.replaced():
            self.check("no replaced torch/timing functions", False, f"{', '.join(replaced)} ({when})")
            raise Verdict("rejected", f"the candidate replaced {', '.join(replaced[:4])} ({when})")
        if leftover is not None and (left := leftover.leftovers()):
            self.check("nothing left running after forward", False, f"{', '.join(left)} ({when})")
            raise Verdict("rejected", f"{', '.join(left[:3])} still running after forward returned ({when})")

    def load(self):
        """Import the problem and the candidate (building happens here); check ModelNew."""
        self.phase("build")
        problem = w.import_file(self.request["problem_path"], "kevin_reference")
        self.tracker.install()
        identity = IdentityGuard()
        module = self.guarded(
            "importing the candidate",
            lambda: w.import_file(self.request["candidate_path"], "kevin_candidate"),
        )
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            raise Verdict("format_error", "the candidate defines no ModelNew class (an nn.Module)")
        self.verify_untouched(identity, None, "after import")
        return problem, model_new, identity

    def construct(self, problem, model_new, inputs: dict[str, Any]):
        seed = self.request["seed"]
        init = inputs["init_inputs"]
        if why := w.signature_problem(model_new, "__init__", init):
            raise Verdict("format_error", why)
        if why := w.signature_problem(model_new, "forward", inputs["trials"][0]):
            raise Verdict("format_error", why)
        model = self.guarded("ModelNew(*get_init_inputs())", lambda: w.seeded(seed, lambda: model_new(*init)))
        if self.tracker.uses_cuda and not self.device.startswith("cuda"):
            builds = self.tracker.summary()
            raise Verdict(
                "compiled",
                "built for real with nvcc; there is no CUDA device here, so it was not run or checked",
                builds=builds,
            )
        model = self.guarded("moving ModelNew to the device", lambda: model.to(self.device))
        reference = w.seeded(seed, lambda: problem.Model(*init)).to(self.device)
        return model, reference

    def call(self, model, args, what: str):
        def run():
            with torch.no_grad():
                out = model(*args)
            w.synchronize(self.device)  # surface asynchronous CUDA errors here
            return out

        return self.guarded(what, run)

    def check_outputs(self, model, reference, inputs, identity: IdentityGuard) -> list[dict[str, Any]]:
        self.phase("check")
        leftover = LeftoverGuard()
        mutation_allowed = self.request["reference_mutates_inputs"]
        runs = []
        for trial, raw in enumerate(inputs["trials"], start=1):
            args = w.to_device(raw, self.device)
            outputs = {}
            for order in ("before", "after"):
                given = w.clone(args)
                out = self.call(model, given, f"forward (trial {trial}, {order} the reference)")
                self.verify_untouched(identity, leftover, f"trial {trial}")
                if not mutation_allowed and not w.same(given, args):
                    self.check("inputs unchanged", False, f"trial {trial}")
                    raise Verdict("incorrect", f"the candidate changed its inputs in place (trial {trial})")
                outputs[order] = record_output(out)
                if order == "before":
                    with torch.no_grad():
                        reference(*w.clone(args))
                    w.synchronize(self.device)
            runs.append(outputs)
        self.check("inputs unchanged", True, "" if not mutation_allowed else "the reference changes them too")
        self.check("no replaced torch/timing functions", True)
        self.check("nothing left running after forward", True)
        return runs

    def run(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.set_device(self.device)  # kernels launch on the current device: make it ours
        problem, model_new, identity = self.load()
        if self.request.get("build_only"):
            self.channel.emit("built", builds=self.tracker.summary())
            return
        inputs = torch.load(self.request["inputs_path"], weights_only=False)
        model, reference = self.construct(problem, model_new, inputs)
        self.verify_untouched(identity, None, "after construction")
        runs = self.check_outputs(model, reference, inputs, identity)
        outputs_path = Path(self.request["scratch"]) / "outputs.pt"
        torch.save(runs, outputs_path)
        self.channel.emit("checked", outputs_path=str(outputs_path), checks=self.checks, builds=self.tracker.summary())
        command = self.channel.next_command()
        if command["cmd"] != "time":
            return
        self.phase("time")
        args = w.to_device(inputs["trials"][0], self.device)
        plan = TimingPlan(**command["plan"])
        leftover = LeftoverGuard()
        with torch.no_grad():
            timings = self.guarded("timing forward", lambda: time_call(lambda: model(*args), plan, self.device))
        self.verify_untouched(identity, leftover, "after timing")
        self.channel.emit("timed", timings={k: v.__dict__ for k, v in timings.items()}, checks=self.checks)
        self.channel.next_command()


def run_candidate(request: dict[str, Any], channel: w.Channel) -> None:
    run = CandidateRun(request, channel)
    try:
        run.run()
    except Verdict as verdict:
        channel.emit(
            "final",
            status=verdict.status,
            message=verdict.message,
            details=verdict.details,
            checks=run.checks,
            builds=run.tracker.summary(),
        )

"""The candidate worker: imports the untrusted candidate, runs it on the inputs it is handed, one step
at a time, and reports. It decides nothing: its outputs are judged by the reference worker and its
timings checked against the host's clock. A failure it reports about itself (a crash, a tripwire)
is believed, since reporting one can only hurt the candidate.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator.protocol import COMPILE_SEED, round_file
from kevin_tui.evaluator.worker import common, tensorfile
from kevin_tui.evaluator.worker.build_client import CUDA_CALLED, PROFILING, BuildClient
from kevin_tui.evaluator.worker.capture import aliases, leaves, model_tensors, no_modes, snapshot
from kevin_tui.evaluator.worker.channel import Channel
from kevin_tui.evaluator.worker.guards import Elsewhere, IdentityGuard, LeftoverGuard, RoundWatch
from kevin_tui.evaluator.worker.inputs import TimedInputs
from kevin_tui.evaluator.worker.opcount import count_ops
from kevin_tui.evaluator.worker.reference import write_record
from kevin_tui.evaluator.worker.timing_loop import Timer


class Failure(Exception):
    """Ends the run with a status the candidate earned (raised from deep inside, caught once)."""

    def __init__(self, status: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.details = status, message, details


def scribble(value: Any) -> None:
    """Fill what the reference left behind with NaN before it is freed, and the allocator's free memory of the
    same sizes too, so that memory a kernel forgets to write holds no answer (uninitialised reads show)."""
    tensors = [t for t in leaves(value) if type(t) is torch.Tensor and t.is_floating_point()]
    with torch.no_grad():
        for tensor in tensors:
            tensor.fill_(float("nan"))
        garbage = [torch.full_like(t, float("nan")) for t in tensors for _ in range(2)]
    del garbage


def seed_cache() -> None:
    """This worker's own torch.compile cache (in its private /tmp) starts as a copy of the reference
    workers' shared one, which it sees read-only (host: Evaluator.compile_cache)."""
    seed = os.environ.get(COMPILE_SEED)
    if not seed or not Path(seed).is_dir():
        return
    for source, target in ((seed, "TORCHINDUCTOR_CACHE_DIR"), (f"{seed}/triton", "TRITON_CACHE_DIR")):
        if (own := os.environ.get(target)) and Path(source).is_dir():
            shutil.copytree(source, own, symlinks=True, dirs_exist_ok=True)


def refuse(replaced: list[str], left: list[str], when: str) -> None:
    """`rejected` for a watched function replaced or work left running (what the tripwires found), else nothing."""
    if replaced:
        raise Failure("rejected", f"the candidate replaced {', '.join(replaced[:4])} ({when})")
    if left:
        raise Failure("rejected", f"{', '.join(left[:3])} still running after forward returned ({when})")


class CandidateRun:
    def __init__(self, request: dict[str, Any], channel: Channel) -> None:
        self.request = request
        self.channel = channel
        self.device = request["device"]
        self.scratch = Path(request["scratch"])
        self.builds = BuildClient(channel)
        self.mutation_allowed = request["mutates_inputs"]
        self.identity: IdentityGuard | None = None
        self.previous_args: list[Any] | None = None
        self.reused: list[Any] | None = None  # the in-place trials' input objects, the same for all of them
        self.timer: Timer | None = None
        self.compiled_model: Any = None  # ModelNew under torch.compile, made by the first `compiled` command

    def guarded(self, what: str, fn):
        try:
            return fn()
        except (Failure, SystemExit):
            raise
        except BaseException as exc:
            raise Failure(
                "runtime_error",
                f"{what} raised {type(exc).__name__}: {str(exc)[:300]}",
                traceback=common.short_traceback(exc),
            ) from exc

    def untouched(self, leftover: LeftoverGuard | None, when: str) -> None:
        """Fail as `rejected` if a watched function was replaced or work was left running."""
        assert self.identity is not None, "the candidate is loaded first"
        refuse(self.identity.replaced(), [], when)  # first: the leftovers' look can take 20 ms
        refuse([], leftover.leftovers() if leftover is not None else [], when)

    # -- loading -------------------------------------------------------------------

    def load(self) -> None:
        self.problem = common.import_file(self.request["problem_path"], "kevin_reference")
        # held before the candidate runs: it can rebind the module's names (the timing pool is drawn with these)
        self.get_inputs, self.reference_class = self.problem.get_inputs, self.problem.Model
        self.builds.install()
        self.identity = IdentityGuard()
        self.elsewhere = Elsewhere(lambda: self.builds.loaded)
        module = self.guarded(
            "importing the candidate", lambda: common.import_file(self.request["candidate_path"], "kevin_candidate")
        )
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            raise Failure("format_error", "the candidate defines no ModelNew class (an nn.Module)")
        self.untouched(None, "after import")
        init = tensorfile.read(Path(self.request["init_path"]))
        for method in ("__init__",):
            if why := common.signature_problem(model_new, method, init):
                raise Failure("format_error", why)
        seed = self.request["init_seed"]
        model = self.guarded("ModelNew(*get_init_inputs())", lambda: common.seeded(seed, lambda: model_new(*init)))
        self.model = self.guarded("moving ModelNew to the device", lambda: model.to(self.device))
        self.reference = common.seeded(seed, lambda: self.reference_class(*init)).to(self.device)
        self.untouched(None, "after construction")
        torch.set_num_threads(self.request["threads"])  # pinned again: importing the candidate may have changed it
        self.channel.emit("loaded")

    # -- correctness -----------------------------------------------------------------

    @contextlib.contextmanager
    def cuda_ops_watched(self) -> Iterator[None]:
        """On a CPU evaluation, a call of an operator an nvcc-built library registered is noted in CUDA_CALLED
        (its Python-module functions note themselves: build_client.Traced)."""
        if not self.builds.cuda_ops or self.device.startswith("cuda"):
            yield
            return
        with torch.autograd.profiler.profile() as profile:
            yield
        CUDA_CALLED[0] = CUDA_CALLED[0] or any(e.name in self.builds.cuda_ops for e in profile.function_events)

    def call(self, args: list[Any], model: Any = None, watched: bool = True) -> tuple[Any, list[str], Any]:
        """One call of `model` (ModelNew unless given: its torch.compile form) on `args`, and its output taken the
        moment it returns: a copy, what it shares memory with (the inputs, ModelNew's tensors), and the live output.
        `watched`: under `cuda_ops_watched` (its profiler may start a thread, which the op count must not have)."""
        with torch.no_grad(), self.cuda_ops_watched() if watched else contextlib.nullcontext():
            out = (self.model if model is None else model)(*args)
        common.synchronize(self.device)  # surface asynchronous CUDA errors here
        with no_modes():
            return snapshot(out), aliases(out, args, model_tensors(self.model)), out

    def forward(self, args: list[Any], what: str) -> tuple[Any, list[str], Any]:
        return self.guarded(what, lambda: self.call(args))

    def profile(self, command: dict[str, Any]) -> None:
        """Where one forward call's time goes: PyTorch ops (CPU) and kernels (CUDA), from torch.profiler."""
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.startswith("cuda") else [])
        args = common.clone(self.first_args)
        PROFILING[0] = True
        try:
            with torch.no_grad():
                self.model(*args)  # warm
                common.synchronize(self.device)
                with profile(activities=activities) as trace, record_function("kevin::forward"):
                    self.model(*args)
                    common.synchronize(self.device)
            events = trace.key_averages()
        except Exception:
            self.channel.emit("profiled", ops=[], kernels=[], total_ms=0.0)
            return
        finally:
            PROFILING[0] = False
        ops, kernels, total = [], [], 0.0
        for e in events:
            if e.key == "kevin::forward":
                total = e.cpu_time_total / 1e3
                continue
            device_us = getattr(e, "self_device_time_total", 0.0) or getattr(e, "self_cuda_time_total", 0.0)
            if device_us > 0 and not e.key.startswith("aten::"):
                kernels.append([e.key[:200], int(e.count), device_us / 1e3])
            elif e.key.startswith(("aten::", "kevin_ext::")):  # self times: an extension's torch calls are torch's
                ops.append([e.key, int(e.count), e.self_cpu_time_total / 1e3])
        ops.sort(key=lambda o: -o[2])
        kernels.sort(key=lambda k: -k[2])
        self.channel.emit("profiled", ops=ops[:20], kernels=kernels[:20], total_ms=total)

    def ncu(self, command: dict[str, Any]) -> None:
        """For a worker running under Nsight Compute: one warm call, then one inside the NVTX range ncu
        profiles (only that call's kernels are replayed and measured)."""
        args = common.to_device(tensorfile.read(Path(command["inputs"])), self.device)
        with torch.no_grad():
            self.guarded("forward (warm-up for ncu)", lambda: self.model(*common.clone(args)))
            common.synchronize(self.device)
            torch.cuda.nvtx.range_push(command["range"])
            self.guarded("forward (under ncu)", lambda: self.model(*args))
            common.synchronize(self.device)
            torch.cuda.nvtx.range_pop()
        self.channel.emit("ncu_done")

    def sanitize(self, command: dict[str, Any]) -> None:
        """For a worker running under compute-sanitizer: one call, synchronised, so that every kernel it
        launched has run under the tool before the reply."""
        args = common.to_device(tensorfile.read(Path(command["inputs"])), self.device)
        with torch.no_grad():
            self.guarded("forward (under compute-sanitizer)", lambda: self.model(*args))
            common.synchronize(self.device)
        self.channel.emit("sanitized")

    def count(self, command: dict[str, Any]) -> None:
        """Evidence, asked for last (counting leaves the process slower, so it never happens before timing): the
        PyTorch compute ops one forward call dispatches, on a fresh sample it never saw (on a trial's inputs a kernel
        replayed its stored answer and dispatched nothing), its output written to be judged like a trial's. Named
        with it (`unseen`): what of the candidate's could run PyTorch beside the counted thread, or that forward
        failed under the count (a kernel that cannot run under a dispatch mode is not wrong for it, only unseen)."""
        index = command["index"]
        args = common.to_device(tensorfile.read(Path(command["inputs"])), self.device)
        counts: dict[str, int] = {}
        path: Path | None = None
        try:
            ((out, out_aliases, _), counts), unseen = self.elsewhere.around(
                lambda: self.guarded(
                    "forward (its ops counted)", lambda: count_ops(lambda: self.call(args, watched=False))
                ),
                triton_runs=self.device.startswith("cuda"),
            )
        except Failure as failure:
            unseen = [f"forward failed while its ops were counted: {failure.message[:300]}"]
        else:
            path = self.scratch / f"out-{index}.kt"
            write_record(path, {"count": out}, out_aliases)
        self.channel.emit("ops", op_counts=counts, unseen=unseen, path=str(path) if path else None)

    def trial(self, command: dict[str, Any]) -> None:
        index = command["index"]
        args = common.to_device(tensorfile.read(Path(command["inputs"])), self.device)
        if index == 0:
            if why := common.signature_problem(type(self.model), "forward", args):
                raise Failure("format_error", why)
            self.first_args = common.clone(args)
        leftover = LeftoverGuard()
        outputs: dict[str, Any] = {}
        found: list[str] = []
        first: tuple[Any, Any] | None = None  # the first call's live output and its copy
        for order in ("before", "after"):
            given = common.clone(args)
            label = f"forward (trial {index + 1}, {order} the reference)"
            out, out_aliases, live = self.forward(given, label)
            if first is None:
                first = (live, out)
            elif not common.same_values(first[0], first[1]):
                raise Failure("incorrect", "the output of one call changed during the next call (one output buffer "
                              "reused across calls?): a module's result must stay valid")  # fmt: skip
            self.untouched(leftover, f"trial {index + 1}")
            if not self.mutation_allowed and not common.same(given, args):
                raise Failure("incorrect", f"the candidate changed its inputs in place (trial {index + 1})")
            outputs[order], found = out, found or out_aliases
            if order == "before":
                with torch.no_grad():
                    scribble(self.reference(*common.clone(args)))
                common.synchronize(self.device)
        assert first is not None
        if self.previous_args is not None:  # a call on other inputs must leave this call's output alone
            self.forward(common.clone(self.previous_args), f"forward (trial {index + 1}, on earlier inputs)")
            if not common.same_values(*first):
                raise Failure("incorrect", "the output of one call changed during the next call (one output "
                              "buffer reused across calls?): a module's result must stay valid")  # fmt: skip
        self.previous_args = args
        path = self.scratch / f"out-{index}.kt"
        write_record(path, outputs, found)
        self.channel.emit("trial_done", index=index, path=str(path), cuda_called=CUDA_CALLED[0])

    def changed(self, command: dict[str, Any]) -> None:
        """The first trial's input objects called again after their values change in place, and the model's
        parameters too when they are the reference's (same names and shapes, nothing derived beside them):
        what an optimizer step does. A kernel that caches by identity or data_ptr answers stale. Every such trial
        changes the same objects (made from the first trial's inputs once), so the last one, after the timed calls,
        is the latest reuse of a buffer the evaluation makes."""
        index = command["index"]
        new_args, new_params = tensorfile.read(Path(command["inputs"]))
        if self.reused is None:
            self.reused = common.clone(self.first_args)
        given = self.reused
        self.forward(given, "forward (before its inputs and parameters change in place)")
        params = dict(self.model.named_parameters())
        mine = {k: tuple(v.shape) for k, v in self.model.state_dict().items()}
        theirs = {k: tuple(v.shape) for k, v in self.reference.state_dict().items()}
        follow = mine == theirs and {name for name, _ in new_params} == set(params)
        saved = {name: p.detach().clone() for name, p in params.items()} if follow else {}
        with torch.no_grad():
            for old, new in zip(given, new_args, strict=True):
                if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
                    old.copy_(new)
            for name, value in new_params if follow else []:
                params[name].copy_(value)
        try:
            out, out_aliases, _ = self.forward(given, "forward (after its inputs and parameters changed in place)")
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    params[name].copy_(value)
        path = self.scratch / f"out-{index}.kt"
        write_record(path, {"parameters" if follow else "inputs": out}, out_aliases)
        self.channel.emit("trial_done", index=index, path=str(path), cuda_called=CUDA_CALLED[0])

    def compiled(self, command: dict[str, Any]) -> None:
        """One trial's inputs through ModelNew under torch.compile (compiled on the first call), its output
        written for the judge like an eager trial's. The graph breaks are counted once by
        torch._dynamo.explain, here in the candidate's process, so the host takes them as information only."""
        import torch._dynamo as dynamo  # imported at the start under --compiled (worker/main.py)

        index = command["index"]
        args = common.to_device(tensorfile.read(Path(command["inputs"])), self.device)
        breaks: int | None = None
        reasons: list[str] = []
        if self.compiled_model is None:
            try:
                with torch.no_grad():
                    explained = dynamo.explain(self.model)(*common.clone(args))
                breaks = common.graph_breaks(explained)
                reasons = [str(getattr(r, "reason", r))[:300] for r in explained.break_reasons[:5]]
            except Exception as exc:  # the compiled call below says what fails
                reasons = [f"torch._dynamo.explain raised {type(exc).__name__}: {str(exc)[:300]}"]
            dynamo.reset()
            seed_cache()
            self.compiled_model = torch.compile(self.model)
        given, model = common.clone(args), self.compiled_model
        out, found, _ = self.elsewhere.compiling(
            lambda: self.guarded(
                f"forward under torch.compile (trial {index + 1})", lambda: self.call(given, model, watched=False)
            )
        )
        path = self.scratch / f"compiled-{index}.kt"
        write_record(path, {"compiled": out}, found)
        self.channel.emit("compiled_done", index=index, path=str(path), graph_breaks=breaks, break_reasons=reasons)

    # -- timing ------------------------------------------------------------------------

    def timer_for(self, command: dict[str, Any]) -> None:
        assert self.identity is not None, "the candidate is loaded first"
        inputs = TimedInputs(self.get_inputs, self.device)
        model, reference = self.model, self.reference
        self.timer = Timer(lambda args: model(*args), inputs, self.device, RoundWatch(self.identity),
                           control=lambda args: reference(*args))  # fmt: skip
        self.channel.emit("timer_ready")

    def round(self, command: dict[str, Any]) -> None:
        """One timing round: the same loop as the reference's, its tripwires (`RoundWatch`) included, and nothing
        after the reply: the host stops this process on the reply (a main round's) or soon after (its next
        command goes to the reference, with this process stopped), so work left for after it landed in this
        worker's next window, which the reference's has not (its post-reply tripwires and a control round's file
        removal: ~0.5-2 ms a round, 0.13 ms a call of an identical 1 MB ReLU, read as 0.64x). The host removes
        the round's file, as it does the reference's."""
        if (threads := torch.get_num_threads()) != self.request["threads"]:
            raise Failure("rejected", f"the candidate changed torch's thread count to {threads} "
                          f"(the reference runs with {self.request['threads']})")  # fmt: skip
        timer = self.timer
        assert timer is not None, "the host sends timer before the first round"
        path = self.scratch / round_file(command["round"])
        samples, synced = self.guarded(
            "timing forward",
            lambda: timer.round(
                command["calls"], command["seed"], path, command["control"], command.get("watch", True)
            ),
        )
        refuse(*timer.found, f"timing round {command['round']}")
        if timer.shared_memory and not self.request["output_aliases"]:
            shared = timer.shared_memory
            raise Failure("incorrect", f"in timing round {command['round']}, {shared} output(s) shared memory "
                          "with their call's inputs, which the reference's output never does")  # fmt: skip
        self.channel.emit("round_done", round=command["round"], samples_ms=samples, synced_ms=synced,
                          path=None if command["control"] else str(path))  # fmt: skip

    def serve(self) -> None:
        handlers = {"trial": self.trial, "changed": self.changed, "timer": self.timer_for, "round": self.round,
                    "count": self.count, "profile": self.profile, "ncu": self.ncu,
                    "sanitize": self.sanitize, "compiled": self.compiled}  # fmt: skip
        while (command := self.channel.next_command())["cmd"] != "exit":
            handlers[command["cmd"]](command)


def run_candidate(request: dict[str, Any], channel: Channel) -> None:
    torch.set_num_threads(request["threads"])
    if request["device"].startswith("cuda"):
        torch.cuda.set_device(request["device"])  # kernels launch on the current device: make it ours
        torch.cuda.init()  # before anything is seeded, as in the reference worker (common.seeded)
    run = CandidateRun(request, channel)
    try:
        run.load()
        run.serve()
    except Failure as failure:
        channel.emit("final", status=failure.status, message=failure.message, details=failure.details)

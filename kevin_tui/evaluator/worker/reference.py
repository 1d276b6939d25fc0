"""The reference worker: the user's problem, its inputs and outputs, its timing rounds, and the judge.

It imports only the problem, never a candidate; it makes every trial's inputs from the secret seed the
host gives it per evaluation, keeps the reference outputs in memory, and judges the candidate's
outputs from files (never unpickled). It stays alive for the evaluator's lifetime.
"""

from __future__ import annotations

import importlib
import os
import secrets
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator.protocol import OUTPUT_FILE_SLACK, compile_baseline_on, round_file
from kevin_tui.evaluator.worker import common, tensorfile
from kevin_tui.evaluator.worker.capture import aliases, leaves, model_tensors, no_modes, snapshot, written_bytes
from kevin_tui.evaluator.worker.channel import Channel
from kevin_tui.evaluator.worker.guards import IdentityGuard, RoundWatch
from kevin_tui.evaluator.worker.inputs import TimedInputs, near_duplicate, sample, trial_inputs
from kevin_tui.evaluator.worker.judge import judge_trial, tolerance_share, typed_numbers, widest_float
from kevin_tui.evaluator.worker.own_error import REDRAWS, Truth, nudged
from kevin_tui.evaluator.worker.rounding_probe import BAND, Plan, rounded_match, widths
from kevin_tui.evaluator.worker.tensorfile import TensorFileError
from kevin_tui.evaluator.worker.timing_loop import Timer


class ProblemBroken(Exception):
    pass


def shape_variants(module: Any, max_bytes: int, size: int) -> list[list[tuple[str, dict[str, int]]]]:
    """The sizes worth trying, each as alternatives (label, new values) of which the first the problem runs at is
    tried; only integers the model's construction never sees. `size`: the bytes of the problem's inputs at its own
    sizes (doubled, they must stay within `max_bytes`). The first such integer halved, then doubled; then every
    even one made odd, or where the problem does not run so (a size its parameters fix), every one but one, then
    each alone: a kernel tiled for a sequence length passed where only its batch was made odd."""
    init_names = set(module.get_init_inputs.__code__.co_names)
    names = [
        n for n in dict.fromkeys(module.get_inputs.__code__.co_names)
        if n not in init_names and type(getattr(module, n, None)) is int and getattr(module, n) > 1
    ]  # fmt: skip
    if not names:
        return []
    first, own = names[0], {n: getattr(module, n) for n in names}
    variants = [[(f"{first}={own[first] // 2}", {first: own[first] // 2})]]
    if 2 * size <= max_bytes:
        variants.append([(f"{first}={2 * own[first]}", {first: 2 * own[first]})])
    evens = [n for n in names if own[n] % 2 == 0]
    subsets = [evens]
    if len(evens) > 1:
        subsets += [[n for n in evens if n != left] for left in reversed(evens)] + [[n] for n in evens]
    odd = [(", ".join(f"{n}={own[n] - 1}" for n in subset), {n: own[n] - 1 for n in subset}) for subset in subsets]
    return variants + ([list(dict(odd).items())] if evens else [])


def write_record(path: Path, outputs: dict[str, Any], found_aliases: list[str]) -> None:
    """An output record: each named run's output (e.g. before/after the reference) and its aliasing."""
    tensorfile.write(path, [[[name, value] for name, value in outputs.items()], list(found_aliases)])


MAX_ALIASES = 16


def read_record(
    path: Path, names: tuple[str, ...], *others: tuple[str, ...], max_bytes: int
) -> tuple[dict[str, Any], list[str]]:
    """The runs of an output record, which must be exactly `names` or one of the `others` (the candidate wrote
    it, and its words end up in the judgement), and what its outputs alias; a file over `max_bytes` is not read."""
    bounded(path, max_bytes)
    accepted = [set(names), *map(set, others)]
    names = tuple(n for choice in (names, *others) for n in choice)
    record = tensorfile.read(path, with_devices=True)
    if not (type(record) is list and len(record) == 2 and type(record[0]) is list and type(record[1]) is list):
        raise TensorFileError("not an output record")
    runs = {}
    for pair in record[0]:
        if not (type(pair) is list and len(pair) == 2 and type(pair[0]) is str) or pair[0] in runs:
            raise TensorFileError("not an output record")
        if pair[0] not in names:
            raise TensorFileError(f"an output record with a run named {pair[0][:40]!r}, expected {'/'.join(names)}")
        runs[pair[0]] = pair[1]
    aliases = record[1]
    if set(runs) not in accepted or len(aliases) > MAX_ALIASES:
        raise TensorFileError(f"not an output record of the runs {'/'.join(names)}")
    if not all(type(a) is str and len(a) <= tensorfile.MAX_NAME for a in aliases):
        raise TensorFileError("not an output record")
    return runs, aliases


def bounded(path: Path, max_bytes: int) -> None:
    """A candidate's file larger than what it should hold is refused before it is read (holes read as zeros)."""
    if (size := os.stat(path).st_size) > max_bytes:
        raise TensorFileError(f"{size} bytes, more than the {max_bytes} its outputs take")


def record_bytes(runs: int, *outputs: Any) -> int:
    """The most an output record of `runs` runs may take, each like the largest of the reference's `outputs`."""
    return runs * 2 * max(map(_nbytes, outputs), default=0) + OUTPUT_FILE_SLACK


TRIAL_RUNS = ("before", "after")  # a trial's runs, before and after the reference ran in the candidate's process
MAX_MESSAGE = 2000


def _bounded(value: Any) -> Any:
    """A judgement's words stay short whatever the candidate's output held (an event has a size limit)."""
    return value[:MAX_MESSAGE] if isinstance(value, str) else value


def _supported(value: Any) -> bool:
    if type(value) is torch.Tensor or type(value) in (int, float, bool, str) or value is None:
        return True
    return type(value) in (tuple, list) and all(_supported(v) for v in value)


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return 0


class Reference:
    numbers: torch.dtype  # the dtype its Python numbers are judged in: the widest float it computes in (probe)
    input_bytes: int  # what its inputs take at the problem's own sizes (probe)

    def __init__(self, request: dict[str, Any], channel: Channel) -> None:
        self.channel = channel
        self.path = request["problem_path"]
        self.device = common.resolve_device(request["device"])
        self.outbox = Path(request["outbox"])
        self.module = self._import()
        seed = request["init_seed"]
        try:
            self.init_inputs = common.seeded(seed, self.module.get_init_inputs)
            self.model = common.seeded(seed, lambda: self.module.Model(*self.init_inputs)).to(self.device)
        except Exception as exc:
            raise ProblemBroken(
                f"{self.path}: building Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}"
            ) from exc
        self.outputs: dict[int, list[Any]] = {}
        self.first_args: list[Any] = []  # the first trial's inputs, which the in-place-change trial changes
        self.trial_args: list[list[Any]] = []  # every trial's inputs (a float64 run of one on a close miss)
        # another size's inputs and sizes (or a fresh sample's, at the problem's sizes), by output
        self.sized_args: dict[int, tuple[list[Any], dict[str, int]]] = {}
        self.changed_inputs: tuple[list[Any], dict[str, Any]] = ([], {})  # the in-place trial's inputs, parameters
        self.precise_trials: dict[int, Truth | None] = {}  # trial outputs in float64 when first asked (None: cannot be)
        self.timers: dict[str, Timer] = {}
        self.served: dict[int, Any] = {}
        self.round_seeds: dict[str, int] = {}  # each side's last round's seed: a judged call's inputs, drawn again
        self.output_aliases: list[str] = []  # what the reference's own output shares memory with (its probe)
        self.last_judged: dict[str, Any] | None = None  # the candidate outputs judged last
        # the named trial's or timed call's precision, measured after every trial or round (`deferred_precision`)
        self.deferred: Callable[[], dict[str, float] | None] | None = None

    def _import(self):
        try:
            module = common.import_file(self.path, "kevin_reference")
        except BaseException as exc:
            raise ProblemBroken(f"{self.path}: importing it raised {type(exc).__name__}: {exc}") from exc
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not callable(getattr(module, name, None)):
                raise ProblemBroken(f"{self.path}: {name} is missing or not callable")
        return module

    def forward(self, args: list[Any]) -> Any:
        with torch.no_grad():
            out = self.model(*args)
        common.synchronize(self.device)
        return out

    def expected(self, args: list[Any]) -> Any:
        """The reference's output on `args` (as drawn, on the CPU), copied as it returns. It runs on a copy: `args`
        are kept as a trial's inputs, whose float64 result is computed from them when asked, and on the CPU moving
        them to the device is no copy, so a problem changing its inputs in place changed the kept ones (its float64
        results were of other inputs: tests/candidates/redteam24/matmul256_scaled_input_cut_to_18_bits.py)."""
        with no_modes():
            return snapshot(self.forward(common.to_device(common.clone(args), self.device)))

    def keep(self, evaluation: int, name: str, args: list[Any], out: Any, values: dict[str, int]) -> tuple[str, int]:
        """An expected output beyond the trials' (another size's, a fresh sample's) kept to judge against, with its
        inputs and sizes `values` (its float64 output is computed from them when asked: `precise_output`); its
        inputs written for the candidate. Their file and the output's index."""
        outputs = self.outputs.setdefault(evaluation, [])
        outputs.append(out)
        self.sized_args[len(outputs) - 1] = (args, values)
        path = self.outbox / f"eval-{evaluation}-{name}.kt"
        tensorfile.write(path, args)
        return str(path), len(outputs) - 1

    def probe(self, seed: int) -> dict[str, Any]:
        """Run one sample: does the problem work, mutate its inputs, alias them, return something we can compare?
        Its inputs are drawn twice from one seed (the two workers must draw alike from one); the second draw, equal
        to the first and never run, is returned as "spare" (the warm compile runs on it: no third draw)."""
        try:
            drawn = sample(self.module.get_inputs, seed)
            again = sample(self.module.get_inputs, seed)
        except Exception as exc:
            raise ProblemBroken(f"{self.path}: get_inputs() raised {type(exc).__name__}: {exc}") from exc
        if not common.same(drawn, again):
            raise ProblemBroken(
                f"{self.path}: get_inputs() drew other inputs from the same seed (it draws from something no seed "
                "fixes: the clock, os.urandom, a generator of its own); both workers must draw the same inputs, "
                "so every candidate would fail. Draw with torch's, numpy's or Python's random functions"
            )
        try:
            args = common.to_device(drawn, self.device)
            original = common.clone(args)
            self.numbers = widest_float([*leaves(args), *model_tensors(self.model)])
            self.input_bytes = _nbytes(original)  # as drawn (before the forward, which may change them)
            out = self.forward(args)
        except Exception as exc:
            raise ProblemBroken(f"{self.path}: the reference forward raised {type(exc).__name__}: {exc}") from exc
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        try:
            with counter:
                self.forward(common.clone(original))
            flops = int(counter.get_total_flops())
        except RuntimeError:  # its module tracker cannot follow a reference that calls autograd.grad (a backward
            flops = 0  # problem): the work is then counted as none
        if not _supported(out):
            raise ProblemBroken(
                f"{self.path}: the reference returns a {type(out).__name__}; kevin-tui compares tensors, "
                "tuples and lists of them, and plain numbers"
            )
        saved = {}  # each input changed in place, its storage as it was (written_bytes: what the call changed there)
        for now, was in zip(leaves(args), leaves(original), strict=False):
            if type(now) is torch.Tensor and now.numel() and not common.same(now, was):
                try:  # out of memory: the in-place result counts as a view did (nothing written)
                    before = now.untyped_storage().clone()
                    torch.empty(0, dtype=now.dtype, device=now.device).set_(
                        before, now.storage_offset(), now.shape, now.stride()
                    ).copy_(was)
                except RuntimeError:
                    continue
                saved[now.untyped_storage().data_ptr()] = before
        return {
            "mutates_inputs": not common.same(args, original),
            "output_aliases": aliases(out, args, model_tensors(self.model)),
            "output_bytes": _nbytes(out),
            "written_bytes": written_bytes(out, args, model_tensors(self.model), saved),  # what it changed there
            "input_bytes": self.input_bytes,
            "flops": flops,
            "work_bytes": _nbytes(original) + _nbytes(out) + _nbytes(model_tensors(self.model)),
            "spare": again,
        }

    # -- correctness -----------------------------------------------------------------

    def trials(self, command: dict[str, Any]) -> None:
        evaluation, seed = command["eval"], command["seed"]
        self.deferred = None  # an earlier evaluation's, stopped before its trials ended, is not this one's
        inputs = trial_inputs(self.module.get_inputs, seed, command["fresh"], command["duplicates"])
        paths, outputs = [], []
        for index, args in enumerate(inputs):
            path = self.outbox / f"eval-{evaluation}-trial-{index}.kt"
            tensorfile.write(path, args)
            paths.append(str(path))
            outputs.append(self.expected(args))
        self.outputs = {evaluation: outputs}
        self.trial_args, self.sized_args, self.precise_trials = inputs, {}, {}
        self.first_args = inputs[0]
        self.channel.emit("trials_ready", paths=paths)

    def in_float64(
        self, args: list[Any], parameters: dict[str, Any] | None = None, plan: Plan | None = None, model: Any = None
    ) -> Any:
        """The reference's output in float64 (a copy of the model, or of `model`, with `parameters` if given, inputs
        widened):
        what a candidate's error and the float32 reference's own are measured against. With `plan`, the inputs
        ("input 0", ...) and parameters and buffers (by name) are rounded by it first (worker/rounding_probe.py).
        None where the problem cannot run so."""
        import copy

        keep: Plan = plan or (lambda name, t: t)
        # a copy of every input, made once (the probe runs the problem many times on the same kept inputs, which it
        # may change): the widening copies a float tensor, even one already float64
        widened = [keep(f"input {i}", a).to(torch.float64, copy=True)
                   if isinstance(a, torch.Tensor) and a.is_floating_point() else common.clone(a)
                   for i, a in enumerate(args)]  # fmt: skip
        try:
            model = copy.deepcopy(self.model if model is None else model)
            if parameters is not None:
                model.load_state_dict(parameters, strict=False)
            if plan is not None:
                with torch.no_grad():
                    for name, tensor in (*model.named_parameters(), *model.named_buffers()):
                        tensor.copy_(plan(name, tensor))
            model = model.double()
            with torch.no_grad(), no_modes():
                return snapshot(model(*common.to_device(widened, self.device)))
        except Exception:
            return None

    def truth(
        self, args: list[Any], parameters: dict[str, Any] | None = None, sizes: dict[str, int] | None = None
    ) -> Truth | None:
        """`in_float64` of `args` (at the module-level `sizes` given), with the reference's own error drawn again
        when first asked (own_error.py); None where the problem cannot run in float64."""
        value = self.sized(sizes or {}, partial(self.in_float64, args, parameters))
        if value is None:
            return None
        return Truth(value, partial(self.sized, sizes or {}, partial(self.redraws, args, parameters)))

    def redraws(self, args: list[Any], parameters: dict[str, Any] | None) -> list[tuple[Any, Any]]:
        """The reference's output in its own dtypes and in float64 on `args` nudged (own_error.nudged), REDRAWS
        times, each on a copy of the model (with `parameters` if given) whose float parameters and buffers are nudged
        too; none where a run fails. With its parameters as they were, a problem whose rounding is a parameter's (an
        int8 input, a float weight) drew the judged call's own error again each time, and a place where the reference
        happened to round almost exactly had no allowance past its own luck (tests/test_redteam32.py)."""
        import copy

        # secret: with a seed in our source a candidate computed where a draw's nudged sum stepped floor(a @ b) and
        # answered one off there, inside that place's drawn allowance (tests/test_redteam32.py)
        generator = torch.Generator().manual_seed(secrets.randbits(62))
        draws = []
        try:
            base = self.model  # copied for each draw below: one more copy of a large model only with `parameters`
            if parameters is not None:
                base = copy.deepcopy(self.model)
                base.load_state_dict(parameters, strict=False)
            for _ in range(REDRAWS):
                moved, model = nudged(args, generator), copy.deepcopy(base)
                with torch.no_grad():
                    held = [*model.parameters(), *model.buffers()]
                    for tensor, value in zip(held, nudged(held, generator), strict=True):
                        tensor.copy_(value)
                exact = self.in_float64(moved, model=model)  # first: the forward below may change the model
                with torch.no_grad(), no_modes():
                    own = snapshot(model(*common.to_device(common.clone(moved), self.device)))
                if exact is not None:
                    draws.append((own, exact))
        except Exception:
            return []
        return draws

    def operands(self, args: list[Any]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """The inputs, parameters and buffers of a format the rounded-inputs probe may round (float32, bfloat16,
        float16), by the names `in_float64` gives its plan, with their shapes and dtypes."""
        named = [(f"input {i}", a) for i, a in enumerate(args)]
        named += [*self.model.named_parameters(), *self.model.named_buffers()]
        return {name: (tuple(t.shape), t.dtype) for name, t in named if isinstance(t, torch.Tensor) and widths(t.dtype)}

    def precision(
        self, args: list[Any], precise: Any, ref: Any, got: Any, command: dict[str, Any]
    ) -> dict[str, float] | None:
        """How much of the tolerance a candidate output and the float32 reference's each use against the float64
        result `precise` of inputs `args` (evidence: a much larger share suggests the candidate computes in less
        precision); where it is notably larger, the width of input rounding the candidate's output matches, if
        any (worker/rounding_probe.py)."""
        if precise is None or got is None:
            return None
        ref = typed_numbers(ref, self.numbers)
        atol, rtol = command.get("atol"), command.get("rtol")
        candidate = tolerance_share(precise, got, ref, atol, rtol)
        reference = tolerance_share(precise, ref, ref, atol, rtol)
        if candidate is None or reference is None:
            return None
        found = {"candidate": round(candidate, 6), "reference": round(reference, 6)}
        if candidate > BAND * reference:
            rounded = partial(self.in_float64, args, None)
            match = rounded_match(rounded, self.operands(args), precise, got, ref, atol, rtol)
            found.update({k: round(v, 6) for k, v in (match or {}).items()})
        return found

    def changed(self, command: dict[str, Any]) -> None:
        """A trial on the first trial's input objects after their values change in place, with the parameters
        changed too (what an optimizer step does): new values from a fresh sample and a freshly initialised
        Model, the expected output computed with them, both written for the candidate. With `few`, only a few input
        values change (as a near-duplicate trial's) and no parameter: a kernel remembering its answer by the
        tensor's address and a few of its values (or the parameters' versions) answers stale there, where every
        value changing, or the parameters, made it miss (tests/candidates/redteam20/address_memo_eval.py)."""
        from torch.func import functional_call

        fresh = sample(self.module.get_inputs, command["seed"])
        few = command.get("few") is True
        if few:
            near = near_duplicate(self.first_args, fresh, command["seed"])
            if near is None:
                self.channel.emit("changed_ready", path="", index=-1, reason="no input varies between samples")
                return
            fresh = near
        args = [
            new if isinstance(old, torch.Tensor) and type(new) is torch.Tensor and new.shape == old.shape
            and new.dtype == old.dtype else old
            for old, new in zip(self.first_args, fresh, strict=True)
        ]  # fmt: skip
        params: dict[str, Any] = {}  # with `few`, functional_call runs the reference's own
        if not few:
            other = common.seeded(command["seed"], lambda: self.module.Model(*self.init_inputs)).to(self.device)
            # as the model's own parameters are (a problem may differentiate with respect to them: a backward problem)
            params = {name: p.detach().requires_grad_(p.requires_grad) for name, p in other.named_parameters()}
        on_device = tuple(common.to_device(args, self.device))
        try:
            with torch.no_grad(), no_modes():
                expected = {"parameters": snapshot(functional_call(self.model, params, common.clone(on_device))),
                            "inputs": snapshot(self.model(*common.clone(on_device)))}  # fmt: skip
        except Exception as exc:  # the problem cannot run so: the trial is skipped, never charged to anyone
            self.channel.emit("changed_ready", path="", index=-1, reason=_bounded(f"{type(exc).__name__}: {exc}"))
            return
        common.synchronize(self.device)
        path = self.outbox / f"eval-{command['eval']}-changed{'-few' if few else ''}.kt"
        self.changed_inputs = (args, params)
        tensorfile.write(path, [args, [[name, value] for name, value in params.items()]])
        outputs = self.outputs.setdefault(command["eval"], [])
        outputs.append(expected)
        self.channel.emit("changed_ready", path=str(path), index=len(outputs) - 1, reason="")

    def judge_changed(self, command: dict[str, Any]) -> None:
        """The in-place-change trial, against the output for what the candidate's worker changed: inputs and
        parameters, or its inputs only (its parameters are not the reference's, or it keeps derived ones)."""
        expected = self.outputs[command["eval"]][command["trial"]]
        try:
            largest = record_bytes(1, *expected.values())
            (changed,), _ = read_record(Path(command["path"]), ("parameters",), ("inputs",), max_bytes=largest)
        except (OSError, TensorFileError, ValueError, MemoryError):
            changed = "parameters"  # judged below, which says why the record is unusable
        label = command["label"] + (" (its inputs only)" if changed == "inputs" else "")
        args, params = self.changed_inputs
        precise = partial(self.truth, args, params if changed == "parameters" else None)
        self.judge(command, expected[changed], label, runs=(changed,), precise=precise)

    def precise_output(self, index: int) -> Callable[[], Truth | None] | None:
        """Expected output `index` in float64, computed when first asked (a run outside tolerance): a trial's
        (also judged again under --compiled) or another size's, at that size; None for any other. Every judge of
        an output needs it: an honest kernel more exact than the reference passes the trials by it, and failed
        at other sizes and under torch.compile without it."""
        if index < len(self.trial_args):
            return partial(self.precise_trial, index)
        if index in self.sized_args:
            args, values = self.sized_args[index]
            return partial(self.truth, args, sizes=values)
        return None

    def precise_trial(self, index: int) -> Truth | None:
        """Trial `index`'s output in float64, computed once (the fallback and the precision measurement share it)."""
        if index not in self.precise_trials:
            self.precise_trials[index] = self.truth(self.trial_args[index])
        return self.precise_trials[index]

    def sized(self, values: dict[str, int], fn: Callable[[], Any]) -> Any:
        """`fn()` with the problem's module-level sizes set to `values` (a size only get_inputs reads), then
        restored."""
        saved = {name: getattr(self.module, name) for name in values}
        try:
            for name, value in values.items():
                setattr(self.module, name, value)
            return fn()
        finally:
            for name, value in saved.items():
                setattr(self.module, name, value)

    def judge(
        self, command: dict[str, Any], ref: Any, label: str, previous: Any = None, runs: tuple[str, ...] = TRIAL_RUNS,
        measure: bool = False, precise: Callable[[], Truth | None] | None = None, args: list[Any] | None = None,
    ) -> None:  # fmt: skip
        """`measure`: this output's precision is measured against float64 too (the trial the host named in secret,
        whose inputs are `args`)."""
        ref = typed_numbers(ref, self.numbers)
        try:
            outputs, given_aliases = read_record(Path(command["path"]), runs, max_bytes=record_bytes(len(runs), ref))
        except (OSError, TensorFileError, MemoryError) as exc:  # a file too large to read is the candidate's too
            message = _bounded(f"the candidate's output file for {label} is unusable: {exc or type(exc).__name__}")
            self.channel.emit("judged", passed=False, checks=[], mismatch={"reason": message}, precision=None,
                              message=message)  # fmt: skip
            return
        verdict = judge_trial(ref, outputs, self.device, command.get("atol"), command.get("rtol"), label, previous,
                              precise)  # fmt: skip
        if verdict.passed and given_aliases and not self.output_aliases:
            verdict.passed = False
            verdict.message = f"{label}: {given_aliases[0]}, which the reference's output never does"
            verdict.mismatch = {"reason": verdict.message}
        precision = None
        if measure and verdict.passed and precise is not None and args is not None:  # measured after the last trial:
            self.deferred = partial(self.trial_run_precision, args, precise, ref, dict(outputs), command)
        self.channel.emit(
            "judged",
            passed=verdict.passed,
            checks=[{k: _bounded(v) for k, v in c.__dict__.items()} for c in verdict.checks],
            mismatch={k: _bounded(v) for k, v in verdict.mismatch.items()},
            message=_bounded(verdict.message),
            precision=precision,
        )
        self.last_judged = outputs

    def judge_check(self, command: dict[str, Any]) -> None:
        index = command["trial"]
        outputs = self.outputs.get(command["eval"], [])
        if command.get("runs") == ["changed"]:
            self.judge_changed(command)
            return
        precise = self.precise_output(index)
        if label := command.get("label"):
            self.judge(command, outputs[index], label, runs=tuple(command.get("runs", TRIAL_RUNS)), precise=precise)
            return
        previous = self.last_judged if index > 0 else None
        measure = command.get("precision") is True
        self.judge(command, outputs[index], f"trial {index + 1}", previous, measure=measure, precise=precise,
                   args=self.trial_args[index])  # fmt: skip

    def shapes(self, command: dict[str, Any]) -> None:
        """Inputs at other sizes, where the problem allows it: the module-level integers that only
        get_inputs uses (a batch size, a length), halved, doubled, or made odd to break tiling."""
        found: list[list[Any]] = []  # [label, inputs file, output index]

        def at_size() -> tuple[list[Any], Any]:
            args = sample(self.module.get_inputs, command["seed"])
            return args, self.expected(args)

        for alternatives in shape_variants(self.module, command["max_bytes"], self.input_bytes):
            for label, values in alternatives:
                try:
                    args, out = self.sized(values, at_size)
                except Exception:
                    continue  # the problem itself does not work at that size: not a shape it allows
                found.append([label, *self.keep(command["eval"], f"shape-{len(found)}", args, out, values)])
                break
        self.channel.emit("shapes_ready", variants=found)

    def fresh(self, command: dict[str, Any]) -> None:
        """One fresh sample from a seed the host drew in secret, and its expected output, for the call whose ops are
        counted: inputs the candidate never saw, so it cannot answer them from memory."""
        args = sample(self.module.get_inputs, command["seed"])
        # its float64 output is computed as another size's is, at the problem's own sizes
        path, index = self.keep(command["eval"], "fresh", args, self.expected(args), {})
        self.channel.emit("fresh_ready", path=path, index=index)

    # -- timing ------------------------------------------------------------------

    def timer_for(self, command: dict[str, Any]) -> None:
        self.timers, self.served, self.round_seeds = {}, {}, {}
        self.deferred = None
        inputs = TimedInputs(self.module.get_inputs, self.device)  # its one draw decides how every side's calls draw
        watch = RoundWatch(IdentityGuard())  # the candidate's tripwires, run here for their time only
        for side in command["sides"]:
            model = self.model if side == "eager" else self.compiled()

            def call(args: list[Any], model=model) -> Any:
                return model(*args)

            self.timers[side] = Timer(call, inputs, self.device, watch)
        self.channel.emit("timer_ready")

    def compiled(self):
        return torch.compile(self.model)

    def warm_compile(self, args: list[Any]) -> None:
        """One call of the reference under torch.compile (on `args`, the probe's spare draw), which fills the
        shared compile cache that candidate workers start theirs from under --compiled (inductor's probes of the
        compiler, its headers' builds): ~3x faster first compiles there. Only this worker writes it. A problem that
        cannot compile is not broken: its candidates' compiled runs say so."""
        try:
            with torch.no_grad():
                self.compiled()(*common.to_device(args, self.device))
            common.synchronize(self.device)
        except Exception:
            pass
        torch._dynamo.reset()

    def round(self, command: dict[str, Any]) -> None:
        """The same loop as the candidate's, its tripwires included, writing its outputs the same way; the file is
        not needed, and the host removes it after the reply, outside both windows, as it removes the candidate's
        (freeing a 16 MB file takes ~1 ms: inside the window it was loop overhead the host credited to the
        candidate, which never pays it)."""
        path = self.outbox / round_file(command["side"])
        timer = self.timers[command["side"]]
        samples, synced = timer.round(command["calls"], command["seed"], path, watch=command.get("watch", True))
        self.round_seeds[command["side"]] = command["seed"]
        self.channel.emit("round_done", round=command["round"], samples_ms=samples, synced_ms=synced, path=None,
                          tripwires_ms=timer.tripwires_ms)  # fmt: skip

    def ingest(self, command: dict[str, Any]) -> None:
        """Read every output of one candidate round now, while the host holds the candidate stopped; the judge
        compares them later (`judge_timed`)."""
        try:
            bounded(Path(command["path"]), command["max_bytes"])
            outputs = tensorfile.read(Path(command["path"]), with_devices=True)
            if type(outputs) is not list:
                raise TensorFileError("not a list of outputs")
        except (OSError, TensorFileError, MemoryError) as exc:
            outputs = f"the candidate's outputs of timing round {command['round']} are unusable: {exc}"
        self.served = {command["round"]: outputs}
        usable = type(outputs) is list
        self.channel.emit("ingested", calls=len(outputs) if usable else 0, problem="" if usable else _bounded(outputs))

    def judge_timed(self, command: dict[str, Any]) -> None:
        """Every output of the round against the reference's own output for that call (its round drew the same
        inputs from the same seed, so judging costs comparisons only); one outside tolerance is measured
        against float64 before it counts, as in the trials. The host names one call of one round
        (`precision_call`, after every output was committed) whose precision is measured as the first trial's
        is: a kernel exact only where precision is measured (its first calls) and narrower where it is timed
        shows it there. That call's float64 result is computed after the last round (`timed_precision`): computed
        here it made this round's judgement take a float64 forward longer (a CPU conv3d's: 291 ms between the
        candidate's rounds after the measured one, 52-164 ms after the others), which the candidate, stopped
        meanwhile, reads off the clock, and once it had seen the measured round pass it could be narrow, unmeasured,
        in every later one (tests/test_redteam28.py)."""
        served, mine = self.served.pop(command["round"]), self.timers["eager"].outputs
        label = f"timing round {command['round']}"
        if type(served) is str or len(served) != len(mine):
            counted = f"{label}: {len(served)} outputs for {len(mine)} calls"
            message = _bounded(served if type(served) is str else counted)
            self.channel.emit("judged", passed=False, checks=[], mismatch={"reason": message}, message=message,
                              precision=None)  # fmt: skip
            return
        inputs, seed = self.timers["eager"].inputs, self.round_seeds["eager"]
        widened = 0
        for call, (expected, got) in enumerate(zip(typed_numbers(mine, self.numbers), served, strict=True)):
            precise = partial(lambda index: self.truth(inputs.args(seed, index)), call)
            verdict = judge_trial(expected, {"timed": got}, self.device, command.get("atol"), command.get("rtol"),
                                  f"{label}, call {call + 1}", precise=precise)  # fmt: skip
            if not verdict.passed:
                self.channel.emit("judged", passed=False, precision=None,
                                  checks=[{k: _bounded(v) for k, v in c.__dict__.items()} for c in verdict.checks],
                                  mismatch={k: _bounded(v) for k, v in verdict.mismatch.items()},
                                  message=_bounded(verdict.message))  # fmt: skip
                return
            widened += any(c.detail for c in verdict.checks)
        detail = f"{widened} within the float32 reference's own error of the float64 result" if widened else ""
        check = {"name": f"{label}: all {len(mine)} outputs", "passed": True, "detail": detail}
        named = command.get("precision_call")
        if type(named) is int and 0 <= named < len(mine):
            self.deferred = partial(self.timed_call_precision, seed, named, mine[named], served[named], command)
        self.channel.emit("judged", passed=True, checks=[check], mismatch={}, message="", precision=None)

    def trial_run_precision(
        self,
        args: list[Any],
        precise: Callable[[], Truth | None],
        ref: Any,
        outputs: dict[str, Any],
        command: dict[str, Any],
    ) -> dict[str, float] | None:
        """The named trial's precision, measured on whichever of its runs errs more against float64 (as its float64
        forward's time did, the "before" run alone told the candidate which output was measured: its second run's
        inputs repeat the previous call's, and a kernel narrow only then was never measured narrow;
        tests/candidates/redteam29/narrow_on_the_second_run.py)."""
        truth = precise()
        if truth is None or not outputs:
            return None
        exact = truth.value
        atol, rtol = command.get("atol"), command.get("rtol")
        got = max(outputs.values(), key=lambda out: tolerance_share(exact, out, ref, atol, rtol) or 0.0)
        return self.precision(args, exact, ref, got, command)

    def timed_call_precision(
        self, seed: int, call: int, expected: Any, got: Any, command: dict[str, Any]
    ) -> dict[str, float] | None:
        """The named timed call's precision; its inputs drawn again only now (drawn as its round was judged, their
        time would tell which round it was)."""
        args = self.timers["eager"].inputs.args(seed, call)
        return self.precision(args, self.in_float64(args), expected, got, command)

    def deferred_precision(self, command: dict[str, Any]) -> None:
        """The precision of the trial the host named in secret (`judge`, with `precision`; `trial_precision`) or of the
        timed call it named (`judge_timed`; `timed_precision`), measured once every trial or round was judged:
        measured as it was judged, the float64 forward's time between the candidate's trials or rounds told it which
        was measured, and a kernel could be narrow, unmeasured, in every later one (under --no-timing the trial's is
        the only measurement; tests/test_redteam28.py)."""
        measure, self.deferred = self.deferred, None
        precision = measure() if measure is not None else None
        self.channel.emit("judged", passed=True, checks=[], mismatch={}, message="", precision=precision)

    def measure_peaks(self, command: dict[str, Any]) -> None:
        """This CPU's memory bandwidth (a large copy) and FP32 rate (a matmul), best of a few runs."""
        import time

        source = torch.empty(64 << 20, dtype=torch.float32)
        target = torch.empty_like(source)
        a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
        copy_s = mm_s = float("inf")
        for _ in range(20):  # best of many: a busy machine only ever makes a run slower
            started = time.perf_counter()
            target.copy_(source)
            copy_s = min(copy_s, time.perf_counter() - started)
            started = time.perf_counter()
            torch.mm(a, b)
            mm_s = min(mm_s, time.perf_counter() - started)
        bandwidth = 2 * source.numel() * 4 / copy_s / 1e9
        flops = 2 * 1024**3 / mm_s / 1e12
        self.channel.emit("peaks", bandwidth_gbs=bandwidth, fp32_tflops=flops)


def run_reference(request: dict[str, Any], channel: Channel) -> None:
    torch.set_num_threads(request["threads"])
    try:
        reference = Reference(request, channel)
        probe = reference.probe(request["init_seed"] + 7)
    except ProblemBroken as exc:
        channel.emit("problem_error", message=str(exc), traceback=common.short_traceback(exc.__cause__ or exc))
        return
    reference.output_aliases = probe["output_aliases"]
    if compile_baseline_on(request.get("compile_baseline"), reference.device):  # imported before "ready", not timed
        importlib.import_module("torch._dynamo")
    spare = probe.pop("spare")  # not held for the worker's lifetime: a large problem's inputs
    if request.get("warm_compile"):
        reference.warm_compile(spare)
    del spare
    init_path = reference.outbox / "init.kt"
    tensorfile.write(init_path, list(reference.init_inputs))
    channel.emit(
        "ready",
        device=reference.device,
        environment=common.environment(reference.device),
        init_path=str(init_path),
        mutates_inputs=probe["mutates_inputs"],
        output_aliases=probe["output_aliases"],
        threads=torch.get_num_threads(),
        output_bytes=probe["output_bytes"],
        written_bytes=probe["written_bytes"],
        input_bytes=probe["input_bytes"],
        flops=probe["flops"],
        work_bytes=probe["work_bytes"],
    )
    handlers = {
        "trials": reference.trials,
        "judge": reference.judge_check,
        "timer": reference.timer_for,
        "round": reference.round,
        "ingest": reference.ingest,
        "judge_timed": reference.judge_timed,
        "timed_precision": reference.deferred_precision,
        "trial_precision": reference.deferred_precision,
        "measure_peaks": reference.measure_peaks,
        "shapes": reference.shapes,
        "changed": reference.changed,
        "fresh": reference.fresh,
    }
    while (command := channel.next_command())["cmd"] != "exit":
        handlers[command["cmd"]](command)

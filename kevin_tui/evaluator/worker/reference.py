"""The reference worker: the user's problem, its inputs and outputs, its timing rounds, and the judge.

It imports only the problem, never a candidate; it makes every trial's inputs from the secret seed the
host gives it per evaluation, keeps the reference outputs in memory, and judges the candidate's
outputs from files (never unpickled). It stays alive for the evaluator's lifetime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kevin_tui.evaluator.worker import common, tensorfile
from kevin_tui.evaluator.worker.capture import aliases, model_tensors, no_modes, snapshot
from kevin_tui.evaluator.worker.channel import Channel
from kevin_tui.evaluator.worker.inputs import Pool, sample, trial_inputs
from kevin_tui.evaluator.worker.judge import judge_trial
from kevin_tui.evaluator.worker.tensorfile import TensorFileError
from kevin_tui.evaluator.worker.timing_loop import Timer


class ProblemBroken(Exception):
    pass


def shape_variants(module: Any, max_bytes: int) -> list[tuple[str, dict[str, int]]]:
    """(label, new values) for the sizes worth trying; only integers the model's construction never sees."""
    init_names = set(module.get_init_inputs.__code__.co_names)
    names = [
        n for n in module.get_inputs.__code__.co_names
        if n not in init_names and type(getattr(module, n, None)) is int and getattr(module, n) > 1
    ]  # fmt: skip
    if not names:
        return []
    first = names[0]
    size = _nbytes(sample(module.get_inputs, 0))
    variants = [(f"{first}={getattr(module, first) // 2}", {first: getattr(module, first) // 2})]
    if 2 * size <= max_bytes:
        variants.append((f"{first}={2 * getattr(module, first)}", {first: 2 * getattr(module, first)}))
    odd = {n: getattr(module, n) - 1 if getattr(module, n) % 2 == 0 else getattr(module, n) for n in names}
    if odd != {n: getattr(module, n) for n in names}:
        variants.append((", ".join(f"{n}={v}" for n, v in odd.items()), odd))
    return variants


def write_record(path: Path, outputs: dict[str, Any], found_aliases: list[str]) -> None:
    """An output record: each named run's output (e.g. before/after the reference) and its aliasing."""
    tensorfile.write(path, [[[name, value] for name, value in outputs.items()], list(found_aliases)])


def read_record(path: Path) -> tuple[dict[str, Any], list[str]]:
    record = tensorfile.read(path, with_devices=True)
    if not (type(record) is list and len(record) == 2 and type(record[0]) is list and type(record[1]) is list):
        raise TensorFileError("not an output record")
    runs = {}
    for pair in record[0]:
        if not (type(pair) is list and len(pair) == 2 and type(pair[0]) is str) or pair[0] in runs:
            raise TensorFileError("not an output record")
        runs[pair[0]] = pair[1]
    if not runs or not all(type(a) is str for a in record[1]):
        raise TensorFileError("not an output record")
    return runs, record[1]


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
        self.timers: dict[str, Timer] = {}
        self.served: dict[int, Any] = {}
        self.output_aliases: list[str] = []  # what the reference's own output shares memory with (its probe)
        self.last_judged: dict[str, Any] | None = None  # the candidate outputs judged last

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

    def probe(self, seed: int) -> dict[str, Any]:
        """Run one sample: does the problem work, mutate its inputs, alias them, return something we can compare?"""
        try:
            args = common.to_device(sample(self.module.get_inputs, seed), self.device)
            original = common.clone(args)
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
        return {
            "mutates_inputs": not common.same(args, original),
            "output_aliases": aliases(out, args, model_tensors(self.model)),
            "output_bytes": _nbytes(out),
            "input_bytes": _nbytes(args),
            "flops": flops,
            "work_bytes": _nbytes(original) + _nbytes(out) + _nbytes(model_tensors(self.model)),
        }

    # -- correctness -----------------------------------------------------------------

    def trials(self, command: dict[str, Any]) -> None:
        evaluation, seed = command["eval"], command["seed"]
        inputs = trial_inputs(self.module.get_inputs, seed, command["fresh"], command["duplicates"])
        paths, outputs = [], []
        for index, args in enumerate(inputs):
            path = self.outbox / f"eval-{evaluation}-trial-{index}.kt"
            tensorfile.write(path, args)
            paths.append(str(path))
            with no_modes():
                outputs.append(snapshot(self.forward(common.to_device(args, self.device))))
        self.outputs = {evaluation: outputs}
        self.channel.emit("trials_ready", paths=paths)

    def judge(self, command: dict[str, Any], ref: Any, label: str, previous: Any = None) -> None:
        try:
            outputs, given_aliases = read_record(Path(command["path"]))
        except (OSError, TensorFileError) as exc:
            self.channel.emit("judged", passed=False, checks=[], mismatch={"reason": str(exc)},
                              message=f"the candidate's output file for {label} is unusable: {exc}")  # fmt: skip
            return
        verdict = judge_trial(ref, outputs, self.device, command.get("atol"), command.get("rtol"), label, previous)
        if verdict.passed and given_aliases and not self.output_aliases:
            verdict.passed = False
            verdict.message = f"{label}: {given_aliases[0]}, which the reference's output never does"
            verdict.mismatch = {"reason": verdict.message}
        self.channel.emit(
            "judged",
            passed=verdict.passed,
            checks=[c.__dict__ for c in verdict.checks],
            mismatch=verdict.mismatch,
            message=verdict.message,
        )
        self.last_judged = outputs

    def judge_check(self, command: dict[str, Any]) -> None:
        index = command["trial"]
        outputs = self.outputs.get(command["eval"], [])
        if label := command.get("label"):
            self.judge(command, outputs[index], label)
            return
        previous = self.last_judged if index > 0 else None
        self.judge(command, outputs[index], f"trial {index + 1}", previous)

    def shapes(self, command: dict[str, Any]) -> None:
        """Inputs at other sizes, where the problem allows it: the module-level integers that only
        get_inputs uses (a batch size, a length), halved, doubled, or made odd to break tiling."""
        outputs = self.outputs.setdefault(command["eval"], [])
        found: list[list[Any]] = []  # [label, inputs file, output index]
        for label, values in shape_variants(self.module, command["max_bytes"]):
            saved = {name: getattr(self.module, name) for name in values}
            try:
                for name, value in values.items():
                    setattr(self.module, name, value)
                args = sample(self.module.get_inputs, command["seed"])
                with no_modes():
                    out = snapshot(self.forward(common.to_device(args, self.device)))
            except Exception:
                continue  # the problem itself does not work at that size: not a shape it allows
            finally:
                for name, value in saved.items():
                    setattr(self.module, name, value)
            path = self.outbox / f"eval-{command['eval']}-shape-{len(found)}.kt"
            tensorfile.write(path, args)
            outputs.append(out)
            found.append([label, str(path), len(outputs) - 1])
        self.channel.emit("shapes_ready", variants=found)

    # -- timing ------------------------------------------------------------------

    def pool(self, command: dict[str, Any]) -> None:
        self.timers, self.served = {}, {}
        for side in command["sides"]:
            model = self.model if side == "eager" else self.compiled()
            pool = Pool.build(self.module.get_inputs, command["seed"], self.device, command["pool_bytes"],
                              mixing=command["mixing"])  # fmt: skip

            def call(args: list[Any], model=model) -> Any:
                return model(*args)

            self.timers[side] = Timer(call, pool, self.device)
        self.channel.emit("pool_ready")

    def compiled(self):
        return torch.compile(self.model)

    def round(self, command: dict[str, Any]) -> None:
        """The same loop as the candidate's, writing its outputs the same way (the file is not needed)."""
        path = self.outbox / f"round-{command['side']}.kt"
        samples, synced = self.timers[command["side"]].round(command["calls"], command["seed"], path)
        path.unlink()
        self.channel.emit("round_done", round=command["round"], samples_ms=samples, synced_ms=synced, path=None)

    def ingest(self, command: dict[str, Any]) -> None:
        """Read every output of one candidate round now, before the host names the calls it judges."""
        try:
            outputs = tensorfile.read(Path(command["path"]), with_devices=True)
            if type(outputs) is not list:
                raise TensorFileError("not a list of outputs")
        except (OSError, TensorFileError) as exc:
            outputs = f"the candidate's outputs of timing round {command['round']} are unusable: {exc}"
        self.served = {command["round"]: outputs}
        self.channel.emit("ingested", calls=len(outputs) if type(outputs) is list else 0)

    def judge_timed(self, command: dict[str, Any]) -> None:
        """The calls the host named, each against the reference's own output for that call."""
        served, mine = self.served.pop(command["round"]), self.timers["eager"].outputs
        label = f"timing round {command['round']}"
        if type(served) is str or len(served) != len(mine):
            message = served if type(served) is str else f"{label}: {len(served)} outputs for {len(mine)} calls"
            self.channel.emit("judged", passed=False, checks=[], mismatch={"reason": message}, message=message)
            return
        checks = []
        for call in command["calls"]:
            verdict = judge_trial(mine[call], {"timed": served[call]}, self.device, command.get("atol"),
                                  command.get("rtol"), f"{label}, call {call + 1}")  # fmt: skip
            checks += [c.__dict__ for c in verdict.checks]
            if not verdict.passed:
                self.channel.emit("judged", passed=False, checks=checks, mismatch=verdict.mismatch,
                                  message=verdict.message)  # fmt: skip
                return
        self.channel.emit("judged", passed=True, checks=checks, mismatch={}, message="")

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
        input_bytes=probe["input_bytes"],
        flops=probe["flops"],
        work_bytes=probe["work_bytes"],
    )
    handlers = {
        "trials": reference.trials,
        "judge": reference.judge_check,
        "pool": reference.pool,
        "round": reference.round,
        "ingest": reference.ingest,
        "judge_timed": reference.judge_timed,
        "measure_peaks": reference.measure_peaks,
        "shapes": reference.shapes,
    }
    while (command := channel.next_command())["cmd"] != "exit":
        handlers[command["cmd"]](command)

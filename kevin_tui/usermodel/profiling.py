"""Where your model's time goes, from torch.profiler (runs in the worker).

Each instance of your own classes gets a profiler range (`kevin_module::<path>`) from forward hooks,
so a module's time can be read off the trace: its total, and its self time — the total less the time
of your modules inside it (time in torch's own layers, nn.Linear and the like, counts as the
module's: they are its operators). Operators are torch.profiler's own table, grouped by input shape.
Times are per model call, on the device's clock: CPU time on a CPU, kernel time on a GPU.

The same run measures plain calls first, so the profiler's own cost is known (`overhead`).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

MODULE_RANGE = "kevin_module::"
CALL_RANGE = "kevin_model::call"
MAX_OPERATORS = 15


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_calls(model: nn.Module, args: list[Any], device: str, seconds: float = 0.5, least: int = 3) -> list[float]:
    """Wall-clock milliseconds of plain calls, for about `seconds`."""
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    with torch.no_grad():
        while len(times) < least or (time.perf_counter() < deadline and len(times) < 200):
            start = time.perf_counter()
            model(*args)
            synchronize(device)
            times.append((time.perf_counter() - start) * 1e3)
    return times


def time_backward(module: nn.Module, args: list[Any], device: str, calls: int = 5) -> float:
    """Milliseconds of one backward of `module` alone on `args` (the median of `calls`, after one warm-up):
    the gradients of its floating inputs and parameters for a random grad_output, what a kernel for its
    backward problem replaces. Run as the module ran in your model (the caller sets its autocast)."""
    inputs = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]  # fmt: skip
    wrt = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
    wrt += [p for p in module.parameters() if p.requires_grad]
    times = []
    with torch.enable_grad():
        grad = torch.randn_like(module(*inputs))
        for _ in range(calls + 1):
            output = module(*inputs)
            synchronize(device)
            start = time.perf_counter()
            torch.autograd.grad(output, wrt, grad)
            synchronize(device)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


@dataclass
class Trace:
    events: Any  # torch.profiler's EventList
    averages: Any  # its key_averages(group_by_input_shape=True)
    call_ms: list[float]  # wall clock of each profiled call
    calls: int
    device: str

    def inclusive(self, event: Any) -> float:
        return (event.device_time_total if self.device.startswith("cuda") else event.cpu_time_total) / 1e3


def take_trace(model: nn.Module, args: list[Any], device: str, paths: dict[int, str], calls: int) -> Trace:
    """Profile `calls` calls with a range around each of the modules in `paths` (id -> name)."""
    open_ranges: list[record_function] = []

    def enter(module: nn.Module, _args: Any) -> None:
        open_ranges.append(record_function(MODULE_RANGE + paths[id(module)]).__enter__())

    def leave(module: nn.Module, _args: Any, _output: Any) -> None:
        open_ranges.pop().__exit__(None, None, None)

    modules = [m for m in model.modules() if id(m) in paths]
    handles = [h for m in modules for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    call_ms = []
    try:
        with profile(activities=activities, record_shapes=True) as trace, torch.no_grad():
            for _ in range(calls):
                start = time.perf_counter()
                with record_function(CALL_RANGE):
                    model(*args)
                synchronize(device)
                call_ms.append((time.perf_counter() - start) * 1e3)
    finally:
        for handle in handles:
            handle.remove()
    return Trace(trace.events(), trace.key_averages(group_by_input_shape=True), call_ms, calls, device)


def on_cpu(event: Any) -> bool:
    """The host-side event of a range (on a GPU the trace also has a device-side span of the same name)."""
    return str(event.device_type).endswith("CPU")


def module_times(trace: Trace) -> tuple[float, dict[str, list[tuple[float, float]]]]:
    """The model's time per call, and for each module path its (total, self) per call it made, in ms."""
    total = sum(trace.inclusive(e) for e in trace.events if e.name == CALL_RANGE and on_cpu(e)) / trace.calls
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for event in trace.events:
        if event.name.startswith(MODULE_RANGE) and on_cpu(event):
            inside = sum(trace.inclusive(child) for child in _nearest_modules(event))
            inclusive = trace.inclusive(event)
            found[event.name[len(MODULE_RANGE) :]].append((inclusive, inclusive - inside))
    return total, found


def _nearest_modules(event: Any) -> list[Any]:
    found = []
    for child in event.cpu_children:
        found += [child] if child.name.startswith(MODULE_RANGE) else _nearest_modules(child)
    return found


def operators(trace: Trace, total_ms: float) -> list[dict[str, Any]]:
    """torch's operators by self time per model call, with their input shapes and share."""
    on_gpu = trace.device.startswith("cuda")
    rows = []
    for average in trace.averages:
        if average.key.startswith(("kevin_", "ProfilerStep", "[memory]")):
            continue
        if not on_cpu(average):
            continue  # kernels and device-side spans: their time is counted in the operator that launched them
        self_ms = (average.self_device_time_total if on_gpu else average.self_cpu_time_total) / 1e3 / trace.calls
        if self_ms <= 0:
            continue
        shapes = [list(s) for s in (average.input_shapes or []) if s]
        rows.append({"name": average.key, "calls": average.count / trace.calls, "self_ms": self_ms,
                     "share": self_ms / total_ms if total_ms else 0.0, "shapes": shapes})  # fmt: skip
    rows.sort(key=lambda r: -r["self_ms"])
    return rows[:MAX_OPERATORS]


def overhead(plain_ms: list[float], profiled_ms: list[float]) -> dict[str, float]:
    plain, profiled = statistics.median(plain_ms), statistics.median(profiled_ms)
    return {"plain_ms": plain, "profiled_ms": profiled, "overhead": profiled / plain - 1 if plain else 0.0}

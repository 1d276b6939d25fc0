"""An accepted Kevin kernel, installed in your model: `install(model)` swaps each instance of CLASS
for the kernel's ModelNew, carrying the same parameters and buffers (its state dict).

Written by `kevin-tui apply` beside the kernel, and committed with it; the settings below say which
kernel and which class. Only instances built like the problem the kernel was made for are swapped
(the same parameter and buffer shapes, the same plain settings); any other is left as it is, with a
warning. Nothing changes at import: call it where the model is built.

    from problems.blocks_GeluGate_apply import install
    model = install(model)

Training and torch.compile: the kernel's forward is a torch.library custom operator
(`torch.ops.kevin_tui.<CLASS>_<digest>`) whose shapes come from running your CLASS on fake tensors,
so torch.compile and torch.export trace through it without a graph break. Its gradients are, with
BACKWARD = "recompute", your CLASS's own: the backward runs CLASS's forward again under autograd
from the saved inputs (the forward is the kernel's, the gradients exactly the reference's; the cost
is one more forward of CLASS per backward). BACKWARD = "kernel" uses the kernel's own autograd,
which `kevin-tui apply --check` sets only after its gradients matched CLASS's for every input and
parameter. BACKWARD = "backward_kernel" uses BACKWARD_KERNEL, a kernel for the backward problem (the
vector-Jacobian product of CLASS), as a second custom operator; apply --check has compared its
gradients too. Plain inference (no gradient needed, not compiling) calls the kernel directly.

The switch: KEVIN_TUI_KERNELS=off in the environment (or `install(model, enabled=False)`) leaves
every model exactly as it is.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
import inspect
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

# -- settings, written by kevin-tui apply --
KERNEL = "model_kernel.py"  # the accepted kernel, relative to this file: it defines ModelNew
PROBLEM = "model_problem.py"  # the problem it was made for: its get_init_inputs() are the arguments
CLASS = "Model"  # the class of yours it replaces
SOURCE = "model.py"  # the file that defines CLASS, relative to this file
BACKWARD = "recompute"  # gradients: "recompute" (CLASS's, by construction), "kernel" (its own, checked) or
# "backward_kernel" (BACKWARD_KERNEL's, checked)
BACKWARD_KERNEL = None  # a kernel for CLASS's backward problem (`optimize --backward`), relative to this file
MODES = ("train", "eval")  # the modes the kernel runs in (after apply --check, those it proved: the mode checked, and
# the other where the model was the same with it); in another, CLASS's own forward runs (a kernel leaving out
# dropout is right in eval mode only)
# -- end of settings --

ENABLED = os.environ.get("KEVIN_TUI_KERNELS", "on").lower() not in ("off", "0", "false", "no")
HERE = Path(__file__).resolve().parent
NAMESPACE = "kevin_tui"


def install(model: nn.Module, enabled: bool = ENABLED, backward: str = BACKWARD) -> nn.Module:
    """`model` with its matching CLASS instances swapped for ModelNew; the model itself is returned
    (or its replacement, when the model is an instance of CLASS). `backward` as BACKWARD says."""
    if backward not in ("recompute", "kernel", "backward_kernel") or (
        backward == "backward_kernel" and not BACKWARD_KERNEL
    ):
        raise ValueError(
            f"backward is 'recompute', 'kernel' or (with BACKWARD_KERNEL) 'backward_kernel', not {backward!r}"
        )
    if not enabled:
        return model
    replaced: list[str] = []
    for path, module, why_not in matches(model):
        if why_not is not None:
            warnings.warn(f"kevin-tui kernel: {path or 'the model'} is left as it is: {why_not}", stacklevel=2)
            continue
        if any(path.startswith(f"{done}.") for done in replaced):
            continue  # inside an instance already swapped
        new = replacement(module, backward)
        if not path:
            return new
        parent, _, name = path.rpartition(".")
        setattr(model.get_submodule(parent), name, new)
        replaced.append(path)
    return model


def matches(model: nn.Module) -> list[tuple[str, nn.Module, str | None]]:
    """Each instance of CLASS in the model (path, module) and why it cannot be swapped (None: it can)."""
    found = [(path, module) for path, module in model.named_modules() if is_original(type(module))]
    if not found:
        return []
    made_for = built_for_kernel(type(found[0][1]))
    return [(path, module, difference(module, made_for)) for path, module in found]


def is_original(cls: type) -> bool:
    if cls.__qualname__ != CLASS:
        return False
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:  # a built-in class
        return False
    return source is not None and Path(source).resolve() == (HERE / SOURCE).resolve()


def built_for_kernel(cls: type) -> nn.Module:
    """CLASS built with the kernel's arguments, without memory for its weights where that works."""
    arguments = loaded(PROBLEM).get_init_inputs()
    try:
        with torch.device("meta"):
            return cls(*arguments)
    except Exception:
        return cls(*arguments)


def difference(module: nn.Module, made_for: nn.Module) -> str | None:
    ours, theirs = module.state_dict(), made_for.state_dict()
    if ours.keys() != theirs.keys():
        return "its parameters and buffers are not the ones the kernel was made for"
    for key, value in ours.items():
        if value.shape != theirs[key].shape:
            return f"{key} is {tuple(value.shape)}; the kernel was made for {tuple(theirs[key].shape)}"
    for key, value in vars(made_for).items():
        plain = isinstance(value, int | float | bool | str | tuple | type(None))
        if plain and not key.startswith("_") and key != "training" and getattr(module, key, value) != value:
            return f"{key} is {getattr(module, key)!r}; the kernel was made for {value!r}"
    return None


def replacement(module: nn.Module, backward: str = BACKWARD) -> nn.Module:
    """ModelNew with the module's state dict, on its device and in its dtype and mode."""
    new = installed_class(type(module))(*loaded(PROBLEM).get_init_inputs())
    tensors = [*module.parameters(), *module.buffers()]
    floating = [t.dtype for t in tensors if t.is_floating_point()]
    if tensors:
        new = new.to(tensors[0].device)
    if floating:
        new = new.to(floating[0])
    try:
        new.load_state_dict(module.state_dict())
    except RuntimeError as exc:
        raise RuntimeError(f"ModelNew does not hold {CLASS}'s parameters and buffers under the same names and "
                           f"shapes, so it cannot take them over: {exc}") from None  # fmt: skip
    for parameter, original in zip(new.parameters(), module.parameters(), strict=False):
        parameter.requires_grad_(original.requires_grad)
    new.kevin_backward = backward
    return new.train(module.training)


INSTALLED: dict[type, type] = {}  # CLASS -> its installed ModelNew, made once


def installed_class(original: type[nn.Module]) -> type:
    """The kernel's ModelNew with a forward that goes through its operator when autograd or
    torch.compile needs one (see the module's docstring)."""
    if original not in INSTALLED:
        INSTALLED[original] = _installed_class(original)
    return INSTALLED[original]


def _installed_class(original: type[nn.Module]) -> type:
    kernel = loaded(KERNEL).ModelNew
    operator = KernelOperator(original, kernel)

    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = operator.positional(args, kwargs)
        if ("train" if self.training else "eval") not in MODES:
            return operator.original(self, args)
        # contiguous, as the problem's get_inputs() made every input it was judged on: a kernel reading its input's
        # memory in order read a view's rows from the wrong places (tests/candidates/redteam26/)
        args = tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in args)
        direct = not torch.compiler.is_compiling() and not needs_grad(self, args)
        if direct:
            return kernel.forward(self, *args)
        if self.kevin_backward == "kernel":
            return contiguous_gradients(kernel.forward(self, *args))
        return operator(self, args)

    about = f"{kernel.__doc__ or 'ModelNew'} (installed by kevin-tui)"
    return type(kernel.__name__, (kernel,), {"forward": forward, "__module__": __name__, "__doc__": about})


def contiguous_gradients(outputs: Any) -> Any:
    """`outputs`, each tensor that takes a gradient hooked to pass it on contiguous: a kernel's own backward (BACKWARD
    = "kernel") gets autograd's gradient as the graph after the block made it (a transpose's), where the check sent
    it dense ones; one reading its memory in order was wrong (tests/candidates/redteam26/). Under torch.compile no
    hook is added: the layout a compiled graph gives a kernel's own backward is not checked."""
    if torch.compiler.is_compiling():
        return outputs
    for tensor in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
        if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
            tensor.register_hook(torch.Tensor.contiguous)
    return outputs


def needs_grad(module: nn.Module, args: tuple[Any, ...]) -> bool:
    if not torch.is_grad_enabled():
        return False
    tensors = [*module.parameters(), *module.buffers(), *(a for a in args if isinstance(a, torch.Tensor))]
    return any(t.requires_grad for t in tensors)


def on_meta(cls: type, arguments: list[Any]) -> nn.Module:
    """An instance used only for its code (functional_call gives it the real tensors each call)."""
    try:
        with torch.device("meta"):
            return cls(*arguments)
    except Exception:
        return cls(*arguments).to("meta")


def state_names(module: nn.Module) -> list[str]:
    return [name for name, _ in (*module.named_parameters(), *module.named_buffers())]


class KernelOperator:
    """The kernel's forward as a torch.library custom operator: the kernel computes, CLASS (run on
    fake tensors) gives the output's shapes, and CLASS (run again under autograd) gives gradients.

    The operator takes the forward's tensors and the module's parameters and buffers as one list, the
    forward's other arguments as their Python text (constants to the compiler), and the mode."""

    def __init__(self, original: type[nn.Module], kernel: type[nn.Module]) -> None:
        arguments = loaded(PROBLEM).get_init_inputs()
        self.reference = on_meta(original, arguments)
        self.kernel = on_meta(kernel, arguments)
        self.state = state_names(self.kernel)
        self.reference_state = set(state_names(self.reference))
        self.signature = inspect.signature(original.forward)
        self.returns_tuple = self._returns_tuple()
        self.parameters = [self.state.index(name) for name, _ in self.reference.named_parameters()]
        self.backward_kernel: Any = on_meta(loaded(BACKWARD_KERNEL).ModelNew, arguments) if BACKWARD_KERNEL else None
        self.op = self._define()
        self.backward_op: Any = self._define_backward() if BACKWARD_KERNEL else None

    def positional(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        bound = self.signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.args[1:])

    def __call__(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        named = {**dict(module.named_parameters()), **dict(module.named_buffers())}
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + [named[name] for name in self.state]
        layout = repr([None if isinstance(a, torch.Tensor) else (a,) for a in args])
        outputs = self.op(tensors, layout, module.training, module.kevin_backward)
        return tuple(outputs) if self.returns_tuple else outputs[0]

    def original(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        """CLASS's own forward on the module's parameters and buffers, in its mode: where the kernel is not proven."""
        named = {**dict(module.named_parameters()), **dict(module.named_buffers())}
        self.reference.train(module.training)
        return functional_call(self.reference, {k: v for k, v in named.items() if k in self.reference_state}, args)

    def _returns_tuple(self) -> bool:
        try:
            with torch.device("meta"):
                output = self.reference(*loaded(PROBLEM).get_inputs())
        except Exception:
            return False
        return isinstance(output, tuple | list)

    def split(self, tensors: list[torch.Tensor], layout: str) -> tuple[tuple[Any, ...], list[torch.Tensor]]:
        """The forward's arguments and the module's state, out of the operator's inputs."""
        plain = parse_layout(layout)
        count = sum(p is None for p in plain)
        given = iter(tensors[:count])
        return tuple(next(given) if p is None else p[0] for p in plain), tensors[count:]

    def run(self, module: nn.Module, tensors: list[torch.Tensor], layout: str, training: bool) -> list[torch.Tensor]:
        args, state = self.split(tensors, layout)
        named = dict(zip(self.state, state, strict=True))
        if module is self.reference:
            named = {k: v for k, v in named.items() if k in self.reference_state}
        module.train(training)
        output = functional_call(module, named, args)
        return list(output) if isinstance(output, tuple | list) else [output]

    def _define(self) -> Any:
        digest = hashlib.sha256(str((HERE / KERNEL).resolve()).encode()).hexdigest()[:8]
        name, number = f"{CLASS}_{digest}", 1
        while hasattr(getattr(torch.ops, NAMESPACE), name):  # the helper imported twice in one process
            number += 1
            name = f"{CLASS}_{digest}_{number}"

        def kernel_forward(
            tensors: list[torch.Tensor], layout: str, training: bool, backward: str
        ) -> list[torch.Tensor]:
            return unaliased(self.run(self.kernel, tensors, layout, training), tensors)

        def shapes(tensors: list[torch.Tensor], layout: str, training: bool, backward: str) -> list[torch.Tensor]:
            return [o.contiguous() for o in self.run(self.reference, tensors, layout, training)]

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            tensors, layout, training, backward = inputs
            ctx.wanted = [t.requires_grad and t.is_floating_point() for t in tensors]
            ctx.layout, ctx.training, ctx.backward = layout, training, backward
            device = tensors[0].device.type if tensors else "cpu"
            ctx.autocast = (device, torch.get_autocast_dtype(device)) if torch.is_autocast_enabled(device) else None
            ctx.save_for_backward(*tensors)

        def backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple[Any, None, None, None]:
            saved = list(ctx.saved_tensors)
            wanted = [i for i, w in enumerate(ctx.wanted) if w]
            if ctx.backward == "backward_kernel":
                if grads[0] is None:  # the output was not used: no gradient flows
                    return [None] * len(saved), None, None, None
                # autograd's gradient has whatever layout the graph after the block gave it (a transpose's); the
                # backward problem drew grad_output contiguous
                gradient = grads[0].contiguous()
                got = dict(zip(self.gradient_positions(saved, ctx.layout),
                               self.backward_op(saved, ctx.layout, ctx.training, gradient), strict=True))  # fmt: skip
                return [got.get(i) if ctx.wanted[i] else None for i in range(len(saved))], None, None, None

            def reference(*chosen: torch.Tensor) -> list[torch.Tensor]:
                tensors = list(saved)
                for index, value in zip(wanted, chosen, strict=True):
                    tensors[index] = value
                return self.run(self.reference, tensors, ctx.layout, ctx.training)

            with autocast_as(ctx.autocast):  # the backward runs outside the forward's autocast
                outputs, vjp = torch.func.vjp(reference, *(saved[i] for i in wanted))[:2]
            cotangents = [torch.zeros_like(o) if g is None else g for o, g in zip(outputs, grads, strict=True)]
            got = dict(zip(wanted, vjp(cotangents), strict=True))
            return [got.get(i) for i in range(len(saved))], None, None, None

        self.name = f"{NAMESPACE}::{name}"
        op = torch.library.custom_op(self.name, kernel_forward, mutates_args=())
        op.register_fake(shapes)
        op.register_autograd(backward, setup_context=setup_context)
        return op

    def gradient_positions(self, tensors: list[torch.Tensor], layout: str) -> list[int]:
        """Where, among the operator's inputs, the backward problem's gradients go: its floating
        inputs, then CLASS's parameters in order."""
        count = sum(p is None for p in parse_layout(layout))
        return [i for i in range(count) if tensors[i].is_floating_point()] + [count + i for i in self.parameters]

    def _define_backward(self) -> Any:
        """BACKWARD_KERNEL as an operator: the forward's inputs and state and grad_output in, the
        gradients out (its ModelNew holds CLASS's state under `block.`, as the backward problem does)."""
        names = set(state_names(self.backward_kernel))

        def backward_kernel(tensors: list[torch.Tensor], layout: str, training: bool, grad: torch.Tensor
                            ) -> list[torch.Tensor]:  # fmt: skip
            args, state = self.split(tensors, layout)
            named = {f"block.{k}": v for k, v in zip(self.state, state, strict=True) if f"block.{k}" in names}
            self.backward_kernel.train(training)
            return unaliased(list(functional_call(self.backward_kernel, named, (*args, grad))), [*tensors, grad])

        def shapes(tensors: list[torch.Tensor], layout: str, training: bool, grad: torch.Tensor) -> list[torch.Tensor]:
            return [torch.empty_like(tensors[i]) for i in self.gradient_positions(tensors, layout)]

        op = torch.library.custom_op(f"{self.name}_backward", backward_kernel, mutates_args=())
        op.register_fake(shapes)
        return op


def unaliased(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """An operator's outputs may not share memory with its inputs (a kernel may return one as it is)."""
    storages = {t.untyped_storage().data_ptr() for t in inputs}
    return [o.clone() if o.untyped_storage().data_ptr() in storages else o.contiguous() for o in outputs]


def autocast_as(state: tuple[str, torch.dtype] | None) -> Any:
    return contextlib.nullcontext() if state is None else torch.autocast(state[0], dtype=state[1])


@functools.cache
def parse_layout(layout: str) -> list[tuple[Any] | None]:
    """The forward's arguments as the operator carries them: None for a tensor, (value,) for another."""
    try:
        return ast.literal_eval(layout)
    except (ValueError, SyntaxError):
        raise TypeError(f"kevin-tui kernel: {CLASS}.forward was given an argument its operator cannot carry "
                        f"(only tensors and plain Python values): {layout}") from None  # fmt: skip


@functools.cache
def loaded(name: str) -> ModuleType:
    """The kernel or its problem, imported once (the kernel builds its extension, or loads it from
    torch's cache)."""
    path = HERE / name
    spec = importlib.util.spec_from_file_location(f"kevin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

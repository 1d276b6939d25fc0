"""The KernelBench problem file kevin-tui writes for a module of yours.

It holds the module's source and everything it uses from your code (kevin_tui.usermodel.bundle),
`class Model(YourClass)`, get_inputs() drawing the inputs you gave (or the ones seen in a
profile), get_init_inputs() with the constructor arguments in order, and a first line tagged
`# kevin-tui-origin:` recording where it came from, which `kevin-tui apply` reads.
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kevin_tui.problem import ORIGIN_TAG
from kevin_tui.usermodel.bundle import Bundler, relative_path
from kevin_tui.usermodel.specs import InputSpec, SpecError, size_names

RESERVED = ("Model", "ModelNew", "get_inputs", "get_init_inputs", "batch_size")


@dataclass
class ProblemSpec:
    """What a problem is made from: a class of yours, its arguments and inputs, the mode it runs in."""

    target: str  # as given or found: "tinylm/blocks.py:GeluGate", relative to the project directory
    class_file: Path  # where the class is defined
    class_name: str
    init: list[tuple[str, str]]  # (parameter, Python text), in positional order
    inputs: list[InputSpec]
    training: bool
    needs: list[tuple[Path, str]] = field(default_factory=list)  # more of your names the arguments use
    model: dict[str, Any] | None = None  # {"target", "init", "inputs"} of the model it was profiled in
    dtype: str | None = None  # its parameters' dtype in your model, when not float32 ("bfloat16")
    autocast: str | None = None  # the dtype autocast ran it in, when it did
    grad_output: InputSpec | None = None  # set for a backward problem: the gradient of the output, drawn too

    def origin(self, root: Path, problems_dir: Path) -> dict[str, Any]:
        """What the first line records; paths are relative to `root`, itself relative to the problem."""
        return {
            "root": os.path.relpath(root.resolve(), problems_dir.resolve()),
            "target": self.target,
            "class_file": relative_path(self.class_file, root),
            "class": self.class_name,
            "init": dict(self.init),
            "inputs": [s.text() for s in self.inputs],
            "training": self.training,
            **({"model": self.model} if self.model else {}),
            **({"dtype": self.dtype} if self.dtype else {}),
            **({"autocast": self.autocast} if self.autocast else {}),
            **({"backward": True} if self.grad_output else {}),
        }


def problem_file_name(spec: ProblemSpec) -> str:
    return f"{spec.class_file.stem}_{spec.class_name}{'_backward' if spec.grad_output else ''}.py"


def problem_text(spec: ProblemSpec, roots: list[Path], root: Path, problems_dir: Path) -> str:
    """The problem's source; `roots` are where your package's modules are found, `root` the project
    directory that paths are written relative to, `problems_dir` where the file will be."""
    bundler = Bundler(roots)
    bundler.add(spec.class_file, spec.class_name)
    for path, name in spec.needs:
        bundler.add(path, name)
    for name in RESERVED:
        if name in bundler.meaning and not (name == "Model" == spec.class_name and spec.training):
            raise SpecError(f"cannot write a problem for {spec.target}: your code defines {name}, a name "
                            "KernelBench reserves; rename it")  # fmt: skip
    if spec.grad_output and spec.class_name in ("Model", "Forward"):
        raise SpecError(f"cannot write a backward problem for {spec.target}: rename your class {spec.class_name}")
    bundler.need_import("torch", "import torch")  # get_inputs() draws with it
    body = bundler.text(root)
    relative = relative_path(spec.class_file, root)
    drawn = [*spec.inputs, *([spec.grad_output] if spec.grad_output else [])]
    named = {key: name for key, name in size_names(drawn).items() if name not in bundler.meaning}
    values = {name: size for (_, size), name in named.items()}
    sizes = "".join(f"{name} = {size}\n" for name, size in values.items()) + ("\n\n" if values else "")
    inputs = ", ".join(s.expression(named) for s in drawn)
    init = ", ".join(text for _, text in spec.init)
    names = ", ".join(name for name, _ in spec.init)
    about = (
        f"Made by kevin-tui from {spec.target}; everything it uses from your code is copied here, so this file "
        "stands alone. ModelNew must hold the same parameters and buffers under the same names and shapes: "
        f"`kevin-tui apply` loads the state dict of each {spec.class_name} of your model into it."
    )
    return "\n".join([
        f"{ORIGIN_TAG}{json.dumps(spec.origin(root, problems_dir))}",
        f'"""{spec.class_name} from {relative} as a KernelBench problem: Model is the module to make faster.',
        "",
        textwrap.fill(about, 100),
        '"""',
        "",
        body,
        "",
        (_backward_classes(spec) if spec.grad_output else _model_class(spec)) + sizes + "def get_inputs():",
        f"    return [{inputs}]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{init}]" + (f"  # {names}" if names else ""),
        "",
    ])  # fmt: skip


def _model_class(spec: ProblemSpec, name: str = "Model") -> str:
    """Model: your class, in the mode, dtype and autocast it runs in in your model."""
    if spec.class_name == name:
        return ""
    setup = [] if spec.training else ["        self.eval()  # it runs in eval mode in your model"]
    if spec.dtype:
        setup.append(f"        self.to(torch.{spec.dtype})  # its parameters are {spec.dtype} in your model")
    lines = [f"class {name}({spec.class_name}):", f'    """{spec.class_name}, as your model uses it."""']
    if setup:
        lines += ["", "    def __init__(self, *args):", "        super().__init__(*args)", *setup]
    if spec.autocast:
        lines += ["", "    def forward(self, *args):",
                  "        device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), 'cpu')",
                  f"        with torch.autocast(device, dtype=torch.{spec.autocast}):  # as in your model",
                  "            return super().forward(*args)"]  # fmt: skip
    return "\n".join([*lines, "", "", ""])


def _backward_classes(spec: ProblemSpec) -> str:
    """Forward (your class as your model uses it) and Model, its vector-Jacobian product."""
    about = (f"The backward of {spec.class_name}: from its inputs and grad_output (the gradient of its output), "
             "the gradients of its floating inputs and then of its parameters, in the order parameters() gives "
             "them (`kevin-tui apply --backward-kernel` installs a kernel for it with the forward's).")  # fmt: skip
    return _model_class(spec, "Forward") + "\n".join([
        "class Model(torch.nn.Module):",
        textwrap.indent(f'"""{textwrap.fill(about, 92)}"""', "    "),
        "",
        "    def __init__(self, *args):",
        "        super().__init__()",
        "        self.block = Forward(*args)",
        "",
        "    def forward(self, *inputs):",
        "        *args, grad_output = inputs",
        "        with torch.enable_grad():",
        "            args = [a.detach().requires_grad_() if torch.is_tensor(a) and a.is_floating_point() else a",
        "                    for a in args]",
        "            wrt = [a for a in args if torch.is_tensor(a) and a.requires_grad] + list(self.block.parameters())",
        "            return tuple(torch.autograd.grad(self.block(*args), wrt, grad_output))",
        "", "", "",
    ])  # fmt: skip

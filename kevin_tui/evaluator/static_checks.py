"""Static checks on a candidate's source: Kevin's RL rules and KernelBench's checker.

They are warnings by default and make the verdict `rejected` under --strict.
The runtime checks in the worker are what make a verdict trustworthy; these
catch the patterns that pass at runtime yet defeat the purpose (a PyTorch
fallback, a kernel that is never written).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kevin_tui.evaluator.verdict import Warning_

TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu", "softmax",
    "log_softmax", "sigmoid", "tanh", "gelu", "silu", "layer_norm", "batch_norm",
    "group_norm", "instance_norm", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "cross_entropy", "logsumexp", "cumsum", "cumprod", "norm",
    "sum", "mean", "prod", "var", "std", "argmax", "argmin", "amax", "amin", "scaled_dot_product_attention",
}  # fmt: skip
NN_CONTAINERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer"}
DANGEROUS = {
    "os.system", "os.popen", "os.fork", "os.kill", "os.killpg", "os.remove", "os.unlink",
    "os.rmdir", "os.removedirs", "os.execv", "os.execvp", "os.execve", "os.spawnv",
    "os.putenv", "shutil.rmtree", "shutil.move", "eval", "exec", "__import__",
}  # fmt: skip
DANGEROUS_MODULES = {"subprocess", "socket", "multiprocessing", "ctypes", "urllib", "requests", "http"}
PATCHABLE_ROOTS = {"torch", "time", "os", "sys", "builtins", "np", "numpy", "timeit", "F", "nn"}
STREAM_PATTERN = re.compile(
    r"cudaStreamCreate|getStreamFromPool|torch\.cuda\.Stream\b|torch\.cuda\.stream\(|cuda\.Stream\("
)
KERNEL_PATTERN = re.compile(r"__global__|@triton\.jit|\bload_inline\b|cpp_extension\.load\b")


def dotted_name(node: ast.AST) -> str | None:
    """'torch.nn.functional.relu' for that attribute chain, None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def strip_c_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


class _DropStrings(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.Constant("") if isinstance(node.value, str) else node


def python_code(source: str) -> str:
    """The candidate's Python code without its string constants (CUDA/C++ sources, docstrings)."""
    return ast.unparse(_DropStrings().visit(ast.parse(source)))


def string_constants(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


class _Aliases(ast.NodeVisitor):
    """Resolves import aliases so that `F.relu` and `from torch import nn` are seen as torch."""

    def __init__(self) -> None:
        self.map: dict[str, str] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.map[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.map[a.asname or a.name] = f"{node.module}.{a.name}" if node.module else a.name

    def resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        full = self.map.get(head, head)
        return f"{full}.{rest}" if rest else full


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    return found[-1] if found else None


def _nn_module_attrs(cls: ast.ClassDef, aliases: _Aliases) -> set[str]:
    """Attributes of self assigned an nn.<Module>(...) that computes (not a Parameter holder)."""
    attrs: set[str] = set()
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        name = dotted_name(node.value.func)
        full = aliases.resolve(name) if name else ""
        if full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] not in NN_CONTAINERS:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and dotted_name(target.value) == "self":
                    attrs.add(target.attr)
    return attrs


def _torch_compute_calls(tree: ast.Module, aliases: _Aliases) -> list[str]:
    cls = _model_new(tree)
    scope: ast.AST = cls if cls is not None else tree
    module_attrs = _nn_module_attrs(cls, aliases) if cls is not None else set()
    found: list[str] = []
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call):
            continue
        name = dotted_name(node.func)
        if name is None:
            continue
        full = aliases.resolve(name)
        last = full.rsplit(".", 1)[-1]
        top_level_torch_op = full.startswith("torch.") and full.count(".") == 1 and last in TORCH_COMPUTE
        if full.startswith("torch.nn.functional.") or top_level_torch_op:
            found.append(name)
        elif name.startswith("self.") and name.count(".") == 1 and name[5:] in module_attrs:
            found.append(f"{name} (an nn module)")
    return sorted(set(found))


def _dangerous_calls(tree: ast.Module, aliases: _Aliases) -> list[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found.update(f"import {m}" for m in mods if m.split(".")[0] in DANGEROUS_MODULES)
        elif isinstance(node, ast.Call):
            name = dotted_name(node.func)
            full = aliases.resolve(name) if name else ""
            if full in DANGEROUS or full.split(".")[0] in DANGEROUS_MODULES:
                found.add(full)
    return sorted(found)


def _patches(tree: ast.Module, aliases: _Aliases) -> list[str]:
    """Assignments to attributes of torch/time/... or setattr on them: monkey-patching."""
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and dotted_name(node.func) == "setattr" and node.args:
            root = dotted_name(node.args[0])
            if root and root.split(".")[0] in PATCHABLE_ROOTS:
                found.add(f"setattr({root}, ...)")
        for target in targets:
            if isinstance(target, ast.Attribute):
                name = dotted_name(target)
                if name and name.split(".")[0] in PATCHABLE_ROOTS:
                    found.add(aliases.resolve(name))
    return sorted(found)


def run_static_checks(source: str) -> list[Warning_]:
    """All static findings for a candidate that parses; [] means nothing suspicious."""
    tree = ast.parse(source)
    aliases = _Aliases()
    aliases.visit(tree)
    code_text = strip_c_comments("\n".join(string_constants(tree)))
    py_text = python_code(source)
    warnings: list[Warning_] = []

    def add(code: str, message: str) -> None:
        warnings.append(Warning_(code, message))

    if not KERNEL_PATTERN.search(code_text) and not KERNEL_PATTERN.search(py_text):
        add("no_custom_kernel", "no custom kernel: no __global__ function and no load_inline build")
    if ops := _torch_compute_calls(tree, aliases):
        add("torch_compute_ops", f"ModelNew computes with PyTorch ops: {', '.join(ops[:6])}")
    if any(isinstance(n, ast.Try) and n.handlers for n in ast.walk(tree)):
        add("try_except_fallback", "try/except in the candidate: a fallback to PyTorch hides a failing kernel")
    cls = _model_new(tree)
    if cls is not None and any(dotted_name(b) in {"Model", "__main__.Model"} for b in cls.bases):
        add("subclass_reference", "ModelNew subclasses the reference Model")
    if STREAM_PATTERN.search(code_text) or STREAM_PATTERN.search(py_text):
        add("creates_streams", "the candidate creates CUDA streams: work on them can escape the timer")
    if calls := _dangerous_calls(tree, aliases):
        add("dangerous_call", f"dangerous calls: {', '.join(calls)}")
    if patched := _patches(tree, aliases):
        add("monkey_patch", f"the candidate assigns to library attributes: {', '.join(patched)}")
    return warnings

"""Static checks on a candidate's source: Kevin's RL rules and KernelBench's checker, on the syntax tree.

They are warnings by default and make the verdict `rejected` under --strict. They look at code, not
at strings: a custom kernel is a real call to `load_inline`/`load` (through any import alias) or a
`@triton.jit` function, not the word in a docstring; PyTorch compute is looked for in the whole
module (helpers included), through aliases, tensor methods and the `@` operator. The runtime
evidence the host adds afterwards (the builds it made, the ops forward dispatched) is what settles
whether a kernel really ran; these catch what passes at runtime yet defeats the purpose.
"""

from __future__ import annotations

import ast
import re

from kevin_tui.evaluator.verdict import Warning_

TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu", "softmax", "log_softmax", "sigmoid",
    "tanh", "gelu", "silu", "layer_norm", "batch_norm", "group_norm", "instance_norm", "max_pool1d", "max_pool2d",
    "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "cross_entropy", "logsumexp", "cumsum", "cumprod",
    "norm", "sum", "mean", "prod", "var", "std", "argmax", "argmin", "amax", "amin", "clamp", "clamp_min",
    "clamp_max", "scaled_dot_product_attention", "exp", "log", "sqrt", "rsqrt", "maximum", "minimum", "where",
    "tensordot", "outer", "dot", "mv", "hardtanh", "elu", "selu", "leaky_relu", "softplus", "mish", "dropout",
}  # fmt: skip
# Tensor methods that compute (x.relu(), x.matmul(w)); ambiguous names (x.sum() on a list) are rare in kernels.
TENSOR_METHODS = TORCH_COMPUTE - {"einsum", "linear", "layer_norm", "batch_norm", "group_norm", "instance_norm"}
NN_CONTAINERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer"}
BUILD_FUNCTIONS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
DANGEROUS = {
    "os.system", "os.popen", "os.fork", "os.kill", "os.killpg", "os.remove", "os.unlink", "os.rmdir",
    "os.removedirs", "os.execv", "os.execvp", "os.execve", "os.spawnv", "os.putenv", "shutil.rmtree",
    "shutil.move", "eval", "exec", "__import__",
}  # fmt: skip
DANGEROUS_MODULES = {"subprocess", "socket", "multiprocessing", "urllib", "requests", "http"}
INTROSPECTION = {"sys._getframe", "sys.settrace", "sys.setprofile", "gc.get_referrers", "gc.get_objects"}
INTROSPECTION_MODULES = {"inspect", "gc", "ctypes", "cffi", "_ctypes"}
PATCHABLE_ROOTS = {"torch", "time", "os", "sys", "builtins", "np", "numpy", "timeit", "F", "nn", "kevin_tui"}
STREAM_PATTERN = re.compile(
    r"cudaStreamCreate|getStreamFromPool|torch\.cuda\.Stream\b|torch\.cuda\.stream\(|cuda\.Stream\("
)


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


def string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


class Aliases(ast.NodeVisitor):
    """Resolves import aliases and simple assignments, so `F.relu`, `from torch import nn` and
    `f = torch.nn.functional` are all seen as torch."""

    def __init__(self) -> None:
        self.map: dict[str, str] = {}
        self.local_classes: set[str] = set()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.local_classes.add(node.name)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.map[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.map[a.asname or a.name] = f"{node.module}.{a.name}" if node.module else a.name

    def visit_Assign(self, node: ast.Assign) -> None:
        value = dotted_name(node.value)
        if value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.map[target.id] = self.resolve(value)
        self.generic_visit(node)

    def resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        full = self.map.get(head, head)
        return f"{full}.{rest}" if rest else full


def _plain_module_base(base: ast.expr, aliases: Aliases) -> bool:
    """nn.Module (through any alias) or a class the candidate defines itself from it; anything computed
    at runtime (sys.modules[...].Model) or named Model is not."""
    name = dotted_name(base)
    if name is None:
        return False
    return aliases.resolve(name) in ("torch.nn.Module", "torch.nn.modules.module.Module") or (
        "." not in name and name not in ("Model",) and name in aliases.local_classes
    )


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    return found[-1] if found else None


def _nn_module_attrs(tree: ast.AST, aliases: Aliases) -> set[str]:
    """Attributes of self assigned an nn.<Module>(...) that computes (not a Parameter holder)."""
    attrs: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        name = dotted_name(node.value.func)
        full = aliases.resolve(name) if name else ""
        if full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] not in NN_CONTAINERS:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and dotted_name(target.value) == "self":
                    attrs.add(target.attr)
    return attrs


def _extensions(tree: ast.Module, aliases: Aliases) -> set[str]:
    """Names bound to what load_inline/load returned: calls on them are the candidate's own kernels."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if (called := dotted_name(node.value.func)) and aliases.resolve(called) in BUILD_FUNCTIONS:
            names.update(dotted_name(t) or "" for t in node.targets)
    return names - {""}


def _compute_calls(tree: ast.Module, aliases: Aliases) -> list[str]:
    """PyTorch compute anywhere in the module: torch.X, F.X, nn modules called, tensor methods, `@`."""
    module_attrs = _nn_module_attrs(tree, aliases)
    extensions = _extensions(tree, aliases)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            found.append("the @ operator")
        if not isinstance(node, ast.Call):
            continue
        name = dotted_name(node.func)
        if name is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METHODS:
                found.append(f".{node.func.attr}()")
            continue
        full = aliases.resolve(name)
        last = full.rsplit(".", 1)[-1]
        if full.startswith("torch.nn.functional.") or (full.startswith("torch.") and last in TORCH_COMPUTE):
            found.append(name)
        elif name.startswith("self.") and name.count(".") == 1 and name[5:] in module_attrs:
            found.append(f"{name} (an nn module)")
        elif (
            "." in name
            and last in TENSOR_METHODS
            and not full.startswith("torch.")
            and name.split(".")[0] != "self"
            and name.rsplit(".", 1)[0] not in extensions
        ):
            found.append(f".{last}()")
    return sorted(set(found))


def _builds(tree: ast.Module, aliases: Aliases) -> bool:
    """A real call of load_inline/load (or a @triton.jit function) exists in the module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := dotted_name(node.func)) and aliases.resolve(name) in BUILD_FUNCTIONS:
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (name := dotted_name(target)) and aliases.resolve(name) in ("triton.jit", "triton.autotune"):
                    return True
    return False


def _fallbacks(tree: ast.Module, aliases: Aliases) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.handlers:
            return True
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                name = dotted_name(call.func) if isinstance(call, ast.Call) else None
                if name and aliases.resolve(name) == "contextlib.suppress":
                    return True
    return False


def _calls_in(tree: ast.Module, aliases: Aliases, names: set[str], modules: set[str]) -> list[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found.update(f"import {m}" for m in mods if m.split(".")[0] in modules)
        elif isinstance(node, ast.Call):
            name = dotted_name(node.func)
            full = aliases.resolve(name) if name else ""
            if full in names or full.split(".")[0] in modules:
                found.add(full)
    return sorted(found)


def _dynamic_torch_access(tree: ast.Module, aliases: Aliases) -> list[str]:
    """getattr(torch, <computed name>): a way round every name-based check."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted_name(node.func) == "getattr" and len(node.args) >= 2:
            target = dotted_name(node.args[0])
            if (
                target
                and aliases.resolve(target).split(".")[0] == "torch"
                and not isinstance(node.args[1], ast.Constant)
            ):
                found.append(f"getattr({target}, ...)")
    return found


def _patches(tree: ast.Module, aliases: Aliases) -> list[str]:
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
            if root and _patchable(root, aliases):
                found.add(f"setattr({root}, ...)")
        for target in targets:
            if isinstance(target, ast.Attribute) and (name := dotted_name(target)) and _patchable(name, aliases):
                found.add(aliases.resolve(name))
    return sorted(found)


def _patchable(name: str, aliases: Aliases) -> bool:
    return name.split(".")[0] in PATCHABLE_ROOTS or aliases.resolve(name).split(".")[0] in PATCHABLE_ROOTS


def run_static_checks(source: str) -> list[Warning_]:
    """All static findings for a candidate that parses; [] means nothing suspicious."""
    tree = ast.parse(source)
    aliases = Aliases()
    aliases.visit(tree)
    code_text = strip_c_comments("\n".join(string_constants(tree)))
    py_text = python_code(source)
    warnings: list[Warning_] = []

    def add(code: str, message: str) -> None:
        warnings.append(Warning_(code, message))

    if not _builds(tree, aliases):
        add("no_custom_kernel", "no custom kernel: no load_inline/load call and no @triton.jit function")
    if ops := _compute_calls(tree, aliases):
        add("torch_compute_ops", f"the candidate computes with PyTorch ops: {', '.join(ops[:6])}")
    if _fallbacks(tree, aliases):
        add("try_except_fallback", "try/except or contextlib.suppress: a fallback to PyTorch hides a failing kernel")
    cls = _model_new(tree)
    if cls is not None and (odd := [b for b in cls.bases if not _plain_module_base(b, aliases)]):
        add("subclass_reference", f"ModelNew subclasses {ast.unparse(odd[0])[:80]}, not nn.Module (the reference?)")
    if STREAM_PATTERN.search(code_text) or STREAM_PATTERN.search(py_text):
        add("creates_streams", "the candidate creates CUDA streams: work on them can escape the timer")
    if calls := _calls_in(tree, aliases, DANGEROUS, DANGEROUS_MODULES):
        add("dangerous_call", f"dangerous calls: {', '.join(calls)}")
    if found := _calls_in(tree, aliases, INTROSPECTION, INTROSPECTION_MODULES) + _dynamic_torch_access(tree, aliases):
        add("introspection", f"frame, gc, ctypes or dynamic torch access: {', '.join(sorted(set(found))[:5])}")
    if patched := _patches(tree, aliases):
        add("monkey_patch", f"the candidate assigns to library attributes: {', '.join(patched)}")
    return warnings

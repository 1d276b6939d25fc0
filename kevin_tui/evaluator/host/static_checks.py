"""Static checks on a candidate's source: Kevin's RL rules and KernelBench's checker, on the syntax tree.

They are warnings by default and make the verdict `rejected` under --strict. They look at code, not
at strings: a custom kernel is a real call to `load_inline`/`load` (through any import alias) or a
`@triton.jit` function, not the word in a docstring; PyTorch compute is looked for in the whole
module (helpers included), through aliases, tensor methods and the `@` operator. They see through
names: constant `getattr(torch, "ma" + "tmul")`, `vars(F)["relu"]` and `importlib.import_module("...")`
are read as the attribute or module they name, references to compute functions count as well as calls,
and a name bound more than once (a base class rebound to the reference) is never taken on trust. The
runtime evidence the host adds afterwards (the builds it made, the ops forward dispatched) is what
settles whether a kernel really ran; these catch what passes at runtime yet defeats the purpose.
"""

from __future__ import annotations

import ast
import bisect
import re

from kevin_tui.evaluator.host.cpp_text import code_only, strip_c_comments
from kevin_tui.evaluator.operators import NOT_COMPUTE
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
# What tells a forward call it is being watched (the op count's dispatch mode, the profiler): named at all, it is
# introspection, since a kernel has no use for it but to behave differently then.
WATCH_PROBES = (
    "torch._C._len_torch_dispatch_stack", "torch._C._get_dispatch_stack_at", "torch._C._get_dispatch_mode",
    "torch._C._is_torch_function_mode_enabled", "torch._C._get_function_stack_at", "torch._C._len_torch_function_stack",
    "torch.utils._python_dispatch", "torch.overrides._get_current_function_mode",
    "torch.autograd.profiler._is_profiler", "torch.autograd._profiler_enabled", "torch._C._autograd._profiler_enabled",
)  # fmt: skip
# Methods of a tensor that give numbers or facts, not tensors: arithmetic on what they return is not compute.
TENSOR_FACTS = {
    "size", "dim", "numel", "stride", "item", "tolist", "data_ptr", "element_size", "nelement", "is_contiguous",
    "ndimension", "get_device", "storage_offset", "is_floating_point", "is_complex", "nbytes",
}  # fmt: skip
PATCHABLE_ROOTS = {"torch", "time", "os", "sys", "builtins", "np", "numpy", "timeit", "F", "nn", "kevin_tui"}
# Python's own number modules: their functions take numbers (a one-element tensor at most, given back as a number),
# except those that multiply or add what they are given as it is (`math.prod([a, b])` is `a * b` on tensors).
SCALAR_MODULES = {"math", "cmath"}
SCALAR_FUNCTIONS_ON_ANYTHING = {"prod", "sumprod"}
MATMUL_DUNDERS = {"__matmul__", "__rmatmul__", "__imatmul__"}
MATMUL_FUNCTIONS = {"operator.matmul", "operator.imatmul", "operator.__matmul__", "operator.__imatmul__"}
TORCH_OP_NAMESPACES = ("torch.ops.", "torch._C._nn.", "torch._C._VariableFunctions.", "torch._C._linalg.")
# Other array libraries: their work is neither a kernel of the candidate's nor an op the runtime count sees
# (`np.clip(x.numpy(), 0, None)` is a ReLU nobody dispatches), so their functions are compute, and so is handing a
# tensor to one (`.numpy()`, `__array__`, DLPack: an ndarray's own methods compute where no name can show it).
# Only their types and constants are not.
ARRAY_LIBRARIES = {
    "numpy", "scipy", "cupy", "cupyx", "jax", "jaxlib", "tensorflow", "mlx", "dask", "pandas", "numexpr", "sklearn",
}  # fmt: skip
ARRAY_FACTS = {
    "dtype", "ndarray", "finfo", "iinfo", "pi", "e", "inf", "nan", "newaxis", "bool_", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128",
}  # fmt: skip
TENSOR_EXITS = {"numpy", "__array__", "__array_interface__", "__cuda_array_interface__", "__dlpack__", "to_dlpack"}
EXIT_METHODS = {"__exit__", "__aexit__"}
EXIT_STACKS = {"contextlib.ExitStack", "contextlib.AsyncExitStack"}
STREAM_PATTERN = re.compile(
    r"cudaStreamCreate|getStreamFromPool|torch\.cuda\.Stream\b|torch\.cuda\.stream\(|cuda\.Stream\("
)
# PyTorch compute called from the C++/CUDA sources: `at::relu(x)`, `torch::matmul(a, b)`, `at::cpu::clamp_min`
# (a CPU kernel's own entry, past the dispatcher), `at::_ops::mm::call`, `torch::nn::...`, `x.matmul(w)`. The
# runtime op count cannot be relied on for these: C++ can call a kernel without the dispatcher, or turn off the
# dispatch keys the count listens on for its own scope (CPP_DISPATCH), so the text is read.
CPP_COMPUTE = TORCH_COMPUTE | {
    "add", "sub", "mul", "div", "pow", "neg", "abs", "erf", "reciprocal", "addmv", "addr", "addcmul", "addcdiv",
    "lerp", "max", "min", "sort", "topk", "gemm", "gemv",
}  # fmt: skip
CPP_METHODS = TENSOR_METHODS | {"add", "sub", "mul", "div", "pow", "addmm", "addcmul"}
# A qualified name called (`at::cpu::relu(`, `::at::mm<float>(`, `foo::at::relu(`): matched from the head of its
# chain only, once (atomic), so the scan stays linear in the text (from every `at` of `at::at::at...`, a
# candidate's 80 KB string took the host 99 s and timed out its own load phase).
CPP_CALL = re.compile(r"(?<!::)(?<!\w)(?:::)?((?>\w+(?:::\w+)*))\s*(?:<[^<>;(){}]*>)?\s*\(")
TORCH_NAMESPACES = ("at", "torch")
CPP_METHOD = re.compile(r"(?:\.|->)\s*(\w+)\s*\(")
CPP_DISPATCH = re.compile(
    r"\b(?:Exclude|Include)DispatchKey(?:Set)?Guard\b|\bDispatchKey::Python\w*|\bDispatcher::singleton\b"
    r"|\bfindSchema\w*|\bredispatch\w*|\bDisableTorch(?:Function|Dispatch)\w*"
    # C++ calling back into Python (a module imported, an attribute called by name): torch.relu is one `.attr` away
    r"|\bmodule_?::import\b|\.\s*attr\s*\(|\bPy(?:Import|Run)_\w+|\bPy_CompileString\w*|\bPyEval_EvalCode\w*"
    r"|\bPyObject_(?:GetAttr|Vectorcall|Call)\w*|\b(?:py|pybind11)::(?:eval|exec)\b|__import__"
    # TorchScript made from text in C++ (`torch::jit::compile("... torch.relu(x)")`): compute a literal names, run
    r"|\bjit\s*::\s*(?:compile|load|parseIR|parse_ir|import_ir_module)\b|\bCompilationUnit\b"
)

# The preprocessor's token pasting builds a name the text never spells (`J(PyObject_, CallFunctionObjArgs)` with
# `#define J(a, b) a##b`, redteam17): every name above can be pieced together so, and the built library's imports
# cannot tell Python's call machinery apart (every pybind11 library imports `PyObject_CallFunctionObjArgs`). A text
# that pastes is one this scan cannot read: a finding itself. Stringizing (`#x`) builds no name.
PASTE = re.compile(r"##|%:%:")  # read in the code alone (cpp_text.code_only): in a literal it pastes nothing


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


def _constant_string(node: ast.AST) -> str | None:
    """The value of a string the source spells out: a constant, constants added, an f-string of constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_string(node.left), _constant_string(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [_constant_string(v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None  # type: ignore[arg-type]
    return None


def _dotted_node(name: str) -> ast.expr:
    parts = name.split(".")
    node: ast.expr = ast.Name(parts[0], ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(node, part, ast.Load())
    return node


class _SeeThrough(ast.NodeTransformer):
    """Rewrites what names an attribute or a module by a constant into that attribute or module:
    `getattr(torch, "re" + "lu")` -> `torch.relu`, `vars(F)["gelu"]` and `F.__dict__["gelu"]` -> `F.gelu`,
    `x.__getattribute__("relu")` -> `x.relu`, `importlib.import_module("torch.nn.functional")` and
    `sys.modules["torch.nn.functional"]` (or `.get(...)`) -> that module."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func, args = node.func, node.args
        name = dotted_name(func)
        if name == "getattr" and len(args) in (2, 3) and (attr := _constant_string(args[1])) and attr.isidentifier():
            return ast.copy_location(ast.Attribute(args[0], attr, ast.Load()), node)
        if name == "object.__getattribute__" and len(args) == 2 and (attr := _constant_string(args[1])):
            return ast.copy_location(ast.Attribute(args[0], attr, ast.Load()), node)
        dunder = isinstance(func, ast.Attribute) and func.attr == "__getattribute__" and len(args) == 1
        if dunder and isinstance(func, ast.Attribute) and (attr := _constant_string(args[0])) and attr.isidentifier():
            return ast.copy_location(ast.Attribute(func.value, attr, ast.Load()), node)
        if name in ("importlib.import_module", "import_module", "__import__", "sys.modules.get") and args:
            module = _constant_string(args[0])
            if module and all(part.isidentifier() for part in module.split(".")):
                return ast.copy_location(_dotted_node(module), node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        key = _constant_string(node.slice)
        owner = node.value
        if key and dotted_name(owner) == "sys.modules" and all(part.isidentifier() for part in key.split(".")):
            return ast.copy_location(_dotted_node(key), node)
        if not key or not key.isidentifier():
            return node
        if isinstance(owner, ast.Attribute) and owner.attr == "__dict__":
            return ast.copy_location(ast.Attribute(owner.value, key, ast.Load()), node)
        if isinstance(owner, ast.Call) and dotted_name(owner.func) == "vars" and len(owner.args) == 1:
            return ast.copy_location(ast.Attribute(owner.args[0], key, ast.Load()), node)
        return node


def see_through(tree: ast.Module) -> ast.Module:
    return ast.fix_missing_locations(_SeeThrough().visit(tree))


class _DropStrings(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.Constant("") if isinstance(node.value, str) else node


def python_code(source: str) -> str:
    """The candidate's Python code without its string constants (CUDA/C++ sources, docstrings)."""
    return ast.unparse(_DropStrings().visit(ast.parse(source)))


def string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def code_strings(tree: ast.AST) -> list[str]:
    """The string constants that are not docstrings nor the messages of an `assert` or a `raise`: the C++/CUDA sources
    among them (a docstring may name `at::relu` to say what a kernel replaces, a message what input it expects:
    `"the input x.relu() gets"` was read as a tensor method). What is built is read again as built (`torch_calls`)."""
    holders = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    words = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, holders) and node.body and isinstance(node.body[0], ast.Expr)
    }  # fmt: skip
    messages = [node.msg for node in ast.walk(tree) if isinstance(node, ast.Assert) and node.msg is not None]
    messages += [node.exc for node in ast.walk(tree) if isinstance(node, ast.Raise) and node.exc is not None]
    words |= {id(n) for message in messages for n in ast.walk(message)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in words]  # fmt: skip


def compute_operator(name: str) -> bool:
    """Whether an ATen operator's struct name (`at::_ops::<name>`: the operator, then its overload after `_`, so
    `mul_Tensor`, `sum_dim_IntList`, `fill__Scalar`) is PyTorch compute: any operator but those that only
    allocate, view or copy, as the runtime op count decides (`at::threshold` is a ReLU too)."""
    parts = name.split("_")
    prefixes = ["_".join(parts[:cut]) for cut in range(1, len(parts) + 1)]
    return not any(p in NOT_COMPUTE or p.rstrip("_") in NOT_COMPUTE for p in prefixes if p.strip("_"))


# `acc.add(v)` is the candidate's own arithmetic when `acc` can only be an object of a struct the text defines: every
# declaration of the name has such a type, the struct has no base (`struct Acc {`: not a Tensor by inheritance), its
# body names nothing that could hold PyTorch (a member pointing at `at::relu`, a `std::function`, an alias) and
# nothing renames either (`using`, `typedef`, `#define`). Anything else (`auto`, a template parameter, a qualified or
# templated type, an expression) stays a tensor method: an honest helper struct was `rejected` under --strict.
CPP_STRUCT = re.compile(r"\b(?:struct|class)\s+(\w+)\s*(.)", re.S)
CPP_RENAMED = re.compile(r"\busing\s+(\w+)\s*=|\btypedef\b[^;]*?(\w+)\s*;|#\s*define\s+(\w+)")
CPP_WORD = re.compile(r"(?<![\w.])\w+")
CPP_NOT_PLAIN = re.compile(
    r"\b(?:at|torch|c10)\s*::|\bstd\s*::\s*function\b|\bTensor|\bdecltype\b|\(\s*\*|::\s*\*|\bauto\b"
)
NOT_A_TYPE = {"return", "case", "else", "do", "goto", "throw", "new", "delete", "sizeof", "co_return", "co_yield"}
LOOKBACK = 120  # characters read before a name for its type: bounded, so the scan stays linear in the text


def renamed_names(text: str) -> set[str]:
    return {name for match in CPP_RENAMED.finditer(text) for name in match.groups() if name}


def matching_braces(text: str) -> dict[int, int]:
    """Each `{`'s position mapped to its `}`'s (one pass; an unclosed one to the text's end)."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for match in re.finditer(r"[{}]", text):
        if match[0] == "{":
            opened.append(match.start())
        elif opened:
            pairs[opened.pop()] = match.start()
    pairs.update((start, len(text)) for start in opened)
    return pairs


def own_struct_names(text: str, renamed: set[str]) -> set[str]:
    """Struct and class names the text defines without a base, with bodies that name nothing PyTorch could hide in,
    and never renames (`renamed`: the names it does)."""
    flagged = sorted([m.start() for m in CPP_NOT_PLAIN.finditer(text)] +
                     [m.start() for m in CPP_WORD.finditer(text) if m[0] in renamed])  # fmt: skip
    braces = matching_braces(text) if flagged else {}
    shapes: dict[str, set[str]] = {}
    for match in CPP_STRUCT.finditer(text):
        after = match[2]
        if after == "{":
            inside = bisect.bisect_left(flagged, match.end())
            if inside < len(flagged) and flagged[inside] < braces.get(match.end() - 1, len(text)):
                after = "a body that names PyTorch, a pointer or an alias"
        shapes.setdefault(match[1], set()).add(after)
    return {name for name, after in shapes.items() if after <= {"{", ";"} and "{" in after} - renamed


def word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def type_before(text: str, start: int) -> str:
    """The type a declaration would give the name at `start` (`Acc` in `const Acc& acc`), "" where none can."""
    i, floor = start, max(0, start - LOOKBACK)
    while i > floor:
        if text[i - 1].isspace() or text[i - 1] in "&*":
            i -= 1
        elif i - 5 >= floor and text[i - 5 : i] == "const" and not word_char(text[i - 6 : i - 5]):
            i -= 5
        else:
            break
    if i > floor and text[i - 1] == ">":
        return ">"  # `Acc<F> acc`: a template's instance, whatever F is
    start = word_start(text, i, floor)
    word = text[start:i]
    if not word or word in NOT_A_TYPE or word[0].isdigit():
        return ""
    return f"::{word}" if text[max(0, start - 2) : start] == "::" else word


def word_start(text: str, end: int, floor: int) -> int:
    """Where the identifier characters ending at `end` begin (not before `floor`)."""
    while end > floor and word_char(text[end - 1]):
        end -= 1
    return end


def receiver_of(text: str, dot: int) -> str:
    """The name a method is called on (`acc` in `acc.add(`, `p` in `p->add(`), "" for an expression."""
    end, floor = dot, max(0, dot - LOOKBACK)
    while end > floor and text[end - 1].isspace():
        end -= 1
    return text[word_start(text, end, floor) : end]


def own_struct_receivers(text: str, receivers: set[str]) -> set[str]:
    """Those of `receivers` (names methods are called on) declared, at least once, only as the text's own structs."""
    renamed = renamed_names(text)
    own = own_struct_names(text, renamed)
    names = receivers - {""} if own else set()
    types: dict[str, set[str]] = {}
    for word in CPP_WORD.finditer(text) if names else ():
        if word[0] in names and (declared := type_before(text, word.start())):
            types.setdefault(word[0], set()).add(declared)
    return {name for name, declared in types.items() if declared <= own} - renamed


def cpp_torch_compute(text: str) -> list[str]:
    """PyTorch compute and dispatcher tricks in C++/CUDA source text (comments dropped), by name, once each:
    what `--strict` rejects as PyTorch compute in the extension. Compute is read in the code alone: a literal calls
    nothing, and an error message naming `at::relu(x)` rejected an honest kernel
    (tests/candidates/redteam24/honest_relu_cpp_naming_ops_in_messages.py); what reaches Python is read in the
    literals too (`__import__` in a string handed to the interpreter)."""
    with_literals = strip_c_comments(text)
    text = code_only(text)
    found: list[str] = []
    for match in CPP_CALL.finditer(text):
        chain = match.group(1).split("::")
        start = next((i for i, part in enumerate(chain[:-1]) if part in TORCH_NAMESPACES), None)
        if start is None:
            continue
        parts = chain[start + 1 :]
        if parts[0] == "nn" or any(p.removesuffix("_").removesuffix("_out") in CPP_COMPUTE for p in parts):
            found.append("::".join(chain[start:]))
    methods = [(m.group(1), receiver_of(text, m.start())) for m in CPP_METHOD.finditer(text)
               if m.group(1).removesuffix("_") in CPP_METHODS]  # fmt: skip
    own = own_struct_receivers(text, {receiver for _, receiver in methods})
    found += [f".{method}()" for method, receiver in methods if receiver not in own]
    found += [m.group(0) for m in CPP_DISPATCH.finditer(with_literals)]
    if PASTE.search(text):
        found.append("## (names pasted by the preprocessor, which this scan cannot read)")
    return list(dict.fromkeys(found))


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


def bindings(tree: ast.Module) -> dict[str, int]:
    """How many times each name is bound anywhere in the module (assignments, imports, definitions, loop
    and `with` targets, `del`, `globals()[...]`); "*" counts writes through `globals()` with a computed key."""
    counts: dict[str, int] = {}

    def bound(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound(node.id)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            bound(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                bound((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound(node.name)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            owner = node.value
            if isinstance(owner, ast.Call) and dotted_name(owner.func) in ("globals", "vars", "locals"):
                key = _constant_string(node.slice)
                bound(key if key else "*")
        elif _globals_update(node):
            bound("*")
    return counts


def _globals_update(node: ast.AST) -> bool:
    """`globals().update(...)` (or vars()): binds names nobody can read off the source."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"):
        return False
    owner = node.func.value
    return isinstance(owner, ast.Call) and dotted_name(owner.func) in ("globals", "vars")


def _setattr_name(node: ast.AST) -> str | None:
    """The attribute a `setattr(x, "name", ...)` call sets, when the source spells it out."""
    if isinstance(node, ast.Call) and dotted_name(node.func) == "setattr" and len(node.args) >= 2:
        return _constant_string(node.args[1])
    return None


def _plain_module_base(base: ast.expr, aliases: Aliases, tree: ast.Module, seen: frozenset[str] = frozenset()) -> bool:
    """nn.Module (through any alias) or a class the candidate defines itself, once, from plain bases; anything
    computed at runtime (sys.modules[...].Model), named Model, or bound more than once is not."""
    name = dotted_name(base)
    if name is None:
        return False
    if aliases.resolve(name) in ("torch.nn.Module", "torch.nn.modules.module.Module"):
        return True
    if "." in name or name == "Model" or name in seen or name not in aliases.local_classes:
        return False
    counts = bindings(tree)
    if counts.get(name, 0) != 1 or counts.get("*"):
        return False
    (definition,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    return all(_plain_module_base(b, aliases, tree, seen | {name}) for b in definition.bases)


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    return found[-1] if found else None


def _class_rebinding(tree: ast.Module) -> str | None:
    """Why ModelNew may not be the class its definition says: it is bound again, or some class's bases
    or type are assigned."""
    counts = bindings(tree)
    if counts.get("ModelNew", 0) > 1 or counts.get("*"):
        return "ModelNew is bound more than once (the name can end up meaning another class)"
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in ("__bases__", "__class__", "__mro__"):
                return f"assigns {ast.unparse(target)[:60]}"
        if _setattr_name(node) in ("__bases__", "__class__"):
            return "sets a class's bases with setattr"
    return None


def _makes_nn_module(node: ast.AST, aliases: Aliases) -> bool:
    """`nn.<Module>(...)` for a module that computes (not a Parameter holder)."""
    if not isinstance(node, ast.Call) or (name := dotted_name(node.func)) is None:
        return False
    full = aliases.resolve(name)
    return full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] not in NN_CONTAINERS


def _nn_module_attrs(tree: ast.AST, aliases: Aliases) -> set[str]:
    """Attributes of self (`conv` for self.conv) and plain names assigned an nn.<Module>(...) that computes."""
    attrs: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and _makes_nn_module(node.value, aliases)):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and dotted_name(target.value) == "self":
                attrs.add(target.attr)
            elif isinstance(target, ast.Name):
                attrs.add(target.id)
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


def _torch_compute(full: str) -> bool:
    """A PyTorch compute function by its resolved name (torch.relu, F.gelu, torch.ops.aten.mm, ...)."""
    last = full.rsplit(".", 1)[-1]
    return (
        full.startswith("torch.nn.functional.")
        or full.startswith(TORCH_OP_NAMESPACES)
        or (full.startswith("torch.") and last in TORCH_COMPUTE)
        or full in MATMUL_FUNCTIONS
    )


def _compute_references(tree: ast.Module, aliases: Aliases) -> list[str]:
    """Compute functions named without being called right there (kept in a list, passed along, `x.__matmul__`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            if node.attr in MATMUL_DUNDERS:
                found.append(f".{node.attr}")
            elif (name := dotted_name(node)) and _torch_compute(aliases.resolve(name)):
                found.append(name)
    return found


def _scalar_modules(tree: ast.Module, aliases: Aliases) -> set[str]:
    """Names that can only be Python's own number modules (`import math`, bound nowhere else, no parameter or
    pattern of that name, no write through `globals()`): `math.sqrt(d)` is a scalar's function, not a tensor method."""
    counts = bindings(tree)
    shadowed = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    shadowed |= {n.name for n in ast.walk(tree) if isinstance(n, ast.MatchAs | ast.MatchStar) and n.name}
    if counts.get("*"):
        return set()
    return {name for name, full in aliases.map.items()
            if full in SCALAR_MODULES and counts.get(name) == 1 and name not in shadowed}  # fmt: skip


def _compute_calls(tree: ast.Module, aliases: Aliases) -> list[str]:
    """PyTorch compute anywhere in the module: torch.X, F.X, nn modules called, tensor methods, `@`."""
    module_attrs = _nn_module_attrs(tree, aliases)
    extensions = _extensions(tree, aliases)
    scalar_modules = _scalar_modules(tree, aliases)
    found: list[str] = _compute_references(tree, aliases)
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            found.append("the @ operator")
        if not isinstance(node, ast.Call):
            continue
        name = dotted_name(node.func)
        if name is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METHODS:
                found.append(f".{node.func.attr}()")
            elif isinstance(node.func, ast.Call) and _makes_nn_module(node.func, aliases):
                found.append(f"{dotted_name(node.func.func)}(...)(...) (an nn module)")
            continue
        full = aliases.resolve(name)
        last = full.rsplit(".", 1)[-1]
        if _torch_compute(full):
            found.append(name)
        elif name.removeprefix("self.") in module_attrs and name.count(".") == name.startswith("self."):
            found.append(f"{name} (an nn module)")
        elif (
            "." in name
            and last in TENSOR_METHODS
            and not full.startswith("torch.")
            and name.split(".")[0] != "self"
            and name.rsplit(".", 1)[0] not in extensions
            and (name.rsplit(".", 1)[0] not in scalar_modules or last in SCALAR_FUNCTIONS_ON_ANYTHING)
        ):
            found.append(f".{last}()")
    return sorted(set(found + _tensor_arithmetic(tree, aliases)))


def _tensor_arithmetic(tree: ast.Module, aliases: Aliases) -> list[str]:
    """Arithmetic and comparisons on tensors in forward: its parameters, what the candidate's extension or a
    torch call returned, and what is computed from those (`y * (y > 0)` is a ReLU in PyTorch ops). Sizes and
    other facts of a tensor (`x.size(0) * 2`) are numbers, not compute."""
    extensions = _extensions(tree, aliases)
    found: list[str] = []
    for function in ast.walk(tree):
        if not (isinstance(function, ast.FunctionDef) and function.name == "forward"):
            continue
        tensors = {a.arg for a in function.args.args[1:] + function.args.kwonlyargs}

        def tensor(node: ast.AST, known: set[str] = tensors) -> bool:
            if isinstance(node, ast.Name):
                return node.id in known
            if isinstance(node, ast.BinOp):
                return tensor(node.left) or tensor(node.right)
            if isinstance(node, ast.UnaryOp | ast.Subscript):
                return tensor(node.operand if isinstance(node, ast.UnaryOp) else node.value)
            if isinstance(node, ast.Compare):  # `x is None` asks about the object, never the tensor's values
                identity = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops)
                return not identity and (tensor(node.left) or any(tensor(c) for c in node.comparators))
            if isinstance(node, ast.Call):
                name = dotted_name(node.func) or ""
                if name.rsplit(".", 1)[0] in extensions or aliases.resolve(name).startswith("torch."):
                    return True
                method = node.func
                return isinstance(method, ast.Attribute) and method.attr not in TENSOR_FACTS and tensor(method.value)
            return False

        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and tensor(node.value):
                tensors.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(function):
            if isinstance(node, ast.BinOp) and (tensor(node.left) or tensor(node.right)):
                found.append(f"tensor arithmetic ({ast.unparse(node)[:40]})")
            elif isinstance(node, ast.Compare) and tensor(node):
                found.append(f"a tensor comparison ({ast.unparse(node)[:40]})")
            elif isinstance(node, ast.AugAssign) and (tensor(node.target) or tensor(node.value)):
                found.append(f"in-place tensor arithmetic ({ast.unparse(node)[:40]})")
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Invert) and tensor(node.operand):
                found.append(f"tensor arithmetic ({ast.unparse(node)[:40]})")
            elif isinstance(node, ast.Call) and (name := dotted_name(node.func)):
                full = aliases.resolve(name)
                if (full.startswith("operator.") or full in ("abs", "pow")) and any(tensor(a) for a in node.args):
                    found.append(f"{full}() on a tensor")
    return found


def _library_function(full: str) -> bool:
    """A function of another array library by its resolved name (numpy.clip; not numpy.float32, not numpy itself)."""
    root, _, rest = full.partition(".")
    return root in ARRAY_LIBRARIES and bool(rest) and full.rsplit(".", 1)[-1] not in ARRAY_FACTS


def _library_compute(tree: ast.Module, aliases: Aliases) -> list[str]:
    """Functions of another array library, named anywhere (called, kept, imported by name), and tensors handed to
    one: work no kernel of the candidate's does and no op count sees."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute | ast.Name) or not isinstance(node.ctx, ast.Load) or id(node) in inner:
            continue
        if isinstance(node, ast.Attribute) and node.attr in TENSOR_EXITS:
            found.append(f".{node.attr}")
        elif (name := dotted_name(node)) and _library_function(full := aliases.resolve(name)):
            found.append(full)
    return found


def _watch_probes(tree: ast.Module, aliases: Aliases) -> list[str]:
    """References to what tells a call it is being counted or profiled."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute | ast.Name) and (name := dotted_name(node)):
            names = [aliases.resolve(name)]
        else:
            continue
        found += [n for n in names if n.startswith(WATCH_PROBES)]
    return found


def _builds(tree: ast.Module, aliases: Aliases) -> bool:
    """A real call of load_inline/load (or a @triton.jit function) exists in the module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := dotted_name(node.func)) and aliases.resolve(name) in BUILD_FUNCTIONS:
            return True
    return has_triton_kernel(tree, aliases)


def has_triton_kernel(tree: ast.Module, aliases: Aliases) -> bool:
    """A @triton.jit (or autotuned) function: a kernel that never goes through the host's builds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (name := dotted_name(target)) and aliases.resolve(name) in ("triton.jit", "triton.autotune"):
                    return True
    return False


def _exit_can_swallow(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An `__exit__` that can return something true swallows the exception of its `with` block."""
    returns = [n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
    return any(not (isinstance(r.value, ast.Constant) and r.value.value in (None, False)) for r in returns)


def _swallowing_context_managers(tree: ast.Module, aliases: Aliases) -> bool:
    """Home-made context managers that can swallow: an `__exit__` that may return true, one bound any other way
    (a lambda, setattr, a dict for type()), or exit callbacks pushed onto an ExitStack."""
    stacks = any(
        isinstance(n, ast.Call) and (name := dotted_name(n.func)) and aliases.resolve(name) in EXIT_STACKS
        for n in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in EXIT_METHODS:
            if _exit_can_swallow(node):
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name | ast.Attribute) and getattr(t, "id", getattr(t, "attr", "")) in EXIT_METHODS
                   for t in targets):  # fmt: skip
                return True
        elif isinstance(node, ast.Dict) and any(_constant_string(k) in EXIT_METHODS for k in node.keys if k):
            return True
        elif isinstance(node, ast.Call):
            if _setattr_name(node) in EXIT_METHODS:
                return True
            if stacks and isinstance(node.func, ast.Attribute) and node.func.attr in ("push", "push_async_exit"):
                return True
    return False


def _fallbacks(tree: ast.Module, aliases: Aliases) -> bool:
    if _swallowing_context_managers(tree, aliases):
        return True
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


IMPORTERS = {"importlib.import_module", "importlib.__import__", "builtins.__import__", "__import__", "sys.modules.get"}


def _dynamic_torch_access(tree: ast.Module, aliases: Aliases) -> list[str]:
    """getattr(torch, <computed name>), and a module imported or taken from sys.modules by a computed name (one
    spelt out was already read as that module): ways round every name-based check."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := dotted_name(node.func)) and aliases.resolve(name) in IMPORTERS:
            found.append(f"{name}(<computed>)")
        elif isinstance(node, ast.Subscript) and dotted_name(node.value) in ("sys.modules",):
            found.append("sys.modules[<computed>]")
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
        while any(isinstance(target, ast.Tuple | ast.List | ast.Starred) for target in targets):  # a, b = ...
            targets = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else
                       [t.value] if isinstance(t, ast.Starred) else [t])]  # fmt: skip
        for target in targets:
            if isinstance(target, ast.Attribute) and (name := dotted_name(target)) and _patchable(name, aliases):
                found.add(aliases.resolve(name))
    return sorted(found)


def _patchable(name: str, aliases: Aliases) -> bool:
    return name.split(".")[0] in PATCHABLE_ROOTS or aliases.resolve(name).split(".")[0] in PATCHABLE_ROOTS


def uses_triton(source: str) -> bool:
    """A @triton.jit kernel in the source (it runs without any build the host makes); False where the checks cannot
    read the source (nested too deeply for them)."""
    try:
        tree = see_through(ast.parse(source))
        aliases = Aliases()
        aliases.visit(tree)
        return has_triton_kernel(tree, aliases)
    except RecursionError:
        return False


def run_static_checks(source: str) -> list[Warning_]:
    """All static findings for a candidate that parses; [] means nothing suspicious. Code nested deeper than the
    checks' recursion can follow (an expression of hundreds of terms, which Python itself compiles) is a finding of
    its own: what the checks could not read is not called clean (a rejection under --strict)."""
    try:
        return _static_findings(source)
    except RecursionError:
        return [Warning_("static_checks_incomplete", "the candidate's code is nested too deeply for the static checks "
                         "to read it all (an expression of hundreds of terms?)")]  # fmt: skip


def _static_findings(source: str) -> list[Warning_]:
    tree = see_through(ast.parse(source))
    aliases = Aliases()
    aliases.visit(tree)
    code_text = strip_c_comments("\n".join(string_constants(tree)))
    py_text = python_code(source)
    warnings: list[Warning_] = []

    def add(code: str, message: str) -> None:
        warnings.append(Warning_(code, message))

    if not _builds(tree, aliases):
        add("no_custom_kernel", "no custom kernel: no load_inline/load call and no @triton.jit function")
    # each string on its own, as a source the compiler reads: joined, a message's quote opened a literal in the next
    cpp_calls = [f"{n} (C++)" for n in dict.fromkeys(n for t in code_strings(tree) for n in cpp_torch_compute(t))]
    if ops := _compute_calls(tree, aliases) + cpp_calls:
        add("torch_compute_ops", f"the candidate computes with PyTorch ops: {', '.join(ops[:6])}")
    if found := _library_compute(tree, aliases):
        listed = ", ".join(sorted(set(found))[:5])
        add("library_compute", f"the candidate computes with another array library, or hands tensors to one: {listed}")
    if _fallbacks(tree, aliases):
        add("try_except_fallback", "try/except, contextlib.suppress or a context manager whose __exit__ can swallow "
            "exceptions: a fallback to PyTorch hides a failing kernel")  # fmt: skip
    cls = _model_new(tree)
    if cls is not None and (odd := [b for b in cls.bases if not _plain_module_base(b, aliases, tree)]):
        add("subclass_reference", f"ModelNew subclasses {ast.unparse(odd[0])[:80]}, not nn.Module (the reference?)")
    elif why := _class_rebinding(tree):
        add("subclass_reference", f"{why}: ModelNew may be the reference")
    if STREAM_PATTERN.search(code_text) or STREAM_PATTERN.search(py_text):
        add("creates_streams", "the candidate creates CUDA streams: work on them can escape the timer")
    if calls := _calls_in(tree, aliases, DANGEROUS, DANGEROUS_MODULES):
        add("dangerous_call", f"dangerous calls: {', '.join(calls)}")
    if found := (
        _calls_in(tree, aliases, INTROSPECTION, INTROSPECTION_MODULES)
        + _dynamic_torch_access(tree, aliases)
        + _watch_probes(tree, aliases)
    ):
        add("introspection", f"frame, gc, ctypes or dynamic torch access: {', '.join(sorted(set(found))[:5])}")
    if patched := _patches(tree, aliases):
        add("monkey_patch", f"the candidate assigns to library attributes: {', '.join(patched)}")
    return warnings

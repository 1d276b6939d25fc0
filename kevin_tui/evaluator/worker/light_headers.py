"""Lighter headers for the CUDA half of a load_inline build.

load_inline starts `cuda.cu` with `#include <torch/types.h>`, which pulls in all of ATen; nvcc then
spends ~40 s (cudafe++ 17 s, cicc 12 s, host g++ 11 s on these machines) on headers for a ten-line
kernel. Most kernels need far less: the Tensor class, TORCH_CHECK, the few ATen ops they call,
and the `torch::` aliases. Tensor operators (`x / y`) come from ATen/TensorOperators.h, which pulls
in ATen/Functions.h (every ATen function: a third of the prelude's text) unless
AT_PER_OPERATOR_HEADERS is defined, as torch's own sources do: then it needs only empty_like. So the
prelude defines it around that one header, and includes the op header of every name the source calls
(qualified or not: an unqualified `zeros_like(x)` finds at::zeros_like by argument lookup), unless the
source calls one of the few functions Functions.h defines itself. We derive that set from the source
and try it first; a build failure falls back to the standard headers (the caller does that), so the
light prelude can only save time, except when the failure is the candidate's own: names that no header
defines (`undefined_names`), which the standard headers would fail on too, after another ~40 s.
Each op header also includes ATen/Context.h, DeviceGuard.h, TensorUtils.h and TracerMode.h, for no
definition of its own (its inline functions only call `at::_ops::<op>::call`), and those are 15% of
a light build's text: the prelude has the op headers' own text without those four (read from the installed
torch, so the definitions are torch's). The copies have no `#pragma once`, so they are used only where no torch
header the build includes (EXTRAS: Dispatch.h for AT_DISPATCH..., or the source's own) includes an op header
again, read from that header's includes, transitively; otherwise the op headers are included as they are.
A successful light build is the same code: only declarations differ, never definitions; and it never has a
header the standard build lacks, so a source that forgot `#include <ATen/cuda/CUDAContext.h>` fails both.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

HEAVY_INCLUDE = re.compile(
    r"^\s*#\s*include\s*<(torch/extension\.h|torch/types\.h|torch/torch\.h|torch/all\.h)>\s*$", re.M
)
NEEDS_FULL = re.compile(r"PYBIND11|pybind11|\bpy::|torch/python\.h|torch::(jit|nn|autograd|optim|data)\b")
# A call `torch::f(`, `at::f(` or an unqualified `f(` (not a method, not another namespace's).
OP_CALL = re.compile(r"(?:\b(?:torch|at)::|(?<![\w.>:]))(\w+)\s*\(")
# Headers torch/types.h includes (load_inline's own first line: tests/test_light_headers.py reads that from the
# installed torch), added where the source uses them. Never one it does not (ATen/cuda/CUDAContext.h, CUDAGuard.h):
# a source that uses those without including them fails a plain load_inline, and must fail here as well.
EXTRAS = (
    (re.compile(r"AT_DISPATCH|AT_PRIVATE"), "ATen/Dispatch.h"),
    (re.compile(r"\b(__half|half2?|__float2half|__half2float)\b"), "cuda_fp16.h"),
    (re.compile(r"\b(__nv_bfloat16|__float2bfloat16|__bfloat162float)\b"), "cuda_bf16.h"),
    (re.compile(r"c10::Half|at::Half"), "c10/util/Half.h"),
    (re.compile(r"c10::BFloat16|at::BFloat16"), "c10/util/BFloat16.h"),
    (re.compile(r"std::vector"), "vector"),
    (re.compile(r"\b(DeviceGuard|OptionalDeviceGuard|device_of)\b"), "ATen/DeviceGuard.h"),
    (re.compile(r"\b(globalContext|at::Context)\b"), "ATen/Context.h"),
    (
        re.compile(r"\b(TensorArg|CheckedFrom|check\w*(Dim|Size|Same\w*|Contiguous|Device|Type|Numel|Defined))\b"),
        "ATen/TensorUtils.h",
    ),
)
# What an op header includes that none of its definitions needs (see the module's docstring).
UNUSED_BY_OP_HEADERS = re.compile(
    r"^\s*#\s*include\s*<ATen/(Context|DeviceGuard|TensorUtils|TracerMode)\.h>\s*$\n?"
    r"|^\s*#\s*pragma\s+once\s*$\n?",  # the prelude is no header: the pragma would only warn
    re.M,
)
OP_HEADER_INCLUDE = re.compile(r"^\s*#\s*include\s*<ATen/ops/(\w+)\.h>\s*$", re.M)
TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*<((?:ATen|c10|torch|caffe2)/[^>]+)>", re.M)
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"', re.M)
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


@cache
def torch_include_dir() -> Path:
    from torch.utils import cpp_extension

    return Path(cpp_extension.__file__).resolve().parents[1] / "include"


@cache
def torch_aliases() -> str:
    """The `torch::kFloat32`-style aliases torch/types.h defines, read from the installed torch."""
    path = torch_include_dir() / "torch" / "csrc" / "api" / "include" / "torch" / "types.h"
    try:
        text = path.read_text()
    except OSError:
        return ""
    return "\n".join(
        re.findall(r"^\s*(?:using Dtype = at::ScalarType;|constexpr auto k\w+ = \w+(?:::\w+)?;)", text, re.M)
    )


@cache
def functions_header_own() -> frozenset[str]:
    """The functions ATen/Functions.h defines itself (`at::numel(t)`, `at::var(t, 1)`...), read from the
    installed torch: a source calling one needs that header, so TensorOperators.h is included as it is."""
    try:
        text = (torch_include_dir() / "ATen" / "Functions.h").read_text()
    except OSError:
        return frozenset()
    return frozenset(re.findall(r"^inline [\w:<>, ]+?[ &*](\w+)\(", text, re.M))


@cache
def op_header_text(path: str) -> str | None:
    """A torch header (TensorOperators.h, an op header) as the prelude's own text: the four headers no op
    header's definition needs left out, each op header it includes in its text too (its `_ops.h`
    declarations stay included); None if one is unreadable."""
    try:
        text = UNUSED_BY_OP_HEADERS.sub("", (torch_include_dir() / path).read_text())
    except OSError:
        return None
    parts, end = [], 0
    for match in OP_HEADER_INCLUDE.finditer(text):
        if match[1].endswith("_ops"):
            continue
        if (included := op_header_text(f"ATen/ops/{match[1]}.h")) is None:
            return None
        parts += [text[end : match.start()], included]
        end = match.end()
    return "".join([*parts, text[end:]])


def reaches(header: str, wanted: Callable[[str, Path | None], bool]) -> bool:
    """Whether a torch header, itself or through the headers it includes, transitively, includes one that
    `wanted` picks (by the name it is included as, and its path where it lies among torch's headers),
    whatever `#if` surrounds the include: a header outside torch's include directory (CUDA's, the system's)
    is one name, whose own includes are not read; an unreadable header counts as wanted."""
    root = torch_include_dir()
    search = (root, root / "torch" / "csrc" / "api" / "include")
    seen: set[Path] = set()
    pending = [(header, root, "<")]
    while pending:
        name, including, quote = pending.pop()
        places = ((including,) if quote == '"' else ()) + search
        path = next((found.resolve() for place in places if (found := place / name).is_file()), None)
        if wanted(name, path):
            return True
        if path is None or path in seen:
            continue
        seen.add(path)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return True
        pending += [(included, path.parent, quote) for quote, included in ANY_INCLUDE.findall(text)]
    return False


@cache
def includes_op_headers(header: str) -> bool:
    """Whether a torch header includes an op header or ATen/Functions.h, itself or through its includes
    (more is safe: the op headers are then included as they are)."""
    functions = (torch_include_dir() / "ATen" / "Functions.h").resolve()

    def op_header(name: str, path: Path | None) -> bool:
        if path is None:
            return False
        in_ops = path.parent.name == "ops" and path.parent.parent.name == "ATen"
        return (in_ops and not path.name.endswith("_ops.h")) or path == functions

    return reaches(header, op_header)


def tensor_operators(names: set[str], copied: bool) -> list[str]:
    """ATen/TensorOperators.h with only the op header it uses (empty_like), not all of ATen/Functions.h,
    unless the source calls a function that only Functions.h defines (or it cannot be read); `copied`:
    as the prelude's own text (op_header_text)."""
    own = functions_header_own()
    if not own or names & own:
        return ["#include <ATen/TensorOperators.h>"]
    text = op_header_text("ATen/TensorOperators.h") if copied else None
    return ["#define AT_PER_OPERATOR_HEADERS", text or "#include <ATen/TensorOperators.h>",
            "#undef AT_PER_OPERATOR_HEADERS"]  # fmt: skip


def light_prelude(cuda_sources: list[str]) -> str | None:
    """Headers that should be enough for these CUDA sources, or None where only the full set will do."""
    text = "\n".join(cuda_sources)
    if NEEDS_FULL.search(text) or not torch_aliases():
        return None
    ops_dir = torch_include_dir() / "ATen" / "ops"
    called = set(OP_CALL.findall(text))
    ops = sorted(name for name in called if (ops_dir / f"{name}.h").exists())
    extras = [header for pattern, header in EXTRAS if pattern.search(text)]
    # the copies have no `#pragma once`: only where no header included after them includes an op header
    included = [*TORCH_INCLUDE.findall(without_heavy_includes(text)), *extras]
    copied = not QUOTED_INCLUDE.search(text) and not any(map(includes_op_headers, included))
    operators = tensor_operators(called, copied)
    lines = [
        "#include <ATen/core/Tensor.h>",
        *operators,  # host code writes `x / norm.sqrt()`; without it: the slow full build
        "#include <c10/util/Exception.h>",
        "#include <cuda.h>",
        "#include <cuda_runtime.h>",
    ]
    copied = copied and len(operators) == 3 and not operators[1].startswith("#include")
    for op in ops:
        if copied and op == "empty_like":
            continue  # its text is in the operators' already
        own_text = op_header_text(f"ATen/ops/{op}.h") if copied else None
        lines.append(own_text or f"#include <ATen/ops/{op}.h>")
    lines += [f"#include <{header}>" for header in extras]
    lines += ["namespace torch {", "using namespace at;", torch_aliases(), "}  // namespace torch"]
    return "\n".join(lines)


UNDEFINED = re.compile(r'error: identifier "(\w+)" is undefined')


def undefined_names(build_output: str) -> list[str]:
    """The names a failed light build reports undefined, when those are all its errors and no header
    (torch's, CUDA's, the system's) spells them: then the standard headers cannot define them either.
    Empty when any error may be the light prelude's (anything else, or a name some header holds)."""
    errors = [line for line in build_output.splitlines() if ": error" in line]
    names = sorted({m[1] for line in errors if (m := UNDEFINED.search(line))})
    if not errors or any(not UNDEFINED.search(line) for line in errors):
        return []
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    places = [str(p) for p in (torch_include_dir(), cuda, Path("/usr/include")) if p.is_dir()]
    for name in names:
        found = subprocess.run(["grep", "-rqw", "--", name, *places], capture_output=True)
        if found.returncode != 1:  # 0: some header has it; 2: grep could not tell
            return []
    return names


def without_heavy_includes(source: str) -> str:
    """The source with the catch-all torch includes blanked (line count unchanged)."""
    return HEAVY_INCLUDE.sub("", source)

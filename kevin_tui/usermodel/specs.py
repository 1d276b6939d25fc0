"""What the user types about their model: which module, its constructor arguments, its inputs.

    blocks.py:GeluGate            a module class (or `blocks.py` when it defines only one)
    train.py:build_model          a function that returns an nn.Module
    dim=1024,hidden=4096          constructor (or factory) arguments: Python literals, quotes optional
    x=float32[8,128,1024]         a tensor input: dtype and shape, drawn from randn
    tokens=int64[4,512]~randint(0,32000)     ... with a distribution: randn, normal(mean,std),
                                             uniform(low,high), randint(low,high)
    causal=True                   a plain value passed as it is

Parsed here without torch; every mistake is a `SpecError` with one line that says what is wrong.
Each spec renders back to its text (recorded in problem files) and to the Python expression that
draws it (the problem's get_inputs(), and the worker, evaluate the same expression).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui.errors import EXIT_USAGE, KevinError

DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "fp64": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}  # fmt: skip
FLOATS = {"float32", "float16", "bfloat16", "float64"}
DISTRIBUTIONS = {"randn": 0, "normal": 2, "uniform": 2, "randint": 2}  # name: number of arguments
TENSOR = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*)=)?(?P<dtype>\w+)\[(?P<shape>[^\]]*)\](?:~(?P<dist>.+))?$")
DISTRIBUTION = re.compile(r"^(?P<name>\w+)(?:\((?P<args>[^()]*)\))?$")


class SpecError(KevinError):
    """A target, argument or input spec that cannot work; the message is one line."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Target:
    """A module class or a factory function in a Python file; `name` None: the file's only module class."""

    path: Path
    name: str | None = None

    def text(self) -> str:
        return f"{self.path}:{self.name}" if self.name else str(self.path)


def parse_target(text: str) -> Target:
    path, _, name = text.rpartition(":") if ":" in text else (text, "", "")
    path = path.strip()
    if not path.endswith(".py"):
        raise SpecError(f"bad target {text!r}: expected FILE.py or FILE.py:Name")
    if name and not name.isidentifier():
        raise SpecError(f"bad target {text!r}: {name!r} is not a class or function name")
    if not Path(path).is_file():
        raise SpecError(f"bad target {text!r}: no such file {path}")
    return Target(Path(path), name or None)


def split_top_level(text: str, separators: str) -> list[str]:
    """`text` split at separators outside brackets and quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in separators and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def literal(text: str, what: str) -> Any:
    """A Python literal; a bare word is taken as a string (`act=gelu`)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if re.fullmatch(r"[A-Za-z_][\w.-]*", text):
            return text
    raise SpecError(f"bad {what} {text!r}: not a Python literal (numbers, strings, tuples, True/False/None)")


def parse_init(text: str | dict[str, Any] | None) -> dict[str, Any]:
    """Constructor arguments from `dim=1024,hidden=4096` (flags) or a TOML table."""
    if text is None:
        return {}
    if isinstance(text, dict):
        return dict(text)
    arguments: dict[str, Any] = {}
    for part in split_top_level(text, ","):
        name, equals, value = part.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise SpecError(f"bad argument {part!r}: expected NAME=VALUE, e.g. dim=1024")
        if name in arguments:
            raise SpecError(f"bad arguments {text!r}: {name} is given twice")
        arguments[name] = literal(value.strip(), f"value for {name}")
    return arguments


@dataclass(frozen=True)
class Distribution:
    name: str = "randn"
    args: tuple[float, ...] = ()

    def text(self) -> str:
        return self.name + (f"({','.join(_number(a) for a in self.args)})" if self.args else "")


@dataclass(frozen=True)
class TensorSpec:
    """A tensor input: dtype, shape and the distribution its values are drawn from."""

    name: str | None
    dtype: str
    shape: tuple[int, ...]
    distribution: Distribution = Distribution()

    def text(self) -> str:
        shape = ",".join(str(s) for s in self.shape)
        dist = "" if self.distribution == default_distribution(self.dtype) else f"~{self.distribution.text()}"
        return f"{self.name + '=' if self.name else ''}{self.dtype}[{shape}]{dist}"

    def expression(self, names: Mapping[tuple[int, int], str] | None = None) -> str:
        """Python that draws this tensor with torch's global generator (seeded by the caller); a size with a name
        in `names` (by position and size: `size_names`) is written as that name."""
        dims = [(names or {}).get((i, s), str(s)) for i, s in enumerate(self.shape)]
        size = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
        shape = ", ".join(dims) if dims else "()"
        dtype = f"torch.{self.dtype}"
        dist, args = self.distribution.name, [_number(a) for a in self.distribution.args]
        if dist == "randint":
            if self.dtype == "bool":
                return f"torch.randint({args[0]}, {args[1]}, {size}).bool()"
            return f"torch.randint({args[0]}, {args[1]}, {size}, dtype={dtype})"
        if dist == "randn":
            return f"torch.randn({shape}, dtype={dtype})"
        method = "uniform_" if dist == "uniform" else "normal_"
        return f"torch.empty({shape}, dtype={dtype}).{method}({args[0]}, {args[1]})"


@dataclass(frozen=True)
class ValueSpec:
    """A plain (non-tensor) input passed as it is."""

    name: str | None
    value: Any

    def text(self) -> str:
        return f"{self.name + '=' if self.name else ''}{self.value!r}"

    def expression(self, names: Mapping[tuple[int, int], str] | None = None) -> str:
        return repr(self.value)


InputSpec = TensorSpec | ValueSpec


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_distribution(text: str, dtype: str, spec: str) -> Distribution:
    match = DISTRIBUTION.match(text.strip())
    if match is None or match["name"] not in DISTRIBUTIONS:
        raise SpecError(f"bad input {spec!r}: unknown distribution {text!r} (one of {', '.join(DISTRIBUTIONS)})")
    name = match["name"]
    raw = [a for a in (match["args"] or "").split(",") if a.strip()]
    if len(raw) != DISTRIBUTIONS[name]:
        raise SpecError(f"bad input {spec!r}: {name} takes {DISTRIBUTIONS[name]} numbers, got {len(raw)}")
    try:
        args = tuple(float(a) for a in raw)
    except ValueError:
        raise SpecError(f"bad input {spec!r}: {name}'s arguments must be numbers") from None
    if name == "randint":
        if not all(a.is_integer() for a in args) or args[0] >= args[1]:
            raise SpecError(f"bad input {spec!r}: randint(low,high) needs integers with low < high")
        if dtype in FLOATS:
            raise SpecError(f"bad input {spec!r}: randint draws integers, {dtype} is a float type")
    elif dtype not in FLOATS:
        raise SpecError(f"bad input {spec!r}: {name} draws floats; give {dtype} a range with ~randint(low,high)")
    elif name == "uniform" and args[0] >= args[1]:
        raise SpecError(f"bad input {spec!r}: uniform(low,high) needs low < high")
    return Distribution(name, args)


def parse_input(text: str) -> InputSpec:
    spec = text.strip()
    match = TENSOR.match(spec)
    if match is None:
        name, equals, value = spec.partition("=")
        if equals and name.isidentifier() and "[" not in name:
            return ValueSpec(name, literal(value.strip(), f"input {name}"))
        raise SpecError(f"bad input {spec!r}: expected NAME=DTYPE[SHAPE], e.g. x=float32[8,128,1024]")
    dtype = DTYPES.get(match["dtype"])
    if dtype is None:
        known = ", ".join(sorted(set(DTYPES.values())))
        raise SpecError(f"bad input {spec!r}: unknown dtype {match['dtype']} (one of {known})")
    try:
        shape = tuple(int(s) for s in match["shape"].split(",") if s.strip())
    except ValueError:
        raise SpecError(f"bad input {spec!r}: the shape must be whole numbers, e.g. [8,128]") from None
    if any(s < 0 for s in shape):
        raise SpecError(f"bad input {spec!r}: negative size in the shape")
    distribution = parse_distribution(match["dist"], dtype, spec) if match["dist"] else default_distribution(dtype)
    if distribution is None:
        raise SpecError(f"bad input {spec!r}: an {dtype} input needs a range, e.g. {spec}~randint(0,32000)")
    return TensorSpec(match["name"], dtype, shape, distribution)


def default_distribution(dtype: str) -> Distribution | None:
    """randn for floats, 0 or 1 for bool; integers have no default (indices need their range)."""
    if dtype == "bool":
        return Distribution("randint", (0.0, 2.0))
    return Distribution() if dtype in FLOATS else None


def parse_inputs(texts: list[str] | str | None) -> list[InputSpec]:
    """Input specs from repeated flags or a TOML list; one string may hold several, split by spaces
    or `;`."""
    if texts is None:
        return []
    items = [texts] if isinstance(texts, str) else list(texts)
    specs = [parse_input(part) for item in items for part in split_top_level(item, "; \t")]
    names = [s.name for s in specs if s.name]
    if len(names) != len(set(names)):
        raise SpecError(f"bad inputs: {', '.join(sorted({n for n in names if names.count(n) > 1}))} given twice")
    if names and len(names) != len(specs):
        raise SpecError("bad inputs: name every input or none (x=float32[8,16] y=float32[16])")
    return specs


def first_dim_name(specs: list[InputSpec]) -> str | None:
    """`batch_size` when every tensor input has the same leading size (and at least two dimensions):
    the problem then names it, so the evaluator can also try other batch sizes."""
    tensors = [s for s in specs if isinstance(s, TensorSpec)]
    if not tensors or any(len(t.shape) < 2 for t in tensors) or len({t.shape[0] for t in tensors}) != 1:
        return None
    return "batch_size"


def size_names(specs: list[InputSpec]) -> dict[tuple[int, int], str]:
    """What a problem calls its inputs' sizes, by (position, size): `batch_size` for the leading size every tensor
    input shares (`first_dim_name`), and `size_N` for every other size N above 1, one name for every dimension of
    that size. They become module-level integers that only get_inputs reads, so eval's other sizes change them too:
    with the batch alone, a kernel tiled for the problem's sequence length passed there and was wrong at any other
    (tests/candidates/redteam26/gelu_gate_rows_in_tiles_of_eight_apply.py). A size the model's parameters fix fails
    in the reference at another value, and is not tried there."""
    batch = first_dim_name(specs)
    names: dict[tuple[int, int], str] = {}
    for spec in specs:
        if isinstance(spec, TensorSpec):
            for position, size in enumerate(spec.shape):
                if position == 0 and batch:
                    names[(0, size)] = batch
                elif size > 1:
                    names[(position, size)] = f"size_{size}"
    return names


@dataclass(frozen=True)
class ModelSpec:
    """What the worker builds and runs: a module class or factory, its arguments, its inputs and the
    mode (`train`, `eval`, or as built)."""

    target: str
    init: str = ""
    inputs: tuple[str, ...] = ()
    mode: str | None = None

    @classmethod
    def parse(
        cls, target: str, init: str | dict[str, Any] | None, inputs: list[str] | str | None, mode: str | None = None
    ) -> ModelSpec:
        """Checked now, so a bad spec is one line before any process starts."""
        parse_target(target)
        arguments = parse_init(init)
        specs = parse_inputs(inputs)
        if mode not in (None, "train", "eval"):
            raise SpecError(f"bad mode {mode!r}: train or eval")
        text = ",".join(f"{k}={v!r}" for k, v in arguments.items())
        return cls(target, text, tuple(s.text() for s in specs), mode)

    def request(self) -> dict[str, Any]:
        return {"target": self.target, "init": self.init, "inputs": list(self.inputs), "mode": self.mode}

    def describe(self) -> str:
        parts = [self.target + (f"({self.init})" if self.init else "")]
        if self.inputs:
            parts.append(f"on {' '.join(self.inputs)}")
        if self.mode:
            parts.append(f"in {self.mode} mode")
        return " ".join(parts)

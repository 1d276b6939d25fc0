"""A pickle-free file format for tensors and the plain containers around them.

Inputs go from the reference worker to the candidate, and outputs come back to the judge, as files.
The judge must never unpickle what a candidate wrote, so a file here is a JSON header describing the
exact structure — the exact container types (a tuple subclass is not a tuple), dtypes, shapes — then
the raw bytes of each tensor. Reading checks every offset and size against the file.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

MAGIC = b"KEVT1\n"
MAX_HEADER = 16 << 20
MAX_DEPTH = 32
MAX_NAME = 200  # a type or device name: a writer's words that end up in messages


class TensorFileError(Exception):
    """The file is not a valid tensor file (truncated, inconsistent, or an unknown type)."""


def _dtypes() -> dict[str, Any]:
    import torch

    names = (
        "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
        "complex64", "complex128",
    )  # fmt: skip
    return {name: getattr(torch, name) for name in names}


def _type_name(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _encode(value: Any, blobs: list[Any], offset: list[int], depth: int) -> dict[str, Any]:
    import torch

    if depth > MAX_DEPTH:
        raise TensorFileError("nested too deeply")
    kind = type(value)
    if kind is torch.Tensor:
        data = value.detach().contiguous().cpu()
        raw = data.reshape(-1).view(torch.uint8).numpy() if data.numel() else b""
        size = len(raw) if isinstance(raw, bytes) else raw.nbytes
        node = {"t": "tensor", "dtype": str(data.dtype).removeprefix("torch."), "shape": list(data.shape),
                "offset": offset[0], "nbytes": size, "device": str(value.device)}  # fmt: skip
        blobs.append(raw)
        offset[0] += size
        return node
    if kind in (tuple, list):
        return {"t": kind.__name__, "items": [_encode(v, blobs, offset, depth + 1) for v in value]}
    if kind is float:
        return {"t": "float", "v": repr(value)}  # repr keeps nan/inf, which JSON cannot
    if kind in (int, bool, str) or value is None:
        return {"t": kind.__name__, "v": value}
    if kind is Other:
        return {"t": "other", "type": value.type_name}
    return {"t": "other", "type": _type_name(value)}


def write(path: Path, value: Any) -> None:
    """Write `value`; anything that is not exactly a tensor, tuple, list or plain scalar is named only."""
    blobs: list[Any] = []
    header = json.dumps(_encode(value, blobs, [0], 0)).encode()
    with open(path, "wb") as out:
        out.write(MAGIC + struct.pack("<Q", len(header)) + header)
        for blob in blobs:
            out.write(blob.data if hasattr(blob, "data") else blob)


def _decode(node: Any, data: memoryview, dtypes: dict[str, Any], depth: int, left: list[int]) -> Any:
    """`left`: the bytes of data not yet taken by a tensor. Every tensor is a copy of its span, so spans that
    overlap (a header naming one span 20,000 times) would make a small file many times its size in memory."""
    import torch

    if depth > MAX_DEPTH or not isinstance(node, dict):
        raise TensorFileError("malformed structure")
    kind = node.get("t")
    if kind == "tensor":
        dtype = dtypes.get(str(node.get("dtype")))
        shape, offset, nbytes = node.get("shape"), node.get("offset"), node.get("nbytes")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise TensorFileError(f"unknown dtype or shape: {node.get('dtype')!r} {shape!r}")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not isinstance(offset, int) or nbytes != math.prod(shape) * itemsize or offset < 0:
            raise TensorFileError("tensor size does not match its shape")
        if offset + nbytes > len(data):
            raise TensorFileError("the file is truncated")
        left[0] -= nbytes
        if left[0] < 0:
            raise TensorFileError("tensors that overlap: their sizes add up to more than the file holds")
        device = node.get("device", "cpu")
        if not isinstance(device, str) or len(device) > MAX_NAME:
            raise TensorFileError("a tensor with a malformed device")
        flat = torch.frombuffer(bytearray(data[offset : offset + nbytes]), dtype=torch.uint8) if nbytes else None
        tensor = flat.view(dtype).reshape(shape) if flat is not None else torch.empty(shape, dtype=dtype)
        return Leaf(tensor, device)
    if kind in ("tuple", "list"):
        items = [_decode(item, data, dtypes, depth + 1, left) for item in node.get("items", [])]
        return tuple(items) if kind == "tuple" else items
    if kind == "float":
        try:
            return float(str(node.get("v")))  # written as repr(), which keeps nan and inf
        except ValueError:
            raise TensorFileError(f"malformed float {node.get('v')!r}") from None
    if kind in ("int", "bool", "str", "NoneType"):
        return node.get("v")
    if kind == "other":
        if not isinstance(name := node.get("type"), str) or len(name) > MAX_NAME:
            raise TensorFileError("an object with a malformed type name")
        return Other(name)
    raise TensorFileError(f"unknown node type {kind!r}")


class Leaf:
    """A tensor read back from a file, with the device it was on when written."""

    def __init__(self, tensor: Any, device: str) -> None:
        self.tensor = tensor
        self.device = device


class Other:
    """Something that was not a plain tensor, container or scalar: only its type name travels."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def read(path: Path, with_devices: bool = False) -> Any:
    """The value written by `write`. Tensors come back on the CPU; with `with_devices`, as Leaf objects
    that also say where they were. Opened without blocking: a file its writer still holds a lease on (which
    would hold this read until the writer lets go, doing work nobody times meanwhile) fails with EAGAIN."""
    raw = _read_now(Path(path))
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 8:
        raise TensorFileError("not a tensor file")
    (length,) = struct.unpack("<Q", raw[len(MAGIC) : len(MAGIC) + 8])
    start = len(MAGIC) + 8
    if length > MAX_HEADER or start + length > len(raw):
        raise TensorFileError("header too large or truncated")
    try:
        tree = json.loads(raw[start : start + length])
    except (ValueError, RecursionError):
        raise TensorFileError("the header is not JSON") from None
    data = memoryview(raw)[start + length :]
    try:
        value = _decode(tree, data, _dtypes(), 0, [len(data)])
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:  # torch refusing what the header names
        # (a zero-size tensor of shape [0, 2**63]): the writer's file is unusable, the reader is fine
        raise TensorFileError(f"a tensor torch cannot make: {type(exc).__name__}: {str(exc)[:200]}") from None
    return value if with_devices else _strip(value)


def _read_now(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except BlockingIOError:
        raise TensorFileError("its writer still holds the file (a lease): it cannot be read now") from None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _strip(value: Any) -> Any:
    if isinstance(value, Leaf):
        return value.tensor
    if isinstance(value, tuple | list):
        return type(value)(_strip(v) for v in value)
    return value

"""`load_inline` and `load` inside the candidate worker: ask the host to build, then load its binary.

The candidate's Python never compiles anything itself: each call becomes a `build_request` event, the
host builds it in a separate sandboxed builder (flags checked, output hashed into a manifest the
candidate cannot write) and answers with the path of the library to load, or the compiler's error,
which is raised here as torch would raise it. The host records every build's outcome, so a failure
the candidate catches and hides is still known.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
from pathlib import Path
from typing import Any

from torch.utils import cpp_extension

from kevin_tui.evaluator.worker.channel import Channel

INLINE_SIGNATURE = inspect.signature(cpp_extension.load_inline)
FILES_SIGNATURE = inspect.signature(cpp_extension.load)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _functions(value: Any) -> list[str] | dict[str, str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return [str(v) for v in value]


PROFILING = [False]  # set while a profile is taken: calls into built extensions are then named in it
# Set once the candidate calls a function of an nvcc-built extension (at import, in __init__, in forward): on a
# machine without a GPU its kernels cannot run, so a wrong answer after such a call is what an honest CUDA kernel's
# unchecked launch leaves (the host's `compiled`), while one that never called it computed its answer on the CPU.
CUDA_CALLED = [False]


class Traced:
    """A built extension whose functions show up by name in a profile (`kevin_ext::<name>`), so the time
    spent in the candidate's own code can be told from PyTorch's. Outside a profile, a plain call; a call
    of an nvcc-built one is noted in CUDA_CALLED."""

    def __init__(self, module: Any, cuda: bool = False) -> None:
        self._module = module
        self._cuda = cuda

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._module, attr)
        if not callable(value) or attr.startswith("__"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            CUDA_CALLED[0] = CUDA_CALLED[0] or self._cuda
            if not PROFILING[0]:
                return value(*args, **kwargs)
            from torch.profiler import record_function

            with record_function(f"kevin_ext::{attr}"):
                return value(*args, **kwargs)

        call.__name__ = call.__qualname__ = attr
        call.__doc__ = value.__doc__
        return call

    def __dir__(self) -> list[str]:
        return dir(self._module)

    def __repr__(self) -> str:
        return repr(self._module)


class BuildClient:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.uses_cuda = False
        self.cuda_ops: set[str] = set()  # the operators nvcc-built libraries registered (`torch.ops.load_library`)
        self.loaded: set[str] = set()  # the paths of the libraries the host built, as loaded (guards.Elsewhere)

    def install(self) -> None:
        def load_inline(*args: Any, **kwargs: Any) -> Any:
            return self._request("inline", INLINE_SIGNATURE, args, kwargs)

        def load(*args: Any, **kwargs: Any) -> Any:
            return self._request("files", FILES_SIGNATURE, args, kwargs)

        load_inline.__doc__, load.__doc__ = cpp_extension.load_inline.__doc__, cpp_extension.load.__doc__
        cpp_extension.load_inline, cpp_extension.load = load_inline, load

    def _request(self, kind: str, signature: inspect.Signature, args: tuple, kwargs: dict) -> Any:
        what = "load_inline" if kind == "inline" else "load"
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{what}() {exc}") from None
        bound.apply_defaults()
        given = bound.arguments
        name = str(given["name"])
        if kind == "inline":
            cpp, cuda, sources = _as_list(given["cpp_sources"]), _as_list(given["cuda_sources"]), []
        else:
            cpp, cuda = [], []
            sources = [[Path(p).name, Path(p).read_text()] for p in _as_list(given["sources"])]
        self.channel.emit(
            "build_request",
            kind=kind,
            name=name,
            cpp_sources=cpp,
            cuda_sources=cuda,
            sources=sources,
            functions=_functions(given.get("functions")),
            extra_cflags=_as_list(given["extra_cflags"]),
            extra_cuda_cflags=_as_list(given["extra_cuda_cflags"]),
            extra_ldflags=_as_list(given["extra_ldflags"]),
            extra_include_paths=_as_list(given["extra_include_paths"]),
            with_cuda=given["with_cuda"],
            no_implicit_headers=bool(given.get("no_implicit_headers", False)),
        )
        answer = self.channel.expect("build_result")
        if not answer["ok"]:
            raise RuntimeError(f"Error building extension '{name}': {answer['message']}")
        self.uses_cuda = self.uses_cuda or answer["uses_cuda"]
        return self._load(name, answer["path"], bool(given["is_python_module"]), answer["uses_cuda"])

    def _load(self, name: str, path: str, python_module: bool, cuda: bool) -> Any:
        self.loaded.add(path)
        try:
            if not python_module:
                import torch

                before = set(torch._C._dispatch_get_all_op_names())
                torch.ops.load_library(path)
                if cuda:
                    added = set(torch._C._dispatch_get_all_op_names()) - before
                    self.cuda_ops |= {op.split(".")[0] for op in added}  # as a profile names them
                return path
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            if spec is None:
                raise ImportError(f"{path} is not an extension module")
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            return Traced(module, cuda)
        except (ImportError, OSError) as exc:
            self.channel.emit("load_failed", name=name, message=str(exc)[:4000])
            raise ImportError(f"loading the built extension '{name}' failed: {exc}") from None

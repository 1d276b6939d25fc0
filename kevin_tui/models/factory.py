"""Choosing and opening a backend: the backend scope, which one model server or in-process model
that any number of problems may share.

Which backends exist, their options and capabilities, is the registry's (kevin_tui.models.registry,
filled by kevin_tui.models.backends). Here: the configuration every backend shares, `--backend auto`
(the first registered backend that wants the configuration: a server given, else a GPU here), and
the refusal said at once, before anything is loaded — without a GPU and without a server there is
no way to run Kevin-32B (`NoModel`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kevin_tui.errors import EXIT_USAGE
from kevin_tui.models.base import DEFAULT_MODEL, Backend, BackendError, Sampling
from kevin_tui.models.registry import BackendKind, kind_named, kinds
from kevin_tui.models.vllm_server import ProgressFn

NO_MODEL_HELP = """\
  --server URL                          an OpenAI-compatible server running Kevin-32B (e.g. vllm serve on a GPU machine)
  --backend transformers --model DIR    a small local model, on the CPU
  kevin-tui demo                        the app on a shipped problem with recorded replies, offline"""
NO_MODEL = (
    f"no GPU here and no model server given: {DEFAULT_MODEL} (about 66 GB) cannot run on this machine's CPU, "
    f"so nothing was started. Use one of:\n{NO_MODEL_HELP}"
)

Options = TypeVar("Options")


class NoModel(BackendError):
    """No way to run the model was given or found here; nothing was started."""

    exit_code = EXIT_USAGE


def backend_names() -> list[str]:
    return ["auto", *(kind.name for kind in kinds())]


@dataclass(frozen=True)
class BackendConfig:
    """What every backend shares, plus each backend's own options (by backend name)."""

    backend: str = "auto"
    model: str = DEFAULT_MODEL
    server: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    log_dir: Path = Path(".")
    options: dict[str, Any] = field(default_factory=dict)

    def options_for(self, kind: BackendKind) -> Any:
        """This configuration's options for `kind` (its defaults where none were given)."""
        assert kind.options is not None, f"backend {kind.name} has no options"
        return self.options.get(kind.name) or kind.options()

    def resolve(self) -> BackendKind:
        """The backend to use; raises NoModel where none can work (checked before anything starts)."""
        if self.backend == "auto":
            chosen = next((k for k in kinds() if k.chosen_by_auto and k.chosen_by_auto(self)), None)
            if chosen is None:
                raise NoModel(NO_MODEL)
        else:
            try:
                chosen = kind_named(self.backend)
            except KeyError:
                known = ", ".join(backend_names())
                raise NoModel(f"no backend named {self.backend!r} (choose one of {known})") from None
        if (reason := chosen.refuses(self)) is not None:
            raise NoModel(reason)
        return chosen

    def label(self) -> str:
        """The model as sessions and batch reports name it (a script's name for recorded replies)."""
        return self.model if self.backend == "auto" else kind_named(self.backend).label(self)


@asynccontextmanager
async def open_backend(config: BackendConfig, progress: ProgressFn | None = None) -> AsyncIterator[Backend]:
    """The configured backend, ready to stream; whatever it started (a vLLM server) is stopped on exit."""
    async with config.resolve().open(config, progress) as backend:
        yield backend

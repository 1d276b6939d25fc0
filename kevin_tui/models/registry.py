"""The backends kevin-tui can generate with, each registered once: its name, its typed options (with
the help the command line shows), its capabilities, and how to open it.

The factory, the driver and batch ask a backend's capabilities, never its name: a new backend is one
`register(BackendKind(...))` call (kevin_tui.models.backends has today's four), nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kevin_tui.models.base import Backend
    from kevin_tui.models.factory import BackendConfig
    from kevin_tui.models.vllm_server import ProgressFn


@dataclass(frozen=True)
class Capabilities:
    """What the rest of kevin-tui may count on, asked instead of the backend's name."""

    local_gpu: bool = False  # computes on this machine's GPUs: nothing is timed there while it generates
    streams: bool = True  # text arrives as it is generated
    counts_tokens: bool = False  # the model's own tokenizer counts prompt tokens (else an estimate)
    scripted: bool = False  # replays recorded replies: its "model" is the script, not a model id


@dataclass(frozen=True)
class Option:
    """One typed option of a backend, as a command-line flag; its value is read into the backend's
    options dataclass field of the same name."""

    flag: str
    type: Callable[[str], Any]
    help: str
    action: str | None = None  # "store_true" / "store_false" for switches
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BackendKind:
    name: str
    summary: str  # one line for --help
    capabilities: Capabilities
    open: Callable[[BackendConfig, ProgressFn | None], AbstractAsyncContextManager[Backend]]
    options: type | None = None  # a frozen dataclass of this backend's settings
    flags: dict[str, Option] | None = None  # field name -> its flag
    chosen_by_auto: Callable[[BackendConfig], bool] | None = None  # `--backend auto` takes the first that says yes
    refuses: Callable[[BackendConfig], str | None] = lambda config: None  # why it cannot run here, before starting
    devices: Callable[[BackendConfig], set[str]] = lambda config: set()  # the local devices the model computes on
    label: Callable[[BackendConfig], str] = lambda config: config.model  # the model, as sessions and reports name it


REGISTRY: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> BackendKind:
    if kind.name in REGISTRY or kind.name == "auto":
        raise ValueError(f"backend {kind.name!r} is registered twice (or takes the reserved name 'auto')")
    REGISTRY[kind.name] = kind
    return kind


def kinds() -> list[BackendKind]:
    import kevin_tui.models.backends  # noqa: F401  (registers the built-in backends)

    return list(REGISTRY.values())


def kind_named(name: str) -> BackendKind:
    for kind in kinds():
        if kind.name == name:
            return kind
    raise KeyError(name)

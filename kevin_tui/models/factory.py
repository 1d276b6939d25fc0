"""Choosing and opening a backend: the backend scope, which one model server or in-process model
that any number of problems may share.

`--backend vllm` (the default where there is a GPU) manages a local `vllm serve` and talks to it as
an OpenAI-compatible server; `--server URL` (or `--backend openai`) talks to one already running;
`--backend transformers` runs the model in-process. Without a GPU and without a server there is no
way to run Kevin-32B: that is said at once (`NoModel`), before anything is loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kevin_tui.errors import EXIT_USAGE
from kevin_tui.models.base import DEFAULT_MODEL, Backend, BackendError, Sampling
from kevin_tui.models.vllm_server import ProgressFn, VllmConfig, VllmServer

BACKENDS = ("auto", "vllm", "openai", "transformers", "scripted")
NO_MODEL_HELP = """\
  --server URL                          an OpenAI-compatible server running Kevin-32B (e.g. vllm serve on a GPU machine)
  --backend transformers --model DIR    a small local model, on the CPU
  kevin-tui demo                        the app on a shipped problem with recorded replies, offline"""


class NoModel(BackendError):
    """No way to run the model was given or found here; nothing was started."""

    exit_code = EXIT_USAGE


def has_gpu() -> bool:
    return Path("/dev/nvidia0").exists()


@dataclass
class BackendConfig:
    backend: str = "auto"
    model: str = DEFAULT_MODEL
    server: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    max_model_len: int = 32768
    port: int = 8000
    keep_server: bool = False
    log_dir: Path = Path(".")
    script: Path | None = None
    script_rate: float = 0.0
    script_delay: float = 0.0

    def resolved_backend(self) -> str:
        """The backend to use; raises NoModel where none can work (checked before anything starts)."""
        kind = self.backend
        if kind == "auto":
            kind = "openai" if self.server else "vllm" if has_gpu() else "none"
        if kind == "none" or (kind == "transformers" and self.model == DEFAULT_MODEL and not has_gpu()):
            raise NoModel(
                f"no GPU here and no model server given: {DEFAULT_MODEL} (about 66 GB) cannot run on this "
                f"machine's CPU, so nothing was started. Use one of:\n{NO_MODEL_HELP}"
            )
        return kind


LAUNCH = ("backend", "model", "server", "script", "script_rate", "script_delay", "tensor_parallel_size",
          "gpu_memory_utilization", "port")  # fmt: skip


def launch_record(config: BackendConfig) -> dict[str, Any]:
    """How the backend was started, kept in a session's header or a batch run's manifest so that a
    resume starts the same one."""
    return {name: str(value) if isinstance(value, Path) else value for name in LAUNCH
            if (value := getattr(config, name)) is not None}  # fmt: skip


def relaunched(config: BackendConfig, recorded: dict[str, Any], given: Iterable[str]) -> BackendConfig:
    """The recorded launch, with the options `given` on this command line on top."""
    taken = {name: value for name, value in recorded.items() if name in LAUNCH and name not in set(given)}
    if taken.get("script") is not None:
        taken["script"] = Path(taken["script"])
    return replace(config, **taken)


@asynccontextmanager
async def open_backend(config: BackendConfig, progress: ProgressFn | None = None) -> AsyncIterator[Backend]:
    """The configured backend, ready to stream; a managed vLLM server is stopped on exit."""
    kind = config.resolved_backend()
    if kind == "scripted":
        from kevin_tui.models.scripted import ScriptedBackend

        if config.script is None:
            raise BackendError("--backend scripted needs --script FILE")
        yield ScriptedBackend(config.script, config.script_rate, config.script_delay)
        return
    if kind == "transformers":
        from kevin_tui.models.transformers_backend import TransformersBackend

        backend: Backend = await asyncio.to_thread(TransformersBackend, config.model)  # loading takes a while
        try:
            yield backend
        finally:
            await backend.aclose()
        return
    from kevin_tui.models.openai_backend import OpenAIBackend

    server = None
    url = config.server
    if kind == "vllm":
        if url:
            raise BackendError("--server and --backend vllm exclude each other: vllm means kevin-tui runs the server")
        server = VllmServer(
            VllmConfig(
                model=config.model,
                port=config.port,
                tensor_parallel_size=config.tensor_parallel_size,
                gpu_memory_utilization=config.gpu_memory_utilization,
                max_model_len=config.max_model_len,
                keep_running=config.keep_server,
                log_path=config.log_dir / "vllm-server.log",
            )
        )
        url = await server.start(progress)
    elif not url:
        raise BackendError("--backend openai needs --server URL")
    backend = OpenAIBackend(url, config.model)
    try:
        yield backend
    finally:
        await backend.aclose()
        if server is not None:
            await server.stop()

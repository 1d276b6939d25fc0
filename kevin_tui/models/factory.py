"""Choosing and opening a backend from the command line or config.

`--backend vllm` (the default where there is a GPU) manages a local `vllm serve` and talks to it as
an OpenAI-compatible server; `--server URL` (or `--backend openai`) talks to one already running;
`--backend transformers` runs the model in-process.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kevin_tui.models.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    Backend,
    BackendError,
    Sampling,
)
from kevin_tui.models.vllm_server import ProgressFn, VllmConfig, VllmServer

BACKENDS = ("auto", "vllm", "openai", "transformers", "scripted")


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

    def resolved_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        if self.server:
            return "openai"
        return "vllm" if Path("/dev/nvidia0").exists() else "transformers"


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--backend", choices=BACKENDS, default="auto",
                       help="auto: openai with --server, vllm with a GPU, else transformers")  # fmt: skip
    group.add_argument("--model", default=DEFAULT_MODEL, help=f"model id or local directory (default {DEFAULT_MODEL})")
    group.add_argument("--server", metavar="URL", help="an OpenAI-compatible server (API key from KEVIN_TUI_API_KEY)")
    group.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    group.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    group.add_argument("--top-p", type=float, default=DEFAULT_TOP_P)
    group.add_argument("--sampling-seed", type=int, default=None)
    group.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm: GPUs to shard the model over")
    group.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vllm: fraction of GPU memory")
    group.add_argument("--port", type=int, default=8000, help="vllm: port of the managed server")
    group.add_argument("--keep-server", action="store_true", help="vllm: leave the server running on exit")
    group.add_argument("--script", type=Path, help="scripted: a JSON list of {reasoning, answer} replies to replay")
    group.add_argument("--script-rate", type=float, default=0.0, help="scripted: chunks per second (0: at once)")


def backend_config_from(args: argparse.Namespace) -> BackendConfig:
    return BackendConfig(
        backend=args.backend,
        model=args.model,
        server=args.server,
        sampling=Sampling(args.temperature, args.top_p, args.max_tokens, args.sampling_seed),
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        port=args.port,
        keep_server=args.keep_server,
        script=args.script,
        script_rate=args.script_rate,
    )


@asynccontextmanager
async def open_backend(config: BackendConfig, progress: ProgressFn | None = None) -> AsyncIterator[Backend]:
    """The configured backend, ready to stream; a managed vLLM server is stopped on exit."""
    kind = config.resolved_backend()
    if kind == "scripted":
        from kevin_tui.models.scripted import ScriptedBackend

        if config.script is None:
            raise BackendError("--backend scripted needs --script FILE")
        yield ScriptedBackend(config.script, config.script_rate)
        return
    if kind == "transformers":
        from kevin_tui.models.transformers_backend import TransformersBackend

        backend: Backend = TransformersBackend(config.model)
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

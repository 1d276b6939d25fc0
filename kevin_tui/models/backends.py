"""kevin-tui's four backends, registered with their options and capabilities (kevin_tui.models.registry).

- `openai`: any OpenAI-compatible server (`--server URL`); `auto` takes it when a server is given.
- `vllm`: a `vllm serve` that kevin-tui manages on this machine's GPUs; `auto` takes it with a GPU.
- `transformers`: the model in-process (a small local model on the CPU, or anything on a GPU).
- `scripted`: recorded replies (the demo, tests, benches).

How many tokens a prompt holds is declared by each live backend (`Backend.token_counting`), since
it depends on the connection (a server may lack /tokenize), not on the kind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kevin_tui import devices
from kevin_tui.models.base import DEFAULT_MODEL, Backend
from kevin_tui.models.factory import NO_MODEL, BackendConfig
from kevin_tui.models.registry import BackendKind, Capabilities, Option, register
from kevin_tui.models.vllm_server import KEVIN_CONTEXT, SPECULATIVE, ProgressFn, VllmConfig, VllmServer


@asynccontextmanager
async def closing(backend: Backend) -> AsyncIterator[Backend]:
    try:
        yield backend
    finally:
        await backend.aclose()


@asynccontextmanager
async def open_openai(config: BackendConfig, progress: ProgressFn | None) -> AsyncIterator[Backend]:
    from kevin_tui.models.openai_backend import OpenAIBackend

    assert config.server is not None  # refused before opening
    async with closing(OpenAIBackend(config.server, config.model)) as backend:
        yield backend


def openai_refuses(config: BackendConfig) -> str | None:
    return None if config.server else "--backend openai needs --server URL"


register(
    BackendKind(
        name="openai",
        summary="an OpenAI-compatible server (--server URL): vllm serve, SGLang, transformers serve...",
        capabilities=Capabilities(),
        open=open_openai,
        chosen_by_auto=lambda config: bool(config.server),
        refuses=openai_refuses,
    )
)


@dataclass(frozen=True)
class VllmOptions:
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    max_model_len: int = KEVIN_CONTEXT
    speculative: str = "off"
    prefix_caching: bool = True
    port: int = 8000
    keep_server: bool = False


VLLM_FLAGS = {
    "tensor_parallel_size": Option("--tensor-parallel-size", int, "GPUs to shard the model over"),
    "gpu_memory_utilization": Option("--gpu-memory-utilization", float, "fraction of GPU memory (default 0.85)"),
    "max_model_len": Option(
        "--max-model-len",
        int,
        f"context length (default {KEVIN_CONTEXT}: Kevin's 8k prompt + 22k reply; "
        "above 32768 QwQ's RoPE is stretched with YaRN)",
    ),
    "speculative": Option(
        "--speculative",
        str,
        "ngram = prompt-lookup speculative decoding (off: unmeasured on a GPU)",
        choices=SPECULATIVE,
    ),
    "prefix_caching": Option(
        "--no-prefix-caching",
        bool,
        "do not reuse the KV cache of the prompt text turns share",
        action="store_false",
    ),
    "port": Option("--port", int, "port of the managed server (default 8000)"),
    "keep_server": Option("--keep-server", bool, "leave the server running on exit", action="store_true"),
}


@asynccontextmanager
async def open_vllm(config: BackendConfig, progress: ProgressFn | None) -> AsyncIterator[Backend]:
    from kevin_tui.models.openai_backend import OpenAIBackend

    options = config.options_for(VLLM)
    server = VllmServer(
        VllmConfig(
            model=config.model,
            port=options.port,
            tensor_parallel_size=options.tensor_parallel_size,
            gpu_memory_utilization=options.gpu_memory_utilization,
            max_model_len=options.max_model_len,
            speculative=options.speculative,
            prefix_caching=options.prefix_caching,
            keep_running=options.keep_server,
            log_path=config.log_dir / "vllm-server.log",
        )
    )
    url = await server.start(progress)
    try:
        async with closing(OpenAIBackend(url, config.model)) as backend:
            yield backend
    finally:
        await server.stop()


def vllm_refuses(config: BackendConfig) -> str | None:
    if config.server:
        return "--server and --backend vllm exclude each other: vllm means kevin-tui runs the server"
    return None


VLLM: BackendKind = register(
    BackendKind(
        name="vllm",
        summary="a vllm serve that kevin-tui runs on this machine's GPUs (pip install 'kevin-tui[vllm]')",
        capabilities=Capabilities(local_gpu=True),
        open=open_vllm,
        options=VllmOptions,
        flags=VLLM_FLAGS,
        chosen_by_auto=lambda config: devices.has_gpu(),
        refuses=vllm_refuses,
        devices=lambda config: {f"cuda:{i}" for i in range(config.options_for(VLLM).tensor_parallel_size)},
    )
)


@asynccontextmanager
async def open_transformers(config: BackendConfig, progress: ProgressFn | None) -> AsyncIterator[Backend]:
    from kevin_tui.models.transformers_backend import TransformersBackend

    backend = await asyncio.to_thread(TransformersBackend, config.model)  # loading takes a while
    async with closing(backend) as opened:
        yield opened


register(
    BackendKind(
        name="transformers",
        summary="the model in-process with transformers (--model DIR: a small local model works on the CPU)",
        capabilities=Capabilities(local_gpu=True),
        open=open_transformers,
        refuses=lambda config: NO_MODEL if config.model == DEFAULT_MODEL and not devices.has_gpu() else None,
        devices=lambda config: {devices.resolve_device("auto")},
    )
)


@dataclass(frozen=True)
class ScriptOptions:
    script: Path | None = None
    script_rate: float = 0.0
    script_delay: float = 0.0


SCRIPT_FLAGS = {
    "script": Option("--script", Path, "a JSON list of {reasoning, answer} replies to replay"),
    "script_rate": Option("--script-rate", float, "chunks per second (0: at once)"),
    "script_delay": Option("--script-delay", float, "seconds before each reply starts"),
}


@asynccontextmanager
async def open_scripted(config: BackendConfig, progress: ProgressFn | None) -> AsyncIterator[Backend]:
    from kevin_tui.models.scripted import ScriptedBackend

    options = config.options_for(SCRIPTED)
    assert options.script is not None  # refused before opening
    async with closing(ScriptedBackend(options.script, options.script_rate, options.script_delay)) as backend:
        yield backend


SCRIPTED: BackendKind = register(
    BackendKind(
        name="scripted",
        summary="recorded replies (--script FILE): the demo, tests and benches",
        capabilities=Capabilities(scripted=True),
        open=open_scripted,
        options=ScriptOptions,
        flags=SCRIPT_FLAGS,
        refuses=lambda config: None if config.options_for(SCRIPTED).script else "--backend scripted needs --script",
        label=lambda config: f"scripted:{Path(config.options_for(SCRIPTED).script or '?').name}",
    )
)


def scripted_config(script: Path, rate: float = 0.0, delay: float = 0.0, **common: Any) -> BackendConfig:
    """A configuration that replays `script` (the demo's, the tests' and the benches' way in)."""
    return BackendConfig(backend="scripted", options={"scripted": ScriptOptions(script, rate, delay)}, **common)

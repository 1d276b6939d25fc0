"""Running `vllm serve` as a managed child process.

Started on demand with the flags Kevin needs, waited for through its /health endpoint with
progress reported, its output written to a log file (never the terminal), reused when something
already serves on the port, and stopped on exit unless asked to keep it. Talking to it is the
OpenAI-compatible backend's job.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kevin_tui.models.base import DEFAULT_MODEL, BackendError
from kevin_tui.models.http import get_ok
from kevin_tui.processes import kill_process_group

ProgressFn = Callable[[float, str], None]

QWQ_CONTEXT = 32768  # QwQ-32B's native context; its model card's YaRN setting (factor 4) reaches 131,072
QWQ_ROPE_THETA = 1_000_000.0
# Kevin's published lengths: prompts up to 8,192 tokens, replies of 16,384 raised to 22K in training.
KEVIN_CONTEXT = 8192 + 22 * 1024
SPECULATIVE = ("off", "ngram")


def yarn_overrides(max_model_len: int) -> dict[str, object] | None:
    """The `--hf-overrides` that stretch QwQ's RoPE with YaRN to `max_model_len`, None where the
    native context is enough (Kevin's own lengths are)."""
    if max_model_len <= QWQ_CONTEXT:
        return None
    factor = max_model_len / QWQ_CONTEXT
    if factor > 4:
        most = 4 * QWQ_CONTEXT
        raise BackendError(f"--max-model-len {max_model_len}: QwQ-32B reaches at most {most} tokens with YaRN")
    return {"rope_parameters": {"rope_type": "yarn", "factor": factor, "rope_theta": QWQ_ROPE_THETA,
                                "original_max_position_embeddings": QWQ_CONTEXT}}  # fmt: skip


@dataclass
class VllmConfig:
    model: str = DEFAULT_MODEL
    host: str = "127.0.0.1"
    port: int = 8000
    max_model_len: int = KEVIN_CONTEXT  # an 8k prompt plus a 22k reply, as in Kevin's training
    # Prompt-lookup (n-gram) speculative decoding: Kevin rewrites code that is in its prompt, so drafts
    # from the prompt should often be accepted. Off until measured on a GPU (scripts/gpu-check.sh).
    speculative: str = "off"
    speculative_tokens: int = 4
    # Every turn of a trajectory, and every trajectory of a problem, starts with the same prompt text.
    prefix_caching: bool = True
    # Kevin-32B is ~66 GB in bf16: on one 80-141 GB GPU this leaves room for evaluating kernels.
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    reasoning_parser: str = "deepseek_r1"  # splits QwQ-style <think> output into reasoning_content
    executable: str = "vllm"
    extra_args: list[str] = field(default_factory=list)
    log_path: Path = Path("vllm-server.log")
    startup_timeout_s: float = 1800.0
    keep_running: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def vllm_command(config: VllmConfig) -> list[str]:
    command = [
        config.executable, "serve", config.model,
        "--host", config.host, "--port", str(config.port),
        "--max-model-len", str(config.max_model_len),
        "--gpu-memory-utilization", str(config.gpu_memory_utilization),
        "--reasoning-parser", config.reasoning_parser,
        "--served-model-name", config.model,
    ]  # fmt: skip
    if config.tensor_parallel_size > 1:
        command += ["--tensor-parallel-size", str(config.tensor_parallel_size)]
    command.append("--enable-prefix-caching" if config.prefix_caching else "--no-enable-prefix-caching")
    if config.speculative == "ngram":
        draft = {"method": "ngram", "num_speculative_tokens": config.speculative_tokens,
                 "prompt_lookup_max": 4, "prompt_lookup_min": 2}  # fmt: skip
        command += ["--speculative-config", json.dumps(draft)]
    elif config.speculative != "off":
        raise BackendError(f"--speculative {config.speculative}: choose one of {', '.join(SPECULATIVE)}")
    if (overrides := yarn_overrides(config.max_model_len)) is not None:
        command += ["--hf-overrides", json.dumps(overrides)]
    return command + config.extra_args


def vllm_available(executable: str) -> bool:
    return shutil.which(executable) is not None or (
        executable == "vllm" and importlib.util.find_spec("vllm") is not None
    )


async def healthy(url: str, timeout_s: float = 2.0) -> bool:
    return await asyncio.to_thread(get_ok, f"{url}/health", timeout_s)


def _log_tail(path: Path, chars: int = 400) -> str:
    try:
        text = path.read_bytes()[-chars:].decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class VllmServer:
    def __init__(self, config: VllmConfig) -> None:
        self.config = config
        self.process: subprocess.Popen | None = None
        self.reused = False

    async def start(self, progress: ProgressFn | None = None) -> str:
        """Serve the model (or find it already served) and return the server's URL."""
        progress = progress or (lambda elapsed, line: None)
        config = self.config
        if await healthy(config.url):
            self.reused = True
            progress(0.0, f"reusing the server already running at {config.url}")
            return config.url
        if not vllm_available(config.executable):
            raise BackendError(
                "vLLM is not installed: `pip install 'kevin-tui[vllm]'` on a machine with a GPU; or point at a "
                "running server with --server URL, or run in-process with --backend transformers"
            )
        if config.executable == "vllm" and not any(Path("/dev").glob("nvidia[0-9]*")):
            raise BackendError(
                "no GPU is visible, and vLLM needs one: point at a server elsewhere with --server URL, "
                "or run in-process (slowly) with --backend transformers"
            )
        config.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(config.log_path, "ab") as log:
            self.process = subprocess.Popen(
                vllm_command(config), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            if self.process.poll() is not None:
                code = self.process.returncode
                raise BackendError(
                    f"vllm serve exited with code {code} after {elapsed:.0f} s: {_log_tail(config.log_path)} "
                    f"(full log: {config.log_path})"
                )
            if await healthy(config.url):
                progress(elapsed, "ready")
                return config.url
            if elapsed > config.startup_timeout_s:
                await self.stop(force=True)
                raise BackendError(f"vllm serve was not healthy after {elapsed:.0f} s (log: {config.log_path})")
            progress(elapsed, _log_tail(config.log_path))
            await asyncio.sleep(1.0)

    async def stop(self, force: bool = False) -> None:
        """Stop the server we started (never one we reused), unless it is to be kept."""
        process = self.process
        if process is None or (self.config.keep_running and not force):
            return
        await asyncio.to_thread(kill_process_group, process, 30.0)

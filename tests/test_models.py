"""Backends against real parts: the tiny Qwen2 in-process, `transformers serve` on loopback, and a
stand-in `vllm` executable (vLLM itself cannot run here)."""

from __future__ import annotations

import asyncio
import ctypes
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kevin_tui.models.base import BackendError, Delta, Reply, Sampling, StreamEnd, collect
from kevin_tui.models.http import get_ok
from kevin_tui.models.openai_backend import OpenAIBackend
from kevin_tui.models.think import CLOSE, ThinkSplitter
from kevin_tui.models.vllm_server import VllmConfig, VllmServer, vllm_command
from kevin_tui.processes import kill_process_group
from kevin_tui.protocol.parse import parse_reply

MESSAGES = [{"role": "user", "content": "Write a CUDA kernel for ReLU."}]


def split(chunks: list[str], starts_in_reasoning: bool) -> tuple[str, str, bool]:
    splitter = ThinkSplitter(starts_in_reasoning)
    reply = Reply()
    for chunk in chunks:
        for delta in splitter.feed(chunk):
            reply.add(delta)
    for delta in splitter.flush():
        reply.add(delta)
    return reply.reasoning, reply.answer, splitter.closed


@pytest.mark.parametrize("cut", range(1, 30))
def test_think_tags_split_anywhere_across_chunks(cut):
    text = "<think>plan: a < b</think>\n```python\nif a < b: pass\n```"
    assert split([text[:cut], text[cut:]], starts_in_reasoning=False) == (
        "plan: a < b",
        "```python\nif a < b: pass\n```",
        True,
    )


def test_only_the_closing_tag_when_the_template_opened_it():
    assert split(["I should fuse", " ops.</th", "ink>The answer"], True) == ("I should fuse ops.", "The answer", True)


def test_no_tags_at_all():
    assert split(["just an answer"], False) == ("", "just an answer", False)
    assert split(["no close ever"], True) == ("no close ever", "", False)


def test_after_the_close_nothing_is_a_tag():
    assert split(["plan</think>answer <think>still answer</think>"], True) == (
        "plan",
        "answer <think>still answer</think>",
        True,
    )


# -- one rule for both paths: the text, and a server's reasoning parser ------------

REPLIES = Path(__file__).parent / "replies"


def deepseek_r1_deltas(output: str) -> list[dict[str, str]]:
    """What vLLM's deepseek_r1 reasoning parser streams for `output` (`</think>` is one token): text
    before `</think>` as reasoning_content, after it as content; without it, all reasoning."""
    before, closed, after = output.partition(CLOSE)
    pieces = [{"reasoning_content": before[i : i + 7]} for i in range(0, len(before), 7)]
    return pieces + [{"content": after[i : i + 7]} for i in range(0, len(after), 7)] if closed else pieces


def text_deltas(output: str) -> list[dict[str, str]]:
    """The same output from a server without a reasoning parser, tags split across chunks."""
    return [{"content": output[i : i + 5]} for i in range(0, len(output), 5)]


class StandInServer(http.server.ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that streams the deltas it was given, then a finish reason."""

    deltas: list[dict[str, str]] = []
    finish_reason = "stop"


class StreamDeltas(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        server = self.server
        finals = [({}, server.finish_reason)]
        for delta, finish in [*((d, None) for d in server.deltas), *finals]:
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "kevin",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stand_in():
    server = StandInServer(("127.0.0.1", 0), StreamDeltas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def reply_from(server: StandInServer, deltas: list[dict[str, str]], finish_reason: str) -> Reply:
    server.deltas, server.finish_reason = deltas, finish_reason

    async def run():
        backend = OpenAIBackend(f"http://127.0.0.1:{server.server_address[1]}", "kevin")
        try:
            return await collect(backend.stream(MESSAGES, Sampling(max_tokens=100)))
        finally:
            await backend.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("finish_reason", ["stop", "length"])
@pytest.mark.parametrize("name", sorted(p.stem for p in REPLIES.glob("*.txt")))
def test_the_text_path_and_a_reasoning_parser_give_the_same_reply(stand_in, name, finish_reason):
    output = (REPLIES / f"{name}.txt").read_text()
    from_text = reply_from(stand_in, text_deltas(output), finish_reason)
    from_parser = reply_from(stand_in, deepseek_r1_deltas(output), finish_reason)
    assert from_text == from_parser and from_text.end.finish_reason == finish_reason
    assert from_text.reasoning + CLOSE in output or (CLOSE not in output and from_text.reasoning == output)
    assert from_text.end.think_unclosed == (not from_text.answer)


def test_output_without_a_close_is_reasoning_whether_it_stopped_or_was_cut_off(stand_in):
    """(parse_reply then offers a kernel written there: see tests/test_protocol.py.)"""
    output = (REPLIES / "no_think_close.txt").read_text()
    for finish_reason in ("stop", "length"):
        reply = reply_from(stand_in, text_deltas(output), finish_reason)
        assert (reply.reasoning, reply.answer, reply.end.think_unclosed) == (output, "", True)


# -- transformers, in-process ---------------------------------------------


@pytest.fixture(scope="module")
def local_backend(tiny_model):
    from kevin_tui.models.transformers_backend import TransformersBackend

    return TransformersBackend(str(tiny_model), device="cpu")


def test_transformers_backend_streams_with_a_token_record(local_backend):
    items = []

    async def run():
        async for item in local_backend.stream(MESSAGES, Sampling(max_tokens=24, seed=3)):
            items.append(item)

    asyncio.run(run())
    assert isinstance(items[-1], StreamEnd) and all(isinstance(i, Delta) for i in items[:-1])
    end = items[-1]
    assert end.prompt_tokens > 0 and 0 < end.completion_tokens <= 24
    assert end.finish_reason in ("stop", "length")
    assert len(items) > 2  # arrived in pieces, not at the end


def test_transformers_backend_cancels_mid_stream(local_backend):
    async def run():
        stream = local_backend.stream(MESSAGES, Sampling(max_tokens=2000, seed=1))
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 3:
                break
        await stream.aclose()

    started = time.monotonic()
    asyncio.run(run())
    assert time.monotonic() - started < 30
    assert not any(t.name == "kevin-generate" and t.is_alive() for t in threading.enumerate())


def test_garbage_from_the_tiny_model_is_a_format_error_not_a_crash(local_backend):
    reply = asyncio.run(collect(local_backend.stream(MESSAGES, Sampling(max_tokens=40, seed=5))))
    parsed = parse_reply(reply.answer)
    assert parsed.code is None and parsed.error


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    from kevin_tui.models.transformers_backend import TransformersBackend

    with pytest.raises(BackendError, match="cannot load model"):
        TransformersBackend(str(tmp_path / "nowhere"))


# -- transformers serve on loopback, through the openai backend --------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PR_SET_PDEATHSIG = 1


def die_with_the_tests() -> None:
    """In the server's process before it runs: killed when the test process dies, even by SIGKILL or an
    interrupted run (which left servers of ~1 GB each behind)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def start_server(model: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--device", "cpu"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_the_tests,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if get_ok(f"{url}/health", timeout_s=1):
            return proc, url
        time.sleep(0.3)
    kill_process_group(proc)  # never leave a server behind, whatever went wrong
    pytest.fail(f"transformers serve did not start: {log.read_text()[-2000:]}")


def test_openai_backend_streams_from_a_real_server(served, tiny_model):
    async def run():
        backend = OpenAIBackend(served, str(tiny_model))
        try:
            return await collect(backend.stream(MESSAGES, Sampling(max_tokens=20, seed=2)))
        finally:
            await backend.aclose()

    reply = asyncio.run(run())
    assert reply.complete and reply.end.finish_reason in ("stop", "length")
    assert reply.reasoning  # transformers serve splits QwQ-style thinking into reasoning_content
    assert reply.end.completion_tokens is None or reply.end.completion_tokens > 0


def test_openai_backend_cancellation_leaves_the_server_usable(served, tiny_model):
    async def run():
        backend = OpenAIBackend(served, str(tiny_model))
        stream = backend.stream(MESSAGES, Sampling(max_tokens=3000, seed=2))
        async for _ in stream:
            break
        await stream.aclose()
        again = await collect(backend.stream(MESSAGES, Sampling(max_tokens=5, seed=2)))
        await backend.aclose()
        return again

    assert asyncio.run(run()).complete


def test_a_server_dying_mid_stream_is_a_backend_error(tiny_model, tmp_path):
    proc, url = start_server(tiny_model, tmp_path / "serve.log")

    async def run():
        backend = OpenAIBackend(url, str(tiny_model))
        reply = Reply()
        try:
            async for item in backend.stream(MESSAGES, Sampling(max_tokens=5000, seed=2)):
                if isinstance(item, Delta):
                    reply.add(item)
                    if proc.poll() is None:
                        os.killpg(proc.pid, signal.SIGKILL)
        finally:
            await backend.aclose()
        return reply

    with pytest.raises(BackendError, match=r"broke off|cannot reach"):
        asyncio.run(run())
    kill_process_group(proc)


def test_an_unreachable_server_is_a_clear_error():
    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}", "kevin")
    with pytest.raises(BackendError, match="cannot reach the model server"):
        asyncio.run(collect(backend.stream(MESSAGES, Sampling(max_tokens=5))))


def test_the_api_key_is_sent_but_never_in_errors(monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_API_KEY", "sk-secret-value")
    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}", "kevin")
    assert backend.client.api_key == "sk-secret-value"
    with pytest.raises(BackendError) as caught:
        asyncio.run(collect(backend.stream(MESSAGES, Sampling(max_tokens=5))))
    assert "sk-secret-value" not in str(caught.value)


# -- the managed vLLM server, with a stand-in executable ----------------------

FAKE_VLLM = r'''#!/usr/bin/env python3
"""Stands in for `vllm serve`: records its arguments, logs progress, then serves /health."""
import http.server, json, os, sys, time
args = sys.argv[1:]
open(os.environ["FAKE_VLLM_ARGS"], "w").write(json.dumps(args))
port = int(args[args.index("--port") + 1])
for step in ("loading weights 10%", "loading weights 100%", "capturing CUDA graphs"):
    print(step, flush=True)
    time.sleep(1.2)
if os.environ.get("FAKE_VLLM_FAIL"):
    print("torch.OutOfMemoryError: CUDA out of memory", flush=True)
    sys.exit(1)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    exe = tmp_path / "vllm"
    exe.write_text(FAKE_VLLM)
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_VLLM_ARGS", str(tmp_path / "args.json"))
    return exe


def test_vllm_command_has_the_flags_kevin_needs():
    command = vllm_command(VllmConfig(tensor_parallel_size=4, gpu_memory_utilization=0.8))
    assert command[:3] == ["vllm", "serve", "cognition-ai/Kevin-32B"]
    for flag, value in (
        ("--reasoning-parser", "deepseek_r1"),
        ("--tensor-parallel-size", "4"),
        ("--gpu-memory-utilization", "0.8"),
        ("--max-model-len", "30720"),
    ):
        assert command[command.index(flag) + 1] == value
    assert "--enable-prefix-caching" in command  # turns and trajectories share their prompt's prefix
    assert "--speculative-config" not in command and "--hf-overrides" not in command  # off; native context


def test_vllm_command_speculates_from_the_prompt_and_stretches_rope_only_when_asked():
    command = vllm_command(VllmConfig(speculative="ngram", max_model_len=65536, prefix_caching=False))
    draft = json.loads(command[command.index("--speculative-config") + 1])
    assert draft["method"] == "ngram" and draft["num_speculative_tokens"] == 4 and draft["prompt_lookup_max"] == 4
    rope = json.loads(command[command.index("--hf-overrides") + 1])["rope_parameters"]
    assert rope == {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1_000_000.0,
                    "original_max_position_embeddings": 32768}  # fmt: skip
    assert "--no-enable-prefix-caching" in command
    with pytest.raises(BackendError, match="at most 131072"):
        vllm_command(VllmConfig(max_model_len=200_000))


def test_the_flags_reach_the_managed_server():
    from kevin_tui.arguments import backend_config, build_parser
    from kevin_tui.models.backends import VLLM

    args = build_parser().parse_args(["ask", "x.py", "--speculative", "ngram", "--max-model-len", "40000",
                                      "--no-prefix-caching"])  # fmt: skip
    options = backend_config(args).options_for(VLLM)
    assert (options.speculative, options.max_model_len, options.prefix_caching) == ("ngram", 40000, False)


def test_managed_server_starts_reports_progress_logs_to_a_file_and_stops(fake_vllm, tmp_path, capfd):
    import json

    config = VllmConfig(executable=str(fake_vllm), port=free_port(), log_path=tmp_path / "vllm.log")
    server = VllmServer(config)
    progress: list[str] = []

    async def run():
        url = await server.start(lambda elapsed, line: progress.append(line))
        assert url == config.url
        assert await VllmServer(config).start() == config.url  # a second manager reuses it
        await server.stop()

    asyncio.run(run())
    assert any("loading weights" in line for line in progress) and progress[-1] == "ready"
    assert "capturing CUDA graphs" in (tmp_path / "vllm.log").read_text()
    assert "loading weights" not in capfd.readouterr().out  # never on the terminal
    assert json.loads((tmp_path / "args.json").read_text())[:2] == ["serve", "cognition-ai/Kevin-32B"]
    assert server.process.poll() is not None


def test_a_server_we_reused_is_not_stopped(fake_vllm, tmp_path):
    config = VllmConfig(executable=str(fake_vllm), port=free_port(), log_path=tmp_path / "vllm.log")
    owner = VllmServer(config)

    async def run():
        await owner.start()
        guest = VllmServer(config)
        await guest.start()
        assert guest.reused and guest.process is None
        await guest.stop()
        from kevin_tui.models.vllm_server import healthy

        assert await healthy(config.url)
        await owner.stop()

    asyncio.run(run())


def test_a_failing_server_start_shows_the_log_line(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    config = VllmConfig(executable=str(fake_vllm), port=free_port(), log_path=tmp_path / "vllm.log")
    with pytest.raises(BackendError, match="out of memory"):
        asyncio.run(VllmServer(config).start())


def test_missing_vllm_points_at_the_alternatives(tmp_path):
    config = VllmConfig(executable=str(tmp_path / "no-vllm-here"), port=free_port())
    with pytest.raises(BackendError, match=r"--server URL.*--backend transformers"):
        asyncio.run(VllmServer(config).start())


# -- kevin-tui ask: one turn from the command line -----------------------------


def run_ask(*args: str) -> subprocess.CompletedProcess:
    from tests.conftest import RELU

    return subprocess.run([sys.executable, "-m", "kevin_tui", "ask", str(RELU), *args, "--max-tokens", "30",
                           "--sampling-seed", "1"], capture_output=True, text=True, timeout=300)  # fmt: skip


def test_ask_one_turn_from_a_server(served, tiny_model):
    result = run_ask("--server", served, "--model", str(tiny_model))
    assert "prompt: " in result.stderr and "of 8192" in result.stderr
    assert result.returncode == 1 and "format_error:" in result.stderr  # the tiny model writes noise
    assert "Traceback" not in result.stderr


def test_ask_in_process_counts_with_the_local_tokenizer_and_loads_without_a_progress_bar(tiny_model):
    """Before: transformers' "Loading weights: 100%|████|" bar went to stderr, into headless output (the
    model loads before the prompt is counted; the tiny model's reply, noise, follows the prompt line)."""
    result = run_ask("--backend", "transformers", "--model", str(tiny_model))
    assert "(transformers tokenizer)" in result.stderr and "format_error:" in result.stderr
    loading = result.stderr.split("prompt: ")[0]
    assert "%|" not in loading and "Loading" not in loading, loading


def test_ask_with_a_dead_server_says_so():
    result = run_ask("--server", f"http://127.0.0.1:{free_port()}", "--model", "kevin")
    assert result.returncode == 1 and "cannot reach the model server" in result.stderr
    assert "Traceback" not in result.stderr


def test_vllm_without_a_gpu_points_at_the_alternatives(monkeypatch):
    if any(Path("/dev").glob("nvidia[0-9]*")):
        pytest.skip("this machine has a GPU")
    monkeypatch.setattr("kevin_tui.models.vllm_server.vllm_available", lambda exe: True)
    with pytest.raises(BackendError, match=r"no GPU is visible.*--server URL"):
        asyncio.run(VllmServer(VllmConfig(port=free_port())).start())

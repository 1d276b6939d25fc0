"""Prompt tokens counted the way the backend can, once per text, and never on the event loop:
against a real HTTP /tokenize endpoint on loopback (slow on purpose)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kevin_tui.loop import Agent
from kevin_tui.models.openai_backend import OpenAIBackend
from kevin_tui.models.scripted import ScriptedBackend
from kevin_tui.models.tokens import PromptTokens
from kevin_tui.protocol.prompt import PromptBuilder, estimate_tokens
from kevin_tui.protocol.templates import load_templates
from kevin_tui.session import Header, SessionWriter

DELAY_S = 0.2


class Tokenizer(BaseHTTPRequestHandler):
    """A /tokenize like vLLM's (one token per word), slow; or none at all (404)."""

    requests: list[str] = []
    available = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append(body["prompt"])
        time.sleep(DELAY_S)
        if not self.available or self.path != "/tokenize":
            self.send_error(404)
            return
        data = json.dumps({"count": len(body["prompt"].split())}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        return


@pytest.fixture
def server() -> Iterator[str]:
    Tokenizer.requests = []
    Tokenizer.available = True
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Tokenizer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_server_counts_each_text_once(server):
    tokens = PromptTokens(OpenAIBackend(server, "kevin"))
    assert tokens("one two three") == 3 and tokens("one two three") == 3
    assert Tokenizer.requests == ["one two three"] and tokens.counted_with == "openai tokenizer"


def test_a_server_without_tokenize_is_asked_once_then_estimated(server):
    Tokenizer.available = False
    tokens = PromptTokens(OpenAIBackend(server, "kevin"))
    assert tokens("one two three") == estimate_tokens("one two three")
    assert tokens("four five") == estimate_tokens("four five")
    assert len(Tokenizer.requests) == 1 and tokens.counted_with == "estimate"


def test_a_backend_that_cannot_count_is_never_asked(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('[{"answer": "x"}]')
    tokens = PromptTokens(ScriptedBackend(script))
    assert tokens("one two") == estimate_tokens("one two") and tokens.counted_with == "estimate"


def test_the_loop_builds_prompts_without_blocking_the_event_loop(server, tmp_path):
    backend = OpenAIBackend(server, "kevin")
    tokens = PromptTokens(backend)
    templates = load_templates()
    builder = PromptBuilder(templates, "class Model: pass", 8192, tokens, tokens.counted_with)
    header = Header(id="t", created="now", problem={"path": "p", "sha256": "s", "source": ""}, model="m", backend="b")
    agent = Agent(builder, backend, None, templates, SessionWriter(tmp_path / "s.jsonl", header), tokens=tokens)

    async def run() -> tuple[int, float]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        started = time.perf_counter()
        prompt = await agent.build_prompt()
        elapsed = time.perf_counter() - started
        ticker.cancel()
        return prompt.tokens, ticks / (elapsed / 0.01)

    counted, share = asyncio.run(run())
    assert counted > 10 and Tokenizer.requests  # counted by the server...
    assert share > 0.5  # ...while the event loop kept ticking

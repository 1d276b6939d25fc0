"""`kevin-tui ask PROBLEM`: one turn of the protocol, streamed to the terminal.

It builds the turn-1 prompt, streams Kevin's reasoning (dimmed, on stderr) and answer (stdout),
parses the kernel and, with --evaluate, judges it. It is the quickest way to check that a model
server works with kevin-tui; the refinement loop builds on the same parts.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from kevin_tui.models.base import BackendError, Reply, StreamEnd
from kevin_tui.models.factory import BackendConfig, open_backend
from kevin_tui.models.tokens import PromptTokens
from kevin_tui.problem import Problem
from kevin_tui.protocol.parse import parse_reply
from kevin_tui.protocol.prompt import PromptBuilder
from kevin_tui.protocol.templates import load_templates


async def ask(problem: Problem, config: BackendConfig, budget: int, prompts: Path | None) -> tuple[Reply, str]:
    dim = sys.stderr.isatty()

    def progress(elapsed: float, line: str) -> None:
        print(f"[vllm {elapsed:4.0f} s] {line}", file=sys.stderr)

    async with open_backend(config, progress) as backend:
        tokens = PromptTokens(backend)
        builder = PromptBuilder(load_templates(prompts), problem.source, budget, tokens, tokens.counted_with)
        prompt = await asyncio.to_thread(builder.build, [])
        print(f"prompt: {prompt.tokens} tokens ({tokens.counted_with}) of {budget}", file=sys.stderr)
        reply = Reply()
        async for item in backend.stream(prompt.messages, config.sampling):
            if isinstance(item, StreamEnd):
                reply.finish(item)
                continue
            reply.add(item)
            if item.kind == "reasoning":
                print(f"\033[2m{item.text}\033[0m" if dim else item.text, end="", file=sys.stderr, flush=True)
            else:
                print(item.text, end="", flush=True)
        print(file=sys.stderr)
        return reply, prompt.text


def ask_once(problem: Problem, config: BackendConfig, budget: int, prompts: Path | None, save: str | None) -> int:
    try:
        reply, _ = asyncio.run(ask(problem, config, budget, prompts))
    except BackendError as exc:
        print(f"kevin-tui: {exc}", file=sys.stderr)
        return 1
    end = reply.end
    print(f"\nfinish: {end.finish_reason}; prompt {end.prompt_tokens} / reply {end.completion_tokens} tokens",
          file=sys.stderr)  # fmt: skip
    parsed = parse_reply(reply.answer, reply.reasoning)
    if parsed.code is None:
        print(f"format_error: {parsed.error}", file=sys.stderr)
        return 1
    if save:
        Path(save).write_text(parsed.code)
        print(f"kernel written to {save}", file=sys.stderr)
    return 0

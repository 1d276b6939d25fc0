"""Tokens per second of Kevin's replies from the managed vLLM server, with and without n-gram speculative decoding.

Two real prompts from kevin-tui's own prompt builder: turn 1 (the problem alone) and turn 3 (two earlier kernels
with their feedback, where drafts taken from the prompt should be accepted most). Each mode starts its own
`vllm serve` (one 32B model fills a GPU, so the modes run one after the other, not interleaved), sends one
warm-up request, then times every prompt `--rounds` times: time to the first token, and decode speed (completion
tokens over the time from the first token to the last). `--speculative ngram` is on by default only if this shows
it helps. With `--server URL` it times a server already running instead (one mode, "given"), which is how it runs
on a machine without a GPU (against `transformers serve`).

    python3 bench/generation_bench.py --model /path/to/Kevin-32B            # off, then ngram
    python3 bench/generation_bench.py --server http://127.0.0.1:8000 --model NAME --max-tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin_tui import kernelbench  # noqa: E402
from kevin_tui.models.base import DEFAULT_MODEL, Delta, Sampling, StreamEnd  # noqa: E402
from kevin_tui.models.openai_backend import OpenAIBackend  # noqa: E402
from kevin_tui.models.vllm_server import SPECULATIVE, VllmConfig, VllmServer  # noqa: E402
from kevin_tui.protocol.feedback import Feedback  # noqa: E402
from kevin_tui.protocol.prompt import Attempt, PromptBuilder  # noqa: E402
from kevin_tui.protocol.templates import load_templates  # noqa: E402

PROBLEM = kernelbench.root() / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
KERNEL = (REPO / "tests" / "candidates" / "relu_cuda.py").read_text()


def prompts() -> dict[str, list[dict[str, str]]]:
    builder = PromptBuilder(load_templates(), PROBLEM.read_text())
    earlier = [
        Attempt(
            1, KERNEL, "A first fused kernel.", Feedback("incorrect", "wrong output in trial 2", "max_abs_error=1")
        ),
        Attempt(2, KERNEL, "Fixed the indexing.", Feedback("correct", "correct, 1.20x vs eager", "", 1.2)),
    ]
    return {"turn 1": builder.build([]).messages, "turn 3": builder.build(earlier).messages}


async def timed(backend: OpenAIBackend, messages: list[dict[str, str]], sampling: Sampling) -> tuple[float, float, int]:
    """Seconds to the first token, decode tokens per second, and completion tokens of one streamed reply."""
    started = time.perf_counter()
    first = last = 0.0
    tokens = 0
    async for item in backend.stream(messages, sampling):
        if isinstance(item, Delta) and item.text:
            last = time.perf_counter()
            first = first or last
        elif isinstance(item, StreamEnd):
            tokens = item.completion_tokens or 0
    decode_s = last - first
    return first - started, (tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else 0.0, tokens


async def measure(url: str, model: str, rounds: int, sampling: Sampling) -> dict[str, list[tuple[float, float, int]]]:
    backend = OpenAIBackend(url, model)
    try:
        cases = prompts()
        await timed(backend, cases["turn 1"], Sampling(max_tokens=16, seed=0))  # warm-up: graphs, caches
        found: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, messages in cases.items():
                found[name].append(await timed(backend, messages, sampling))
        return found
    finally:
        await backend.aclose()


async def run(args: argparse.Namespace) -> None:
    sampling = Sampling(max_tokens=args.max_tokens, seed=0)
    results: dict[str, dict[str, list[tuple[float, float, int]]]] = {}
    if args.server:
        results["given"] = await measure(args.server, args.model, args.rounds, sampling)
    for mode in [] if args.server else args.modes:
        config = VllmConfig(model=args.model, port=args.port, speculative=mode,
                            log_path=Path(f"vllm-bench-{mode}.log"))  # fmt: skip
        server = VllmServer(config)
        url = await server.start(lambda elapsed, line, mode=mode: print(f"  [{mode} {elapsed:4.0f} s] {line}"[:160]))
        if server.reused:
            sys.exit(f"a server already runs on port {args.port}: stop it, or pass --port")
        try:
            results[mode] = await measure(url, args.model, args.rounds, sampling)
        finally:
            await server.stop(force=True)
    print(f"\n{'mode':>6} {'prompt':>7} {'first token s':>14} {'decode tok/s':>13} {'tokens':>7}", end="")
    print(f"  (medians of {args.rounds})")
    for mode, cases in results.items():
        for name, runs in cases.items():
            first, speed, tokens = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{mode:>6} {name:>7} {first:>14.2f} {speed:>13.1f} {tokens:>7.0f}")
    if "off" in results and "ngram" in results:
        for name in results["off"]:
            off = statistics.median(r[1] for r in results["off"][name])
            ngram = statistics.median(r[1] for r in results["ngram"][name])
            print(f"ngram / off, {name}: {ngram / off:.2f}x decode speed" if off else f"{name}: no tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL, help="weights (a path or a hub name the server can load)")
    parser.add_argument("--server", help="time this running OpenAI-compatible server instead of starting vLLM")
    parser.add_argument("--modes", nargs="+", choices=SPECULATIVE, default=list(SPECULATIVE))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--port", type=int, default=8011)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

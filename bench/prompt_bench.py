"""Prompt size per turn with summarised history, beside a transcript that keeps the full reasoning.

    python3 bench/prompt_bench.py [--budget 8192] [--reasoning-tokens 12000]

A realistic session: each turn Kevin reasons at length (Kevin was trained with 16-22k token
replies, mostly reasoning), writes a ~1.5 kB kernel and a short summary, and gets feedback that
cycles through the verdicts. Both sides are counted with the same counter (the conservative
estimate, or a tokenizer with --tokenizer DIR), so the ratio is fair.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin_tui import kernelbench  # noqa: E402
from kevin_tui.protocol.feedback import Feedback  # noqa: E402
from kevin_tui.protocol.prompt import Attempt, PromptBuilder, estimate_tokens  # noqa: E402
from kevin_tui.protocol.templates import load_templates  # noqa: E402

PROBLEM = kernelbench.root() / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
KERNEL = (REPO / "tests" / "candidates" / "relu_cuda.py").read_text()
FEEDBACKS = [
    Feedback("compile_error", "the build failed", "\n".join(f"cuda.cu:{i}: error: something {i}" for i in range(12))),
    Feedback("incorrect", "wrong output in trial 2", "max_abs_error=0.5, max_rel_error=1.0, worst_index=[3, 7]"),
    Feedback("correct", "correct, 1.40x vs eager", "", 1.4),
    Feedback("runtime_error", "CUDA error: an illegal memory access", "Traceback ...\nRuntimeError: CUDA error"),
    Feedback("correct", "correct, 1.90x vs eager", "", 1.9),
]
WORDS = [
    "the", "kernel", "block", "thread", "warp", "shared", "memory", "coalesced", "load", "tile", "fuse", "relu",
    "bias", "conv", "output", "index", "stride", "grid", "launch", "occupancy", "register", "float4", "vectorize",
]  # fmt: skip


def reasoning_text(rng: random.Random, tokens: int) -> str:
    chunks, size = [], 0
    while size < tokens * 3:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + ". "
        if rng.random() < 0.1:
            sentence += "\n```cpp\n" + KERNEL[:400] + "\n```\n"
        chunks.append(sentence)
        size += len(sentence)
    return "".join(chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=8192)
    parser.add_argument("--reasoning-tokens", type=int, default=12000)
    parser.add_argument("--tokenizer", type=Path, help="count with this tokenizer instead of the estimate")
    args = parser.parse_args()
    counter, counted_with = estimate_tokens, "estimate (chars/3)"
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
        counter, counted_with = (lambda t: len(tokenizer(t).input_ids)), f"tokenizer {args.tokenizer}"
    rng = random.Random(0)
    builder = PromptBuilder(load_templates(), PROBLEM.read_text(), args.budget, counter, counted_with)
    attempts: list[Attempt] = []
    transcript_tokens = 0  # every earlier prompt's new parts + full replies, as a chat log would keep them
    print(f"counted with {counted_with}; budget {args.budget}; ~{args.reasoning_tokens} reasoning tokens per turn")
    print(f"{'turn':>4} {'prompt':>8} {'full transcript':>16} {'ratio':>6} {'attempts kept':>14}")
    for turn in range(1, 17):
        prompt = builder.build(attempts)
        if turn == 1:
            transcript_tokens = prompt.tokens
        if turn in (1, 4, 8, 16):
            ratio = prompt.tokens / transcript_tokens
            flag = " OVER BUDGET" if prompt.over_budget or prompt.tokens > args.budget else ""
            print(
                f"{turn:>4} {prompt.tokens:>8} {transcript_tokens:>16} {ratio:>6.1%} {len(prompt.included):>14}{flag}"
            )
        reasoning = reasoning_text(rng, args.reasoning_tokens)
        summary = "I tiled the convolution and fused the ReLU and bias add into its epilogue to save two launches."
        answer = f"```python\n{KERNEL}```\n{summary}"
        feedback = FEEDBACKS[turn % len(FEEDBACKS)]
        attempts.append(Attempt(turn, KERNEL, summary, feedback))
        transcript_tokens += counter(reasoning) + counter(answer) + counter(feedback.message + feedback.detail)


if __name__ == "__main__":
    main()

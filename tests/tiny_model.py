"""A tiny random Qwen2 model with a tokenizer trained in-process (seconds on the CPU).

It stands in for Kevin-32B, whose weights cannot be downloaded here: the loading, chat template,
streaming and server code paths are the real ones; the text it writes is noise.
"""

from __future__ import annotations

from pathlib import Path

# The shape of QwQ's template: the assistant turn starts inside an opened <think> block.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
CORPUS = [
    "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n",
    "__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n",
    "The kernel fuses the matmul and the relu. ```python\n``` Summary: faster because fewer launches.\n",
] * 20


def build_tiny_model(directory: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.add_tokens(["<think>", "</think>"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=8192, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    return directory

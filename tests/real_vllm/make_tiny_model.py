"""Write a tiny Qwen2-architecture model directory without downloading anything.

The real-vLLM tests serve it with ``--load-format dummy`` (random weights), so only a config and a
tokenizer are needed. The tokenizer is a byte-level BPE trained on this Python's standard library
sources: deterministic for a given Python, offline, and good enough to give realistic token counts
for English/code text. KV cost of the model: 4 layers x (K, V) x 2 KV heads x 64 x 2 bytes = 2 KiB
per token, which the KV-pressure test relies on.

Usage: python make_tiny_model.py OUTPUT_DIR
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB_SIZE = 8192
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(out: Path) -> Tokenizer:
    sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:200]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(p) for p in sources], trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    return tokenizer


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(out)
    eos_id = tokenizer.token_to_id("<|endoftext|>")
    write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 32768,
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    })
    write_json(out / "special_tokens_map.json", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
    write_json(out / "config.json", {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 256,
        "intermediate_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "max_window_layers": 4,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "bfloat16",
    })
    write_json(out / "generation_config.json", {"bos_token_id": eos_id, "eos_token_id": eos_id, "do_sample": False})
    print(f"wrote {out} (vocab {tokenizer.get_vocab_size()})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUTPUT_DIR")
    main(Path(sys.argv[1]))

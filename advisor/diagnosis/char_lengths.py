"""A length given in Chinese characters ("输入约 5 万字"), turned into tokens for the model.

Chinese users often measure prompts in characters; a tokenizer's ratio depends on its vocabulary. Two
published measurements set the estimate (an estimate, and the answer says so):
- a large vocabulary (about 100K entries or more: Qwen, DeepSeek, Llama 3, GLM-4): about 0.6 token per
  Chinese character (DeepSeek's API documentation, "Token & Token Usage":
  https://api-docs.deepseek.com/quick_start/token_usage);
- a 32K vocabulary built for English (Llama 2, Mistral 7B v0.1): about 0.7 character per token on
  cc100-zh-Hans, i.e. 1.43 tokens per character (tokenizer-arena's compression table:
  https://huggingface.co/spaces/eson/tokenizer-arena).
A model the catalog does not know gets the second figure when its name is of a 32K family (Llama 2,
Mistral 7B v0.1/v0.2, Mixtral), else the first; the answer says the ratio it used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: tokens per Chinese character, by vocabulary (see the module docstring for the sources)
LARGE_VOCAB_TOKENS_PER_CHAR = 0.6
SMALL_VOCAB_TOKENS_PER_CHAR = 1.43
SMALL_VOCAB = 33_000  # 32,000 (Llama 2) and 32,768 (Mistral) entries


@dataclass(frozen=True)
class CharLength:
    """``chars`` Chinese characters read as ``tokens`` tokens at ``per_char`` tokens per character."""

    chars: int
    tokens: int
    per_char: float


#: 32K-vocabulary families the catalog may not hold, by name (Llama 2, Mistral 7B v0.1/v0.2, Mixtral)
SMALL_VOCAB_NAMES = re.compile(r"llama[-_ ]?2(?![\d.])|mistral[-_ ]7b.*v0\.[12]|mixtral", re.IGNORECASE)


def tokens_per_char(model: str | None) -> float:
    from ..perf.catalog import models as model_catalog

    spec = model_catalog.find_model(model) if model else None
    vocab = getattr(spec, "vocab_size", None) if spec is not None else None
    small = vocab <= SMALL_VOCAB if vocab is not None else bool(model and SMALL_VOCAB_NAMES.search(model))
    return SMALL_VOCAB_TOKENS_PER_CHAR if small else LARGE_VOCAB_TOKENS_PER_CHAR


def as_tokens(chars: int | None, model: str | None) -> CharLength | None:
    if not chars:
        return None
    ratio = tokens_per_char(model)
    return CharLength(chars, max(1, round(chars * ratio)), ratio)

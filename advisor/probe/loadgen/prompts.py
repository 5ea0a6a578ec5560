"""Prompts of an exact token length, made with the server's own tokenizer.

Why the server's tokenizer: the advisor has no copy of the served model's tokenizer (and must not
download one), while vLLM serves ``POST /tokenize`` and ``POST /detokenize`` for the exact
tokenizer and chat template the engine uses. A prompt is random pseudo-words (so no two requests
share a prefix unless asked to), tokenized, cut to the target length, decoded and re-tokenized
until the count is exact: cutting a token sequence and decoding it can re-merge at the cut.

A server without ``/tokenize`` (another OpenAI-compatible server, a gateway that hides it) still
gets prompts, sized by a characters-per-token estimate; they are marked inexact, and the run's
input lengths then come from the ``usage`` the server reports per request.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from ...errors import EndpointError

_CONSONANTS = "bcdfghklmnprstvz"
_VOWELS = "aeiou"
#: attempts to hit the length exactly before settling for the closest prompt
_MAX_ATTEMPTS = 8
_MAX_GROWTH = 12  # texts made longer before a /tokenize whose count does not grow is given up on
#: characters per token assumed without a tokenizer (English-like text)
_CHARS_PER_TOKEN_GUESS = 4.0


@dataclass(frozen=True)
class Prompt:
    text: str
    tokens: int | None  # as the server's tokenizer counts it (chat: with the template); None if unknown
    exact: bool


def pseudo_words(rng: random.Random, count: int) -> str:
    """``count`` pronounceable random words: cheap, tokenizer-friendly, and never repeated text."""
    words = []
    for _ in range(count):
        syllables = rng.randint(1, 3)
        words.append("".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables)))
    return " ".join(words)


class PromptBuilder:
    """Builds exact-length prompts through one server's /tokenize and /detokenize."""

    def __init__(self, client: httpx.Client, base_url: str, model: str, *, chat: bool = False) -> None:
        self._client = client
        self._root = base_url.rstrip("/")
        self._model = model
        self._chat = chat
        self.has_tokenizer = True
        self.notes: list[str] = []
        self._tokens_per_word: float | None = None
        self._template_overhead = 0

    # -- the server's tokenizer -------------------------------------------------------------
    def _post(self, path: str, payload: dict) -> dict:
        url = f"{self._root}{path}"
        try:
            response = self._client.post(url, json=payload)
        except httpx.HTTPError as exc:
            raise EndpointError(f"{path} failed: {type(exc).__name__}: {exc}", source=self._root) from None
        if response.status_code in (404, 405, 501):
            raise _NoTokenizer(f"{path} answered HTTP {response.status_code}")
        if response.status_code != 200:
            raise EndpointError(f"{path} answered HTTP {response.status_code}: {response.text[:200]}", source=self._root)
        try:
            data = response.json()
        except ValueError:
            raise _NoTokenizer(f"{path} did not answer JSON") from None
        if not isinstance(data, dict):
            raise _NoTokenizer(f"{path} answered JSON that is not an object")
        return data

    def _tokenize(self, text: str) -> list[int]:
        data = self._post("/tokenize", {"model": self._model, "prompt": text, "add_special_tokens": True})
        tokens = data.get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            raise _NoTokenizer("/tokenize answered without a 'tokens' list of integers")
        return tokens

    def _detokenize(self, tokens: list[int]) -> str:
        data = self._post("/detokenize", {"model": self._model, "tokens": tokens})
        text = data.get("prompt")
        if not isinstance(text, str):
            raise _NoTokenizer("/detokenize answered without a 'prompt' string")
        return text

    def _chat_count(self, content: str) -> int:
        data = self._post("/tokenize", {"model": self._model, "messages": [{"role": "user", "content": content}], "add_generation_prompt": True})
        count = data.get("count")
        if type(count) is not int or count < 0:
            raise _NoTokenizer("/tokenize (messages) answered without a 'count'")
        return count

    def _calibrate(self, rng: random.Random) -> None:
        """Tokens per pseudo-word, and (chat) the tokens the chat template adds around a message."""
        if self._tokens_per_word is not None or not self.has_tokenizer:
            return
        try:
            sample = pseudo_words(rng, 400)
            self._tokens_per_word = max(0.2, len(self._tokenize(sample)) / 400)
            if self._chat:
                self._template_overhead = self._chat_count(sample) - len(self._tokenize(sample))
        except _NoTokenizer as exc:
            self.has_tokenizer = False
            self._tokens_per_word = None
            self.notes.append(
                f"the server has no usable /tokenize ({exc}): prompt lengths are estimated at "
                f"{_CHARS_PER_TOKEN_GUESS:g} characters per token; the per-request input lengths come from the server's usage report"
            )

    # -- prompts ------------------------------------------------------------------------------
    def build(self, length: int, rng: random.Random, prefix: str = "") -> Prompt:
        """A prompt of ``length`` tokens (chat: counted with the template) that starts with ``prefix``."""
        self._calibrate(rng)
        if not self.has_tokenizer:
            chars = max(int(length * _CHARS_PER_TOKEN_GUESS), len(prefix) + 1)
            text = prefix
            while len(text) < chars:
                text += pseudo_words(rng, max(1, (chars - len(text)) // 4)) + " "
            return Prompt(text[:chars].rstrip(), None, False)
        target = length - self._template_overhead
        if target <= 0:
            raise EndpointError(f"the chat template alone takes {self._template_overhead} tokens, more than --input-len {length}", source=self._root)
        try:
            text, count = self._exact(target, rng, prefix)
            if self._chat:
                count = self._chat_count(text)
        except _NoTokenizer as exc:  # the endpoint vanished mid-way: fall back for the rest
            self.has_tokenizer = False
            self.notes.append(f"/tokenize stopped working ({exc}): later prompt lengths are estimates")
            return self.build(length, rng, prefix)
        return Prompt(text, count, count == length)

    def exact_prefix(self, length: int, rng: random.Random) -> str:
        """Shared leading text of ``length`` tokens, ending in a newline so later text cannot merge into it."""
        self._calibrate(rng)
        if length <= 0:
            return ""
        if not self.has_tokenizer:
            return self.build(length, rng).text + "\n"
        text, _ = self._exact(max(1, length - 1), rng, "")
        return text + "\n"

    def _exact(self, target: int, rng: random.Random, prefix: str) -> tuple[str, int]:
        per_word = self._tokens_per_word or 1.0
        words = int((target / per_word) * 1.15) + 8
        text = prefix + pseudo_words(rng, words)
        tokens = self._tokenize(text)
        for _ in range(_MAX_GROWTH):  # the estimate was short: add words
            if len(tokens) >= target:
                break
            text += " " + pseudo_words(rng, int((target - len(tokens)) / per_word) + 8)
            tokens = self._tokenize(text)
        else:
            raise _NoTokenizer(f"/tokenize counts {len(tokens)} tokens after {_MAX_GROWTH} longer texts")
        filler = self._tokenize(" " + pseudo_words(rng, 16))
        best: tuple[str, int] | None = None
        candidate = tokens[:target]
        for _ in range(_MAX_ATTEMPTS):
            text = self._detokenize(candidate)
            tokens = self._tokenize(text)
            if best is None or abs(len(tokens) - target) < abs(best[1] - target):
                best = (text, len(tokens))
            if len(tokens) == target:
                return text, target
            if len(tokens) > target:
                candidate = tokens[:target]
            else:
                candidate = tokens + filler[: target - len(tokens)]
        assert best is not None
        return best


class _NoTokenizer(Exception):
    """The server cannot tokenize for us; prompt lengths become estimates."""

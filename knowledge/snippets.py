"""The few lines of a chunk worth showing under a citation.

A chunk is up to ~1,000 characters; a result list shows about 280 of them. The window shown is the
one holding most of the query's words, so the reader sees why the passage came back.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .text_tokens import tokenize

SNIPPET_CHARS = 280
_SENTENCE_END = re.compile(r"(?<=[.!?。！？:])\s+|\n+")


@lru_cache(maxsize=256)
def _windows(text: str, width: int) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Each window that starts a sentence, with its tokens. Kept per process: the searches of one
    answer (one per finding) return many of the same passages, and tokenizing a passage's windows
    (2 ms) is most of a snippet's cost; the query only decides which window wins."""
    starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
    return tuple((start, tuple(tokenize(text[start : start + width]))) for start in starts)


def make_snippet(text: str, query_tokens: set[str], width: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    best_start, best_score = 0, -1
    for start, tokens in _windows(text, width):
        score = sum(1 for tok in tokens if tok in query_tokens)
        if score > best_score:
            best_start, best_score = start, score
    window = " ".join(text[best_start:].split())
    cut = window[:width]
    if len(window) > width and " " in cut:
        cut = cut[: cut.rfind(" ")]
    prefix = "… " if best_start > 0 else ""
    return f"{prefix}{cut} …" if len(window) > len(cut) else f"{prefix}{cut}"

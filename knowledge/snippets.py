"""The few lines of a chunk worth showing under a citation.

A chunk is up to ~1,000 characters; a result list shows about 280 of them. The window shown is the
one holding most of the query's words, so the reader sees why the passage came back.
"""

from __future__ import annotations

import re

from .text_tokens import tokenize

SNIPPET_CHARS = 280
_SENTENCE_END = re.compile(r"(?<=[.!?。！？:])\s+|\n+")


def make_snippet(text: str, query_tokens: set[str], width: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
    best_start, best_score = 0, -1
    for start in starts:
        window = text[start : start + width]
        score = sum(1 for tok in tokenize(window) if tok in query_tokens)
        if score > best_score:
            best_start, best_score = start, score
    window = " ".join(text[best_start:].split())
    cut = window[:width]
    if len(window) > width and " " in cut:
        cut = cut[: cut.rfind(" ")]
    prefix = "… " if best_start > 0 else ""
    return f"{prefix}{cut} …" if len(window) > len(cut) else f"{prefix}{cut}"

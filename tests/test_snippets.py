"""Snippets are the same whether a passage's windows were tokenized for this query or kept from an
earlier one (the searches of one answer return many of the same passages)."""

from __future__ import annotations

from pathlib import Path

from vllm_advisor_knowledge.snippets import _SENTENCE_END, SNIPPET_CHARS, _windows, make_snippet
from vllm_advisor_knowledge.text_tokens import tokenize

REPO = Path(__file__).resolve().parents[1]


def _uncached(text: str, query_tokens: set[str], width: int = SNIPPET_CHARS) -> str:
    """make_snippet as it was before the window cache."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
    best_start, best_score = 0, -1
    for start in starts:
        score = sum(1 for tok in tokenize(text[start : start + width]) if tok in query_tokens)
        if score > best_score:
            best_start, best_score = start, score
    window = " ".join(text[best_start:].split())
    cut = window[:width]
    if len(window) > width and " " in cut:
        cut = cut[: cut.rfind(" ")]
    prefix = "… " if best_start > 0 else ""
    return f"{prefix}{cut} …" if len(window) > len(cut) else f"{prefix}{cut}"


def test_cached_windows_give_the_same_snippets():
    texts = [p.read_text(encoding="utf-8")[:1500] for p in sorted((REPO / "knowledge" / "cards").glob("*.md"))[::3]]
    queries = ["why is TTFT so high with long prompts", "为什么100并发和40并发差不多 KV cache", "max_num_batched_tokens chunked prefill", "zzz"]
    _windows.cache_clear()
    for text in texts:
        for q in queries:  # the first query tokenizes the windows, the others read them from the cache
            tokens = set(tokenize(q))
            assert make_snippet(text, tokens) == _uncached(text, tokens)
        tokens = set(tokenize(queries[0]))
        assert make_snippet(text, tokens, 120) == _uncached(text, tokens, 120)
    assert _windows.cache_info().hits > 0

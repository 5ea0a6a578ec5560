"""The user's words are embedded within a fixed budget of characters, whatever their length: the
embedding's cost grows with its input (a 120,000-character question took 16 s and 1.7 GB)."""

from __future__ import annotations

import numpy as np

from vllm_advisor.cases.library import load_library
from vllm_advisor.diagnosis import semantic


def test_sentences_stay_within_the_budget():
    text = ("why is TTFT slow " * 200 + ". ") * 100 + "a sentence without an end " * 5000
    parts = semantic.sentences(text)
    assert sum(map(len, parts)) <= semantic.EMBED_CHARS
    assert all(len(p) <= semantic.SENTENCE_CHARS for p in parts)
    assert parts  # the first sentences are kept, not dropped for being long


def test_embed_text_sends_at_most_the_budget(monkeypatch):
    seen: list[list[str]] = []

    def fake_embed(texts):
        seen.append(texts)
        return np.zeros((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(semantic, "embed", fake_embed)
    semantic.embed_text("x" * 120_000 + ". " + "y" * 50_000)
    (texts,) = seen
    assert len(texts[0]) == semantic.EMBED_CHARS
    assert sum(map(len, texts[1:])) <= semantic.EMBED_CHARS


def test_the_library_texts_are_under_the_caps():
    """The caps never cut a library report's words, so the shipped vectors stay what they were."""
    for case in load_library():
        words = "\n".join([case.case.question or "", case.case.workload.dataset or "", *(o.notes or "" for o in case.case.observations)])
        assert len(words) < semantic.EMBED_CHARS // 2, case.id
        assert max(map(len, semantic._SENTENCE_END.split(words))) <= semantic.SENTENCE_CHARS, case.id

"""Reading a saved bm25s index with numpy gives bm25s' own scores and order, so `ask` can search the
cards and the docs without importing bm25s (scipy: 0.15-0.25 s) and answer the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

bm25s = pytest.importorskip("bm25s")

from vllm_advisor.answer.sources import query_tokens  # noqa: E402
from vllm_advisor_knowledge import bm25_saved  # noqa: E402
from vllm_advisor_knowledge.bm25_index import build_bm25, load_bm25, save_bm25  # noqa: E402
from vllm_advisor_knowledge.bm25_saved import SavedBm25, cached_index, open_saved  # noqa: E402
from vllm_advisor_knowledge.cards import load_cards  # noqa: E402
from vllm_advisor_knowledge.chunk_cache import cached_chunks  # noqa: E402
from vllm_advisor_knowledge.text_tokens import tokenize  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def card_texts(tmp_path_factory) -> list[str]:
    chunks = cached_chunks(load_cards(), folder=tmp_path_factory.mktemp("chunks"))
    return [f"{c.title}\n{c.heading}\n{c.text}" for c in chunks]


@pytest.fixture(scope="module")
def queries(shared_dir) -> list[list[str]]:
    """The retrieval questions (English and Chinese, glossary-expanded as `ask` does), the cause
    symptom sentences and the dev cases' questions, as BM25 tokens; plus an empty query and one
    whose words are in no card."""
    texts = [q["q"] for q in yaml.safe_load((REPO / "tests" / "data" / "retrieval_questions.yaml").read_text(encoding="utf-8"))["questions"]]
    raw = yaml.safe_load((REPO / "knowledge" / "cause_symptoms.yaml").read_text(encoding="utf-8"))
    texts += [s for cause in raw.values() for lang in cause.values() for s in lang]
    for case in sorted((shared_dir / "cases" / "dev").glob("*.yaml")):
        texts.append(str((yaml.safe_load(case.read_text(encoding="utf-8")) or {}).get("question") or ""))
    tokens = [query_tokens(t) for t in texts] + [tokenize(t) for t in texts]
    return [t for t in tokens if t] + [[], ["zzzzunknownword"]]


def test_card_scores_are_bm25s_scores(tmp_path, card_texts, queries):
    reference = bm25s.BM25()
    reference.index([tokenize(t) for t in card_texts], show_progress=False)
    first = cached_index(card_texts, name="cards", folder=tmp_path)  # built with bm25s and saved
    again = cached_index(card_texts, name="cards", folder=tmp_path)  # read with numpy
    assert isinstance(again, SavedBm25) and not isinstance(first, SavedBm25)
    assert len(queries) > 150
    for tokens in queries:
        if tokens:
            assert np.array_equal(again.get_scores(tokens), reference.get_scores(tokens)), tokens
    # other texts (a card edited) give another cache entry, and the stale one is removed
    cached_index(card_texts[:-1] + [card_texts[-1] + " edited"], name="cards", folder=tmp_path)
    assert len(list(tmp_path.glob("cards-bm25-*"))) == 1


@pytest.mark.parametrize("k", [1, 8, 20, "all"])
def test_retrieve_gives_bm25s_documents_scores_and_tie_order(tmp_path, card_texts, queries, k):
    """The keyword half of a docs search: the same rows in the same order, ties included (k = all
    sorts every document, most of them tied at 0)."""
    index = build_bm25([f"c{i}" for i in range(len(card_texts))], card_texts, ["doc"] * len(card_texts), "gen-1")
    save_bm25(index, tmp_path / "bm25")
    loaded = load_bm25(tmp_path / "bm25", "gen-1")
    assert isinstance(loaded.retriever, SavedBm25)
    n = len(card_texts) if k == "all" else k
    for tokens in queries:
        ours = loaded.retriever.retrieve([tokens], k=n)
        theirs = index.retriever.retrieve([tokens], k=n, show_progress=False)
        assert np.array_equal(ours[0], theirs[0]) and np.array_equal(ours[1], theirs[1]), tokens
    text = "为什么 KV cache 满了 preemption"
    assert loaded.search(text, 5) == index.search(text, 5)


def test_what_only_bm25s_computes_is_left_to_bm25s(tmp_path, card_texts, monkeypatch):
    retriever = bm25s.BM25(method="bm25+")
    retriever.index([tokenize(t) for t in card_texts[:30]], show_progress=False)
    retriever.save(str(tmp_path / "plus"), show_progress=False)
    assert open_saved(tmp_path / "plus") is None  # needs its non-occurrence term
    save_bm25(build_bm25(["a", "b"], ["kv cache", "prefill"], ["doc", "doc"], "g"), tmp_path / "small")
    assert isinstance(open_saved(tmp_path / "small"), SavedBm25)
    monkeypatch.setattr(bm25_saved, "_jax_selects", lambda: True)  # bm25s would select with jax.lax.top_k
    assert open_saved(tmp_path / "small") is None
    assert not isinstance(load_bm25(tmp_path / "small", "g").retriever, SavedBm25)
    (tmp_path / "small" / bm25_saved.PARAMS).write_text(json.dumps({"backend": "numba", "num_docs": 2}))
    monkeypatch.setattr(bm25_saved, "_jax_selects", lambda: False)
    assert open_saved(tmp_path / "small") is None

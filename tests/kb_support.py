"""Shared by the knowledge-base tests: one embedding model per session, one full index per session.

The full index (the 33 cards + vLLM 0.34.0's 248 docs pages from ../shared, ~3,700 chunks) takes
about two minutes to embed on two CPU cores, so it is built once and reused by every test module
that needs it (a session fixture defined in two modules would build it twice).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from vllm_advisor_knowledge.embeddings import Embedder, SentenceTransformerEmbedder
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO.parent / "shared" / "corpus" / "vllm-docs"
QUESTIONS = REPO / "tests" / "data" / "retrieval_questions.yaml"

class MemoEmbedder(SentenceTransformerEmbedder):
    """The real model, with each distinct text encoded once per session.

    Every small test index starts by indexing the 33 packaged cards (178 chunks); without the memo
    each test would re-encode them. ``texts_encoded`` still counts only texts that reach the model,
    so the tests that prove incrementality measure exactly what they did before.
    """

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[str, "object"] = {}

    def encode(self, texts, *, batch_size=64):
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for text, vec in zip(missing, super().encode(missing, batch_size=batch_size)):
                self._memo[text] = vec
        if not texts:
            return super().encode([], batch_size=batch_size)
        return np.stack([self._memo[t] for t in texts])


_embedder: MemoEmbedder | None = None
_built: dict[str, object] = {}


def shared_embedder() -> Embedder:
    global _embedder
    if _embedder is None:
        _embedder = MemoEmbedder()
    return _embedder


def full_index(base_dir: Path) -> tuple[Path, KnowledgeBase, list]:
    """(kb_dir, KnowledgeBase, [cards report, docs report]) built once per session under ``base_dir``."""
    if "kb" not in _built:
        kb_dir = base_dir / "full-kb"
        kb = KnowledgeBase(kb_dir, embedder=shared_embedder())
        reports = kb.build()
        reports.append(kb.ingest_markdown_folder(DOCS))
        _built.update(kb=kb, dir=kb_dir, reports=reports)
    return _built["dir"], _built["kb"], _built["reports"]  # type: ignore[return-value]


def small_docs(target: Path, pages: tuple[str, ...] = ("configuration/optimization.md", "usage/metrics.md", "features/sleep_mode.md")) -> Path:
    """A few real pages copied into a temp folder that a test may then edit."""
    for page in pages:
        (target / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DOCS / page, target / page)
    return target

"""Shared by the knowledge-base tests: one embedding model per session, two real indexes per session.

* The subset index (the 34 cards + the vLLM 0.34.0 docs pages the retrieval questions expect, plus
  every 12th other page as distractors: ~40 pages) runs in the default test run.
* The full index (the cards + all 248 pages, ~3,700 chunks, a minute or more of embedding on two
  CPU cores) runs in the slow run (``-m slow``, ``make test-slow``, CI): tests take it through the
  ``slow``-marked parameter of their ``index`` fixture.

Each is built once and reused by every test module that needs it (a session fixture defined in two
modules would build it twice).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from vllm_advisor_knowledge.embeddings import Embedder, SentenceTransformerEmbedder
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO.parent / "shared" / "corpus" / "vllm-docs"
QUESTIONS = REPO / "tests" / "data" / "retrieval_questions.yaml"

class MemoEmbedder(SentenceTransformerEmbedder):
    """The real model, with each distinct text encoded once per session.

    Every small test index starts by indexing the 34 packaged cards (183 chunks); without the memo
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


def subset_pages() -> tuple[str, ...]:
    """The pages the retrieval questions expect, plus every 12th other page (sorted) as distractors."""
    expected = set(re.findall(r"[A-Za-z0-9_./-]+\.md", QUESTIONS.read_text(encoding="utf-8")))
    every = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.name != "SOURCE.md")
    missing = expected - set(every)
    assert not missing, f"the retrieval questions expect pages that are not in {DOCS}: {sorted(missing)}"
    return tuple(sorted(expected | set(every[::12])))


def subset_index(base_dir: Path) -> tuple[Path, KnowledgeBase, list]:
    """(kb_dir, KnowledgeBase, [cards report, docs report]) over the subset, built once per session."""
    if "subset" not in _built:
        folder = small_docs(base_dir / "subset-docs", subset_pages())
        shutil.copy(DOCS / "SOURCE.md", folder / "SOURCE.md")  # the version, as in the full corpus
        kb_dir = base_dir / "subset-kb"
        kb = KnowledgeBase(kb_dir, embedder=shared_embedder())
        reports = kb.build()
        reports.append(kb.ingest_markdown_folder(folder))
        _built["subset"] = (kb_dir, kb, reports, folder)
    kb_dir, kb, reports, _ = _built["subset"]  # type: ignore[misc]
    return kb_dir, kb, reports


def subset_folder() -> Path:
    return _built["subset"][3]  # type: ignore[index]


def index_for(variant: str, base_dir: Path) -> tuple[Path, KnowledgeBase, list]:
    return full_index(base_dir) if variant == "full" else subset_index(base_dir)


def small_docs(target: Path, pages: tuple[str, ...] = ("configuration/optimization.md", "usage/metrics.md", "features/sleep_mode.md")) -> Path:
    """A few real pages copied into a temp folder that a test may then edit."""
    for page in pages:
        (target / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DOCS / page, target / page)
    return target

"""Chunks of the packaged cards, kept on disk so `ask` need not import the text splitters.

Every `ask`, `memo` and chat answer ranks the tuning cards' sections (BM25 over ~180 chunks). Cutting
the cards into chunks takes langchain-text-splitters, whose import (langchain-core, pydantic v1
shims) costs 0.1-0.5 s per process, more than the rest of the card ranking. The chunks only change
when a card or the chunker changes, so they are cached as JSON under :func:`.paths.cache_dir`, keyed
by a hash of both: any edit to a card's text or metadata, or to ``chunking.py``, gives a new key and
a fresh cut. A cache that cannot be read or written is ignored (the chunks are then cut in memory).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from .documents import Chunk, SourceDocument
from .paths import cache_dir

CACHE_SCHEMA = 1


def _key(docs: list[SourceDocument]) -> str:
    digest = hashlib.sha256(f"schema {CACHE_SCHEMA}\n".encode())
    digest.update(Path(__file__).with_name("chunking.py").read_bytes())  # the chunker's own code
    for doc in docs:
        record = [doc.doc_id, doc.kind, doc.title, doc.url, doc.version, doc.text, doc.metadata]
        digest.update(json.dumps(record, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()[:20]


def cached_chunks(docs: list[SourceDocument], *, name: str = "cards", folder: Path | None = None) -> list[Chunk]:
    """``chunk_document`` of every document, in order, from the cache when it is current."""
    key = _key(docs)
    path = (folder or cache_dir()) / f"{name}-chunks-{key}.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return [Chunk(**row) for row in rows]
    except (OSError, ValueError, TypeError):
        pass
    from .chunking import chunk_document

    chunks = [chunk for doc in docs for chunk in chunk_document(doc)]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{name}-chunks-*.json"):  # earlier cards or chunker: never read again
            old.unlink(missing_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps([asdict(c) for c in chunks], ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: cut again next time
    return chunks

"""The keyword half of hybrid retrieval: a bm25s index kept beside the vector store.

Chroma holds the chunks; BM25 needs its own inverted index. It is saved in the index folder with the
store's *generation* (a token the store changes on every write), so a search loads it in
milliseconds when it is current (read with numpy alone, :mod:`.bm25_saved`) and rebuilds it from the
store's text when it is not (another process ingested, or a team's Chroma server changed).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .bm25_saved import open_saved
from .text_tokens import tokenize

IDS_FILE = "chunks.json"


@dataclass
class Bm25Index:
    """A bm25s retriever plus the chunk id and kind of every row."""

    retriever: object
    chunk_ids: list[str]
    kinds: list[str]
    generation: str

    def search(self, text: str, k: int, *, kinds: set[str] | None = None) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) best first; chunks sharing no token with the query are left out."""
        tokens = tokenize(text)
        if not tokens or not self.chunk_ids:
            return []
        n = len(self.chunk_ids) if kinds else min(k, len(self.chunk_ids))
        rows, scores = self.retriever.retrieve([tokens], k=n, show_progress=False)  # type: ignore[attr-defined]
        hits: list[tuple[str, float]] = []
        for row, score in zip(rows[0], scores[0]):
            if score <= 0:
                break
            if kinds and self.kinds[int(row)] not in kinds:
                continue
            hits.append((self.chunk_ids[int(row)], float(score)))
            if len(hits) >= k:
                break
        return hits


def build_bm25(chunk_ids: list[str], texts: list[str], kinds: list[str], generation: str) -> Bm25Index:
    import bm25s

    retriever = bm25s.BM25()
    if texts:
        retriever.index([tokenize(t) for t in texts], show_progress=False)
    return Bm25Index(retriever, list(chunk_ids), list(kinds), generation)


def save_bm25(index: Bm25Index, folder: Path) -> None:
    """Write to a temp folder and swap it in, so a reader never sees half an index."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if index.chunk_ids:
        index.retriever.save(str(tmp), show_progress=False)  # type: ignore[attr-defined]
    (tmp / IDS_FILE).write_text(
        json.dumps({"generation": index.generation, "chunk_ids": index.chunk_ids, "kinds": index.kinds}), encoding="utf-8"
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def load_bm25(folder: Path, generation: str) -> Bm25Index | None:
    """The saved index if it matches ``generation``; None when missing, stale or unreadable."""
    ids_path = folder / IDS_FILE
    try:
        meta = json.loads(ids_path.read_text(encoding="utf-8"))
        if meta.get("generation") != generation:
            return None
        if not meta["chunk_ids"]:
            return Bm25Index(None, [], [], generation)  # search() returns [] before using it
        retriever = open_saved(folder)  # numpy alone: no bm25s (scipy) import on a search
        if retriever is None:
            import bm25s

            retriever = bm25s.BM25.load(str(folder), show_progress=False)
        return Bm25Index(retriever, list(meta["chunk_ids"]), list(meta["kinds"]), generation)
    except Exception:  # missing, half-written or garbled files: the caller rebuilds from the store
        return None

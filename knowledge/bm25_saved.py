"""Searching a saved bm25s index with numpy alone, so `ask` never imports bm25s (and scipy).

WHY: ``import bm25s`` imports scipy.sparse and tqdm: 0.15-0.25 s of every `ask`, which has a budget
of one second. What bm25s saves is plain arrays, the BM25 score of every (token, document) pair as
a CSC matrix, plus a JSON vocabulary, and scoring a query is adding up the columns of its tokens.
:class:`SavedBm25` reads those files and does what ``BM25.get_scores`` and ``BM25.retrieve`` do for
one query with bm25s' numpy backend (``_compute_relevance_from_scores``, ``selection._topk_numpy``):
the same numpy operations in the same order, so the scores and the order of tied documents are
bm25s' own (``tests/test_bm25_saved.py`` compares them on the retrieval questions and the cards).

bm25s still builds and saves every index. Where this reader would not be bm25s' twin it declines
(:func:`open_saved` returns None and the caller loads bm25s): an index saved with another scoring
backend or a BM25 variant with a non-occurrence term, or top-k selection with JAX installed (bm25s
then selects with ``jax.lax.top_k``).

:func:`cached_index` keeps a BM25 index of a small fixed corpus (the packaged cards' sections)
under the cache folder, so a process neither tokenizes the corpus nor imports bm25s to search it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

#: bm25s' file names (``BM25.save``)
DATA, INDICES, INDPTR, VOCAB, PARAMS = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json", "params.index.json"
#: BM25 variants whose saved index needs its non-occurrence array (bm25s: methods_requiring_nonoccurrence)
_NONOCCURRENCE_METHODS = ("bm25l", "bm25+")
CACHE_SCHEMA = 1


class SavedBm25:
    """One saved bm25s index, read with numpy: ``get_scores(tokens)`` and ``retrieve([tokens], k)``."""

    def __init__(self, folder: Path) -> None:
        params = json.loads((folder / PARAMS).read_text(encoding="utf-8"))
        if params.get("backend", "numpy") != "numpy" or params.get("method") in _NONOCCURRENCE_METHODS:
            raise ValueError(f"{folder}: saved with backend {params.get('backend')!r}, method {params.get('method')!r}")
        self.dtype = np.dtype(params.get("dtype", "float32"))
        self.int_dtype = np.dtype(params.get("int_dtype", "int32"))
        self.num_docs = int(params["num_docs"])
        self.vocab: dict[str, int] = json.loads((folder / VOCAB).read_text(encoding="utf-8"))
        self.data = np.load(folder / DATA, mmap_mode="r")
        self.indices = np.load(folder / INDICES, mmap_mode="r")
        self.indptr = np.load(folder / INDPTR, mmap_mode="r")

    def get_scores(self, tokens: list[str]) -> np.ndarray:
        """``BM25.get_scores``: every document's score for the query's tokens (unknown ones ignored)."""
        ids = np.asarray([self.vocab[t] for t in tokens if t in self.vocab], dtype=self.int_dtype)
        if int(ids.max(initial=0)) >= len(self.indptr) - 1:  # bm25s' check (its empty token has no column)
            raise ValueError("a query token is not in the index's score matrix")
        starts = self.indptr[ids]
        ends = self.indptr[ids + 1]
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for i in range(len(ids)):
            start, end = starts[i], ends[i]
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores

    def retrieve(self, query_tokens: list[list[str]], k: int = 10, show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``BM25.retrieve(query_tokens, k=k)`` (sorted, numpy selection): (documents, scores), one row per query."""
        del show_progress
        if k > self.num_docs:
            raise ValueError(f"k of {k} is larger than the number of available scores, which is {self.num_docs}")
        rows = [self._top_k(tokens, k) for tokens in query_tokens]
        return np.array([r[1] for r in rows]), np.array([r[0] for r in rows])

    def _top_k(self, tokens: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        scores = self.get_scores(tokens) if len(tokens) else np.zeros(self.num_docs, dtype=self.dtype)
        partitioned = np.argpartition(scores, -k).take(indices=range(-k, 0))
        partitioned_scores = np.take(scores, partitioned)
        order = np.flip(np.argsort(partitioned_scores))
        return partitioned_scores[order], partitioned[order]


def _jax_selects() -> bool:
    """bm25s selects the top k with ``jax.lax.top_k`` when JAX imports (checked without importing it)."""
    return importlib.util.find_spec("jax") is not None


def open_saved(folder: Path, *, for_retrieve: bool = True) -> SavedBm25 | None:
    """The saved index in ``folder`` read with numpy, or None (missing, unreadable, or a case where
    only bm25s itself gives bm25s' results)."""
    if for_retrieve and _jax_selects():
        return None
    try:
        return SavedBm25(folder)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _bm25s_version() -> str:
    """bm25s' version without importing it (its version file's text)."""
    spec = importlib.util.find_spec("bm25s")
    if spec is None or not spec.origin:
        return "none"
    try:
        return Path(spec.origin).with_name("version.py").read_text(encoding="utf-8")
    except OSError:
        return spec.origin


def _key(texts: list[str]) -> str:
    """What the index depends on: the texts, the tokenizer's code, whether it stems, and bm25s."""
    from . import text_tokens

    digest = hashlib.sha256(f"schema {CACHE_SCHEMA}\n".encode())
    digest.update(Path(text_tokens.__file__).read_bytes())
    digest.update(f"stemmer {importlib.util.find_spec('Stemmer') is not None}\n".encode())
    digest.update(_bm25s_version().encode())
    for text in texts:
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text.encode("utf-8"))
    return digest.hexdigest()[:20]


def build_bm25s(texts: list[str]) -> Any:
    """A bm25s index over ``texts`` (tokenized by :func:`.text_tokens.tokenize`)."""
    import bm25s

    from .text_tokens import tokenize

    retriever = bm25s.BM25()
    retriever.index([tokenize(t) for t in texts], show_progress=False)
    return retriever


def cached_index(texts: list[str], *, name: str, folder: Path | None = None) -> Any:
    """A BM25 index over ``texts`` with ``get_scores(tokens)``: the one saved under the cache folder
    for exactly these texts (read by :class:`SavedBm25`), else built with bm25s and saved for the
    next process. A cache that cannot be written costs only the build."""
    from .paths import cache_dir

    root = folder or cache_dir()
    path = root / f"{name}-bm25-{_key(texts)}"
    saved = open_saved(path, for_retrieve=False)
    if saved is not None and saved.num_docs == len(texts):
        return saved
    retriever = build_bm25s(texts)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for old in root.glob(f"{name}-bm25-*"):  # earlier texts, tokenizer or bm25s: never read again
            shutil.rmtree(old, ignore_errors=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        retriever.save(str(tmp), show_progress=False)
        tmp.rename(path)
    except OSError:
        pass  # a read-only home: build again next time
    return retriever

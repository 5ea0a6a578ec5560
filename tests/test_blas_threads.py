"""Query-time products on one BLAS thread give the same numbers as on numpy's default threads, so
limiting them (16 ms -> 0.4 ms per search on a busy 2-core machine) changes no ranking."""

from __future__ import annotations

import contextlib

import numpy as np

from vllm_advisor.diagnosis.semantic import packaged_index
from vllm_advisor_knowledge import blas_threads
from vllm_advisor_knowledge.search_snapshot import Snapshot


def test_one_thread_gives_the_default_threads_numbers_on_real_vectors():
    index = packaged_index()
    stored = np.ascontiguousarray(np.vstack([index.vectors, index.symptom_vectors]), dtype=np.float32)  # the library's reports and symptoms
    queries = stored[::7]
    default = [stored @ q for q in queries]
    with blas_threads.one_blas_thread():
        limited = [stored @ q for q in queries]
        limited_block = stored @ queries.T
    # one query at a time: the same numbers to float32 rounding and the same order (bit for bit on 859
    # reports; with 902 OpenBLAS split a product differently, 1e-7 apart)
    assert all(np.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(default, limited))
    assert all(np.array_equal(np.argsort(-a, kind="stable")[:20], np.argsort(-b, kind="stable")[:20]) for a, b in zip(default, limited))
    # a block of queries may be split differently over threads (AMD EPYC's OpenBLAS: 4e-7 apart):
    # the same numbers to float32 rounding, and the same nearest 20 for every query (a tie deep in the
    # tail, 0.1600954 against 0.1600953, may swap)
    default_block = stored @ queries.T
    assert np.allclose(default_block, limited_block, rtol=0, atol=1e-6)
    assert np.array_equal(np.argsort(-default_block, axis=0, kind="stable")[:20], np.argsort(-limited_block, axis=0, kind="stable")[:20])


def test_snapshot_search_is_the_same_with_and_without_the_limit(monkeypatch):
    index = packaged_index()
    vectors = np.ascontiguousarray(index.vectors, dtype=np.float32)
    snapshot = Snapshot("g", "m", list(index.ids), ["doc" if i % 3 else "issue" for i in range(len(index.ids))], [""] * len(index.ids), [{}] * len(index.ids), vectors)
    limited = [snapshot.dense(q, 40, {"doc"}) for q in vectors[::5]]
    monkeypatch.setattr(blas_threads, "one_blas_thread", contextlib.nullcontext)
    assert [snapshot.dense(q, 40, {"doc"}) for q in vectors[::5]] == limited
    assert blas_threads.blas_limit() is not None  # threadpoolctl is installed with the package

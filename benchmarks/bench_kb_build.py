"""Benchmark: building the knowledge index over the packaged cards and the shared vLLM docs.

Builds a fresh index in a temp dir (cards, then ../shared/corpus/vllm-docs: 248 pages of vLLM
0.34.0), N times, and prints one JSON line: median seconds and chunks/s of the docs ingest (chunking,
embedding with all-MiniLM-L6-v2 on the CPU, writing to Chroma, the BM25 index), the median time
of re-ingesting the unchanged docs (hash comparison only, no embedding), and the time of writing
and verifying the model's ONNX copy for queries (part of the cards build, the first ingest).

Usage: .venv/bin/python benchmarks/bench_kb_build.py [--repeats 1] [--docs PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from vllm_advisor_knowledge.embeddings import DEFAULT_MODEL
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase
from vllm_advisor_knowledge.onnx_embedder import OnnxManifest, manifest_path

DOCS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "vllm-docs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own, one per core)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    load_before = open("/proc/loadavg").read().split()[:3]
    cpu_s: list[float] = []

    build_s, chunks, cards_s, reingest_s, model_load_s, export_s = [], 0, [], [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            kb = KnowledgeBase(Path(tmp) / "kb")
            t0 = time.perf_counter()
            kb.embedder().encode(["warm-up"])  # model load measured apart from throughput
            model_load_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            kb.build()
            cards_s.append(time.perf_counter() - t0)
            export_s.append(OnnxManifest.read(manifest_path(kb.models_dir, DEFAULT_MODEL)).export_seconds)
            cpu0 = time.process_time()
            report = kb.ingest_markdown_folder(args.docs)
            cpu_s.append(time.process_time() - cpu0)
            build_s.append(report.seconds)
            chunks = report.chunks
            again = kb.ingest_markdown_folder(args.docs)
            assert again.embedded == 0
            reingest_s.append(again.seconds)
    median = statistics.median(build_s)
    print(json.dumps({
        "bench": "kb_build",
        "docs_pages": report.documents,
        "docs_chunks": chunks,
        "docs_ingest_median_s": round(median, 2),
        "docs_chunks_per_s": round(chunks / median, 1),
        "docs_ingest_cpu_s": round(statistics.median(cpu_s), 1),  # all threads: what 2 idle cores share
        "precision": kb.embedder().precision,
        "threads": args.threads or "torch default",
        "load_average_before_after": [load_before, open("/proc/loadavg").read().split()[:3]],
        "cards_build_median_s": round(statistics.median(cards_s), 2),
        "model_load_s": round(statistics.median(model_load_s), 2),
        "onnx_export_s": round(statistics.median(export_s), 2),
        "reingest_unchanged_median_s": round(statistics.median(reingest_s), 2),
        "repeats": args.repeats,
    }))


if __name__ == "__main__":
    main()

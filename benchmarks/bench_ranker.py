"""Benchmark: what the learned diagnosis ranking adds to `ask`.

- the fitted weights + the case index (library vectors, labels, symptom vectors) loaded from the
  package, in-process, cold (caches cleared), median of N;
- the whole case library parsed from its YAML files (only fitting needs this; `ask` reads the index);
- the multilingual embedder in a fresh process: start, load (memory-mapped arrays + C++ tokenizer),
  embed one question; and one warm query embedding in-process;
- the semantic signals + the word model + ranking for one query (in-process, warm).

Usage: .venv/bin/python benchmarks/bench_ranker.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

QUESTION = "为什么40并发时每个请求的生成速度减半了？单请求 40 tok/s，40 并发时每个请求 22 tok/s，100 并发 20 tok/s"


def median_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from vllm_advisor.cases import load_library
    from vllm_advisor.diagnosis import ranker, semantic
    from vllm_advisor.diagnosis.board import Board

    def load_artifacts():
        ranker.packaged_model.cache_clear()
        semantic.packaged_index.cache_clear()
        ranker.packaged_model()
        semantic.packaged_index()

    artifacts = median_of(load_artifacts, args.repeats)
    library = median_of(load_library, args.repeats)
    n_cases = len(load_library())
    semantic.embed([QUESTION])
    embed_warm = median_of(lambda: semantic.embed([QUESTION]), args.repeats)
    model, index = ranker.packaged_model(), semantic.packaged_index()
    vector = semantic.embed([QUESTION])[0]
    rank_warm = median_of(lambda: ranker.rank(Board(), semantic.signals(vector, index), model, QUESTION), args.repeats)
    code = "from vllm_advisor_knowledge.multilingual_embedder import shared_embedder; shared_embedder().encode(['x'])"
    cold = median_of(lambda: subprocess.run([sys.executable, "-c", code], check=True), args.repeats)
    bare = median_of(lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True), args.repeats)
    print(f"weights + case index load (in-process, cold): {artifacts * 1000:.1f} ms")
    print(f"case library YAML parse ({n_cases} files):    {library * 1000:.1f} ms (fitting only)")
    print(f"embed one question (warm):                   {embed_warm * 1000:.1f} ms")
    print(f"signals + word model + ranking (warm):      {rank_warm * 1000:.2f} ms")
    print(f"embedder in a fresh process (start+load+1):  {cold * 1000:.0f} ms (python + numpy alone: {bare * 1000:.0f} ms)")


if __name__ == "__main__":
    main()

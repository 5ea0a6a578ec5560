"""Benchmark: knowledge-base queries: warm latency, cold start, and recall@5 per language.

Uses the index in --kb-dir, or builds one in a temp dir over the cards and ../shared's vLLM docs.
Prints JSON lines:
  * kb_query_warm: p50 / p90 seconds of ``KnowledgeBase.search`` (k=5, hybrid) over the retrieval
    test set's questions, after one warm-up query, in one process; ``query_backend`` says whether
    queries went through the default model's ONNX copy ("onnx") or torch;
  * kb_cold_start: median seconds from starting ``vllm-advisor kb search ... --json`` as a new process
    to its exit with the answer printed (imports, model load, index open, query), N runs, after one
    untimed run (files in the OS cache, as in everyday use);
  * kb_ask_with_index: wall and CPU medians of ``vllm-advisor ask --profile examples/seed-qwen32b-h800-long-input.yaml
    --json --no-log`` in new processes with this index as the user's (``$VLLM_ADVISOR_HOME/kb``), so
    its sources include docs passages found by searching it, with the load average (issue 17's target
    for ``ask``: < 1 s warm);
  * kb_recall: recall@5 per language on tests/data/retrieval_questions.yaml, hybrid, and for
    comparison dense only, BM25 only, and without the Chinese glossary.

Usage: .venv/bin/python benchmarks/bench_kb_query.py [--kb-dir DIR] [--cold-runs 3] [--ask-runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vllm_advisor_knowledge.evaluation import load_questions, recall_at_k
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_process import Command, run_interleaved  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO.parent / "shared" / "corpus" / "vllm-docs"
QUESTIONS = REPO / "tests" / "data" / "retrieval_questions.yaml"
ASK_PROFILE = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure_ask(exe: Path, kb_dir: Path, runs: int) -> None:
    """Wall and CPU medians of fresh `ask` processes answering with this index, the load beside them
    (benchmarks/fresh_process.py); the answer must cite a docs or issue passage of the index."""
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "kb").symlink_to(kb_dir.resolve(), target_is_directory=True)
        env = {"VLLM_ADVISOR_HOME": home}
        command = [str(exe), "ask", "--profile", str(ASK_PROFILE), "--json", "--no-log"]
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env})
        assert proc.returncode == 0, proc.stderr
        sources = json.loads(proc.stdout)["sources"]
        assert any(str(s.get("doc_id", "")).startswith(("doc:", "issue:")) for s in sources), "no index hit among the sources"
        timed = run_interleaved({"ask": Command(command, env=env)}, runs)
    print(json.dumps({"bench": "kb_ask_with_index", "runs": runs, "median_s": timed["ask"]["wall_median_s"],
                      "cpu_median_s": timed["ask"]["cpu_median_s"], "loadavg_before": timed["loadavg_before"], "loadavg_after": timed["loadavg_after"]}))


def measure(kb_dir: Path, cold_runs: int, ask_runs: int) -> None:
    questions = load_questions(QUESTIONS)
    kb = KnowledgeBase(kb_dir)
    kb.search("warm-up query", k=5)
    backend = kb.query_embedder().backend
    latencies = []
    for q in questions:
        t0 = time.perf_counter()
        kb.search(q.text, k=5)
        latencies.append(time.perf_counter() - t0)
    print(json.dumps({
        "bench": "kb_query_warm", "queries": len(latencies), "query_backend": backend,
        "p50_s": round(statistics.median(latencies), 4), "p90_s": round(percentile(latencies, 0.9), 4),
    }))

    exe = Path(sys.executable).with_name("vllm-advisor")
    cold = []
    subprocess.run([str(exe), "kb", "search", "warm-up", "--kb-dir", str(kb_dir), "--json"], capture_output=True, check=True)
    for i in range(cold_runs):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(exe), "kb", "search", questions[i % len(questions)].text, "--kb-dir", str(kb_dir), "--json"],
            capture_output=True, text=True,
        )
        cold.append(time.perf_counter() - t0)
        assert proc.returncode == 0 and json.loads(proc.stdout)["results"], proc.stderr
    print(json.dumps({"bench": "kb_cold_start", "runs": cold_runs, "median_s": round(statistics.median(cold), 2)}))
    if ask_runs:
        measure_ask(exe, kb_dir, ask_runs)

    variants = {
        "hybrid": {},
        "dense_only": {"retrievers": ("dense",)},
        "bm25_only": {"retrievers": ("bm25",)},
        "no_glossary": {"use_glossary": False},
    }
    for name, options in variants.items():
        report = recall_at_k(kb, questions, k=5, **options)
        print(json.dumps({
            "bench": "kb_recall", "variant": name, "k": 5, "questions": report.counts,
            "recall": {lang: round(v, 3) for lang, v in report.per_language.items()},
            "misses": [m["id"] for m in report.misses],
        }, ensure_ascii=False))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kb-dir", type=Path)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--ask-runs", type=int, default=7, help="0 skips the ask measurement")
    args = parser.parse_args()
    if args.kb_dir:
        measure(args.kb_dir, args.cold_runs, args.ask_runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        kb_dir = Path(tmp) / "kb"
        kb = KnowledgeBase(kb_dir)
        kb.build()
        kb.ingest_markdown_folder(DOCS)
        measure(kb_dir, args.cold_runs, args.ask_runs)


if __name__ == "__main__":
    main()

"""Log lines and benchmark blocks pasted into the question are read as the files they came from.

Real reports paste what vLLM and its benchmark printed instead of attaching the file; a reviewer's
question with 256 running, 180 pending and the KV cache 45% full was answered "the KV cache holds too
few requests", and a pasted result block with a 45 s TTFT for 2K-token prompts "the release
regressed". The pasted lines here come from the project's real H100 run (planted-14b-seqs6: vLLM
0.26.0 run with --max-num-seqs 6) and from the client log of a real vLLM CPU run (shared fixtures)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.inputs import detect_language, gather
from vllm_advisor.probe.pasted import pasted_log, pasted_runs
from vllm_advisor.session import Session

REPO = Path(__file__).resolve().parents[1]
SEQS6 = REPO / "benchmarks" / "gpu" / "runs" / "2026-12-06-h100-planted-b" / "planted-14b-seqs6" / "server.log.gz"
CPU_CLIENT = REPO.parent / "shared" / "fixtures" / "vllm-cpu-real" / "logs" / "client_A_bench_in6000_c8_seed106_during.log"


def _real_lines(marker: str, count: int) -> list[str]:
    with gzip.open(SEQS6, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh if marker in line][:count]


def _block(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(k for k, line in enumerate(lines) if "Serving Benchmark Result" in line)
    end = next(k for k in range(start + 1, len(lines)) if set(lines[k].strip()) == {"="})
    return "\n".join(lines[start : end + 1])


def test_stats_lines_pasted_into_the_question_are_the_server_log():
    lines = _real_lines("non-default args", 1) + _real_lines("Waiting: 4", 2)
    question = "Why do requests wait? Qwen2.5-14B on one H100, vLLM 0.26.0.\n" + "\n".join(lines)
    inputs = gather(question=question, predict=False)
    (log,) = inputs.server_logs
    assert [s.running for s in log.stats] == [6, 6] and all(s.waiting for s in log.stats)
    assert inputs.engine_args.max_num_seqs == 6  # from the pasted "non-default args" line


def test_log_lines_that_lost_their_line_breaks_are_still_one_line_each():
    lines = _real_lines("Waiting: 4", 2)
    log = pasted_log("the log says " + " ".join(lines) + " what now?")
    assert log is not None and [s.waiting for s in log.stats] == [int(s.split("Waiting: ")[1].split()[0]) for s in lines]


def test_prose_that_names_a_log_line_is_not_a_log():
    assert pasted_log("my GPU KV cache size: too small? and the # GPU blocks are few") is None


def test_the_default_batch_cap_pinned_with_the_cache_half_empty_names_max_num_seqs():
    """256 running (vLLM 0.6.3's default on an A100) with requests pending and the KV cache under
    half full: the cap, as the release defaults it, kept them out; the answer opens with it."""
    question = (
        "Why is throughput low? Llama-3.1-8B on one A100 80GB, vLLM 0.6.3. "
        "INFO 10-12 10:00:01 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1200.5 tokens/s, "
        "Running: 256 reqs, Swapped: 0 reqs, Pending: 180 reqs, GPU KV cache usage: 45.2%, CPU KV cache usage: 0.0%."
    )
    answer = Session().answer(question)
    first = answer.diagnosis.findings[0]
    assert first.cause == "max_num_seqs_limit" and first.evidence[0].origin == "question"
    assert answer.answer.markdown.split("\n\n")[1].startswith("The server log shows requests waiting while max_num_seqs=256")
    # how far it can rise, from the same line: 256 requests held 45.2%, so ~448 fill 80% (a multiple of 16)
    assert [r.flag for r in first.recommendations if r.flag and r.flag.startswith("--max-num-seqs")] == ["--max-num-seqs 448"]


def test_a_pasted_result_block_is_a_measured_run():
    runs = pasted_runs("Why is TTFT so spread?\n" + _block(CPU_CLIENT) + "\nthanks")
    (run,) = runs
    assert run.offered_concurrency == 8 and run.completed == 32 and run.ttft_ms.median == pytest.approx(580.83)


def test_a_ttft_far_above_one_prompts_prefill_is_waiting_and_the_chinese_question_stays_chinese():
    """500 prompts of 2,048 tokens at once to a 7B on an L40S: a 45 s TTFT against a prefill of about
    0.1 s is queue time; the question is Chinese though most of its lines are the pasted block."""
    block = "\n".join([
        "============ Serving Benchmark Result ============",
        "Successful requests:                     500",
        "Benchmark duration (s):                  210.33",
        "Total input tokens:                      1024000",
        "Total generated tokens:                  64000",
        "Request throughput (req/s):              2.38",
        "Output token throughput (tok/s):         304.28",
        "---------------Time to First Token----------------",
        "Mean TTFT (ms):                          45210.11",
        "Median TTFT (ms):                        44980.50",
        "-----Time per Output Token (excl. 1st token)------",
        "Mean TPOT (ms):                          62.10",
        "Median TPOT (ms):                        61.50",
        "==================================================",
    ])
    question = f"首 token 延迟为什么这么高？单卡 L40S 跑 Qwen2.5-7B-Instruct，vLLM 0.8.5，压测结果：\n{block} 请帮忙看看"
    assert detect_language(question) == "zh"
    answer = Session().answer(question)
    waiting = next(f for f in answer.diagnosis.findings[:2] if f.cause == "queueing")  # the ranker's order beside it
    assert any(e.kind == "model" and e.value == pytest.approx(0.1, abs=0.1) for e in waiting.evidence)
    assert answer.answer.markdown.split("\n\n")[1].startswith("实测 TTFT 45 秒 是同样长度的单个提示词单独预填充所需时间")


def test_a_pasted_block_cut_short_is_set_aside_with_a_note():
    question = "Why slow? Llama-3.1-8B on one H100.\n============ Serving Benchmark Result ============\nSuccessful requests: 10\nMean TTFT (ms): lots"
    inputs = gather(question=question, predict=False)
    assert not inputs.measured and [n.code for n in inputs.skipped] == ["pasted_skipped"]

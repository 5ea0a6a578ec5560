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
from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.pasted import pasted_log, pasted_metrics, pasted_runs
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
    assert answer.answer.markdown.split("\n\n")[1].startswith("实测首 token 时间 45 秒 是同样长度的单个提示词单独预填充所需时间")


def test_a_pasted_block_cut_short_is_set_aside_with_a_note():
    question = "Why slow? Llama-3.1-8B on one H100.\n============ Serving Benchmark Result ============\nSuccessful requests: 10\nMean TTFT (ms): lots"
    inputs = gather(question=question, predict=False)
    assert not inputs.measured and [n.code for n in inputs.skipped] == ["pasted_skipped"]


FLEX = REPO / "benchmarks" / "gpu" / "runs" / "2026-12-06-h100-planted-f" / "planted-14b-flex" / "server.log.gz"
GLM = REPO.parent / "shared" / "fixtures" / "real-metrics" / "production-stack-issue617_vllm-0.10.0_glm45_excerpt.txt"


def _samples(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("vllm:")]


def test_pasted_metrics_lines_are_one_snapshot_of_the_server():
    """`curl .../metrics | grep -v '^#'` pasted: the same gauges as the dump attached."""
    lines = _samples(GLM)
    pasted = gather(question="Is the KV cache the problem?\n" + "\n".join(lines), predict=False)
    attached = gather(question="Is the KV cache the problem?", attachments=[GLM], predict=False)
    assert len(pasted.metrics_summaries) == 1
    assert pasted.metrics_summaries[0]["engines"] == attached.metrics_summaries[0]["engines"]


def test_an_attached_metrics_excerpt_without_type_lines_is_read(tmp_path):
    excerpt = tmp_path / "metrics.txt"
    excerpt.write_text("\n".join(_samples(GLM)) + "\n", encoding="utf-8")
    inputs = gather(question="why?", attachments=[excerpt], predict=False)
    assert not inputs.skipped and len(inputs.metrics_summaries) == 1


def test_one_metrics_reading_at_the_cap_with_room_names_the_cap_and_how_far_it_can_rise():
    question = (
        "Requests queue for 20 s. Mistral-7B-Instruct-v0.3 on one L40S, vLLM 0.8.4.\n"
        "vllm serve mistralai/Mistral-7B-Instruct-v0.3 --max-model-len 8192 --max-num-seqs 64\n"
        'vllm:num_requests_running{engine="0",model_name="mistral"} 64.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="mistral"} 187.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="mistral"} 0.297\n'
        'vllm:num_preemptions_total{engine="0",model_name="mistral"} 0.0\n'
    )
    answer = Session().answer(question)
    first = answer.diagnosis.findings[0]
    assert first.cause == "max_num_seqs_limit"
    assert "--max-num-seqs 160" in [r.flag for r in first.recommendations]  # 64 x 80 / 29.7, a multiple of 16
    # the server never saw its cache full: vLLM's "Maximum concurrency" at max_model_len is no over-admission
    assert not any(r.id == "reason.max_num_seqs_over" for f in answer.diagnosis.findings for r in f.reasons)


def test_a_busy_server_with_its_cache_under_half_and_nothing_waiting_rules_out_the_kv_cache():
    """A real H100 run's stats lines (vLLM 0.26.0, Qwen2.5-14B): requests running, none waiting, the
    KV cache at most 38%; and the words name the KV cache."""
    with gzip.open(FLEX, "rt", encoding="utf-8") as fh:
        lines = [line.rstrip("\n") for line in fh if "Waiting: 0 reqs" in line and "Running: 0 reqs" not in line][:4]
    assert max(float(line.split("KV cache usage: ")[1].split("%")[0]) for line in lines) < 50
    question = "Is our KV cache too small? Qwen2.5-14B-Instruct on one H100, vLLM 0.26.0. GPU KV cache size: 400,000 tokens.\n" + "\n".join(lines)
    causes = [f.cause for f in Session().answer(question).diagnosis.findings]
    assert "kv_capacity" not in causes and "preemption" not in causes


def test_pasted_lines_are_figures_not_words():
    """The cue phrases read the user's words, not the program's lines; and "no preemptions" says
    there were none."""
    lines = _real_lines("non-default args", 1) + _real_lines("Waiting: 4", 2)
    inputs = gather(question="Why do requests wait? There are no preemptions.\n" + "\n".join(lines), predict=False)
    assert "Avg prompt throughput" not in inputs.prose and "There are no preemptions" in inputs.prose
    one_line = gather(question="Why do requests wait? " + " ".join(lines), predict=False)  # the line breaks lost
    assert one_line.prose.strip() == "Why do requests wait?"
    from vllm_advisor.diagnosis.board import Board
    from vllm_advisor.diagnosis.text_cues import detect_cues

    board = Board()
    detect_cues(inputs, board)
    assert "preemption" not in board.hypotheses
    from vllm_advisor.diagnosis.text_cues import causes_named

    # the question's topics read the same negation: "no preemptions" does not make preemption a topic
    assert "preemption" not in causes_named("Why do requests wait? There are no preemptions.")
    assert "preemption" in causes_named("Why do requests wait? We see many preemptions.")


def test_hostile_pasted_text_is_read_in_bounded_time():
    """Banners with no closing rule, a long run of blanks: each pattern is linear (a pattern over a
    text of 4,000 banners took minutes before)."""
    import time

    from vllm_advisor.diagnosis.inputs import prose_of

    banners = "============ Serving Benchmark Result ============\nMean TTFT (ms): 1\n" * 4000
    blanks = "a" + " " * 200_000 + "b"
    started = time.perf_counter()
    assert prose_of(banners).strip() == "" and prose_of(blanks) == blanks
    assert pasted_log(blanks) is None and pasted_metrics(blanks) is None
    with pytest.raises(InputFileError):  # a block with no closing rule: the reader's one-line error
        pasted_runs(banners)
    assert time.perf_counter() - started < 5


def test_a_shared_prompt_with_almost_no_hits_says_the_prefix_varies():
    """A reviewer's question: every request shares a 2,600-token system prompt, the pasted stats lines
    show 1.2% prefix hits, and the prompt code starts with the time and a request id. The hit rate
    was "nothing measured"; it is the figure, and the change is to move what varies after the prefix."""
    question = (
        "Is prefix caching broken in V1? Every request uses the same ~2,600-token system prompt, but the hit rate stays around 1%. "
        "Qwen2.5-32B-Instruct, TP=2 on 2x H100 SXM, vLLM 0.8.5.\n"
        "INFO 05-21 09:41:07 [loggers.py:111] Engine 000: Avg prompt throughput: 11842.6 tokens/s, Avg generation throughput: 402.7 tokens/s, "
        "Running: 19 reqs, Waiting: 0 reqs, GPU KV cache usage: 17.9%, Prefix cache hit rate: 1.2%\n"
        'system = f"Current time: {datetime.now().isoformat()} Request id: {uuid.uuid4()} You are ACME\'s support assistant."\n'
    )
    diagnosis = Session(kb=False).answer(question).diagnosis
    found = next(f for f in diagnosis.findings if f.cause == "prefix_cache")
    assert [r.id for r in found.reasons][:1] == ["reason.shared_prefix_varies"]
    assert any(e.kind == "measured" and e.value == 1.2 for e in found.evidence)
    assert "rec.prefix_stable_first" in [r.change.id for r in found.recommendations]

"""Questions asked with a real run attached, as a new user asked them (session 33's report).

Each case is a real vLLM run: the project's planted GPU runs (benchmarks/gpu/runs, vLLM 0.26.0 on an
H100, whose logs name the model by a local path) and files other people wrote (../shared/fixtures).
What each answer must do is what the user's report found missing: the model the words name used
where the files' is unknown, the KV cache's room counted from the client count alone, a memory
fraction set below the default named with what the default holds, one request at a time seen in
the server's own lines, speculative decoding that drafted nothing, and the figure a question asks
about ("why is TTFT so high?") quoted before any cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor import Session
from vllm_advisor.messages import render
from vllm_advisor.probe.serverlog import parse_server_log

RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "runs"
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
KV_RUN = RUNS / "2026-12-06-h100-planted" / "planted-8b-kv"  # --gpu-memory-utilization 0.35, 48 clients of 8K prompts
NGRAM_RUN = RUNS / "2026-12-07-h100-specdecode" / "planted-8b-ngram"
ONE_AT_A_TIME_LOG = FIXTURES / "real-logs" / "guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"
BENCH_70B = FIXTURES / "real-bench" / "vllm-bench" / "llm-k8s_llama33-70b_tp8_qpsinf_vllm083_detailed.json"


def _ask(question: str, *attachments: Path, **kwargs):
    return Session(kb=False, attachments=list(attachments), **kwargs).answer(question)


def _opening(result) -> str:
    return result.answer.markdown.split("\n\n")[1]


def test_the_model_the_words_name_is_modelled_where_the_log_names_a_local_path():
    """The log names /tmp/e2e/models/llama31-8b, which no catalog knows; the words say Llama-3.1-8B."""
    result = _ask("Why is TTFT 16 seconds at 48 concurrent clients with 8K prompts? Llama-3.1-8B on one H100.", KV_RUN)
    assert result.inputs.engine is not None and result.inputs.deployment.model == "Llama-3.1-8B"
    assert any(n.code == "model_from_words" and "/tmp/e2e/models/llama31-8b" in n.detail for n in result.inputs.skipped)


def test_the_kv_cache_room_is_counted_from_the_clients_without_a_simulated_load():
    """No output length, so no load is simulated: 93,216 tokens of KV hold at most 11.7 requests of 8,000
    tokens, and 36 of the 48 clients wait. The answer opens with that, not with a 0.2 s prefill floor,
    and names the memory fraction 0.35 with what vLLM's default holds."""
    result = _ask("Why is TTFT 16 seconds at 48 concurrent clients with 8K prompts? Llama-3.1-8B on one H100.", KV_RUN)
    findings = result.diagnosis.findings
    assert findings[0].cause == "kv_capacity"
    assert findings[0].reasons[0].id == "reason.kv_fit_clients_min"
    memory = next(f for f in findings if f.cause == "memory_config")
    reason = render(memory.reasons[0], "en")
    assert "`--gpu-memory-utilization 0.35` leaves the KV cache 93,216 tokens" in reason and "enough for your 48 clients" in reason
    opening = _opening(result)
    assert opening.startswith("Each request of at least 8,000 tokens") and "about 36 requests wait for room" in opening
    assert any(r.flag == "--gpu-memory-utilization 0.92" for f in findings for r in f.recommendations)


def test_is_the_kv_cache_too_small_gets_a_yes_first_in_chinese():
    result = _ask("48并发、输入8K时首token要16秒，KV缓存是不是太小了？模型是Llama-3.1-8B，一张H100。", KV_RUN)
    assert _opening(result).startswith("是的：KV 缓存容量是这里的首要原因")


def test_a_server_sent_one_request_at_a_time_is_seen_in_its_own_lines():
    """Every stats line of a real gpt-oss log says "Running: 1 reqs, Waiting: 0 reqs": throughput is one
    request's speed, whatever CUDA graphs do."""
    result = _ask("Throughput of our gpt-oss-20b server looks low. Here is the server log. What limits it?", ONE_AT_A_TIME_LOG)
    assert "benchmark_methodology" in [f.cause for f in result.diagnosis.findings[:3]]
    assert _opening(result).startswith("Every stats line that generated tokens (93 lines) shows one request running and none waiting")


def test_one_request_alone_asked_about_is_not_called_one_at_a_time():
    result = _ask("A single user gets 33 tok/s on gpt-oss-20b. Is that normal?", ONE_AT_A_TIME_LOG)
    assert all(r.id != "reason.one_at_a_time" for f in result.diagnosis.findings for r in f.reasons)


def test_speculative_decoding_that_drafted_nothing_is_measured():
    """A real H100 run of ngram speculative decoding on random prompts: vllm:spec_decode_num_draft_tokens
    stayed 0 while 33,576 tokens were generated (throughput 23-39% below the same server without it)."""
    result = _ask("We turned on ngram speculative decoding on Llama-3.1-8B-Instruct (one H100) and throughput at 64 clients got worse. Why?", NGRAM_RUN)
    spec = result.diagnosis.findings[0]
    assert spec.cause == "spec_decode" and spec.confidence >= 0.5
    drafted = next(e for e in spec.evidence if e.label.id == "ev.spec_drafted")
    assert drafted.kind == "measured" and drafted.value == 0
    assert any(r.id == "reason.spec_no_drafts" for r in spec.reasons)


def test_the_spec_decoding_log_line_is_read(tmp_path):
    """vLLM V1's line, in the format of vllm/v1/spec_decode/metrics.py: accepted and drafted tokens summed."""
    line = ("(APIServer pid=1) INFO 12-07 10:00:{s:02d} [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 1.40, Accepted throughput: 12.00 tokens/s, "
            "Drafted throughput: 150.00 tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: 0.300, 0.060, 0.020, 0.010, 0.010, Avg Draft acceptance rate: 8.0%\n")
    log = tmp_path / "server.log"
    stats = "(APIServer pid=1) INFO 12-07 10:00:05 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 140.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%\n"
    log.write_text(line.format(s=0, a=120, d=1500) + stats + line.format(s=10, a=1_080, d=13_500))
    parsed = parse_server_log(log)
    assert (parsed.spec_accepted_tokens, parsed.spec_drafted_tokens, parsed.spec_metric_lines) == (1_200, 15_000, 2)
    result = _ask("Speculative decoding made decoding slower, why?", log)
    spec = next(f for f in result.diagnosis.findings if f.cause == "spec_decode")
    assert any(r.id == "reason.spec_low_acceptance" for r in spec.reasons)


def test_the_benchmark_files_model_is_read_and_its_ttft_quoted_first():
    """`vllm bench serve` keeps model_id; "why is TTFT so high?" gets the file's TTFT (median 350 ms, p99
    450 ms at rate=inf) beside the model's before any cause."""
    result = _ask("Why is TTFT so high?", BENCH_70B, overrides={"gpu": "A100-SXM4-40GB", "num_gpus": 8})
    assert result.inputs.deployment.model == "meta-llama/Llama-3.3-70B-Instruct" and result.inputs.engine is not None
    t = result.diagnosis.measured_ttft
    assert (t.load, t.median_ms, t.p99_ms) == ("rate=inf", 349.8, 450.4) and t.predicted_median_ms
    assert _opening(result).startswith("Your time to first token at rate=inf: median 350 ms, p99 450 ms (measured)")


@pytest.mark.parametrize("question", ["为什么首 token 这么慢？", "首token延迟为什么这么高"])
def test_the_ttft_figure_opens_a_chinese_answer_in_chinese(question):
    opening = _opening(_ask(question, BENCH_70B, overrides={"gpu": "A100-SXM4-40GB", "num_gpus": 8}))
    assert opening.startswith("你在不限速率时的首 token 时间：中位数 350 毫秒，p99 450 毫秒（实测）")


KV_PRESSURE_BENCH = next((FIXTURES / "vllm-cpu-real" / "results" / "kv-pressure").glob("*.json"))


def _spoiled(tmp_path: Path) -> Path:
    """A real `vllm bench serve` file with three fields of the wrong type, as a hand edit leaves them."""
    import json

    data = json.loads(KV_PRESSURE_BENCH.read_text())
    data.update(max_concurrency="eight", request_throughput=-5, mean_ttft_ms="922 ms")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_a_field_of_the_wrong_type_costs_that_figure_not_the_file(tmp_path):
    """A new user's find: one wrong-typed field threw the whole benchmark away, and the note named that
    field alone. The rest of the file is read; one note lists every field left out."""
    path = _spoiled(tmp_path)
    result = _ask("Why is TTFT so high?", path)
    runs = [r for r in result.inputs.measured if r.source == str(path)]
    assert runs and runs[0].ttft_ms is not None and runs[0].ttft_ms.median and runs[0].completed
    note = next(n for n in result.inputs.skipped if n.code == "partly_read")
    assert note.reason == "fields_dropped" and all(f in note.detail for f in ("max_concurrency", "request_throughput", "mean_ttft_ms"))


def test_probe_load_stays_strict_on_a_wrong_field(tmp_path):
    from click.testing import CliRunner

    from vllm_advisor.cli.main import cli

    result = CliRunner().invoke(cli, ["probe", "load", str(_spoiled(tmp_path))])
    assert result.exit_code == 3 and "max_concurrency" in result.output


def test_a_long_logs_last_stats_lines_are_weighed_and_the_answer_says_so(tmp_path, monkeypatch):
    import vllm_advisor.probe.serverlog as serverlog

    monkeypatch.setattr(serverlog, "MAX_STATS_LINES", 5)
    line = "(APIServer pid=1) INFO 12-07 10:00:{s:02d} [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 140.0 tokens/s, Running: 8 reqs, Waiting: 3 reqs, GPU KV cache usage: 97.0%, Prefix cache hit rate: 0.0%\n"
    log = tmp_path / "server.log"
    log.write_text("".join(line.format(s=s) for s in range(12)))
    result = _ask("Why do requests wait?", log)
    note = next(n for n in result.inputs.skipped if n.code == "partly_read")
    assert "only its last 5 of 12 stats lines were weighed" in note.detail


BENCHSERVE_RUN = RUNS / "2026-12-07-h100-benchserve" / "planted-8b-seqs8-benchserve"  # vllm bench serve at c=32, --max-num-seqs 8


def test_a_folder_from_vllm_bench_serve_is_read_once_and_in_time_order():
    """A real H100 run saved as a user saves it: `vllm bench serve --save-result`, its console output,
    /metrics before and after (metrics_after.txt sorts first and the dumps carry no timestamps), the
    server log. The dumps are one window in the order their counters grew (it read a restart and no
    work), the console block repeats the JSON and is dropped, and max_num_seqs=8 leads."""
    result = _ask("Why is TTFT so high at 32 concurrent users? Llama-3.1-8B-Instruct on one H100.", BENCHSERVE_RUN)
    inputs = result.inputs
    assert [r.format for r in inputs.measured] == ["vllm-bench"]
    [summary] = inputs.metrics_summaries
    engine = summary["engines"][0]
    assert engine["prompt_tokens"] == 128 * 2048 and not any("reset" in n for n in summary["notes"])
    assert any("ordered by their counters" in n for n in summary["notes"])
    top = result.diagnosis.findings[0]
    assert top.cause == "max_num_seqs_limit" and top.confidence >= 0.5
    assert "max_num_seqs=8 lets at most 8 requests run at once; with 32 clients, 24 of them wait" in result.answer.markdown


def test_drafts_that_add_a_token_a_step_are_not_called_a_loss(tmp_path):
    """28% of five-token drafts accepted adds 1.4 tokens a step: that pays at one request alone, so no
    low-acceptance finding (a reviewer's find against a bar on the rate alone)."""
    line = ("(APIServer pid=1) INFO 12-07 10:00:00 [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 2.40, Accepted throughput: 40.00 tokens/s, "
            "Drafted throughput: 143.00 tokens/s, Accepted: 1400 tokens, Drafted: 5000 tokens, Per-position acceptance rate: 0.600, 0.400, 0.200, 0.120, 0.080, Avg Draft acceptance rate: 28.0%\n")
    stats = "(APIServer pid=1) INFO 12-07 10:00:05 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 140.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n"
    log = tmp_path / "server.log"
    log.write_text(line + stats)
    assert parse_server_log(log).spec_drafts == 1000
    result = _ask("Is speculative decoding helping?", log)
    assert all(r.id != "reason.spec_low_acceptance" for f in result.diagnosis.findings for r in f.reasons)


def test_a_size_in_the_files_model_name_must_be_the_words_model():
    """The words name a model they compare with: a 70B path is not modelled as the 8B named beside it."""
    from vllm_advisor.diagnosis.inputs import _words_model_wins

    assert _words_model_wins("/tmp/e2e/models/llama31-8b", "Llama-3.1-8B")
    assert not _words_model_wins("/models/acme-chat-70b", "Llama-3.1-8B")


def test_one_change_per_flag_the_users_own_setting_undone():
    """"--max-num-seqs 1024" (the default back) and "--max-num-seqs 160" (sized from the server's lines) were
    both offered with the same predicted effect: one change per flag, the one that undoes the user's setting."""
    md = _ask("Why is TTFT so high at 32 concurrent users? Llama-3.1-8B-Instruct on one H100.", BENCHSERVE_RUN).answer.markdown
    changes = md.split("## What to change", 1)[1].split("## ", 1)[0]
    assert changes.count("--max-num-seqs") == 1 and "`--max-num-seqs 1024`" in changes


BUDGET_RUN = RUNS / "2026-12-06-h100-planted-d" / "planted-8b-budget256"  # --max-num-batched-tokens 256, 64 clients of 2K prompts


def test_requests_waiting_with_slots_and_blocks_free_behind_a_small_step_budget():
    """A real run at --max-num-batched-tokens 256: 17 ran, 47 waited, the KV cache at 7.5%, none preempted.
    The budget leads, with the queue the readings show as its doing (a new user's find: it was never named;
    the answer blamed max_num_seqs against vLLM's "Maximum concurrency" at max_model_len, then queueing)."""
    result = _ask("why is TTFT so high?", BUDGET_RUN / "server.log.gz", BUDGET_RUN / "snapshots.prom.gz")
    findings = result.diagnosis.findings
    assert findings[0].cause == "batched_tokens_limit"
    assert findings[0].reasons[0].id == "reason.budget_throttles"
    assert not any(r.id == "reason.max_num_seqs_over" for f in findings for r in f.reasons)
    opening = _opening(result)
    assert opening.startswith("Up to 47 requests waited") and "`--max-num-batched-tokens 256`" in opening


def test_the_logged_kv_pool_holds_the_clients_or_not_without_a_model_of_the_gpu():
    """No GPU or catalogued model named (the log names a local path): the pool the log printed (93,216 tokens)
    still counts the 8K requests that fit (11.7 of 48), and the memory fraction 0.35 is named with what the
    same card holds at the default, from the log's own figures (79.18 GiB card, 11.38 GiB of KV): the real
    check run at 0.9 held 449,968 tokens (a new user's find: told to buy a second GPU)."""
    result = _ask("TTFT is 16 s with 48 clients sending 8k-token prompts. why?", KV_RUN / "server.log.gz", KV_RUN / "snapshots.prom.gz")
    assert result.inputs.engine is None
    causes = [f.cause for f in result.diagnosis.findings[:3]]
    assert "kv_capacity" in causes[:2] and "memory_config" in causes
    text = result.answer.markdown
    assert "holds 93,216 tokens (its log)" in text and "about 36 requests wait for room" in text
    assert "`--gpu-memory-utilization 0.35` leaves the KV cache 93,216 tokens" in text and "enough for your 48 clients" in text
    changes = text.split("## What to change")[1]
    assert changes.lstrip().startswith("1. **Put gpu_memory_utilization back to vLLM's default")  # not a second GPU first


NOPREFIX_RUN = RUNS / "2026-12-06-h100-planted-b" / "planted-8b-noprefix"  # --no-enable-prefix-caching, a 7.5K prefix shared by 8K prompts


def test_a_shared_prefix_in_the_words_costs_the_prefix_cache_that_is_off():
    """The words give the shared prefix (7.5K of 8K prompts), the log says prefix caching is off: the prefix
    recomputed for every request opens the answer to a TTFT question, before the prefill floor."""
    result = _ask("RAG 场景，所有请求共用一个 7.5k 的系统提示词，16 并发，8k 输入 128 输出，H100 上 Llama-3.1-8B 首 token 0.87 秒，感觉共享前缀应该更快才对？",
                  NOPREFIX_RUN / "server.log.gz", NOPREFIX_RUN / "snapshots.prom.gz")
    assert result.inputs.shared_prefix_len == 7500
    assert result.diagnosis.findings[0].cause == "prefix_cache"
    assert _opening(result).startswith("前缀缓存是关闭的，所有提示词共享的 7,500 个 token")


LONGMIX_RUN = RUNS / "2026-12-06-h100-planted-b" / "planted-14b-longmix"  # 6 clients of 20K-token prompts, the default budget


def test_a_long_prompts_chunks_stall_the_running_streams_without_a_simulated_load():
    """No output length, so no load is simulated: each 20K prompt still enters in 3 chunks of 8,192 tokens
    and each chunk's step stalls the 5 running streams many decode steps (a new user's find: "it freezes
    mid-answer" was answered with the API server's CPU)."""
    result = _ask("6 users each sending 20k-token documents, Qwen2.5-14B on one H100. Streaming looks choppy: ITL p50 22 ms but TPOT 30 ms, "
                  "and sometimes it freezes for a while mid-answer. normal?", LONGMIX_RUN / "server.log.gz", LONGMIX_RUN / "snapshots.prom.gz")
    assert result.inputs.input_len == 20000
    assert result.diagnosis.findings[0].cause == "chunked_prefill_interference"
    assert "enters in 3 chunks of up to 8,192 tokens" in result.answer.markdown


IDLE_DUMP = FIXTURES / "real-metrics" / "production-stack-issue318_vllm-v1-early2025_qwen25coder32b_excerpt.txt"


def test_one_metrics_dump_taken_while_idle_is_said_so():
    """A single /metrics dump with nothing running or waiting says nothing of the slow load (a new user's find:
    it was used without a word and the answer guessed a CPU front end)."""
    md = _ask("我们用 production-stack 部署了 Qwen2.5-Coder-32B，两张 A800，这是 /metrics 的内容，用户说很慢，看得出问题吗", IDLE_DUMP).answer.markdown
    assert "只有一次 /metrics 采样，而且是在服务空闲时采的" in md.split("## 说明")[1]


UNSTREAMED = FIXTURES / "real-bench" / "genai-perf" / "adaptive_simple_long_response_c50_genai_perf.json"


def test_a_ttft_complaint_about_a_run_that_was_not_streamed_is_about_how_it_was_measured():
    """genai-perf wrote time_to_first_token equal to request_latency (7,508 ms): not a first token's time
    (a new user's find: answered with queueing)."""
    result = _ask("our vLLM TTFT at concurrency 50 is terrible, see the genai-perf export", UNSTREAMED)
    assert result.diagnosis.findings[0].cause == "benchmark_methodology"
    assert _opening(result).startswith("This run was not streamed: genai-perf's \"time to first token\" (7,508 ms on average)")

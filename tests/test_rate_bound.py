"""Requests sent on a clock slower than the server completes them (physics._rate_bound) and an open loop
held to a client count (`vllm bench serve --request-rate R --max-concurrency C`, perf/simulator.py).

A reviewer's find: a run at `--request-rate 2 --max-concurrency 100` (Qwen2.5-7B on one H100, 1,024 in /
256 out) measured 510 tok/s, and was modelled as 100 clients sending back to back: its TTFT and TPOT were
called faster than the hardware allows, and its 510 tok/s a slow H100. 2 requests a second of 256 tokens
are 512 tok/s: the client's clock set it.
"""

from __future__ import annotations

from pathlib import Path

from vllm_advisor import Session


def _case(tmp_path: Path, rate: float, clients: int, total: float) -> Path:
    case = tmp_path / "case.yaml"
    case.write_text(
        "question: 并发一百才 500 tok/s，H100 这么慢？\n"
        "deployment: {engine: vllm, vllm_version: '0.10.1', model: Qwen/Qwen2.5-7B-Instruct, gpu: H100, num_gpus: 1}\n"
        f"workload: {{input_len: 1024, output_len: 256, concurrency: {clients}, request_rate: {rate}, dataset: random}}\n"
        f"observations:\n  - {{concurrency: {clients}, request_rate: {rate}, output_tok_s_total: {total}, ttft_ms: {{mean: 45}}, tpot_ms: {{mean: 6.5}}}}\n"
    )
    return case


def test_a_rate_below_the_servers_names_the_client_clock(tmp_path):
    result = Session(profile=_case(tmp_path, 2, 100, 510), kb=False).answer()
    top = result.diagnosis.findings[0]
    assert top.cause == "benchmark_methodology"
    assert top.reasons[0].id == "reason.rate_bound"
    assert not any(r.id == "reason.beyond_ceiling" for f in result.diagnosis.findings for r in f.reasons)
    assert result.answer.markdown.split("\n\n")[1].startswith("压测只以 2 req/s 的速率发请求；每个请求输出 256 个 token，合计就是 512 tok/s")
    # "并发一百才 500 tok/s" is the whole server at 100 clients, not one request's speed
    assert result.inputs.stated.request_tok_s is None


def test_an_open_loop_held_to_a_client_count_keeps_under_it(tmp_path):
    predicted = Session(profile=_case(tmp_path, 2, 100, 510), kb=False).answer().inputs.predicted[0]
    assert (predicted.offered_concurrency, predicted.offered_request_rate) == (100, 2)
    assert predicted.server_view.running_mean < 10  # 2 req/s x ~2 s each: a few in flight, not 100
    assert abs(predicted.output_throughput_tok_s / 512 - 1) < 0.2
    held = Session(profile=_case(tmp_path, 50, 4, 510), kb=False).answer().inputs.predicted[0]
    assert held.server_view.running_max <= 4  # 50 req/s offered, at most 4 in flight: the cap holds


def test_a_throughput_the_rate_does_not_explain_is_left_alone(tmp_path):
    result = Session(profile=_case(tmp_path, 2, 100, 1500), kb=False).answer()
    assert not any(r.id == "reason.rate_bound" for f in result.diagnosis.findings for r in f.reasons)


def _bench_summary(tmp_path: Path, tpot_ms: float, output_tok_s: float) -> Path:
    """A `vllm bench serve --save-result` summary (no per-request lists) of one client, 20 requests of
    512 / 256 tokens: the keys and shape vLLM writes."""
    import json

    path = tmp_path / "bench.json"
    path.write_text(json.dumps({
        "date": "20261205-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 20, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": 1, "duration": 5120 / output_tok_s, "completed": 20, "failed": 0, "total_input_tokens": 10240,
        "total_output_tokens": 5120, "request_throughput": 20 * output_tok_s / 5120, "output_throughput": output_tok_s,
        "total_token_throughput": 3 * output_tok_s, "mean_ttft_ms": 120, "median_ttft_ms": 118, "p99_ttft_ms": 160, "mean_tpot_ms": tpot_ms,
        "median_tpot_ms": tpot_ms, "p99_tpot_ms": tpot_ms * 1.05, "mean_itl_ms": tpot_ms, "median_itl_ms": tpot_ms, "p99_itl_ms": tpot_ms * 1.1,
        "mean_e2el_ms": 256 * tpot_ms + 120, "median_e2el_ms": 256 * tpot_ms + 120, "p99_e2el_ms": 280 * tpot_ms,
    }))
    return path


def _ask(path: Path):
    session = Session(kb=False, attachments=[path], overrides={"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100"})
    return session.answer("One user on an H100: only 22 tokens per second. Why so slow?")


def test_a_run_far_slower_than_the_model_says_so_first(tmp_path):
    """A reviewer's find: 22 tok/s measured beside 101 modelled was answered with a 24% guess. The summary's
    token totals give the lengths (512 / 256) where it kept no per-request ones."""
    result = _ask(_bench_summary(tmp_path, 45.0, 22.1))
    assert (result.inputs.input_len, result.inputs.output_len) == (512, 256)
    opening = result.answer.markdown.split("\n\n")[1]
    assert opening.startswith("Far slower than this hardware should be: at c=1, for this model, GPU and these settings, the performance model predicts"), opening
    assert "where 22.1 tok/s was measured" in opening and "where 45 ms was measured" in opening


def test_a_run_near_the_model_is_not_called_slow(tmp_path):
    result = _ask(_bench_summary(tmp_path, 7.5, 130.0))
    assert result.diagnosis.disagreement is None
    assert "Far slower" not in result.answer.markdown

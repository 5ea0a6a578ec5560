"""The hardware ceiling is a bound: bytes over the memory bandwidth, FLOPs over the peak, nothing fixed per
kernel or per step (diagnosis/inputs.ceiling_efficiency).

A reviewer's find: with no vLLM version given the ceiling kept 0.95 of the bandwidth, no graph factor and
each kernel's fixed time, 6.3 ms a step for an 8B on an H100, so a healthy 5.7 ms TPOT at one client read
"beyond the ceiling" in the memo. The weights an 8B reads each step (its layers and LM head, 15.1 GB at
BF16) over 3.35 TB/s take 4.5 ms.
"""

from __future__ import annotations

from vllm_advisor import Session
from vllm_advisor.diagnosis.inputs import ceiling_efficiency
from vllm_advisor.perf.simulator import StepBatch


def _engine(version: str):
    q = f"Llama-3.1-8B-Instruct on one H100{version}, 1000-token prompts, 200 output, 4 clients"
    return Session(kb=False).answer(q).inputs


def test_the_ceiling_is_bytes_over_bandwidth_whatever_the_release():
    for version in ("", " vLLM 0.26", " vLLM 0.10.1"):
        inputs = _engine(version)
        engine = inputs.engine
        engine.step.eff = ceiling_efficiency(engine.step.eff)
        step_ms = engine.step.breakdown(StepBatch(1, 1100, ())).total_ms
        bound_ms = 15.1e9 / 3.35e12 * 1000
        assert 0.95 * bound_ms < step_ms < 1.1 * bound_ms, (version, step_ms)


def test_a_healthy_tpot_is_not_beyond_the_ceiling(tmp_path):
    case = tmp_path / "case.yaml"
    case.write_text(
        "question: Is vLLM slower than it should be? 175 tok/s single stream for Llama-3.1-8B on one H100.\n"
        "deployment: {engine: vllm, vllm_version: '0.10.1', model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100, num_gpus: 1}\n"
        "workload: {input_len: 1000, output_len: 500, concurrency: 1}\n"
        "observations:\n  - {concurrency: 1, tpot_ms: {mean: 5.7}, ttft_ms: {mean: 45}, output_tok_s_per_request: 175}\n"
    )
    inputs = Session(profile=case, kb=False).answer().inputs
    ceiling = inputs.ceiling[0]
    assert ceiling.tpot_ms.mean < 5.7


def test_a_steady_ttft_at_many_clients_is_not_beyond_the_ceiling(tmp_path):
    """A reviewer's find (Qwen2.5-7B, one H100, 2K / 512 at 50 clients): TTFT 220 ms was called 2.4x faster than
    the ceiling's mean of 518 ms, a mean carried by the simulation's first wave of 50 prompts sent together; and
    50 x 70 tok/s was called a formula with only 47 running, where the server's own count said 50."""
    case = tmp_path / "case.yaml"
    case.write_text(
        "question: 并发五十的时候每个请求掉到 70 tok/s，是不是哪里配置错了？\n"
        "deployment: {engine: vllm, vllm_version: '0.10.1', model: Qwen/Qwen2.5-7B-Instruct, gpu: H100, num_gpus: 1}\n"
        "workload: {input_len: 2048, output_len: 512, concurrency: 50, dataset: random}\n"
        "observations:\n"
        "  - {concurrency: 1, output_tok_s_per_request: 160, ttft_ms: {mean: 45}, tpot_ms: {mean: 6.2}}\n"
        "  - {concurrency: 50, output_tok_s_per_request: 70, output_tok_s_total: 3500, ttft_ms: {mean: 220}, tpot_ms: {mean: 14},\n"
        "     kv_cache_usage_pct: 18, num_requests_running: 50, num_requests_waiting: 0}\n"
    )
    reasons = {r.id for f in Session(profile=case, kb=False).answer().diagnosis.findings for r in f.reasons}
    assert "reason.beyond_ceiling" not in reasons
    assert not reasons & {"reason.throughput_formula", "reason.throughput_formula_running"}

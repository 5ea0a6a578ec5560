"""Models with sliding-window layers (gpt-oss, Gemma 2/3): the window caps what those layers keep.

vLLM counts a hybrid model's KV capacity with every token in the full-attention layers and at most
the window (plus a block) in the sliding ones; the memory model did so for "Maximum concurrency",
while the simulator, the requests-that-fit figure and the per-request size counted every token in
every layer (gpt-oss-120b on one H100: 2.8 requests of 65,000 tokens instead of 5.6).
"""

from __future__ import annotations

import math

from vllm_advisor.diagnosis.inputs import DiagnosisInputs
from vllm_advisor.perf.predict import build_engine_model
from vllm_advisor.schema import Deployment, EngineArgs


def _engine(model: str, gpu: str = "H100-SXM", max_model_len: int = 131072):
    return build_engine_model(Deployment(model=model, gpu=gpu, num_gpus=1), EngineArgs(model=model, max_model_len=max_model_len))


def test_requests_that_fit_count_the_window_once() -> None:
    e = _engine("openai/gpt-oss-120b")
    m = e.memory
    assert m.sliding_window == 128 and m.kv_bytes_per_token_sliding > 0
    assert math.isclose(m.kv_bytes_per_token_full + m.kv_bytes_per_token_sliding, m.kv_bytes_per_token)
    # at max_model_len the figure is vLLM's "Maximum concurrency"
    assert math.isclose(m.requests_that_fit(131072), m.max_concurrency, rel_tol=1e-3)
    every_layer = m.num_gpu_blocks / math.ceil(65000 / m.block_size)  # what the simulator used to hold
    assert m.requests_that_fit(65000) > 1.9 * every_layer
    # a request inside the window holds every token in every layer
    assert math.isclose(m.request_kv_bytes(64), 64 * m.kv_bytes_per_token)
    assert m.request_kv_bytes(65000) < 0.51 * 65008 * m.kv_bytes_per_token


def test_the_simulator_gets_the_pool_for_the_workloads_length() -> None:
    e = _engine("openai/gpt-oss-120b")
    limits = e.limits_for(65000)
    assert int(limits.num_gpu_blocks / math.ceil(65000 / limits.block_size)) == int(e.memory.requests_that_fit(65000))
    assert limits.num_gpu_blocks > e.limits.num_gpu_blocks
    full = _engine("Qwen/Qwen2.5-32B-Instruct", max_model_len=32768)
    assert full.limits_for(30000) == full.limits  # no sliding layers: unchanged


def test_facts_show_the_two_parts_of_the_kv_per_token() -> None:
    from vllm_advisor.diagnosis.engine import _facts
    from vllm_advisor.messages import render

    e = _engine("openai/gpt-oss-120b")
    inputs = DiagnosisInputs(question="how many fit?", deployment=Deployment(model="openai/gpt-oss-120b", gpu="H100-SXM", num_gpus=1))
    inputs.engine = e
    labels = {render(f.label, "en"): f.value for f in _facts(inputs)}
    full = next(v for k, v in labels.items() if "full-attention" in k)
    sliding = next(v for k, v in labels.items() if "sliding-window" in k and "128 tokens" in k)
    assert full + sliding == round(e.memory.kv_bytes_per_token / 1024)
    assert not any(k == "KV per token per GPU" for k in labels)
    zh = [render(f.label, "zh") for f in _facts(inputs)]
    assert any("滑动窗口层" in k for k in zh) and not any("sliding" in k for k in zh)


def test_average_kv_per_token_of_a_request() -> None:
    """What one token of a request costs on average: the disaggregation what-if sends this much per
    prompt token, the KV-capacity evidence shows it."""
    m = _engine("openai/gpt-oss-120b").memory
    assert m.kv_bytes_per_token_at(64) == m.kv_bytes_per_token
    assert math.isclose(m.kv_bytes_per_token_at(65000), m.request_kv_bytes(65000) / 65000)
    assert m.kv_bytes_per_token_at(65000) < 0.51 * m.kv_bytes_per_token
    full = _engine("Qwen/Qwen2.5-32B-Instruct", max_model_len=32768).memory
    assert full.kv_bytes_per_token_at(30001) == full.kv_bytes_per_token  # no sliding layers: the exact figure

"""A quantised checkpoint's weights: the quantised parameters at the format's width, the embedding,
LM head and norms (and gpt-oss's attention) in 16 bits (perf/memory.weight_bytes).

Held to two real servers' "Model loading took N GiB" lines (shared fixtures, real-logs: vLLM on four
devices each): gpt-oss-20b in MXFP4 took 3.5 GiB per device, Qwen3-30B-A3B in FP8 7.28 GiB. Every
parameter at the format's width gave 2.58 GiB for the first (26% under)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_advisor.perf.catalog.models import get_model
from vllm_advisor.perf.memory import GiB, UNQUANTISED_BYTES, weight_bytes

LOGS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real-logs"


def _loaded_gib(name: str) -> float:
    text = (LOGS / name).read_text(encoding="utf-8", errors="replace")
    return float(re.search(r"Model loading took ([\d.]+) GiB", text).group(1))


@pytest.mark.parametrize(("model", "quantization", "log"), [
    ("openai/gpt-oss-20b", "mxfp4", "guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"),
    ("Qwen/Qwen3-30B-A3B", "fp8", "guidellm-bench_qwen3-30b-a3b_tp4_fp8_vllm-server.log"),
])
def test_weights_per_device_match_what_the_server_loaded(model, quantization, log):
    per_device = weight_bytes(get_model(model), quantization, None) / 4 / GiB
    assert per_device == pytest.approx(_loaded_gib(log), rel=0.10)


def test_an_int4_checkpoint_keeps_its_embedding_and_lm_head_in_16_bits():
    spec = get_model("Qwen2.5-32B")
    parts = spec.param_breakdown()
    kept = parts["embedding"] + parts["lm_head"] + parts["norms"]
    assert weight_bytes(spec, "awq", None) == pytest.approx((spec.total_params - kept) * 0.53 + kept * UNQUANTISED_BYTES)
    assert weight_bytes(spec, None, "bfloat16") == spec.total_params * 2.0  # unquantised: every parameter at 2 bytes


def test_each_rank_holds_the_replicated_layers_whole():
    """vLLM keeps MLA's down-projections (q_a, kv_a with their norms) and every MoE router whole on
    each tensor-parallel rank (ReplicatedLinear), and copies a KV head to each rank when TP exceeds the
    KV heads: DeepSeek-R1 in FP8 on eight GPUs holds about 0.93 GiB a rank more than 1/8 of its weights
    (an audit's arithmetic from config.json; the router in 16 bits, as quantisation configs leave it)."""
    from vllm_advisor.perf.memory import replicated_bytes_per_gpu

    r1 = get_model("DeepSeek-R1")
    down = 61 * 7168 * (1536 + 512 + 64) * 1.0 + 61 * (1536 + 512) * 2.0  # q_a, kv_a (+ rope), their norms
    router = 58 * (7168 * 256 + 256) * 2.0  # with its bias (e_score_correction_bias)
    assert replicated_bytes_per_gpu(r1, "fp8", None, 8) == pytest.approx((down + router) * (1 - 1 / 8))
    per_rank = (weight_bytes(r1, "fp8", None) / 8 + replicated_bytes_per_gpu(r1, "fp8", None, 8)) / GiB
    assert 79.0 < per_rank < 79.6  # 1/8 of the weights alone: 78.3
    assert replicated_bytes_per_gpu(r1, "fp8", None, 1) == 0.0
    # Qwen2.5-7B has 4 KV heads: at TP8 each rank holds one whole head where 1/8 would be half of one
    qwen = get_model("Qwen2.5-7B-Instruct")
    assert replicated_bytes_per_gpu(qwen, None, "bfloat16", 8) == pytest.approx(28 * 2 * 3584 * 128 * (1 - 4 / 8) * 2.0)
    assert replicated_bytes_per_gpu(qwen, None, "bfloat16", 4) == 0.0
    assert replicated_bytes_per_gpu(get_model("Llama-3.1-70B-Instruct"), None, "bfloat16", 8) == 0.0

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

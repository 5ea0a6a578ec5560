"""A portable attention backend (vLLM's Triton kernels, FlexAttention, SDPA, xFormers) set by hand on an
NVIDIA GPU where vLLM would run FlashAttention is config evidence for the attention backend, with
"put FLASH_ATTN back" as its change; the same setting on a GPU without FlashAttention (Volta), on AMD,
or FlashInfer (as fast) is not. Real runs of the rule: tests/test_planted_runs.py."""

from __future__ import annotations

import pytest
import yaml

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather


def _diagnose(tmp_path, gpu: str, command: str):
    case = {
        "question": "Decode is slower than I expected on this GPU. Why?",
        "deployment": {"engine": "vllm", "vllm_version": "0.26.0", "model": "Llama-3.1-8B-Instruct", "gpu": gpu, "num_gpus": 1, "serve_command": command},
    }
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    return diagnose(gather(profile=path))


def _config_evidence(diagnosis) -> list:
    return [e for f in diagnosis.findings if f.cause == "attention_backend" for e in f.evidence if e.kind == "config"]


@pytest.mark.parametrize("command", [
    "VLLM_ATTENTION_BACKEND=XFORMERS vllm serve meta-llama/Llama-3.1-8B-Instruct",
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --attention-backend TRITON_ATTN",
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --attention-backend FLEX_ATTENTION",
])
def test_a_portable_backend_on_a_flash_attention_gpu_is_evidence_with_its_change(command, tmp_path) -> None:
    diagnosis = _diagnose(tmp_path, "A100", command)
    assert _config_evidence(diagnosis)
    finding = next(f for f in diagnosis.findings if f.cause == "attention_backend")
    assert finding.reasons[0].id == "reason.attention_portable"
    assert "--attention-backend FLASH_ATTN" in [r.flag for r in finding.recommendations]


@pytest.mark.parametrize(("gpu", "command"), [
    ("V100", "VLLM_ATTENTION_BACKEND=XFORMERS vllm serve meta-llama/Llama-3.1-8B-Instruct"),  # no FlashAttention 2 on Volta
    ("MI300X", "vllm serve meta-llama/Llama-3.1-8B-Instruct --attention-backend TRITON_ATTN"),  # vLLM's own ROCm choice
    ("H100", "vllm serve meta-llama/Llama-3.1-8B-Instruct --attention-backend FLASHINFER"),  # as fast as FlashAttention
    ("H100", "vllm serve meta-llama/Llama-3.1-8B-Instruct"),
])
def test_no_such_evidence_where_the_backend_is_vllms_own_choice_or_as_fast(gpu, command, tmp_path) -> None:
    diagnosis = _diagnose(tmp_path, gpu, command)
    assert not [e for e in _config_evidence(diagnosis) if e.label.args.get("name") == "attention_backend"]
    assert not [r for f in diagnosis.findings for r in f.reasons if r.id == "reason.attention_portable"]


def test_triton_mla_is_vllms_own_choice_for_an_mla_model_on_ampere(tmp_path) -> None:
    # FlashMLA needs Hopper: on an A100 vLLM picks TRITON_MLA itself, so naming it is no finding
    diagnosis = _diagnose(tmp_path, "A100", "vllm serve deepseek-ai/DeepSeek-V2-Lite --attention-backend TRITON_MLA")
    assert not [r for f in diagnosis.findings for r in f.reasons if r.id == "reason.attention_portable"]

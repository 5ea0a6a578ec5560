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


def test_a_priced_backend_setting_is_undone_first_and_an_unpriced_one_keeps_its_place():
    # the user's own attention backend, priced by a measurement (ev.backend_gap), is put back before the
    # changes of findings ranked above it, like a setting the model costs; without the price it keeps its place
    from vllm_advisor.answer.embedded import _own_settings_first
    from vllm_advisor.schema import Evidence, Finding, Recommendation
    from vllm_advisor.schema.message import msg

    chunk = Finding(cause="chunked_prefill_interference", confidence=0.8)
    budget = Recommendation(change=msg("rec.chunked_prefill_interference_1"), flag="--max-num-batched-tokens 2048")
    undo = Recommendation(change=msg("rec.attention_backend_default"), flag="--attention-backend FLASH_ATTN")
    gap = Evidence(kind="model", origin="model", label=msg("ev.backend_gap", figure=msg("figure.ttft_p50")), value=2.8, unit="x")
    setting = Evidence(kind="config", origin="deployment", label=msg("ev.setting", name="attention_backend"), value="TRITON_ATTN")
    priced = Finding(cause="attention_backend", confidence=0.5, evidence=[setting, gap])
    unpriced = Finding(cause="attention_backend", confidence=0.5, evidence=[setting])
    assert [r.flag for _, r in _own_settings_first([(chunk, budget), (priced, undo)])] == ["--attention-backend FLASH_ATTN", "--max-num-batched-tokens 2048"]
    assert [r.flag for _, r in _own_settings_first([(chunk, budget), (unpriced, undo)])] == ["--max-num-batched-tokens 2048", "--attention-backend FLASH_ATTN"]

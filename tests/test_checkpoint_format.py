"""A checkpoint's own weight format reaches the memory and step-time models.

WHY: vLLM reads the format from the checkpoint's quantization_config, so users serve "-AWQ" copies,
gpt-oss (MXFP4 experts) and DeepSeek-V3 (FP8) without --quantization. Modelled in BF16 they "could not
start" on hardware where they run (a reviewer's find: gpt-oss-120b on one H100 reported serving 2,560
requests, modelled at 234 GB of weights).
"""

from __future__ import annotations

import pytest

from vllm_advisor.perf.catalog import get_model
from vllm_advisor.perf.predict import build_engine_model
from vllm_advisor.schema import Deployment, EngineArgs


def _memory(model: str, gpu: str, n: int = 1, **args):
    dep = Deployment(engine="vllm", model=model, gpu=gpu, num_gpus=n, vllm_version="0.10.1")
    return build_engine_model(dep, EngineArgs(model=model, tensor_parallel_size=n, **args), needed_model_len=8192).memory


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("Qwen/Qwen2.5-72B-Instruct-AWQ", "awq"), ("Qwen3-32B-FP8", "fp8"), ("Qwen3-30B-A3B-GPTQ-Int8", "int8"), ("Qwen/Qwen2.5-7B-Instruct", None)],
)
def test_a_quantised_copy_names_its_format(name, fmt):
    assert get_model(name).checkpoint_quantization == fmt


def test_an_awq_copy_holds_about_a_quarter_of_the_bf16_weights():
    bf16 = _memory("Qwen/Qwen2.5-72B-Instruct", "H100", 2)
    awq = _memory("Qwen/Qwen2.5-72B-Instruct-AWQ", "H100", 2)
    assert 0.24 < awq.weights_gib / bf16.weights_gib < 0.30
    assert awq.kv_cache_tokens > bf16.kv_cache_tokens


def test_gpt_oss_120b_fits_one_80gb_card():
    mem = _memory("openai/gpt-oss-120b", "H100")
    assert mem.fits and 55 < mem.weights_gib < 70  # the MXFP4 checkpoint is about 61 GiB


def test_deepseek_v3_fp8_fits_eight_h200s_and_a_setting_still_wins():
    assert _memory("deepseek-ai/DeepSeek-V3", "H200", 8).fits
    # an explicit --quantization (or --dtype with no format) is the user's and decides
    assert _memory("Qwen/Qwen2.5-72B-Instruct-AWQ", "H100", 2, quantization="fp8").weights_gib > _memory("Qwen/Qwen2.5-72B-Instruct-AWQ", "H100", 2).weights_gib


def test_no_quantisation_flag_offered_for_a_checkpoint_that_ships_quantised():
    from vllm_advisor.diagnosis.inputs import DiagnosisInputs
    from vllm_advisor.diagnosis.report_facts import weights_quantised

    def quantised(model):
        return weights_quantised(DiagnosisInputs(question="why slow", deployment=Deployment(engine="vllm", model=model)))

    assert quantised("openai/gpt-oss-120b") and quantised("deepseek-ai/DeepSeek-R1") and quantised("Qwen3-32B-AWQ")
    assert not quantised("Qwen/Qwen2.5-72B-Instruct") and not quantised("some-unknown-model")

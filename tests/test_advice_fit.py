"""Changes checked against the deployment they are for (diagnosis/advice_fit.py), on real reports
of the case library: nothing already set, nothing the GPU, the model's size or the user's release
cannot take, no vLLM wheel for another engine, and the release the user compares against filled in."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather

CASES = Path(__file__).resolve().parents[1] / "knowledge" / "cases"


def _changes(case: str):
    d = diagnose(gather(profile=CASES / f"{case}.yaml"))
    return [r for f in d.findings for r in f.recommendations]


def _flags(case: str) -> list[str]:
    return [r.flag for r in _changes(case) if r.flag]


def test_no_fp8_kv_cache_for_a_deployment_that_runs_one_and_the_release_compared_against_is_named():
    flags = _flags("vllm-47047-gemma4-mtp-v023-regression")  # kv_cache_dtype: fp8; "fast on 0.21.0"
    assert not any(f.startswith("--kv-cache-dtype fp8") for f in flags)
    assert "pip install vllm==0.21.0" in flags and not any("<previous>" in f for f in flags)


def test_no_one_replica_per_gpu_for_a_model_that_cannot_fit_one_gpu():
    for case in ("vllm-53472-nemotron-ultra-moe-backend-swap-itl", "vllm-4852-qwen15-72b-l20-tpot-48-vs-39"):
        assert not any(f.startswith("-tp 1") for f in _flags(case)), case


def test_no_flag_the_users_release_does_not_have():
    flags = _flags("vllm-4852-qwen15-72b-l20-tpot-48-vs-39")  # vLLM 0.4.x
    assert not any(name in f for f in flags for name in ("--compilation-config", "--api-server-count", "vllm bench serve", "--attention-backend"))


def test_quantised_weights_slower_than_16_bit_get_the_kernel_not_the_bandwidth_bound():
    ids = [r.change.id for r in _changes("chatglm6b-726-int8-weight-only-slower")]
    assert "rec.decode_bandwidth_dequant" in ids and "rec.decode_bandwidth_1" not in ids


@pytest.mark.parametrize("case", ["ktransformers-440-v03-bf16-vs-v02-q4", "mindnlp-1168-910b-op-dispatch-core-hopping", "qwen-843-official-docker-6x-slower-autogptq",
                                  "langchain-chatchat-442-v0113-streaming-gc-slow"])  # the last never names vLLM: an upgraded chat app
def test_no_vllm_wheel_for_a_report_about_another_engine(case):
    assert not any(f.startswith("pip install vllm") for f in _flags(case))


def test_a_cause_whose_changes_all_left_still_says_what_to_do():
    d = diagnose(gather(profile=CASES / "vllm-53472-nemotron-ultra-moe-backend-swap-itl.yaml"))
    assert all(f.recommendations for f in d.findings)


@pytest.mark.parametrize("case", ["qwen-1103-openai-api-demo-serial-requests", "chatglm3-735-streamlit-demo-many-users"])
def test_a_transformers_demo_is_told_to_serve_with_a_batching_server_first(case):
    d = diagnose(gather(profile=CASES / f"{case}.yaml"))
    batching = [f for f in d.findings if f.cause in ("queueing", "max_num_seqs_limit", "cpu_frontend", "benchmark_methodology")]
    assert batching and all(f.recommendations[0].change.id == "rec.serve_with_batching" for f in batching)
    assert all(f.recommendations[0].flag.startswith("vllm serve ") for f in batching)
    assert "note.engine_named_loop" in [n.id for n in d.notes]


def test_engines_named_in_the_words_of_a_report():
    from vllm_advisor.diagnosis.report_facts import engine_named_in_text

    assert engine_named_in_text("served with text-generation-webui and --pre_layer 30") == "text-generation-webui"
    assert engine_named_in_text("LoRAX with 4 adapters on 2xA30") == "LoRAX"
    assert engine_named_in_text("通过 xinference 部署 qwen") == "Xinference"
    assert engine_named_in_text("用 transformers 4.37 加载，device_map=auto") == "Hugging Face transformers"
    assert engine_named_in_text("vLLM 0.6 vs transformers generate") is None  # vLLM named too: a comparison


def test_no_memory_fraction_at_or_below_one_the_reports_words_give():
    """The serve command gave none, the notes say 0.9555: 0.95 is not offered, the words stay."""
    changes = [r for r in _changes("vllm-52520-align-mode-pool-at-ceiling-reprefill") if r.change.id == "rec.memory_config_1"]
    assert changes and not any(r.flag and "--gpu-memory-utilization" in r.flag for r in changes)


def test_the_memory_fraction_in_words_is_read_as_a_number():
    from vllm_advisor.diagnosis.advice_fit import memory_fraction_in_use
    from vllm_advisor.diagnosis.inputs import DiagnosisInputs

    def said(text: str) -> float | None:
        return memory_fraction_in_use(DiagnosisInputs(question=text))

    assert said("we run gpu_memory_utilization 0.9555 and it still OOMs") == 0.9555
    assert said("--mem-fraction-static 0.82 vs --gpu-memory-utilization=0.95") == 0.95
    assert said("raised gpu-memory-utilization from 0.9 to 0.95") is None  # a change asked about, not the value in use
    assert said("no memory settings mentioned") is None


def test_missing_prefix_hits_get_the_reasons_hits_are_lost_not_fresh_prompts():
    """Two reviews (session 12) found "measure with distinct prompts (a fresh seed)" told to users whose
    complaint is zero hits: the advice for inflated hits answered the opposite complaint."""
    for case in ("reederey87-glm53-16-prefix-cache-zero-hits-sub-block-prompts", "vllm-ascend-10313-qwen35-prefix-cache-off-by-default"):
        ids = [r.change.id for r in _changes(case)]
        assert "rec.prefix_cache_no_hits" in ids and "rec.prefix_cache_1" not in ids, case
    ids = [r.change.id for r in _changes("vllm-52884-bench-loop-warm-prefix-cache")]  # warm-cache inflation
    assert "rec.prefix_cache_no_hits" not in ids


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("prefix_cache_hits_total stays at zero", True), ("0% prefix cache hit rate", True), ("命中率为 0", True),
        ("前缀缓存没有命中", True), ("the cache is never reused across turns", True),
        ("hit rate of 91%", False), ("the same prompt hits the cache, so results look fast", False), ("hit rate 0.45", False),
    ],
)
def test_words_that_say_prefix_hits_are_missing(text, missing):
    from vllm_advisor.diagnosis.report_facts import NO_PREFIX_REUSE

    assert bool(NO_PREFIX_REUSE.search(text)) is missing


def test_speculation_at_one_stream_is_not_told_to_switch_off_at_high_concurrency():
    ids = [r.change.id for r in _changes("vllm-49547-flashinfer-spec-decode-piecewise-gb10")]  # concurrency 1
    assert "rec.spec_decode_low_load" in ids and "rec.spec_decode_1" not in ids


def test_another_packages_release_is_not_offered_as_a_vllm_release():
    """"v0.24.0 ships FlashInfer 0.6.12": the release to go back to is vLLM's 0.24.0, never 0.6.12."""
    flags = _flags("flashinfer-3935-sm120-long-prefill-11pct-after-0-6-13")
    assert "pip install vllm==0.24.0" in flags and not any("0.6.1" in f for f in flags)


def test_requests_served_one_after_another_are_told_to_find_what_serialises_them():
    ids = [r.change.id for r in _changes("deepspeed-mii-325-restful-api-0-61-req-s")]  # a REST gateway, one request at a time
    assert "rec.queueing_serialised" in ids and "rec.queueing_1" not in ids
    ids = [r.change.id for r in _changes("vllm-54101-bench-excludes-client-queueing")]  # a real queue: unchanged
    assert "rec.queueing_1" in ids


@pytest.mark.parametrize(("words", "serial"), [
    ("多个用户同时发请求时，一条做完才轮到下一条，没有并行", True),
    ("请求只能依次完成，无法并行", True),
    ("requests are processed one by one behind our gateway", True),
    ("并发 40 时每个请求只有 22 tok/s，排队时间很长", False),
    ("parallel sampling with n=4 is slow", False),
])
def test_words_that_say_requests_run_one_after_another(words, serial):
    from types import SimpleNamespace

    from vllm_advisor.diagnosis.report_facts import requests_serialised

    assert requests_serialised(SimpleNamespace(text=words)) is serial

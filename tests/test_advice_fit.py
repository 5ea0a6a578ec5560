"""Changes checked against the deployment they are for (diagnosis/advice_fit.py), on real reports
of the case library: nothing already set, nothing the GPU, the model's size or the user's release
cannot take, no vLLM wheel for another engine, and the release the user compares against filled in."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.session import Session

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
    changes = [r for r in _changes("vllm-52520-align-mode-pool-at-ceiling-reprefill") if r.change.id in ("rec.memory_config_1", "rec.memory_config_chunked")]
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


def test_no_change_that_is_the_setting_the_deployment_runs():
    """A reviewer's find: advice that repeats the user's own setting. A step budget of 8192 is not
    advised to a deployment at 8192; "more replicas" to one at DP 2 is DP 4."""
    assert "--max-num-batched-tokens 8192" not in _flags("vllm-51041-dsv4-flash-0731-swa-inflight-kv")
    assert "rec.batched_tokens_limit_1" in [r.change.id for r in _changes("vllm-51041-dsv4-flash-0731-swa-inflight-kv")]  # the words stay
    flags = _flags("vllm-45178-cudagraph-mem-estimate-shrinks-kv")  # --data-parallel-size 2
    assert "--data-parallel-size 4" in flags and "--data-parallel-size 2" not in flags


def test_prefix_caching_is_not_advised_where_it_is_on_and_is_where_nothing_says_so():
    assert "--enable-prefix-caching" not in _flags("lmdeploy-2728-80k-prompt-ttft-a800")  # "已开启前缀缓存"
    # a packaged configuration that turned it off, the setting not given: the flag is the fix
    assert "--enable-prefix-caching" in _flags("syvai-6-agent-reprefill-prefix-cache-off")


def test_prefix_caching_is_not_offered_for_prefill_where_it_is_on_by_default_and_no_prefix_repeats():
    """vLLM V1 and SGLang cache prefixes by default: `--enable-prefix-caching` for one long prompt's
    prefill repeats the default (5 English and 3 Chinese answers); beside turns of a session it stays."""
    for case in ("vllm-2404-awq-yi34b-slow-first-token", "sglang-4265-60k-prompt-blocks-next-request"):
        assert "--enable-prefix-caching" not in _flags(case), case
    assert "--enable-prefix-caching" in _flags("syvai-6-agent-reprefill-prefix-cache-off")


def test_vllm_on_another_accelerator_keeps_vllm_commands():
    assert "vllm bench serve --max-concurrency N" in _flags("vllm-ascend-8126-qwen3-8b-c2-ttft-waiting")


def test_a_user_who_compared_kv_dtypes_is_not_told_to_compare_them():
    changes = _changes("vllm-48786-fp8-kv-slower-hopper")  # runs fp8 KV, measured it beside bf16
    ids = [r.change.id for r in changes]
    assert "rec.kv_quant_compared" in ids and "rec.kv_quant_1" not in ids
    assert "--kv-cache-dtype auto" in [r.flag for r in changes]  # the way back to 16-bit KV stays
    # no quantised KV set or named: "auto" is what it runs (16-bit KV would not add capacity)
    assert "--kv-cache-dtype auto" not in _flags("vllm-45178-cudagraph-mem-estimate-shrinks-kv")


@pytest.mark.parametrize(
    "words,on",
    [("vllm serve M --enable-prefix-caching", True), ("enable_prefix_caching: true", True), ("prefix caching is enabled", True),
     ("已开启前缀缓存", True), ("前缀缓存已开启", True), ("--no-enable-prefix-caching", False), ("enable_prefix_caching=False", False),
     ("prefix caching off", False), ("why is TTFT 3 s?", False)],
)
def test_words_that_say_prefix_caching_runs(words, on):
    from vllm_advisor.diagnosis.report_facts import PREFIX_CACHING_STATED_ON

    assert bool(PREFIX_CACHING_STATED_ON.search(words)) is on


def test_already_runs_reads_every_pair_of_the_flag():
    from vllm_advisor.diagnosis.advice_fit import already_runs
    from vllm_advisor.schema import EngineArgs

    args = EngineArgs(max_num_batched_tokens=8192, kv_cache_dtype="auto")
    assert already_runs("--max-num-batched-tokens 8192", args)
    assert already_runs("--kv-cache-dtype auto", args) and not already_runs("--kv-cache-dtype auto", EngineArgs())
    assert not already_runs("-tp 1 --data-parallel-size 2", EngineArgs())  # TP 1 is the default, DP 2 is not
    assert not already_runs("--max-num-seqs N", EngineArgs(max_num_seqs=5))  # a placeholder never matches
    assert not already_runs("vllm bench serve --max-concurrency 8", args)  # a command, not a setting


def _checks(case: str) -> list[str]:
    """Every check a library report's answer gives: its changes' verify lines and its deciding commands."""
    d = diagnose(gather(profile=CASES / f"{case}.yaml"))
    return [r.verify or "" for f in d.findings for r in f.recommendations] + [m.command for m in d.missing]


@pytest.mark.parametrize("case", ["sglang-pr13926-pp-disagg-prefill-kv-send-delayed", "lmdeploy-2728-80k-prompt-ttft-a800"])
def test_no_vllm_command_metric_or_log_line_to_a_user_of_another_engine(case):
    """Reviewers found `vllm bench serve`, `vllm:` PromQL and vLLM's log lines given to SGLang,
    LMDeploy and KTransformers users (11 of 16 Chinese answers)."""
    checks = _checks(case)
    assert not any("vllm" in c.lower() for c in checks), checks


def test_no_nvidia_tool_on_an_amd_gpu_the_catalog_lacks():
    checks = _checks("vllm-8698-mi250-llama31-6-tok-s")  # gpu: MI250
    assert not any("nvidia-smi" in c for c in checks), checks
    seed = diagnose(gather(profile=Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"))
    assert any("vllm bench serve" in m.command for m in seed.missing)  # on vLLM and NVIDIA they stay


def test_the_deciding_commands_are_code_only():
    from vllm_advisor.diagnosis.deciding import COMMANDS, fitted_command

    assert not [c for c in COMMANDS.values() if "   (" in c]  # no English prose inside the code of a Chinese answer
    assert fitted_command(COMMANDS["cpu_frontend"], vllm=True, nvidia=False).startswith("py-spy top")
    assert fitted_command(COMMANDS["cpu_frontend"], vllm=False, nvidia=True) == "nvidia-smi dmon -s u"


def test_no_bisecting_for_a_user_who_never_changed_release():
    """"Pin the previous version and bisect" to users who never upgraded (3 English, 4 Chinese answers):
    without a change of release in view, compare this release with the newest one."""
    ids = [r.change.id for r in _changes("vllm-8698-mi250-llama31-6-tok-s")]
    assert "rec.version_regression_compare" in ids and "rec.version_regression_1" not in ids
    assert "rec.version_regression_1" in [r.change.id for r in _changes("ktransformers-440-v03-bf16-vs-v02-q4")]  # "V0.3 比 V0.2"


def test_an_offline_run_is_told_what_its_generate_timing_includes():
    ids = [r.change.id for r in _changes("msswift-9626-second-half-slower-longer-outputs")]
    assert "rec.benchmark_methodology_offline" in ids and "rec.benchmark_methodology_check" not in ids


def test_an_engine_driven_from_the_users_own_process_is_not_told_to_scale_api_servers():
    """`--api-server-count` scales vLLM's server; a report driving AsyncLLM from its own code runs none
    (reviewers: 7 Chinese and 6 English answers with no API server to scale)."""
    changes = _changes("vllm-49317-asyncllm-raw-mm-prompts-serialized")
    assert "rec.cpu_frontend_in_process" in [r.change.id for r in changes]
    assert "--api-server-count 4" not in [r.flag for r in changes]


def test_ktransformers_decode_is_bounded_by_host_memory_not_more_gpus():
    changes = _changes("ktransformers-587-epyc-half-populated-ram-swap")
    ids = [r.change.id for r in changes]
    assert "rec.decode_bandwidth_host" in ids and not {"rec.decode_bandwidth_1", "rec.decode_bandwidth_quantised", "rec.kv_capacity_2"} & set(ids)


def test_a_transformers_script_at_one_request_is_not_told_batching_is_the_gain():
    """At one request at a time an engine helps by its kernels, not by batching (3 Chinese answers)."""
    ids = [r.change.id for r in _changes("glm4-391-glm4v-int4-not-faster")]  # transformers, concurrency 1
    assert "rec.serve_with_batching" not in ids


def test_one_gpu_is_not_told_to_separate_prefill_from_decode():
    """Disaggregated prefill needs two instances (a reviewer's find); one GPU is told to cap the prefill per step."""
    ids = [r.change.id for r in _changes("llamacpp-29175-prefill-chunk-blocks-all-slots")]
    assert "rec.chunked_prefill_cap" in ids and "rec.chunked_prefill_interference_1" not in ids


@pytest.mark.parametrize("case", ["mlxserve-380-json-schema-decode-60x-confounded", "blog-stellersjay-llama-server-parallel-1-agents-queue"])
def test_apple_silicon_named_or_implied_by_mlx_gets_no_nvidia_tool(case):
    checks = _checks(case)  # "an Apple M4 Max" in the notes; gpu "Apple M1 Max"
    assert not any("nvidia-smi" in c for c in checks), checks



def test_a_flag_at_the_given_releases_default_is_not_advised():
    """A reviewer's find: `--max-num-batched-tokens 8192` advised to a release whose default it is. The
    resolved default counts only where the release was given (an assumed release's defaults may not be the user's)."""
    from vllm_advisor.diagnosis.advice_fit import already_runs

    known = Session(kb=False).answer("Llama-3.1-8B-Instruct on one H100 vLLM 0.26, 2000 input, 200 output, 16 clients").inputs
    assumed = Session(kb=False).answer("Llama-3.1-8B-Instruct on one H100, 2000 input, 200 output, 16 clients").inputs
    assert already_runs("--max-num-batched-tokens 8192", known.engine_args, known.engine.config)
    assert not already_runs("--max-num-batched-tokens 8192", assumed.engine_args, assumed.engine.config)
    assert not already_runs("--max-num-batched-tokens 2048", known.engine_args, known.engine.config)

"""The model and GPU catalogs: data integrity, derived figures, name lookup and config.json reading."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from vllm_advisor.errors import AdvisorError, InputFileError
from vllm_advisor.perf.catalog import (
    GpuSpec,
    ModelSpec,
    UnknownCatalogEntry,
    get_gpu,
    get_model,
    list_gpus,
    list_models,
)
from vllm_advisor.perf.catalog.gpus import PCIE_X16_GBS_PER_DIRECTION

MODELS = list_models()
GPUS = list_gpus()

# The models the brief requires, by the names users write.
REQUIRED_MODELS = [
    "Qwen2.5-7B", "Qwen2.5-14B", "Qwen2.5-32B", "Qwen2.5-72B", "Qwen3-8B", "Qwen3-14B", "Qwen3-32B",
    "Qwen3-30B-A3B", "Qwen3-235B-A22B", "QwQ-32B", "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B",
    "Llama-3.3-70B", "Llama-3.2-3B", "Mistral-7B-v0.3", "Mistral-Small-24B", "Mixtral-8x7B", "Mixtral-8x22B",
    "DeepSeek-V3", "DeepSeek-R1", "DeepSeek-R1-Distill-Qwen-32B", "GLM-4-9B", "GLM-4.5", "GLM-4.5-Air",
    "gpt-oss-20b", "gpt-oss-120b", "gemma-2-9b", "gemma-2-27b", "gemma-3-27b", "phi-4",
]
REQUIRED_GPUS = [
    "H100 SXM", "H100 PCIe", "H800", "H200", "H20", "B200", "A100 40GB", "A100-SXM4-80GB", "A800", "L40S",
    "L20", "L4", "A10", "RTX A6000", "RTX 4090", "RTX 3090", "MI300X", "DGX Spark",
]


# ----- model catalog: data integrity ------------------------------------------------------------


def test_catalog_holds_every_required_model() -> None:
    assert len(MODELS) >= 25
    names = {get_model(n).name for n in REQUIRED_MODELS}
    assert len(names) == len(REQUIRED_MODELS)


@pytest.mark.parametrize("spec", MODELS, ids=lambda s: s.name)
def test_computed_total_params_match_the_model_card(spec: ModelSpec) -> None:
    """Parameter counts are computed from the shapes; a typo in models.yaml breaks this."""
    assert spec.published_params is not None
    assert spec.total_params / 1e9 == pytest.approx(spec.published_params, rel=0.03)


@pytest.mark.parametrize("spec", [m for m in MODELS if m.is_moe], ids=lambda s: s.name)
def test_computed_active_params_match_the_model_card(spec: ModelSpec) -> None:
    assert spec.published_active_params is not None
    active = spec.active_params_counted_as(spec.published_active_convention)
    assert active / 1e9 == pytest.approx(spec.published_active_params, rel=0.05)
    assert spec.active_params < spec.total_params


@pytest.mark.parametrize("spec", MODELS, ids=lambda s: s.name)
def test_each_model_cites_its_config_json(spec: ModelSpec) -> None:
    assert spec.hf_id
    assert spec.source[0] == f"https://huggingface.co/{spec.hf_id}/blob/main/config.json"
    assert all(url.startswith("https://") for url in spec.source)
    assert spec.verified or spec.verified_via is not None or spec.notes


def test_published_parameter_counts_of_key_models() -> None:
    # Values from the model cards (Qwen2.5-32B: "Number of Parameters: 32.5B"), as found by search.
    assert get_model("Qwen2.5-32B").total_params == 32_763_876_352
    assert get_model("Llama-3.1-8B").total_params == 8_030_261_248  # Meta's 8.03B
    assert get_model("gpt-oss-120b").total_params / 1e9 == pytest.approx(116.83, abs=0.01)


def test_list_models_is_sorted_and_loaded_once() -> None:
    assert [m.name for m in MODELS] == sorted(m.name for m in MODELS)
    assert list_models()[0] is MODELS[0]


# ----- KV cache -----------------------------------------------------------------------------------


def test_motivating_model_kv_bytes_per_token() -> None:
    """Qwen2.5-32B at bf16: 2 (K and V) x 64 layers x 8 KV heads x 128 dims x 2 bytes = 256 KiB."""
    qwen = get_model("Qwen2.5-32B")
    assert qwen.attention == "gqa"
    assert qwen.kv_bytes_per_token(2) == 2 * 64 * 8 * 128 * 2 == 262_144
    assert qwen.kv_bytes_per_token(2, tp=2) == 131_072
    assert qwen.kv_bytes_per_token(1, tp=8) == 2 * 64 * 1 * 128 * 1
    # More ranks than KV heads: each rank keeps one head (vLLM replicates), so TP 16 saves nothing over TP 8.
    assert qwen.kv_heads_per_gpu(16) == 1
    assert qwen.kv_bytes_per_token(2, tp=16) == qwen.kv_bytes_per_token(2, tp=8) == 32_768
    assert qwen.kv_bytes_per_token_sliding_layers(2) == 0


def test_deepseek_v3_mla_cache_is_576_values_per_layer_and_not_split_by_tp() -> None:
    ds = get_model("DeepSeek-V3")
    assert ds.attention == "mla"
    assert ds.kv_bytes_per_token(1) == 61 * 576
    assert ds.kv_bytes_per_token(2, tp=8) == ds.kv_bytes_per_token(2, tp=1) == 70_272


def test_kv_bytes_agree_with_the_deepseek_v3_paper_table() -> None:
    """'Insights into DeepSeek-V3' (ISCA 2025) lists KV cache per token at BF16: DeepSeek-V3
    70.272 KB, Qwen-2.5 72B 327.680 KB, LLaMA-3.1 405B 516.096 KB."""
    assert get_model("DeepSeek-V3").kv_bytes_per_token(2) == 70_272
    assert get_model("Qwen2.5-72B").kv_bytes_per_token(2) == 327_680
    assert get_model("Llama-3.1-405B").kv_bytes_per_token(2) == 516_096


def test_sliding_window_layers_are_reported_separately_and_capped() -> None:
    gemma2 = get_model("gemma-2-9b")
    per_layer = 2 * 8 * 256 * 2
    assert gemma2.num_sliding_layers == 21 and gemma2.num_full_attention_layers == 21
    assert gemma2.kv_bytes_per_token_full_layers(2) == 21 * per_layer
    assert gemma2.kv_bytes_per_token_sliding_layers(2) == 21 * per_layer
    # An 8192-token sequence: full layers keep 8192 tokens, sliding layers only the 4096-token window.
    assert gemma2.kv_bytes_for_sequence(8192, 2) == 8192 * 21 * per_layer + 4096 * 21 * per_layer
    assert gemma2.kv_bytes_for_sequence(1000, 2) == 1000 * gemma2.kv_bytes_per_token(2)

    gemma3 = get_model("gemma-3-27b")
    assert (gemma3.num_full_attention_layers, gemma3.num_sliding_layers, gemma3.sliding_window) == (10, 52, 1024)
    oss = get_model("gpt-oss-120b")
    assert (oss.num_full_attention_layers, oss.num_sliding_layers, oss.sliding_window) == (18, 18, 128)
    assert oss.kv_bytes_per_token_full_layers(2) == 18 * 2 * 8 * 64 * 2


def test_few_kv_heads_replicate_across_tensor_parallel_ranks() -> None:
    glm = get_model("GLM-4-9B")  # 2 KV heads
    assert [glm.kv_heads_per_gpu(tp) for tp in (1, 2, 4, 8)] == [2, 1, 1, 1]
    with pytest.raises(ValueError):
        glm.kv_heads_per_gpu(0)


# ----- weights and FLOPs --------------------------------------------------------------------------


def test_weight_bytes_scale_with_element_size() -> None:
    qwen = get_model("Qwen2.5-32B")
    assert qwen.weight_bytes(2) == 2 * qwen.total_params
    assert qwen.weight_bytes(2) / 2**30 == pytest.approx(61.03, abs=0.01)  # ~61 GiB of bf16 weights
    assert sum(qwen.param_breakdown().values()) == qwen.total_params


def test_linear_flops_are_twice_the_multiplied_weights() -> None:
    for name in ("Qwen2.5-32B", "Qwen3-30B-A3B", "DeepSeek-V3", "gpt-oss-20b", "gemma-2-9b"):
        spec = get_model(name)
        assert spec.linear_flops_per_token() == pytest.approx(2 * spec.active_matmul_params, rel=1e-12), name
    qwen = get_model("Qwen2.5-32B")
    per_layer = qwen.linear_flops_per_token_per_layer()
    assert per_layer["dense_layer"] == 2 * (5120 * 5120 + 2 * 5120 * 1024 + 5120 * 5120 + 5120 + 2 * 1024 + 3 * 5120 * 27648)
    assert "moe_layer" not in per_layer
    ds = get_model("DeepSeek-V3").linear_flops_per_token_per_layer()
    # 8 routed + 1 shared expert of width 2048 multiply as many weights as the dense 18432-wide MLP;
    # an MoE layer adds only its router (7168 x 256 weights + 256 score-correction biases).
    assert ds["moe_layer"] - ds["dense_layer"] == 2 * (7168 * 256 + 256)


def test_attention_flops_grow_with_context_and_respect_windows() -> None:
    qwen = get_model("Qwen2.5-32B")
    assert qwen.attention_flops_per_token(1000) == 2 * 40 * (128 + 128) * 64 * 1000
    assert qwen.attention_flops_per_token(0) == 0
    gemma2 = get_model("gemma-2-9b")
    per_ctx = 2 * 16 * (256 + 256)
    assert gemma2.attention_flops_per_token(8192) == per_ctx * (21 * 8192 + 21 * 4096)
    ds = get_model("DeepSeek-V3")
    assert ds.attention_flops_per_token(100) == 2 * 128 * (576 + 512) * 61 * 100
    assert ds.attention_flops_per_token(100, mla_absorbed=False) == 2 * 128 * (192 + 128) * 61 * 100
    with pytest.raises(ValueError):
        qwen.attention_flops_per_token(-1)


def test_moe_activation_width_counts_routed_and_shared_experts() -> None:
    assert get_model("Qwen2.5-32B").intermediate_size_for_activation == 27648
    assert get_model("Qwen3-30B-A3B").intermediate_size_for_activation == 8 * 768
    assert get_model("DeepSeek-V3").intermediate_size_for_activation == max(18432, 9 * 2048)


# ----- lookup ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "Qwen2.5-32B", "qwen2.5-32b-instruct", "Qwen2.5 32B",
     "qwen2.5_32b", "Qwen/Qwen2.5-32B", "Qwen2.5-32B-Chat"],
)
def test_names_ids_and_case_variants_resolve(query: str) -> None:
    spec = get_model(query)
    assert spec.name == "Qwen2.5-32B-Instruct"
    assert spec.note is None


def test_loose_qwen32b_is_assumed_with_a_note() -> None:
    for query in ("Qwen-32B", "Qwen32B", "qwen 32b"):
        spec = get_model(query)
        assert spec.name == "Qwen2.5-32B-Instruct"
        assert spec.note is not None and "assumed Qwen2.5-32B-Instruct" in spec.note
        assert "Qwen3-32B" in spec.note and "QwQ-32B" in spec.note
    # The cached entry itself is untouched.
    assert get_model("Qwen2.5-32B").note is None


def test_quantized_repository_names_resolve_to_the_base_architecture() -> None:
    spec = get_model("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4")
    assert spec.name == "Qwen2.5-72B-Instruct"
    assert spec.note is not None and "GPTQ-INT4" in spec.note
    assert get_model("Qwen2.5-32B-Instruct-AWQ").name == "Qwen2.5-32B-Instruct"


def test_hf_ids_with_old_org_names_resolve() -> None:
    assert get_model("meta-llama/Meta-Llama-3.1-8B-Instruct").name == "Llama-3.1-8B-Instruct"
    assert get_model("google/gemma-2-9b-it").name == "gemma-2-9b-it"
    assert get_model("THUDM/glm-4-9b-chat-hf").name == "GLM-4-9B-Chat"


def test_unknown_model_is_one_line_with_close_matches() -> None:
    with pytest.raises(UnknownCatalogEntry) as info:
        get_model("Llama-3.4-70B")
    message = str(info.value)
    assert "\n" not in message
    assert "unknown model 'Llama-3.4-70B'" in message
    assert "Llama-3.3-70B-Instruct" in message and "config.json" in message
    assert isinstance(info.value, AdvisorError)
    with pytest.raises(UnknownCatalogEntry, match="known: DeepSeek-R1"):
        get_model("zzzz")


# ----- config.json ------------------------------------------------------------------------------------


def test_reads_the_shared_tiny_qwen2_config(fixtures_dir: Path) -> None:
    """The 4-layer Qwen2 that the CPU fixtures were recorded with."""
    path = fixtures_dir / "vllm-cpu-real" / "model" / "config.json"
    spec = get_model(str(path))
    assert (spec.architecture, spec.family) == ("Qwen2ForCausalLM", "qwen2")
    assert (spec.num_layers, spec.hidden_size, spec.num_kv_heads, spec.head_dim) == (4, 256, 2, 64)
    assert spec.tie_word_embeddings is True and spec.num_sliding_layers == 0
    assert spec.kv_bytes_per_token(2) == 2 * 4 * 2 * 64 * 2 == 2048
    # embedding 8192x256 (tied) + 4 x (attention 197,120 incl. qkv bias + MLP 786,432 + 2 norms) + final norm
    assert spec.total_params == 8192 * 256 + 4 * (197_120 + 3 * 256 * 1024 + 2 * 256) + 256 == 6_033_664
    assert get_model(str(path.parent)).total_params == spec.total_params  # a directory works too


def _hf_config(spec: ModelSpec) -> dict[str, Any]:
    """A config.json as Hugging Face writes it for this catalog entry's architecture."""
    text: dict[str, Any] = {
        "model_type": spec.family,
        "num_hidden_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
    }
    if spec.family in ("glm", "glm4_moe", "gpt_oss"):
        text["attention_bias"] = spec.qkv_bias
    if spec.family == "glm4_moe":
        text["use_qk_norm"] = spec.qk_norm
    if spec.family == "gemma2":
        text["sliding_window"] = spec.sliding_window
    if spec.family == "gemma3":
        text.update(sliding_window=spec.sliding_window, sliding_window_pattern=6)
    if spec.family == "gpt_oss":
        text["sliding_window"] = spec.sliding_window
        text["layer_types"] = ["sliding_attention", "full_attention"] * (spec.num_layers // 2)
    if spec.attention == "mla":
        del text["head_dim"]
        text.update(
            q_lora_rank=spec.q_lora_rank, kv_lora_rank=spec.kv_lora_rank, qk_rope_head_dim=spec.qk_rope_head_dim,
            qk_nope_head_dim=spec.qk_nope_head_dim, v_head_dim=spec.v_head_dim, topk_method="noaux_tc",
        )
    if spec.family in ("qwen3_moe", "qwen2_moe"):
        text.update(num_experts=spec.num_experts, num_experts_per_tok=spec.experts_per_token,
                    moe_intermediate_size=spec.moe_intermediate_size, decoder_sparse_step=1, mlp_only_layers=[])
    if spec.family in ("mixtral", "gpt_oss"):
        text.update(num_local_experts=spec.num_experts, num_experts_per_tok=spec.experts_per_token)
        text["intermediate_size"] = spec.moe_intermediate_size
    if spec.family in ("deepseek_v3", "glm4_moe"):
        text.update(n_routed_experts=spec.num_experts, n_shared_experts=spec.num_shared_experts,
                    num_experts_per_tok=spec.experts_per_token, moe_intermediate_size=spec.moe_intermediate_size,
                    first_k_dense_replace=spec.num_dense_layers, num_nextn_predict_layers=spec.mtp_layers)
    config: dict[str, Any] = {"architectures": [spec.architecture], "torch_dtype": "bfloat16"}
    if spec.vision:
        config["text_config"] = text
        config["vision_config"] = {
            "hidden_size": spec.vision.hidden_size, "intermediate_size": spec.vision.intermediate_size,
            "num_hidden_layers": spec.vision.num_layers, "image_size": spec.vision.image_size,
            "patch_size": spec.vision.patch_size,
        }
    else:
        config.update(text)
    return config


def _derived(spec: ModelSpec) -> dict[str, Any]:
    return {
        "total": spec.total_params,
        "active": spec.active_params,
        "attention": spec.attention,
        "layers": (spec.num_full_attention_layers, spec.num_sliding_layers, spec.sliding_window),
        "moe": (spec.num_experts, spec.experts_per_token, spec.num_moe_layers, spec.num_shared_experts),
        "kv": [(spec.kv_bytes_per_token_full_layers(2, tp), spec.kv_bytes_per_token_sliding_layers(2, tp)) for tp in (1, 2, 8)],
        "linear_flops": spec.linear_flops_per_token(),
        "attention_flops": spec.attention_flops_per_token(4096),
    }


ROUND_TRIP = ["Qwen2.5-32B", "Llama-3.2-3B", "phi-4", "GLM-4-9B", "Qwen3-30B-A3B", "Mixtral-8x7B", "DeepSeek-V3",
              "GLM-4.5", "gpt-oss-20b", "gemma-2-9b", "gemma-3-27b"]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_config_json_round_trip_reproduces_derived_figures(name: str, tmp_path: Path) -> None:
    """Dense, MoE, MLA, sliding-window and vision models written as config.json and read back."""
    spec = get_model(name)
    (tmp_path / "config.json").write_text(json.dumps(_hf_config(spec)))
    read = get_model(str(tmp_path / "config.json"))
    assert read.architecture == spec.architecture
    assert _derived(read) == _derived(spec)


def test_qwen2_moe_shared_expert_config_matches_its_card(tmp_path: Path) -> None:
    """Qwen1.5-MoE-A2.7B's config.json shapes; its card states 14.3B total, 2.7B activated."""
    cfg = {"architectures": ["Qwen2MoeForCausalLM"], "num_hidden_layers": 24, "hidden_size": 2048,
           "intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
           "max_position_embeddings": 8192, "num_experts": 60, "num_experts_per_tok": 4,
           "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = get_model(str(tmp_path))
    assert spec.total_params / 1e9 == pytest.approx(14.3, rel=0.01)
    assert spec.active_params / 1e9 == pytest.approx(2.7, rel=0.01)
    assert spec.attention == "mha"


def test_qwen2_and_mistral_sliding_window_rules(tmp_path: Path) -> None:
    base = {"num_hidden_layers": 36, "hidden_size": 2048, "intermediate_size": 11008, "num_attention_heads": 16,
            "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768}
    (tmp_path / "config.json").write_text(json.dumps(
        {**base, "architectures": ["Qwen2ForCausalLM"], "use_sliding_window": True, "sliding_window": 4096,
         "max_window_layers": 28}))
    assert get_model(str(tmp_path)).num_sliding_layers == 8  # layers 28..35
    (tmp_path / "config.json").write_text(json.dumps(
        {**base, "architectures": ["Qwen2ForCausalLM"], "use_sliding_window": False, "sliding_window": 4096}))
    assert get_model(str(tmp_path)).num_sliding_layers == 0
    (tmp_path / "config.json").write_text(json.dumps({**base, "architectures": ["MistralForCausalLM"], "sliding_window": 4096}))
    assert get_model(str(tmp_path)).num_sliding_layers == 36


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"architectures": ["MambaForCausalLM"], "hidden_size": 1}', r"architecture 'MambaForCausalLM' is not supported"),
        ('{"hidden_size": 4096}', r"field 'architectures'"),
        ('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096', r"not valid JSON"),
        ('[1, 2]', r"expected a JSON object"),
        ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64}', r"field 'num_attention_heads': missing"),
        ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": "32", "hidden_size": 64}', r"field 'num_hidden_layers'.*integer"),
        ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 8, '
         '"num_attention_heads": 6, "num_key_value_heads": 4, "vocab_size": 10, "max_position_embeddings": 8}', r"inconsistent shapes"),
    ],
)
def test_bad_config_json_is_one_line_naming_the_file(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(InputFileError, match=expected) as info:
        get_model(str(path))
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_config_paths(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="directory has no config.json"):
        get_model(str(tmp_path))
    with pytest.raises(InputFileError, match="no such file"):
        get_model(str(tmp_path / "nope" / "config.json"))
    (tmp_path / "config.json").write_bytes(b"\x00\x01binary")
    with pytest.raises(InputFileError, match="binary"):
        get_model(str(tmp_path))


# ----- GPU catalog ------------------------------------------------------------------------------------


def test_gpu_catalog_holds_every_required_gpu() -> None:
    assert len(GPUS) >= 15
    assert len({get_gpu(n).name for n in REQUIRED_GPUS}) == len(REQUIRED_GPUS)


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_gpu_figures_are_within_sane_bounds(gpu: GpuSpec) -> None:
    # 200 GB/s floor: the DGX Spark's unified LPDDR5x (273 GB/s) is the slowest memory listed.
    assert 200 <= gpu.mem_bandwidth_gbs <= 10_000
    # 14 GiB floor: 16 GB cards report less (a T4 15360MiB, some drivers 15109MiB; a V100 16GB 16160MiB).
    assert 14 <= gpu.memory_gib <= 256
    assert gpu.memory_bytes <= gpu.memory_marketed_gb * 2**30 * 1.001
    if gpu.bf16_dense_tflops and gpu.fp8_dense_tflops:
        assert gpu.fp8_dense_tflops >= gpu.bf16_dense_tflops
    if gpu.vendor == "nvidia" and gpu.form_factor != "soc":
        assert gpu.bf16_dense_tflops is not None
    if gpu.interconnect == "pcie":
        assert gpu.interconnect_bw_gbs == PCIE_X16_GBS_PER_DIRECTION[gpu.pcie_gen]  # type: ignore[index]
    assert gpu.source and all(url.startswith("https://") for url in gpu.source)


def test_datacenter_fp8_needs_hopper_or_ada_or_newer() -> None:
    for gpu in GPUS:
        if gpu.vendor == "nvidia" and gpu.compute_capability and gpu.form_factor != "soc":
            has_fp8 = gpu.fp8_dense_tflops is not None
            assert has_fp8 == (float(gpu.compute_capability) >= 8.9), gpu.name


def test_h800_h200_h100_values() -> None:
    h800 = get_gpu("H800")
    assert h800.name == "H800-SXM"
    assert (h800.interconnect, h800.interconnect_bw_gbs) == ("nvlink", 200)  # 400 GB/s bidirectional
    assert (h800.bf16_dense_tflops, h800.fp8_dense_tflops, h800.mem_bandwidth_gbs) == (989.4, 1978.9, 3350)
    assert h800.memory_bytes == 81559 * 2**20
    assert h800.memory_gib == pytest.approx(79.65, abs=0.01)
    h100 = get_gpu("H100")
    assert (h100.interconnect_bw_gbs, h100.mem_bandwidth_gbs, h100.tdp_w) == (450, 3350, 700)
    h200 = get_gpu("H200")
    assert (h200.mem_bandwidth_gbs, h200.memory_reported_mib, h200.interconnect_bw_gbs) == (4800, 143771, 450)
    assert h200.bf16_dense_tflops == h100.bf16_dense_tflops
    assert (h800.bf16_tflops, h800.fp8_tflops) == (989.4, 1978.9)
    assert get_gpu("A100").fp8_tflops is None
    h20 = get_gpu("H20")
    assert h20.interconnect_bw_gbs == 450 and h20.bf16_dense_tflops == 148


@pytest.mark.parametrize(
    ("query", "name"),
    [("H800", "H800-SXM"), ("H800-SXM", "H800-SXM"), ("NVIDIA H800", "H800-SXM"), ("h800 sxm", "H800-SXM"),
     ("A100-80G", "A100-SXM4-80GB"), ("A100 80GB", "A100-SXM4-80GB"), ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
     ("RTX4090", "RTX-4090"), ("4090", "RTX-4090"), ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("3090", "RTX-3090"),
     ("GB10", "GB10"), ("DGX Spark", "GB10"), ("A10G", "A10"), ("AMD Instinct MI300X", "MI300X")],
)
def test_gpu_aliases_resolve(query: str, name: str) -> None:
    assert get_gpu(query).name == name


def test_a_memory_size_written_loosely_resolves_only_to_a_card_of_that_size() -> None:
    """"A100-PCIe-80G" in a case file left the deployment unmodelled (a reviewer's find)."""
    assert get_gpu("A100-PCIe-80G").name == "A100-PCIe-80GB" and get_gpu("A100-SXM4-80G").name == "A100-SXM4-80GB"
    assert get_gpu("RTX 4090 24G").name == "RTX-4090" and get_gpu("L40S-48G").name == "L40S"
    with pytest.raises(UnknownCatalogEntry):
        get_gpu("RTX 4090 48G")  # a modified card with twice the memory is not the catalog's


def test_ambiguous_gpu_names_carry_a_note() -> None:
    a100 = get_gpu("A100")
    assert a100.name == "A100-SXM4-80GB" and a100.note and "assumed A100-SXM4-80GB" in a100.note
    assert get_gpu("A100-SXM4-80GB").note is None
    assert get_gpu("A10G").note is not None


def test_consumer_cards_have_p2p_disabled() -> None:
    assert not get_gpu("4090").p2p_supported and not get_gpu("3090").p2p_supported
    assert get_gpu("H100").p2p_supported


def test_unknown_gpu_is_one_line_with_close_matches() -> None:
    with pytest.raises(UnknownCatalogEntry) as info:
        get_gpu("H900")
    message = str(info.value)
    assert "\n" not in message and "unknown gpu 'H900'" in message and "H800-SXM" in message


def test_memory_falls_back_to_marketed_gib_without_a_reported_figure() -> None:
    mi300x = get_gpu("MI300X")
    assert mi300x.memory_reported_mib is None
    assert mi300x.memory_bytes == 192 * 2**30
    assert math.isclose(get_gpu("L4").memory_gib, 23034 / 1024)


def test_llama_3_is_its_own_entry_with_its_8k_context():
    """"LLaMA-3-8B" and "Llama3-8B" are the first Llama 3 release (8,192 tokens), not Llama 3.1's
    131,072: a default max_model_len sixteen times too long would misjudge what fits in the KV cache."""
    from vllm_advisor.perf.catalog import get_model

    for name in ("LLaMA-3-8B", "Llama3-8B", "meta-llama/Meta-Llama-3-8B-Instruct"):
        spec = get_model(name)
        assert (spec.name, spec.max_position_embeddings, spec.note) == ("Meta-Llama-3-8B-Instruct", 8192, None)
    assert get_model("Llama3-70B").max_position_embeddings == 8192
    assert get_model("Llama-3.1-8B").max_position_embeddings == 131072


# ----- names an audit found refused (GPUs and models people write in issues and forums) -------------


@pytest.mark.parametrize(
    ("query", "name", "assumed"),
    [
        ("H100 NVL", "H100-NVL", False), ("H100-NVL", "H100-NVL", False), ("NVIDIA H100 NVL", "H100-NVL", False),
        ("L40", "L40", False), ("NVIDIA L40", "L40", False), ("L40-48G", "L40", False),
        ("A100 40G PCIe", "A100-PCIe-40GB", False), ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB", False),
        ("A100-PCIe-40G", "A100-PCIe-40GB", False),
        ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB", False), ("V100-SXM2-16GB", "V100-SXM2-16GB", False),
        ("Tesla V100-PCIE-32GB", "V100-PCIe-32GB", False), ("Tesla V100-PCIE-16GB", "V100-PCIe-16GB", False),
        ("V100-32G", "V100-SXM2-32GB", True), ("V100 32GB", "V100-SXM2-32GB", True), ("V100", "V100-SXM2-32GB", True),
        ("Tesla V100", "V100-SXM2-32GB", True), ("V100 16GB", "V100-SXM2-16GB", True), ("V100S", "V100S-PCIe-32GB", False),
        ("Tesla T4", "T4", False), ("T4", "T4", False), ("NVIDIA T4", "T4", False),
        ("RTX 6000 Ada", "RTX-6000-Ada", False), ("RTX6000 Ada", "RTX-6000-Ada", False),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada", False),
        ("RTX 5090", "RTX-5090", False), ("5090", "RTX-5090", False), ("NVIDIA GeForce RTX 5090", "RTX-5090", False),
        ("GH200", "GH200-96GB", True), ("NVIDIA GH200 480GB", "GH200-96GB", False),
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB", False), ("GH200 144GB", "GH200-144GB", False),
        ("A40", "A40", False), ("NVIDIA A40", "A40", False), ("RTX A5000", "RTX-A5000", False), ("A4000", "RTX-A4000", False),
    ],
)
def test_new_gpu_names_resolve(query: str, name: str, assumed: bool) -> None:
    spec = get_gpu(query)
    assert spec.name == name
    assert (spec.note is not None) is assumed, spec.note


def test_l40_and_l40s_stay_apart() -> None:
    l40, l40s = get_gpu("L40"), get_gpu("L40S")
    assert (l40.name, l40s.name) == ("L40", "L40S")
    assert l40.bf16_dense_tflops == 181.05 and l40s.bf16_dense_tflops == 362.05  # same die, half the tensor rate
    assert get_gpu("NVIDIA L40S").name == "L40S" and get_gpu("L40S-48G").name == "L40S"
    assert get_gpu("L40 48GB").name == "L40" and get_gpu("NVIDIA L40").note is None


def test_names_that_were_already_taken_keep_their_entries() -> None:
    assert get_gpu("A100").name == "A100-SXM4-80GB"  # still the assumed 80 GB SXM card
    assert get_gpu("A100 40GB").name == "A100-SXM4-40GB"
    assert get_gpu("A100 PCIe").name == "A100-PCIe-80GB"
    assert get_gpu("H100").name == "H100-SXM" and get_gpu("H100 PCIe").name == "H100-PCIe"
    assert get_gpu("4090").name == "RTX-4090" and get_gpu("A6000").name == "RTX-A6000"


def test_volta_and_turing_carry_the_fp16_tensor_figure_and_no_fp8() -> None:
    """The schema has no 'no BF16' field: Volta and Turing store their FP16 tensor rate (say so in notes)."""
    for name, tflops in (("V100-SXM2-32GB", 125), ("V100-PCIe-32GB", 112), ("T4", 65)):
        gpu = get_gpu(name)
        assert float(gpu.compute_capability or 0) < 8.0
        assert gpu.bf16_tflops == tflops and gpu.fp8_tflops is None
        assert "no BF16" in gpu.notes
    v100 = get_gpu("V100-SXM2-32GB")
    assert (v100.interconnect, v100.interconnect_bw_gbs, v100.memory_reported_mib) == ("nvlink", 150, 32510)
    t4 = get_gpu("T4")
    assert (t4.mem_bandwidth_gbs, t4.memory_reported_mib, t4.pcie_gen, t4.tdp_w) == (320, 15360, 3, 70)


def test_new_gpu_figures() -> None:
    nvl = get_gpu("H100 NVL")
    assert (nvl.memory_reported_mib, nvl.mem_bandwidth_gbs, nvl.interconnect, nvl.nvlink_bridge_bw_gbs) == (95830, 3900, "pcie", 300)
    gh = get_gpu("NVIDIA GH200 480GB")
    assert (gh.memory_reported_mib, gh.bf16_dense_tflops) == (97871, get_gpu("H100").bf16_dense_tflops)
    assert get_gpu("GH200 144GB").memory_reported_mib == 146831
    rtx5090 = get_gpu("RTX 5090")
    assert (rtx5090.memory_reported_mib, rtx5090.mem_bandwidth_gbs, rtx5090.p2p_supported) == (32607, 1792, False)
    assert get_gpu("A100 40G PCIe").memory_reported_mib == get_gpu("A100 40GB").memory_reported_mib == 40960


@pytest.mark.parametrize(
    ("question", "gpu", "count"),
    [
        ("Serving Qwen2.5-7B-Instruct with vLLM on 4x V100 32GB, TP=4; why is decode slow?", "V100-SXM2-32GB", 4),
        ("我用 vllm 部署 Qwen2.5-7B，两张 T4，TP2，每个请求只有 5 token/s", "T4", 2),
        ("Llama-3.1-8B on two L40 cards with vLLM", "L40", 2),
        ("Llama-3.1-8B on two L40S cards with vLLM", "L40S", 2),
        ("8x H100 NVL serving Llama-3.3-70B", "H100-NVL", 8),
        ("单张 RTX 5090 跑 Qwen3-8B", "RTX-5090", 1),
        ("2x RTX6000 Ada, vLLM 0.8.5", "RTX-6000-Ada", 2),
        ("4 x Tesla V100-SXM2-32GB", "V100-SXM2-32GB", 4),
        ("A100 40G PCIe x 2 running Qwen2.5-14B", "A100-PCIe-40GB", 2),
        ("one GH200 serving Llama-3.1-70B", "GH200-96GB", 1),
    ],
)
def test_the_question_reader_finds_the_new_gpus(question: str, gpu: str, count: int) -> None:
    from vllm_advisor.probe.stated_facts import read_stated_facts

    said = read_stated_facts(question)
    assert said.gpu is not None and get_gpu(said.gpu).name == gpu
    assert said.num_gpus == count


NEW_MODELS = {
    "Llama-2-7b-chat-hf": "Llama-2-7b-chat-hf", "meta-llama/Llama-2-13b-chat-hf": "Llama-2-13b-chat-hf",
    "Llama-2-70B-Chat": "Llama-2-70b-chat-hf", "meta-llama/Llama-2-7b-hf": "Llama-2-7b-chat-hf",
    "mistralai/Mistral-7B-Instruct-v0.2": "Mistral-7B-Instruct-v0.2", "Mistral-7B-v0.1": "Mistral-7B-Instruct-v0.1",
    "Qwen/Qwen2.5-Coder-7B-Instruct": "Qwen2.5-Coder-7B-Instruct", "Qwen2.5-Coder-32B": "Qwen2.5-Coder-32B-Instruct",
    "Qwen/Qwen2.5-0.5B-Instruct": "Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B": "Qwen2.5-1.5B-Instruct",
    "Qwen2.5-3B-Instruct": "Qwen2.5-3B-Instruct", "Qwen/Qwen3-0.6B": "Qwen3-0.6B", "Qwen3-1.7B": "Qwen3-1.7B",
    "Qwen3-4B": "Qwen3-4B", "meta-llama/Llama-3.2-1B-Instruct": "Llama-3.2-1B-Instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": "DeepSeek-R1-Distill-Qwen-7B",
    "DeepSeek-R1-Distill-Qwen-14B": "DeepSeek-R1-Distill-Qwen-14B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": "DeepSeek-R1-Distill-Llama-8B",
    "DeepSeek-R1-Distill-Llama-70B": "DeepSeek-R1-Distill-Llama-70B",
    "Qwen/Qwen2-7B-Instruct": "Qwen2-7B-Instruct", "Qwen2-72B": "Qwen2-72B-Instruct",
}


@pytest.mark.parametrize("query", list(NEW_MODELS))
def test_new_model_names_resolve_exactly(query: str) -> None:
    spec = get_model(query)
    assert spec.name == NEW_MODELS[query]
    assert spec.note is None


def test_llama_2_is_mha_at_7b_and_13b_and_gqa_at_70b_with_a_4k_context() -> None:
    for name, layers, heads in (("Llama-2-7b", 32, 32), ("Llama-2-13b", 40, 40)):
        spec = get_model(name)
        assert spec.attention == "mha" and spec.num_kv_heads == spec.num_attention_heads == heads
        assert spec.kv_bytes_per_token(2) == 2 * layers * heads * 128 * 2
        assert (spec.vocab_size, spec.max_position_embeddings) == (32000, 4096)
    seventy = get_model("Llama-2-70b")
    assert (seventy.attention, seventy.num_kv_heads, seventy.max_position_embeddings) == ("gqa", 8, 4096)
    assert get_model("Llama-2-7b").kv_bytes_per_token(2) == 512 * 1024  # 4x Llama-3-8B's 128 KiB


def test_mistral_7b_v0_1_slides_and_v0_2_does_not() -> None:
    v01, v02, v03 = get_model("Mistral-7B-v0.1"), get_model("Mistral-7B-v0.2"), get_model("Mistral-7B-v0.3")
    assert (v01.sliding_window, v01.num_sliding_layers, v01.num_full_attention_layers) == (4096, 32, 0)
    assert v01.kv_bytes_for_sequence(8192, 2) == v01.kv_bytes_for_sequence(4096, 2)  # capped at the window
    assert v02.sliding_window is None and v02.num_sliding_layers == 0 and v03.sliding_window is None
    assert (v01.vocab_size, v02.vocab_size, v03.vocab_size) == (32000, 32000, 32768)
    assert get_model("Mistral-7B").name == "Mistral-7B-Instruct-v0.3"  # the loose name is unchanged


def test_r1_distills_have_their_bases_shapes() -> None:
    def shape(spec: ModelSpec) -> tuple:
        return (spec.num_layers, spec.hidden_size, spec.intermediate_size, spec.num_attention_heads, spec.num_kv_heads,
                spec.head_dim, spec.vocab_size, spec.qkv_bias)

    for distill, base in (("DeepSeek-R1-Distill-Qwen-7B", "Qwen2.5-7B"), ("DeepSeek-R1-Distill-Qwen-14B", "Qwen2.5-14B"),
                          ("DeepSeek-R1-Distill-Qwen-32B", "Qwen2.5-32B"), ("DeepSeek-R1-Distill-Llama-8B", "Llama-3.1-8B"),
                          ("DeepSeek-R1-Distill-Llama-70B", "Llama-3.3-70B")):
        assert shape(get_model(distill)) == shape(get_model(base)), distill
        assert get_model(distill).max_position_embeddings == 131072
    assert get_model("DeepSeek-R1").name == "DeepSeek-R1"  # the 671B model is not a distill


def test_small_qwen_models_tie_their_embeddings() -> None:
    for name in ("Qwen2.5-0.5B", "Qwen2.5-1.5B", "Qwen2.5-3B", "Qwen3-0.6B", "Qwen3-1.7B", "Qwen3-4B", "Llama-3.2-1B"):
        spec = get_model(name)
        assert spec.tie_word_embeddings and spec.lm_head_params == 0, name
    assert get_model("Qwen3-0.6B").total_params == 596_049_920  # as a port of the checkpoint counts it


@pytest.mark.parametrize(
    ("repo", "name", "fmt"),
    [
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "Llama-3.1-8B-Instruct", "awq"),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "Llama-3.1-70B-Instruct", "awq"),
        ("TheBloke/Llama-2-13B-chat-AWQ", "Llama-2-13b-chat-hf", "awq"),
        ("TheBloke/Llama-2-7B-Chat-GPTQ", "Llama-2-7b-chat-hf", "gptq"),
        ("Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4", "Qwen2.5-32B-Instruct", "gptq"),
        ("Qwen/Qwen2-72B-Instruct-GPTQ-Int8", "Qwen2-72B-Instruct", "int8"),
        ("TheBloke/Mistral-7B-Instruct-v0.2-AWQ", "Mistral-7B-Instruct-v0.2", "awq"),
        ("Qwen/Qwen2.5-Coder-32B-Instruct-AWQ", "Qwen2.5-Coder-32B-Instruct", "awq"),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-BNB-NF4", "Llama-3.1-8B-Instruct", "bitsandbytes"),
    ],
)
def test_quantised_repositories_resolve_to_the_base_with_their_format(repo: str, name: str, fmt: str) -> None:
    spec = get_model(repo)
    assert (spec.name, spec.checkpoint_quantization) == (name, fmt)
    assert spec.note is not None and "quantized" in spec.note
    assert get_model(name).checkpoint_quantization is None  # the cached base entry is untouched


def test_awq_int4_suffix_names_awq_in_the_note() -> None:
    spec = get_model("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")
    assert spec.note is not None and "(AWQ-INT4)" in spec.note

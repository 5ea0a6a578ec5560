"""Build a :class:`ModelSpec` from a Hugging Face ``config.json``.

Users often serve a model the catalog does not know (a fine-tune, a new release, a local path);
its ``config.json`` holds every shape the performance model needs. Each supported architecture
family has its own rules for which layers are MoE and which use sliding-window attention; those
rules follow the Hugging Face transformers modeling code the configs are written for. Fields a
config.json may omit take the transformers default for that family.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...errors import InputFileError
from ...probe.files import read_text
from .models import ModelSpec, VisionTowerSpec

#: config.json files are a few KiB; anything this big is not one.
_MAX_CONFIG_BYTES = 4 * 1024 * 1024

_MISSING: Any = object()


@dataclass(frozen=True)
class _Family:
    """How one architecture maps config.json fields onto a ModelSpec."""

    family: str
    moe: str | None = None  # 'mixtral' | 'qwen' | 'deepseek' | 'glm4_moe' | 'gpt_oss'
    sliding: str | None = None  # 'all' | 'qwen' | 'alternate' | 'pattern'
    tie_default: bool = False
    qkv_bias: bool | None = None  # None: read 'attention_bias'
    o_bias_follows_attention_bias: bool = False
    qk_norm: bool | str = False  # str: config key that switches it on
    norms_per_layer: int = 2
    nested_text: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)


_GEMMA3_DEFAULTS = {"vocab_size": 262208, "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6}

_FAMILIES: dict[str, _Family] = {
    "LlamaForCausalLM": _Family("llama", o_bias_follows_attention_bias=True),
    "MistralForCausalLM": _Family("mistral", sliding="all"),
    "Qwen2ForCausalLM": _Family("qwen2", sliding="qwen", qkv_bias=True),
    "Qwen3ForCausalLM": _Family("qwen3", sliding="qwen", qk_norm=True),
    "Phi3ForCausalLM": _Family("phi3", sliding="all"),
    "GlmForCausalLM": _Family("glm"),
    "Glm4ForCausalLM": _Family("glm4", norms_per_layer=4),
    "MixtralForCausalLM": _Family("mixtral", moe="mixtral", sliding="all"),
    "Qwen2MoeForCausalLM": _Family("qwen2_moe", moe="qwen", sliding="qwen", qkv_bias=True),
    "Qwen3MoeForCausalLM": _Family("qwen3_moe", moe="qwen", sliding="qwen", qk_norm=True),
    "DeepseekV2ForCausalLM": _Family("deepseek_v2", moe="deepseek"),
    "DeepseekV3ForCausalLM": _Family("deepseek_v3", moe="deepseek"),
    "Glm4MoeForCausalLM": _Family("glm4_moe", moe="glm4_moe", qk_norm="use_qk_norm"),
    "GptOssForCausalLM": _Family("gpt_oss", moe="gpt_oss", sliding="alternate", qkv_bias=True, o_bias_follows_attention_bias=True),
    "Gemma2ForCausalLM": _Family(
        "gemma2", sliding="alternate", tie_default=True, norms_per_layer=4, defaults={"sliding_window": 4096}
    ),
    "Gemma3ForCausalLM": _Family(
        "gemma3_text", sliding="pattern", tie_default=True, qk_norm=True, norms_per_layer=4, defaults=_GEMMA3_DEFAULTS
    ),
    "Gemma3ForConditionalGeneration": _Family(
        "gemma3", sliding="pattern", tie_default=True, qk_norm=True, norms_per_layer=4, nested_text=True,
        defaults=_GEMMA3_DEFAULTS,
    ),
}

_SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "image_size": 224, "patch_size": 16}


class _Reader:
    """Typed access to one config.json dict; every failure names the file and the field."""

    def __init__(self, data: dict[str, Any], source: str, defaults: dict[str, Any] | None = None, prefix: str = ""):
        self.data, self.source, self.defaults, self.prefix = data, source, defaults or {}, prefix

    def error(self, key: str, message: str) -> InputFileError:
        return InputFileError(message, source=self.source, field=self.prefix + key)

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if self.data.get(key) is not None:
            return self.data[key]
        if key in self.defaults:
            return self.defaults[key]
        if default is _MISSING:
            raise self.error(key, "missing (needed to size the model)")
        return default

    def int(self, key: str, default: Any = _MISSING) -> Any:
        value = self.raw(key, default)
        if value is None or value is default:
            return value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, found {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, found {value!r}")
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.raw(key, [])
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(key, f"expected a list of integers, found {value!r}")
        return value


def load_config_json(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed config.json at ``path`` (a file, or a directory holding config.json)."""
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise InputFileError("directory has no config.json", source=str(path))
        path = candidate
    text = read_text(path, max_bytes=_MAX_CONFIG_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source=str(path)) from None
    if not isinstance(data, dict):
        raise InputFileError("expected a JSON object (a Hugging Face config.json)", source=str(path))
    return data, str(path)


def model_from_config_path(path: Path) -> ModelSpec:
    data, source = load_config_json(path)
    return model_from_config(data, source)


def model_from_config(data: dict[str, Any], source: str) -> ModelSpec:
    """A ModelSpec for a config.json's contents; ``source`` names the file in errors."""
    archs = data.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise InputFileError(
            "missing 'architectures' (a list naming the model class)", source=source, field="architectures"
        )
    arch = archs[0]
    fam = _FAMILIES.get(arch)
    if fam is None:
        supported = ", ".join(sorted(_FAMILIES))
        raise InputFileError(
            f"architecture {arch!r} is not supported; supported: {supported}", source=source, field="architectures"
        )
    top = _Reader(data, source)
    if fam.nested_text:
        text_cfg = data.get("text_config")
        if not isinstance(text_cfg, dict):
            raise InputFileError("missing 'text_config' (the language model's shapes)", source=source, field="text_config")
        cfg = _Reader(text_cfg, source, fam.defaults, prefix="text_config.")
    else:
        cfg = _Reader(data, source, fam.defaults)

    layers = cfg.int("num_hidden_layers")
    hidden = cfg.int("hidden_size")
    heads = cfg.int("num_attention_heads")
    fields: dict[str, Any] = {
        "name": str(data.get("_name_or_path") or Path(source).parent.name or Path(source).name),
        "architecture": arch,
        "family": fam.family,
        "num_layers": layers,
        "hidden_size": hidden,
        "intermediate_size": cfg.int("intermediate_size"),
        "num_attention_heads": heads,
        "num_kv_heads": cfg.int("num_key_value_heads", heads),
        "head_dim": cfg.int("head_dim", None) or (hidden // heads),
        "vocab_size": cfg.int("vocab_size"),
        "tie_word_embeddings": top.bool("tie_word_embeddings", cfg.bool("tie_word_embeddings", fam.tie_default)),
        "max_position_embeddings": cfg.int("max_position_embeddings"),
        "dtype": str(data.get("torch_dtype") or data.get("dtype") or cfg.raw("torch_dtype", "bfloat16")),
        "norms_per_layer": fam.norms_per_layer,
        "source": [source],
        "notes": f"read from {source}",
    }
    attention_bias = cfg.bool("attention_bias", False)
    fields["qkv_bias"] = attention_bias if fam.qkv_bias is None else fam.qkv_bias
    fields["o_bias"] = attention_bias if fam.o_bias_follows_attention_bias else False
    fields["qk_norm"] = cfg.bool(fam.qk_norm, False) if isinstance(fam.qk_norm, str) else fam.qk_norm
    fields.update(_sliding(cfg, fam, layers))
    if fam.family.startswith("deepseek"):
        fields.update(_mla(cfg, heads))
    if fam.moe:
        fields.update(_moe(cfg, fam, layers))
    if fam.nested_text and isinstance(data.get("vision_config"), dict):
        vis = _Reader(data["vision_config"], source, _SIGLIP_DEFAULTS, prefix="vision_config.")
        fields["vision"] = VisionTowerSpec(
            hidden_size=vis.int("hidden_size"),
            intermediate_size=vis.int("intermediate_size"),
            num_layers=vis.int("num_hidden_layers"),
            image_size=vis.int("image_size"),
            patch_size=vis.int("patch_size"),
        )
    quant = data.get("quantization_config")
    if isinstance(quant, dict) and isinstance(quant.get("quant_method"), str):
        fields["checkpoint_quantization"] = quant["quant_method"]
    try:
        return ModelSpec(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InputFileError(f"inconsistent shapes: {first['msg']}" + (f" ({where})" if where else ""), source=source) from None


def _sliding(cfg: _Reader, fam: _Family, layers: int) -> dict[str, Any]:
    """sliding_window and how many layers use it, by the family's rule (or explicit layer_types)."""
    layer_types = cfg.raw("layer_types", None)
    window = cfg.int("sliding_window", None)
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != layers:
            raise cfg.error("layer_types", f"has {len(layer_types)} entries for {layers} layers")
        count = sum(1 for t in layer_types if t == "sliding_attention")
    elif fam.sliding == "all":
        count = layers if window else 0
    elif fam.sliding == "qwen":
        use = cfg.bool("use_sliding_window", False)
        count = max(0, layers - cfg.int("max_window_layers", layers)) if (use and window) else 0
    elif fam.sliding == "alternate":
        count = math.ceil(layers / 2)  # layers 0, 2, 4, ... slide
    elif fam.sliding == "pattern":
        pattern = cfg.int("sliding_window_pattern")
        count = layers - layers // pattern  # every pattern-th layer is global
    else:
        count = 0
    if count and not window:
        raise cfg.error("sliding_window", "missing, but the layer pattern has sliding-window layers")
    return {"sliding_window": window, "num_sliding_layers": count} if count else {}


def _mla(cfg: _Reader, heads: int) -> dict[str, Any]:
    kv_lora = cfg.int("kv_lora_rank", None)
    if kv_lora is None:
        return {}
    rope, nope = cfg.int("qk_rope_head_dim"), cfg.int("qk_nope_head_dim")
    return {
        "kv_lora_rank": kv_lora,
        "q_lora_rank": cfg.int("q_lora_rank", None),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": cfg.int("v_head_dim"),
        "head_dim": rope + nope,
        "num_kv_heads": heads,
    }


def _moe(cfg: _Reader, fam: _Family, layers: int) -> dict[str, Any]:
    """Routed/shared expert shapes and the number of layers that keep a dense MLP."""
    out: dict[str, Any] = {}
    if fam.moe in ("mixtral", "gpt_oss"):
        out["num_experts"] = cfg.int("num_local_experts")
        out["experts_per_token"] = cfg.int("num_experts_per_tok", None) or cfg.int("experts_per_token")
        out["moe_intermediate_size"] = cfg.int("intermediate_size")
        if fam.moe == "gpt_oss":
            out.update(expert_bias=True, router_bias=True)
        return out
    if fam.moe == "qwen":
        experts = cfg.int("num_experts")
        step = cfg.int("decoder_sparse_step", 1)
        dense_only = set(cfg.int_list("mlp_only_layers"))
        moe_layers = sum(1 for i in range(layers) if i not in dense_only and experts > 0 and (i + 1) % step == 0)
        out.update(
            num_experts=experts,
            experts_per_token=cfg.int("num_experts_per_tok"),
            moe_intermediate_size=cfg.int("moe_intermediate_size"),
            num_dense_layers=layers - moe_layers,
        )
        shared = cfg.int("shared_expert_intermediate_size", None)
        if shared:
            out["shared_expert_intermediate_size"] = shared
        return out
    # DeepSeek V2/V3 and GLM-4.5: the first k layers are dense, the rest MoE (every moe_layer_freq-th).
    first_dense = cfg.int("first_k_dense_replace", 0)
    freq = cfg.int("moe_layer_freq", 1)
    moe_layers = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    out.update(
        num_experts=cfg.int("n_routed_experts"),
        experts_per_token=cfg.int("num_experts_per_tok"),
        moe_intermediate_size=cfg.int("moe_intermediate_size"),
        num_shared_experts=cfg.int("n_shared_experts", 0),
        num_dense_layers=layers - moe_layers,
        mtp_layers=cfg.int("num_nextn_predict_layers", 0),
        # 'noaux_tc' routing adds a per-expert score-correction bias (DeepSeek-V3, GLM-4.5).
        router_bias=cfg.raw("topk_method", "noaux_tc" if fam.moe == "glm4_moe" else "greedy") == "noaux_tc",
    )
    return out

"""Model shapes: what a model costs in weights, KV cache and FLOPs, derived from its architecture.

The catalog (``models.yaml``) stores only what a Hugging Face ``config.json`` states plus the
model card's published parameter count. Everything the performance model needs (parameter
counts, KV bytes per token, FLOPs) is computed here from the shapes, so a typo in the data shows
up as a parameter count that disagrees with the model card (tests/test_catalog.py checks this).

``get_model`` accepts a catalog name, an alias, a Hugging Face id, a loose name ("Qwen-32B", with
a note saying what was assumed), or a path to a ``config.json`` (or a folder holding one).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from ._names import UnknownCatalogEntry, normalise, unknown

#: libyaml's safe loader when PyYAML has it (about 10x faster on these packaged files), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Suffixes that name a fine-tune or packaging of the same architecture, stripped when matching.
_VARIANT_SUFFIXES = ("-instruct", "-chat", "-it", "-hf", "-base")
#: Suffixes that name a quantized copy of the same architecture: matched, with a note.
_QUANT_SUFFIX = re.compile(
    r"-(awq(-int4)?|gptq(-int[48])?|int[48]|fp8(-dynamic)?|w4a16|w8a8|w8a16|bnb-4bit|bnb-nf4|4bit|8bit|nvfp4|mxfp4|gguf|mlx)$"
)
#: The weight format (memory.WEIGHT_BYTES's key) each suffix names. vLLM reads a checkpoint's format
#: from its quantization_config, so a served "-AWQ" copy holds 4-bit weights without --quantization.
#: GGUF and MLX files name no single width (and are not vLLM's formats): their weights stay unknown.
_SUFFIX_FORMAT = {
    "awq": "awq", "awq-int4": "awq", "gptq": "gptq", "gptq-int4": "gptq", "gptq-int8": "int8", "int4": "w4a16", "int8": "int8",
    "fp8": "fp8", "fp8-dynamic": "fp8", "w4a16": "w4a16", "w8a8": "w8a8", "w8a16": "int8",
    "bnb-4bit": "bitsandbytes", "bnb-nf4": "bitsandbytes", "4bit": "bitsandbytes", "8bit": "int8", "nvfp4": "nvfp4", "mxfp4": "mxfp4",
}


class VisionTowerSpec(BaseModel):
    """A SigLIP-style vision encoder (Gemma 3): its weights load with the model and take memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    image_size: int = Field(gt=0, description="pixels per side")
    patch_size: int = Field(gt=0, description="pixels per side")

    def params(self, text_hidden_size: int) -> int:
        """Encoder (attention + MLP with biases, two LayerNorms per layer), patch and position
        embeddings, final LayerNorm, and the projector into the language model's hidden size."""
        h, i = self.hidden_size, self.intermediate_size
        per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * (2 * h)
        patches = (self.image_size // self.patch_size) ** 2
        embeddings = 3 * self.patch_size**2 * h + h + patches * h
        projector = h * text_hidden_size + h
        return self.num_layers * per_layer + embeddings + 2 * h + projector


class ModelSpec(BaseModel):
    """One model's architecture, with the derived figures the performance model uses.

    Sizes are counts (layers, heads) or widths in elements; byte figures take the element size as
    an argument because it depends on the deployment (bf16, fp8 KV cache, int4 weights...).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    hf_id: str | None = None
    aliases: list[str] = Field(default_factory=list)
    assumed_aliases: list[str] = Field(
        default_factory=list, description="loose names resolved to this entry with a note saying so"
    )
    architecture: str = Field(description="config.json 'architectures'[0]")
    family: str = Field(description="config.json 'model_type' of the language model")

    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0, description="dense MLP width; MoE expert width is moe_intermediate_size")
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0, description="query/key head width; for MLA qk_nope_head_dim + qk_rope_head_dim")
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool
    max_position_embeddings: int = Field(gt=0, description="tokens; vLLM's default max_model_len")
    dtype: str = "bfloat16"

    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = Field(2, ge=0, description="RMSNorm/LayerNorm vectors per decoder layer")

    sliding_window: int | None = Field(None, gt=0, description="tokens seen by sliding-window layers")
    num_sliding_layers: int = Field(0, ge=0, description="layers with sliding-window attention")

    q_lora_rank: int | None = Field(None, gt=0)
    kv_lora_rank: int | None = Field(None, gt=0)
    qk_rope_head_dim: int | None = Field(None, gt=0)
    qk_nope_head_dim: int | None = Field(None, gt=0)
    v_head_dim: int | None = Field(None, gt=0)

    num_experts: int | None = Field(None, gt=0, description="routed experts per MoE layer")
    experts_per_token: int | None = Field(None, gt=0)
    moe_intermediate_size: int | None = Field(None, gt=0)
    num_shared_experts: int = Field(0, ge=0, description="always-on experts, each moe_intermediate_size wide")
    shared_expert_intermediate_size: int | None = Field(
        None, gt=0, description="one always-on expert of this width with a sigmoid gate (Qwen2-MoE)"
    )
    num_dense_layers: int = Field(0, ge=0, description="layers of an MoE model that use the dense MLP")
    expert_bias: bool = False
    router_bias: bool = False
    mtp_layers: int = Field(0, ge=0, description="multi-token-prediction layers, loaded only for MTP speculation")

    vision: VisionTowerSpec | None = None
    checkpoint_quantization: str | None = Field(None, description="format the published weights ship in")

    published_params: float | None = Field(None, gt=0, description="billions, from the model card")
    published_active_params: float | None = Field(None, gt=0, description="billions, from the model card")
    published_active_convention: Literal["all", "matmul", "no_embeddings"] = Field(
        "all",
        description="what the card's active figure counts: 'all' embeddings included; 'matmul' the input "
        "embedding left out; 'no_embeddings' input embedding and LM head both left out",
    )
    source: list[str] = Field(default_factory=list)
    verified: bool = False
    verified_via: str | None = None
    notes: str = ""
    note: str | None = Field(None, description="how this entry was found, when a name had to be assumed")

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        mla = [self.kv_lora_rank, self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim]
        if any(v is not None for v in mla) and not all(v is not None for v in mla):
            raise ValueError("MLA needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim together")
        moe = [self.num_experts, self.experts_per_token, self.moe_intermediate_size]
        if any(v is not None for v in moe) and not all(v is not None for v in moe):
            raise ValueError("MoE needs num_experts, experts_per_token and moe_intermediate_size together")
        if self.num_experts and self.experts_per_token and self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token exceeds num_experts")
        if self.num_dense_layers > self.num_layers or self.num_sliding_layers > self.num_layers:
            raise ValueError("more dense or sliding layers than layers")
        if (self.sliding_window is None) != (self.num_sliding_layers == 0):
            raise ValueError("sliding_window and num_sliding_layers must be given together")
        if self.kv_lora_rank is None and self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads is not a multiple of num_kv_heads")
        return self

    # ----- structure -------------------------------------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def attention(self) -> Literal["gqa", "mha", "mla"]:
        if self.kv_lora_rank is not None:
            return "mla"
        return "mha" if self.num_kv_heads == self.num_attention_heads else "gqa"

    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    @property
    def intermediate_size_for_activation(self) -> int:
        """Widest per-token MLP intermediate alive at once: the dense MLP, or for MoE the routed
        experts' outputs for one token (top-k x expert width) plus the shared experts."""
        moe = 0
        if self.is_moe:
            moe = self.experts_per_token * self.moe_intermediate_size + self._shared_width()  # type: ignore[operator]
        dense = self.intermediate_size if (not self.is_moe or self.num_dense_layers) else 0
        return max(moe, dense)

    def _shared_width(self) -> int:
        width = self.num_shared_experts * (self.moe_intermediate_size or 0)
        return width + (self.shared_expert_intermediate_size or 0)

    # ----- parameters ------------------------------------------------------------------------

    @property
    def attention_params_per_layer(self) -> int:
        """Weights (and biases) of one layer's attention projections."""
        h, heads = self.hidden_size, self.num_attention_heads
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim  # type: ignore[operator]
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk
            else:
                q = h * heads * qk
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)  # type: ignore[operator]
            kv += self.kv_lora_rank + self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)  # type: ignore[operator]
            return q + kv + heads * self.v_head_dim * h  # type: ignore[operator]
        q_width, kv_width = heads * self.head_dim, self.num_kv_heads * self.head_dim
        params = h * q_width + 2 * h * kv_width + q_width * h
        if self.qkv_bias:
            params += q_width + 2 * kv_width
        if self.o_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    @property
    def dense_mlp_params(self) -> int:
        """Gated MLP (gate, up, down) of one dense layer."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        """One routed expert (gated MLP, plus biases where the model has them)."""
        if not self.is_moe:
            return 0
        h, i = self.hidden_size, self.moe_intermediate_size
        return 3 * h * i + ((2 * i + h) if self.expert_bias else 0)  # type: ignore[operator]

    @property
    def moe_always_on_params_per_layer(self) -> int:
        """Router and shared experts of one MoE layer: used by every token."""
        if not self.is_moe:
            return 0
        h = self.hidden_size
        router = self.router_params_per_layer
        shared = self.num_shared_experts * 3 * h * self.moe_intermediate_size  # type: ignore[operator]
        if self.shared_expert_intermediate_size:
            shared += 3 * h * self.shared_expert_intermediate_size + h  # + the sigmoid gate
        return router + shared

    @property
    def router_params_per_layer(self) -> int:
        """One MoE layer's router (gate) weights, and its bias where the model has one."""
        if not self.is_moe:
            return 0
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)  # type: ignore[operator]

    @property
    def router_params(self) -> int:
        """Every MoE layer's router: replicated on each tensor-parallel rank and kept in 16 bits by
        quantised checkpoints."""
        return self.num_moe_layers * self.router_params_per_layer

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters stored for the output projection (0 when tied to the embedding)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def norm_params(self) -> int:
        return (self.num_layers * self.norms_per_layer + 1) * self.hidden_size

    @property
    def vision_params(self) -> int:
        return self.vision.params(self.hidden_size) if self.vision else 0

    def param_breakdown(self) -> dict[str, int]:
        """Parameter count per component (MTP layers excluded: vLLM loads them only for MTP
        speculative decoding)."""
        return {
            "embedding": self.embedding_params,
            "lm_head": self.lm_head_params,
            "attention": self.num_layers * self.attention_params_per_layer,
            "dense_mlp": (self.num_layers - self.num_moe_layers) * self.dense_mlp_params,
            "routed_experts": self.num_moe_layers * (self.num_experts or 0) * self.expert_params,
            "router_and_shared_experts": self.num_moe_layers * self.moe_always_on_params_per_layer,
            "norms": self.norm_params,
            "vision": self.vision_params,
        }

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_params(self) -> int:
        """Every weight loaded for text generation (vision tower included, MTP layers not)."""
        return sum(self.param_breakdown().values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def active_params(self) -> int:
        """Weights a text token uses: all but the routed experts it is not sent to and the vision
        tower (the convention of Qwen's and Mistral's model cards)."""
        idle = self.num_moe_layers * ((self.num_experts or 0) - (self.experts_per_token or 0)) * self.expert_params
        return self.total_params - idle - self.vision_params

    @property
    def active_matmul_params(self) -> int:
        """Weights multiplied per token: ``active_params`` less the input-embedding lookup and the
        norms (the convention of OpenAI's gpt-oss card). A tied embedding still counts once, as
        the LM head."""
        lookup = 0 if self.tie_word_embeddings else self.embedding_params
        return self.active_params - lookup - self.norm_params

    def active_params_counted_as(self, convention: Literal["all", "matmul", "no_embeddings"]) -> int:
        """Active parameters under a model card's counting convention (for checking against it)."""
        if convention == "all":
            return self.active_params
        if convention == "matmul":
            return self.active_matmul_params
        return self.active_params - self.embedding_params - self.lm_head_params - self.norm_params

    def weight_bytes(self, bytes_per_param: float) -> float:
        """Bytes of weights for the whole model at this element size (not split across GPUs)."""
        return self.total_params * bytes_per_param

    # ----- KV cache --------------------------------------------------------------------------

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads each tensor-parallel rank stores: split across ranks, replicated once there
        are more ranks than heads (vLLM: ``max(1, num_kv_heads // tp)``)."""
        if tp < 1:
            raise ValueError("tp must be >= 1")
        return max(1, self.num_kv_heads // tp)

    def _kv_bytes_per_layer(self, kv_dtype_bytes: float, tp: int) -> float:
        if self.attention == "mla":
            # The compressed latent plus the shared RoPE key; every rank keeps all of it.
            return (self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype_bytes  # type: ignore[operator]
        return 2 * self.kv_heads_per_gpu(tp) * self.head_dim * kv_dtype_bytes

    def kv_bytes_per_token_full_layers(self, kv_dtype_bytes: float, tp: int = 1) -> float:
        """KV bytes one token adds on one GPU in the full-attention layers (every token kept)."""
        return self.num_full_attention_layers * self._kv_bytes_per_layer(kv_dtype_bytes, tp)

    def kv_bytes_per_token_sliding_layers(self, kv_dtype_bytes: float, tp: int = 1) -> float:
        """KV bytes one token adds on one GPU in the sliding-window layers; those layers hold at
        most ``sliding_window`` tokens per sequence, so the memory model caps them there."""
        return self.num_sliding_layers * self._kv_bytes_per_layer(kv_dtype_bytes, tp)

    def kv_bytes_per_token(self, kv_dtype_bytes: float, tp: int = 1) -> float:
        """KV bytes per token per GPU, all layers, for a sequence shorter than the window."""
        return self.kv_bytes_per_token_full_layers(kv_dtype_bytes, tp) + self.kv_bytes_per_token_sliding_layers(
            kv_dtype_bytes, tp
        )

    def kv_bytes_for_sequence(self, tokens: int, kv_dtype_bytes: float, tp: int = 1) -> float:
        """KV bytes one sequence of ``tokens`` holds on one GPU, sliding layers capped at the window."""
        sliding_tokens = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return tokens * self.kv_bytes_per_token_full_layers(
            kv_dtype_bytes, tp
        ) + sliding_tokens * self.kv_bytes_per_token_sliding_layers(kv_dtype_bytes, tp)

    # ----- FLOPs -----------------------------------------------------------------------------

    def linear_flops_per_token_per_layer(self) -> dict[str, float]:
        """FLOPs of the weight matmuls one token costs (2 per multiply-add), by layer kind:
        'dense_layer' and 'moe_layer' per decoder layer, 'lm_head' once per token. Whole model,
        before any tensor-parallel split."""
        attn = self.attention_params_per_layer
        out = {"dense_layer": 2.0 * (attn + self.dense_mlp_params), "lm_head": 2.0 * self.embedding_params}
        if self.is_moe:
            routed = self.experts_per_token * self.expert_params  # type: ignore[operator]
            out["moe_layer"] = 2.0 * (attn + self.moe_always_on_params_per_layer + routed)
        return out

    def linear_flops_per_token(self) -> float:
        """FLOPs of all weight matmuls for one token (attention projections, MLP/experts, LM head)."""
        per = self.linear_flops_per_token_per_layer()
        dense_layers = self.num_layers - self.num_moe_layers
        return dense_layers * per["dense_layer"] + self.num_moe_layers * per.get("moe_layer", 0.0) + per["lm_head"]

    def attention_flops_per_token(self, context_len: int, *, mla_absorbed: bool = True) -> float:
        """FLOPs of the attention itself (scores and weighted values) for one new token that
        attends to ``context_len`` tokens; sliding-window layers see at most the window.

        For MLA, ``mla_absorbed`` (vLLM's decode path) attends in the latent space: scores over
        kv_lora_rank + rope dims and values of kv_lora_rank dims; otherwise (prefill path) per-head
        qk_nope + rope and v_head_dim.
        """
        if context_len < 0:
            raise ValueError("context_len must be >= 0")
        if self.attention == "mla" and mla_absorbed:
            qk_dim, v_dim = self.kv_lora_rank + self.qk_rope_head_dim, self.kv_lora_rank  # type: ignore[operator]
        elif self.attention == "mla":
            qk_dim, v_dim = self.qk_nope_head_dim + self.qk_rope_head_dim, self.v_head_dim  # type: ignore[operator]
        else:
            qk_dim = v_dim = self.head_dim
        per_context_token = 2.0 * self.num_attention_heads * (qk_dim + v_dim)
        window_ctx = min(context_len, self.sliding_window) if self.sliding_window else context_len
        return per_context_token * (
            self.num_full_attention_layers * context_len + self.num_sliding_layers * window_ctx
        )


# ----- catalog -------------------------------------------------------------------------------


@functools.cache
def _catalog() -> dict[str, ModelSpec]:
    text = resources.files(__package__).joinpath("models.yaml").read_text(encoding="utf-8")
    entries = yaml.load(text, Loader=_YAML_LOADER)
    specs = [ModelSpec(**entry) for entry in entries]
    return {spec.name: spec for spec in specs}


def _keys(spec: ModelSpec) -> list[str]:
    names = [spec.name, *spec.aliases] + ([spec.hf_id] if spec.hf_id else [])
    keys: list[str] = []
    for name in names:
        key = normalise(name)
        keys.append(key)
        for suffix in _VARIANT_SUFFIXES:
            if key.endswith(suffix):
                keys.append(key[: -len(suffix)])
    return keys


@functools.cache
def _index() -> tuple[dict[str, str], dict[str, str]]:
    """(exact key -> entry name, assumed key -> entry name); a key claimed twice is a data bug."""
    exact: dict[str, str] = {}
    for spec in _catalog().values():
        for key in _keys(spec):
            if exact.setdefault(key, spec.name) != spec.name:
                raise ValueError(f"models.yaml: '{key}' names both {exact[key]} and {spec.name}")
    assumed: dict[str, str] = {}
    for spec in _catalog().values():
        for alias in spec.assumed_aliases:
            key = normalise(alias)
            if key in exact or assumed.setdefault(key, spec.name) != spec.name:
                raise ValueError(f"models.yaml: assumed alias '{alias}' is ambiguous")
    return exact, assumed


def list_models() -> list[ModelSpec]:
    """Every catalog entry, sorted by name."""
    return [spec for _, spec in sorted(_catalog().items())]


def _lookup(key: str, asked: str) -> tuple[ModelSpec, str | None] | None:
    """The entry for a normalised key (exact names first, then assumed loose names, each also
    without a variant suffix such as -Instruct), with a note when the name was assumed."""
    exact, assumed = _index()
    candidates = [key] + [key[: -len(s)] for s in _VARIANT_SUFFIXES if key.endswith(s)]
    for candidate in candidates:
        if candidate in exact:
            return _catalog()[exact[candidate]], None
    for candidate in candidates:
        if candidate in assumed:
            spec = _catalog()[assumed[candidate]]
            others = _ambiguous_with(spec)
            also = f" (could also mean {', '.join(others)})" if others else ""
            return spec, f"'{asked}' is not an exact model name; assumed {spec.name}{also}"
    return None


def _ambiguous_with(spec: ModelSpec) -> list[str]:
    """Other catalog entries of the same size in the same line, named in an assumption note."""
    size = re.search(r"(\d+(?:\.\d+)?)b\b", spec.name.lower())
    if not size:
        return []
    prefix = spec.name.lower()[:2]
    return [
        s.name
        for s in list_models()
        if s.name != spec.name and s.name.lower().startswith(prefix) and re.search(rf"\b{size.group(1)}b\b", s.name.lower())
    ]


def get_model(name_or_path: str) -> ModelSpec:
    """A catalog entry by name, alias or Hugging Face id (case-insensitive), or a ModelSpec read
    from a ``config.json`` path (or a directory holding one).

    Raises :class:`UnknownCatalogEntry` (one line, close matches listed) for an unknown name and
    :class:`~vllm_advisor.errors.InputFileError` for an unreadable or unsupported config.json.
    """
    text = name_or_path.strip()
    path = Path(text).expanduser()
    if text and (path.exists() or text.endswith(".json")):
        # Imported here: hf_config builds ModelSpec objects, so it imports this module.
        from .hf_config import model_from_config_path

        return model_from_config_path(path)
    spec = find_model(text)
    if spec is not None:
        return spec
    exact, assumed = _index()
    raise unknown("model", text, {**exact, **assumed}, "or give the path to the model's config.json")


def find_model(name: str) -> ModelSpec | None:
    """A catalog entry by name, alias or Hugging Face id, or None (never a path, never an error):
    the lookup of ``get_model`` for names read out of free text."""
    text = name.strip()
    key = normalise(text)
    found = _lookup(key, text)
    if found:
        spec, note = found
        return spec.model_copy(update={"note": note}) if note else spec
    quant = _QUANT_SUFFIX.search(key)
    if quant:
        found = _lookup(key[: quant.start()], text)
        if found:
            spec, note = found
            q_note = (
                f"'{text}' is a quantized ({quant.group(1).upper()}) copy of {spec.name}: "
                "same architecture, different weight format"
            )
            update = {"note": "; ".join(n for n in (q_note, note) if n)}
            if quant.group(1) in _SUFFIX_FORMAT:
                update["checkpoint_quantization"] = _SUFFIX_FORMAT[quant.group(1)]
            return spec.model_copy(update=update)
    return None


__all__ = ["ModelSpec", "UnknownCatalogEntry", "VisionTowerSpec", "find_model", "get_model", "list_models"]

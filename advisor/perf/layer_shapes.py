"""The GEMMs one decoder layer runs on one GPU, from a model's architecture and the TP size.

Why per-GEMM shapes and not total weight bytes: the measured cost of a GEMM is not only its bytes
and FLOPs; each kernel has a floor of ~7 µs and a GEMM with few output tiles wastes SMs (see
:mod:`.kernels`). A 64-layer model runs 256 GEMMs per step, so the floor alone is ~1.8 ms of a
decode step. The shapes follow vLLM's column/row-parallel split, as ``benchmarks/gpu/make_shapes.py``
does for the measured models:

- attention: ``qkv_proj`` hidden -> (heads/tp + 2 x kv_heads_per_gpu) x head_dim (KV heads are
  replicated once tp exceeds them); ``o_proj`` heads/tp x head_dim -> hidden. MLA: the down
  projections (``fused_qkv_a_proj``: hidden -> q_lora + kv_lora + rope) are replicated on every
  rank; ``q_b_proj``, ``kv_b_proj`` and ``o_proj`` are split.
- dense MLP: ``gate_up`` hidden -> 2 x intermediate / tp; ``down`` intermediate / tp -> hidden.
- MoE layer: ``router`` hidden -> experts (replicated), shared experts as a dense MLP, and the routed
  experts as two grouped GEMMs (every expert's width split by tp, no expert parallelism).
- ``lm_head``: hidden -> vocab / tp, for the sampled rows only.

Biases, norms and the embedding lookup are left out: none is a GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import ModelSpec


@dataclass(frozen=True)
class Gemm:
    """``F.linear(x[M, k], W[n, k])`` on one GPU."""

    name: str
    k: float
    n: float


@dataclass(frozen=True)
class LayerShapes:
    """Per-GPU GEMMs of one model shard."""

    dense_layer: tuple[Gemm, ...]  # every GEMM of a dense decoder layer
    moe_layer: tuple[Gemm, ...]  # the non-routed GEMMs of an MoE layer (attention, router, shared experts)
    expert_gate_up: Gemm | None  # one routed expert's merged gate and up projection
    expert_down: Gemm | None
    lm_head: Gemm

    def params_per_gpu(self, num_layers: int, num_moe_layers: int, num_experts: int) -> float:
        """Weights these GEMMs hold on one GPU (for checking against the catalog's parameter count)."""
        dense = sum(g.k * g.n for g in self.dense_layer) * (num_layers - num_moe_layers)
        moe = sum(g.k * g.n for g in self.moe_layer) * num_moe_layers
        if self.expert_gate_up and self.expert_down:
            moe += num_moe_layers * num_experts * (self.expert_gate_up.k * self.expert_gate_up.n + self.expert_down.k * self.expert_down.n)
        return dense + moe + self.lm_head.k * self.lm_head.n


def attention_gemms(model: ModelSpec, tp: int) -> tuple[Gemm, ...]:
    h, heads = model.hidden_size, model.num_attention_heads / tp
    if model.attention == "mla":
        rope, kv_lora = model.qk_rope_head_dim, model.kv_lora_rank
        qk = model.qk_nope_head_dim + rope  # type: ignore[operator]
        gemms = []
        if model.q_lora_rank:
            gemms.append(Gemm("fused_qkv_a_proj", h, model.q_lora_rank + kv_lora + rope))  # type: ignore[operator]
            gemms.append(Gemm("q_b_proj", model.q_lora_rank, heads * qk))
        else:
            gemms.append(Gemm("q_proj", h, heads * qk))
            gemms.append(Gemm("kv_a_proj", h, kv_lora + rope))  # type: ignore[operator]
        gemms.append(Gemm("kv_b_proj", kv_lora, heads * (model.qk_nope_head_dim + model.v_head_dim)))  # type: ignore[arg-type, operator]
        gemms.append(Gemm("o_proj", heads * model.v_head_dim, h))  # type: ignore[operator]
        return tuple(gemms)
    d = model.head_dim
    return (Gemm("qkv_proj", h, (heads + 2 * model.kv_heads_per_gpu(tp)) * d), Gemm("o_proj", heads * d, h))


def mlp_gemms(hidden: int, width: float, tp: int, prefix: str = "") -> tuple[Gemm, ...]:
    """A gated MLP of ``width`` split over ``tp`` ranks."""
    return (Gemm(f"{prefix}gate_up", hidden, 2 * width / tp), Gemm(f"{prefix}down", width / tp, hidden))


def layer_shapes(model: ModelSpec, tp: int) -> LayerShapes:
    """The per-GPU GEMMs of ``model`` at tensor-parallel size ``tp``."""
    h = model.hidden_size
    attention = attention_gemms(model, tp)
    dense = attention + mlp_gemms(h, model.intermediate_size, tp)
    moe_layer: tuple[Gemm, ...] = ()
    gate_up = down = None
    if model.is_moe:
        moe_layer = attention + (Gemm("router", h, model.num_experts),)  # type: ignore[arg-type]
        if model.num_shared_experts:
            moe_layer += mlp_gemms(h, model.num_shared_experts * model.moe_intermediate_size, tp, "shared_")  # type: ignore[operator]
        if model.shared_expert_intermediate_size:
            moe_layer += mlp_gemms(h, model.shared_expert_intermediate_size, tp, "shared_")
        gate_up, down = mlp_gemms(h, model.moe_intermediate_size, tp, "expert_")  # type: ignore[arg-type]
    return LayerShapes(dense, moe_layer, gate_up, down, Gemm("lm_head", h, model.vocab_size / tp))


__all__ = ["Gemm", "LayerShapes", "attention_gemms", "layer_shapes", "mlp_gemms"]

"""How long one vLLM engine step takes, from the batch it computes and the hardware.

A step runs every layer once over all scheduled tokens (decodes and prefill chunks together). Its
time is the sum of named parts, each a roofline of the work it does:

- ``gemm``: the linear layers. Reading the weights (``weight_bytes / (bandwidth x eff_mem)``) or doing
  their FLOPs (``2 x active params x tokens / (peak x eff_gemm)``), whichever is slower. At decode
  batch sizes it is the weight read: that is why one request decodes at a speed set by memory
  bandwidth. MoE layers read only the experts the batch routes to.
- ``attn_decode``: decode attention reads each running request's whole KV cache once per step:
  ``sum(context lengths) x KV bytes per token / (bandwidth x eff_attn_decode)``.
- ``attn_prefill``: a prefill chunk of C tokens at depth D attends to D + C/2 tokens on average:
  ``C x 2 x heads x (qk_dim + v_dim) x layers x (D + C/2)`` FLOPs at ``peak x eff_attn_prefill``. This is
  what makes a late chunk of a 63K prompt much more expensive than an early one.
- ``comm``: tensor parallelism all-reduces the hidden state twice per layer: ring all-reduce of
  ``tokens x hidden x 2`` bytes, ``2 (tp-1)/tp`` of it over each link, plus a per-call latency.
- ``lm_head``: the vocabulary projection for the tokens that are sampled.
- ``overhead``: a fixed per-step cost (scheduling, input preparation, sampling, Python) plus a small
  per-sequence term; with ``enforce_eager`` also a kernel-launch cost per layer.

These are torch-level kernel costs plus vLLM's own per-step costs as separate terms. The efficiency
factors below are sourced starting points, to be calibrated on measured steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import BaseModel

from ..errors import UsageError
from .catalog import GpuSpec, ModelSpec
from .simulator import StepBatch


class Efficiency(BaseModel):
    """Fractions of the datasheet peak that real kernels reach, and fixed costs.

    Sources for the defaults:
    - eff_gemm 0.70: large bf16 GEMMs on Hopper/Ampere reach 70-80% of dense peak (cuBLAS; the
      FlashAttention-3 paper, arXiv 2407.08608, reports GEMM-class kernels at ~75-80% of H100 peak).
    - eff_attn_prefill 0.50: FlashAttention-2 reaches 50-73% of A100 peak forward
      (arXiv 2307.08691); FA3 reaches 75% on H100; vLLM's paged variants run lower.
    - eff_mem 0.80 / eff_attn_decode 0.60: GEMV-like decode kernels reach ~80% of HBM bandwidth;
      paged decode attention with scattered blocks less.
    - allreduce_latency_us 15 / eff_comm 0.70: NCCL small-message all-reduce latency on NVLink is
      ~10-20 us; bus bandwidth ~70% of link peak for MB-sized messages (nccl-tests).
    - step_overhead_ms 2.0, per_seq_overhead_us 10: vLLM V1 scheduling + sampling + input prep per
      step (profiles in vLLM's V1 blog, https://blog.vllm.ai/2025/01/27/v1-alpha-release.html).
    - eager_launch_us_per_layer 60: without CUDA graphs each layer launches ~10-15 kernels at ~5 us.
    """

    eff_gemm: float = 0.70
    eff_mem: float = 0.80
    eff_attn_prefill: float = 0.50
    eff_attn_decode: float = 0.60
    eff_comm: float = 0.70
    allreduce_latency_us: float = 15.0
    step_overhead_ms: float = 2.0
    per_seq_overhead_us: float = 10.0
    eager_launch_us_per_layer: float = 60.0


@dataclass(frozen=True)
class ModelCosts:
    """The per-GPU quantities of one model shard that step time depends on."""

    num_layers: int
    hidden_size: int
    dense_weight_bytes: float  # per GPU, read every step whatever the batch
    expert_bytes: float  # per GPU, per expert per MoE layer
    num_moe_layers: int
    num_experts: int
    experts_per_token: int
    linear_flops_per_token: float  # per GPU, all layers, excluding lm_head
    lm_head_flops_per_token: float  # per GPU
    kv_bytes_per_token: float  # per GPU, all layers, bytes read per context token by decode attention
    prefill_attn_flops: Callable[[int], float]  # per GPU: FLOPs for one new token at this context length
    has_sliding_window: bool = False


def model_costs(model: ModelSpec, tp: int, weight_bpp: float, kv_bytes_per_param: float) -> ModelCosts:
    """Per-GPU costs of one TP shard (PP is not split here: a step crosses every stage)."""
    parts = model.param_breakdown()
    # The input embedding is a lookup (a few rows per step), not a full read; a tied table is read as the LM head.
    per_step_params = model.total_params - parts["routed_experts"] - parts["vision"]
    if not model.tie_word_embeddings:
        per_step_params -= parts["embedding"]
    lm_head_flops = 2.0 * model.embedding_params

    def prefill_attn(context_len: int) -> float:
        return model.attention_flops_per_token(context_len, mla_absorbed=False) / tp

    return ModelCosts(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        dense_weight_bytes=per_step_params * weight_bpp / tp,
        expert_bytes=model.expert_params * weight_bpp / tp,
        num_moe_layers=model.num_moe_layers,
        num_experts=model.num_experts or 0,
        experts_per_token=model.experts_per_token or 0,
        linear_flops_per_token=(model.linear_flops_per_token() - lm_head_flops) / tp,
        lm_head_flops_per_token=lm_head_flops / tp,
        kv_bytes_per_token=model.kv_bytes_per_token(kv_bytes_per_param, tp),
        prefill_attn_flops=prefill_attn,
        has_sliding_window=bool(model.sliding_window),
    )


class StepBreakdown(BaseModel):
    """One step's predicted time by part, in milliseconds."""

    gemm_ms: float
    attn_decode_ms: float
    attn_prefill_ms: float
    comm_ms: float
    lm_head_ms: float
    overhead_ms: float

    @property
    def total_ms(self) -> float:
        return self.gemm_ms + self.attn_decode_ms + self.attn_prefill_ms + self.comm_ms + self.lm_head_ms + self.overhead_ms


class StepTimeModel:
    """Callable step-cost model for the simulator: ``model(batch) -> seconds``."""

    def __init__(
        self,
        costs: ModelCosts,
        gpu: GpuSpec,
        *,
        tp: int,
        compute_dtype: str = "bf16",
        enforce_eager: bool = False,
        efficiency: Efficiency | None = None,
        interconnect_gbs: float | None = None,
        cascade_attention: bool = True,
    ) -> None:
        self.cascade_attention = cascade_attention
        self.c = costs
        self.gpu = gpu
        self.tp = tp
        self.eff = efficiency or Efficiency()
        peak_tflops = gpu.fp8_tflops if compute_dtype == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops
        if not peak_tflops:
            raise UsageError(f"GPU {gpu.name}: no published dense BF16 TFLOP/s in the catalog, so step time cannot be modelled")
        self.peak_flops = peak_tflops * 1e12
        self.bandwidth = gpu.mem_bandwidth_gbs * 1e9
        link = interconnect_gbs if interconnect_gbs is not None else gpu.interconnect_bw_gbs
        self.link_bw = (link or 16.0) * 1e9
        self.enforce_eager = enforce_eager

    def _experts_touched(self, tokens: int) -> float:
        """Expected distinct experts per MoE layer when ``tokens`` tokens each pick ``k`` of ``E``."""
        e, k = self.c.num_experts, self.c.experts_per_token
        if not e or not k:
            return 0.0
        return e * (1.0 - (1.0 - k / e) ** tokens)

    def _decode_kv_tokens_read(self, batch: StepBatch) -> int:
        """Context tokens whose KV decode attention reads. With cascade attention (vLLM's FlashAttention
        backend uses it when at least 8 requests share a prefix of at least 256 tokens and the
        model has no sliding window; vllm/v1/attention/backends/flash_attn.py
        ``use_cascade_attention``) a common prefix is read once for all of them."""
        p, readers = batch.shared_prefix_len, batch.shared_prefix_readers
        if self.cascade_attention and p >= 256 and readers >= 8 and not self.c.has_sliding_window:
            return batch.decode_context_sum - (readers - 1) * p
        return batch.decode_context_sum

    def breakdown(self, batch: StepBatch) -> StepBreakdown:
        c, eff = self.c, self.eff
        tokens = batch.total_tokens
        if tokens == 0:
            return StepBreakdown(gemm_ms=0, attn_decode_ms=0, attn_prefill_ms=0, comm_ms=0, lm_head_ms=0, overhead_ms=0)
        weight_bytes = c.dense_weight_bytes + c.expert_bytes * c.num_moe_layers * self._experts_touched(tokens)
        gemm = max(weight_bytes / (self.bandwidth * eff.eff_mem), c.linear_flops_per_token * tokens / (self.peak_flops * eff.eff_gemm))
        attn_decode = self._decode_kv_tokens_read(batch) * c.kv_bytes_per_token / (self.bandwidth * eff.eff_attn_decode)
        prefill_flops = 0.0
        prefill_kv_bytes = 0.0
        for chunk, depth in batch.prefill_chunks:
            # Causal: the chunk's tokens see depth+1 ... depth+chunk tokens, on average depth + chunk/2.
            prefill_flops += chunk * c.prefill_attn_flops(int(depth + chunk / 2))
            prefill_kv_bytes += (depth + chunk) * c.kv_bytes_per_token
        attn_prefill = max(prefill_flops / (self.peak_flops * eff.eff_attn_prefill), prefill_kv_bytes / (self.bandwidth * eff.eff_mem))
        comm = 0.0
        if self.tp > 1:
            msg = tokens * c.hidden_size * 2.0
            per_call = eff.allreduce_latency_us * 1e-6 + msg * 2.0 * (self.tp - 1) / self.tp / (self.link_bw * eff.eff_comm)
            comm = 2 * c.num_layers * per_call
        sampled = batch.num_decodes + len(batch.prefill_chunks)
        # Its weight read is already in ``gemm`` (dense weights); only the FLOPs of sampled rows are added.
        lm_head = c.lm_head_flops_per_token * sampled / (self.peak_flops * eff.eff_gemm)
        overhead = eff.step_overhead_ms * 1e-3 + eff.per_seq_overhead_us * 1e-6 * (batch.num_decodes + len(batch.prefill_chunks))
        if self.enforce_eager:
            overhead += eff.eager_launch_us_per_layer * 1e-6 * c.num_layers
        return StepBreakdown(
            gemm_ms=gemm * 1e3,
            attn_decode_ms=attn_decode * 1e3,
            attn_prefill_ms=attn_prefill * 1e3,
            comm_ms=comm * 1e3,
            lm_head_ms=lm_head * 1e3,
            overhead_ms=overhead * 1e3,
        )

    def __call__(self, batch: StepBatch) -> float:
        return self.breakdown(batch).total_ms / 1e3

"""Time of one GPU kernel from its shape: the component formulas of the step-time model.

Each formula is a roofline (bytes at bandwidth, FLOPs at peak, each at a measured efficiency) plus
the fixed costs the H200 sweep showed cannot be left out. Why each term is there, from the data in
``benchmarks/gpu/data`` (see ``benchmarks/gpu/README.md`` for the hold-out errors):

- **GEMM** ``F.linear(x[M, K], W[N, K])``: ``latency + smoothmax(bytes / (bw x eff_mem),
  flops / (peak x eff_c(M)) x (1 + fill / (M x N)))``. At M = 1..64 a GEMM reads its weights (plus a
  ~7 µs kernel floor that dominates small TP slices); from M ~ 256 it is compute bound. The smooth
  maximum covers the crossover, where neither roofline is reached. Compute efficiency falls from
  ~0.88 at M <= 1K to ~0.75 at 16K because long kernels run at power-limited clocks, and a GEMM
  with few output tiles (small M x N) leaves SMs idle.
- **Grouped MoE GEMM** (all experts of one layer, one kernel): ``latency + smoothmax(tiles x
  tile_us, bytes / (bw x eff), flops / (peak x eff))`` where tiles = experts with rows x
  ceil(N / 128): tiny experts (TP 8 slices) cost per group, not per byte.
- **Decode attention** (one call per layer): ``latency + kv_bytes / (bw x eff x s / (s + s_half))``
  with s = requests x KV heads per GPU: one KV head of one request cannot keep enough memory
  requests in flight to reach full bandwidth.
- **Prefill attention** (one call per layer): ``latency + (flops + tail) / (peak x eff)``, where
  tail = ``tail_rows x C x 2 (qk_dim + v_dim)``: the causal imbalance of a chunk (its last query
  tiles see C more keys than its first) leaves a tail the length of one tile's work, whatever the
  depth.

Every function takes and returns plain floats (seconds), so the simulator can call them per step and
the fit script can evaluate them per measured point with the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .efficiency import Efficiency

#: Output-tile width of the grouped GEMM's per-group cost (CUTLASS / Triton MoE kernels tile N by 128).
MOE_TILE_N = 128


@dataclass(frozen=True)
class Peak:
    """The datasheet ceilings a kernel is measured against: FLOP/s and bytes/s."""

    flops: float
    bandwidth: float


def smooth_max(values: tuple[float, ...], sharpness: float) -> float:
    """``(sum v^p)^(1/p)``: the larger of two rooflines, rounded off where they cross (p -> inf: max)."""
    top = max(values)
    if top <= 0.0:
        return 0.0
    return top * sum((v / top) ** sharpness for v in values) ** (1.0 / sharpness)


def gemm_compute_efficiency(m: float, eff: Efficiency) -> float:
    """Tensor-core efficiency at M rows: ``eff_gemm`` up to the knee, then linear in log2 M down to
    ``eff_gemm x gemm_large_m_ratio`` at ``gemm_large_tokens``, flat beyond."""
    lo, hi = math.log2(eff.gemm_knee_tokens), math.log2(eff.gemm_large_tokens)
    f = min(1.0, max(0.0, (math.log2(max(m, 1.0)) - lo) / (hi - lo)))
    return eff.eff_gemm * (1.0 + f * (eff.gemm_large_m_ratio - 1.0))


def gemm_seconds(m: float, k: float, n: float, peak: Peak, eff: Efficiency, *, weight_bytes: float = 2.0, act_bytes: float = 2.0) -> float:
    """One ``[M, K] x [K, N]`` GEMM: weights read once, activations read and written once."""
    if m <= 0:
        return 0.0
    nbytes = k * n * weight_bytes + m * (k + n) * act_bytes
    memory = nbytes / (peak.bandwidth * eff.eff_mem)
    compute = 2.0 * m * k * n / (peak.flops * gemm_compute_efficiency(m, eff)) * (1.0 + eff.gemm_fill_outputs / (m * n))
    return eff.gemm_latency_us * 1e-6 + smooth_max((memory, compute), eff.gemm_sharpness)


def grouped_gemm_seconds(
    rows: float,
    experts: float,
    k: float,
    n: float,
    peak: Peak,
    eff: Efficiency,
    *,
    weight_bytes: float = 2.0,
    act_bytes: float = 2.0,
    compute_factor: float = 1.0,
    memory_factor: float = 1.0,
) -> float:
    """One MoE layer's expert GEMM over all experts at once: ``rows`` = tokens x top-k routed rows,
    ``experts`` = experts that receive at least one row (their weights are read). ``compute_factor``
    and ``memory_factor`` scale the compute roofline and the per-tile and byte terms: the torch
    kernel the parameters were measured on is not the kernel a serving engine runs (the step model
    passes vLLM's fitted ``moe_compute_factor`` / ``moe_memory_factor``)."""
    if rows <= 0 or experts <= 0:
        return 0.0
    nbytes = experts * k * n * weight_bytes + rows * (k + n) * act_bytes
    tiles = experts * math.ceil(n / MOE_TILE_N)
    parts = (
        tiles * eff.moe_tile_us * 1e-6 * memory_factor,
        nbytes / (peak.bandwidth * eff.moe_eff_mem) * memory_factor,
        2.0 * rows * k * n / (peak.flops * eff.moe_eff_gemm) * compute_factor,
    )
    return eff.moe_latency_us * 1e-6 + smooth_max(parts, eff.moe_sharpness)


def decode_attention_seconds(kv_bytes: float, streams: float, peak: Peak, eff: Efficiency) -> float:
    """One layer's decode attention: read ``kv_bytes`` of K/V; ``streams`` = requests x KV heads per GPU."""
    if kv_bytes <= 0 or streams <= 0:
        return 0.0
    parallel = streams / (streams + eff.attn_decode_half_streams)
    return eff.attn_decode_latency_us * 1e-6 + kv_bytes / (peak.bandwidth * eff.eff_attn_decode * parallel)


def prefill_attention_seconds(flops: float, tail_flops: float, peak: Peak, eff: Efficiency) -> float:
    """One layer's prefill attention: ``flops`` over all chunks, ``tail_flops`` = one tile row-block's
    causal tail (``attn_prefill_tail_rows x C x 2 (qk_dim + v_dim)``, largest chunk)."""
    if flops <= 0:
        return 0.0
    return eff.attn_prefill_latency_us * 1e-6 + (flops + tail_flops) / (peak.flops * eff.eff_attn_prefill)


__all__ = [
    "MOE_TILE_N",
    "Peak",
    "decode_attention_seconds",
    "gemm_compute_efficiency",
    "gemm_seconds",
    "grouped_gemm_seconds",
    "prefill_attention_seconds",
    "smooth_max",
]

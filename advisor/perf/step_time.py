"""How long one vLLM engine step takes, from the batch it computes and the hardware.

A step runs every layer once over all scheduled tokens (decodes and prefill chunks together). Its
time is the sum of named parts. The GPU-kernel parts use the component formulas of
:mod:`.kernels`, whose parameters were measured on an H200 (``catalog/kernels-h200.yaml``) and are
applied to any GPU's datasheet peak TFLOP/s and bandwidth:

- ``gemm``: every linear layer's GEMM at M = the step's tokens (shapes from :mod:`.layer_shapes`):
  weight read or tensor-core time, whichever dominates, plus a per-kernel floor. MoE layers add two
  grouped expert GEMMs over the experts the batch routes to.
- ``attn_decode``: decode attention reads each running request's KV cache once per step, one call
  per layer; few requests x KV heads cannot reach full bandwidth.
- ``attn_prefill``: a prefill chunk of C tokens at depth D attends to D + C/2 tokens on average:
  ``C x 2 x heads x (qk_dim + v_dim) x layers x (D + C/2)`` FLOPs, plus the causal tail of the
  largest chunk and a per-call floor. This is what makes a late chunk of a 63K prompt much more
  expensive than an early one. The parameters are those of an FA3-class kernel (cuDNN's sm90
  kernel), as vLLM runs FlashAttention-3 on Hopper.
- ``lm_head``: the vocabulary projection for the rows that are sampled.
- The four parts above are multiplied by ``sustained_factor``: a layer's kernels back to back
  measured a few percent slower than the sum of each timed alone.

vLLM's own per-step costs are separate, named terms that the torch measurements do not cover (see
:mod:`.efficiency`):

- ``comm`` (sourced): tensor parallelism all-reduces the hidden state twice per layer: ring
  all-reduce of ``tokens x hidden x 2`` bytes, ``2 (tp-1)/tp`` of it over each link, plus a per-call latency.
- ``overhead`` (fitted to real vLLM 0.26.0 runs, ``catalog/vllm-h200.yaml``): the per-step host time
  that is not hidden behind the GPU, a per-scheduled-request term, and a term per request whose
  prefill starts in the step (first chunk at depth 0: request intake, KV allocation, first-token
  output; a prefix-cache hit starts deeper and is not counted); with ``enforce_eager`` also the host time
  of launching every layer's kernels beyond what the kernels take (fitted to real vLLM on an H100).
- Graphs and compilation (fitted likewise): a decode-only step is replayed as a CUDA graph of
  torch.compile'd (fused) kernels, so its kernel parts take ``decode_graph_factor`` times the
  kernels timed one by one; a step that carries prefill tokens runs piecewise graphs around FA3's
  varlen attention and takes ``mixed_step_factor`` times. With ``enforce_eager`` neither applies.
- vLLM's fused MoE kernel (fitted on the engine steps of real MoE servers): the grouped expert GEMM's
  compute term takes ``moe_compute_factor`` times and its per-tile and byte terms ``moe_memory_factor``
  times what torch's grouped GEMM was measured at, in every mode (eager steps run the same kernels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from pydantic import BaseModel

from ..errors import UsageError
from .catalog import GpuSpec, ModelSpec
from .efficiency import ENGINE_FIELDS, PRE_FIT_ENGINE_VALUES, SOURCED_FIELDS, Efficiency, shipped_calibration, shipped_engine_fit
from .kernels import Peak, decode_attention_seconds, gemm_seconds, grouped_gemm_seconds, prefill_attention_seconds
from .layer_shapes import LayerShapes, layer_shapes
from .memory import UNQUANTISED_BYTES
from .simulator import StepBatch


#: An eager step takes the longer of its kernel launches and its kernels (True), or their sum (False).
EAGER_OVERLAP = True


@dataclass(frozen=True)
class ModelCosts:
    """The per-GPU quantities of one model shard that step time depends on."""

    num_layers: int
    hidden_size: int
    shapes: LayerShapes  # per-GPU GEMMs of a dense layer, an MoE layer, the experts and the LM head
    weight_bytes_per_param: float
    num_moe_layers: int
    num_experts: int
    experts_per_token: int
    kv_bytes_per_token: float  # per GPU, all layers, bytes read per context token by decode attention
    kv_heads_per_gpu: int  # independent K/V streams per decoding request (1 for MLA's shared latent)
    attn_flops_per_query_key: float  # 2 (qk_dim + v_dim): FLOPs of one query against one key, one head, one layer
    prefill_attn_flops: Callable[[int], float]  # per GPU: FLOPs for one new token at this context length
    has_sliding_window: bool = False


def model_costs(model: ModelSpec, tp: int, weight_bpp: float, kv_bytes_per_param: float) -> ModelCosts:
    """Per-GPU costs of one TP shard (PP is not split here: a step crosses every stage)."""

    def prefill_attn(context_len: int) -> float:
        return model.attention_flops_per_token(context_len, mla_absorbed=False) / tp

    if not model.sliding_window:
        # Without a sliding window the FLOPs are proportional to the context: one multiplication
        # per chunk instead of a call into the catalog (the simulator asks for it at every event).
        per_token = prefill_attn(1 << 20) / (1 << 20)

        def prefill_attn(context_len: int) -> float:  # noqa: F811
            return per_token * context_len

    if model.attention == "mla":
        qk_v = model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim  # type: ignore[operator]
    else:
        qk_v = 2 * model.head_dim
    return ModelCosts(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        shapes=layer_shapes(model, tp),
        weight_bytes_per_param=weight_bpp,
        num_moe_layers=model.num_moe_layers,
        num_experts=model.num_experts or 0,
        experts_per_token=model.experts_per_token or 0,
        kv_bytes_per_token=model.kv_bytes_per_token(kv_bytes_per_param, tp),
        kv_heads_per_gpu=1 if model.attention == "mla" else model.kv_heads_per_gpu(tp),
        attn_flops_per_query_key=2.0 * qk_v,
        prefill_attn_flops=prefill_attn,
        has_sliding_window=bool(model.sliding_window),
    )


class StepBreakdown(BaseModel):
    """One step's predicted time by part, in milliseconds. ``gemm``, ``attn_*`` and ``lm_head`` are GPU
    kernels (measured components, with the sustained factor); ``comm`` and ``overhead`` are vLLM's own
    sourced terms."""

    gemm_ms: float
    attn_decode_ms: float
    attn_prefill_ms: float
    comm_ms: float
    lm_head_ms: float
    overhead_ms: float

    @property
    def total_ms(self) -> float:
        return self.gemm_ms + self.attn_decode_ms + self.attn_prefill_ms + self.comm_ms + self.lm_head_ms + self.overhead_ms


#: What each part of a breakdown rests on, for parts not measured by the torch sweep.
SOURCED_BASIS = {
    "comm": "sourced, not measured: NCCL ring all-reduce, latency per call + bytes at eff_comm x link bandwidth",
    "overhead": "sourced, not measured: vLLM's scheduling, input preparation and sampling per step",
}


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
        if not gpu.bf16_tflops:
            raise UsageError(f"GPU {gpu.name}: no published dense BF16 TFLOP/s in the catalog, so step time cannot be modelled")
        self.compute_dtype = "fp8" if compute_dtype == "fp8" and gpu.fp8_tflops else "bf16"
        peak_tflops = gpu.fp8_tflops if self.compute_dtype == "fp8" else gpu.bf16_tflops
        self.peak_flops = peak_tflops * 1e12  # type: ignore[operator]
        self.bandwidth = gpu.mem_bandwidth_gbs * 1e9
        # GEMMs run at the weights' compute dtype; attention runs in bf16 whatever the weights are.
        self._gemm_peak = Peak(self.peak_flops, self.bandwidth)
        self._attn_peak = Peak(gpu.bf16_tflops * 1e12, self.bandwidth)
        link = interconnect_gbs if interconnect_gbs is not None else gpu.interconnect_bw_gbs
        self.link_bw = (link or 16.0) * 1e9
        self.enforce_eager = enforce_eager
        self._gemm_cache: dict[tuple[str, int], float] = {}
        self._cache_eff: Efficiency | None = None

    def basis(self) -> dict[str, str]:
        """Where each part of :meth:`breakdown` comes from: measured on the calibration GPU, scaled
        from it by datasheet specs, adjusted by a fit to the user's measurements, or sourced."""
        cal = shipped_calibration()
        shipped = cal.values()
        measured = cal.basis(self.gpu, self.compute_dtype)
        changed = sorted(k for k, v in shipped.items() if getattr(self.eff, k) != v)
        if changed:
            measured += f"; adjusted from the shipped values: {', '.join(changed)}"
        sourced_changed = [k for k in SOURCED_FIELDS if getattr(self.eff, k) != Efficiency.model_fields[k].default]
        out = {part: measured for part in ("gemm", "attn_decode", "attn_prefill", "lm_head")}
        out["attn_prefill"] += " (FA3-class: cuDNN sm90 parameters, depth behaviour checked on torch flash)"
        out.update(SOURCED_BASIS)
        fit = shipped_engine_fit()
        release = fit.engine.split(" (")[0]
        if any(getattr(self.eff, k) != PRE_FIT_ENGINE_VALUES[k] for k in ENGINE_FIELDS):
            out["overhead"] = (
                f"fitted to real {fit.engine} on {fit.gpu} (runs {', '.join(fit.fit_runs)}; {len(fit.holdout_runs)} other runs held out): "
                "visible host time per step, per scheduled request and per starting prefill; the delay before the scheduler sees a request"
            )
            if not self.enforce_eager:
                for part in ("gemm", "attn_decode", "attn_prefill", "lm_head"):
                    out[part] += f"; x decode_graph_factor / mixed_step_factor fitted to real {release}"
            if self.c.num_moe_layers:
                out["gemm"] += f"; expert GEMMs x moe_compute_factor / moe_memory_factor fitted on real {release} MoE engine steps"
            engine_changed = [k for k in ENGINE_FIELDS if getattr(self.eff, k) != fit.values.get(k)]
            if engine_changed:
                out["overhead"] += f"; adjusted from the shipped fit: {', '.join(engine_changed)}"
        else:
            out["overhead"] += f"; the fit to real {release} applies to that release and later, not to an older or unknown version"
        if self.enforce_eager:  # any release: launching from Python is torch's eager path, not vLLM's host code
            out["overhead"] += "; + eager kernel launches per layer beyond the kernels, fitted to real vLLM 0.26.0 on an H100 (applied to every release)"
        if sourced_changed:
            out["comm"] += f"; changed: {', '.join(sourced_changed)}"
        return out

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

    def _cached(self, key: tuple[str, int]) -> float | None:
        """GEMM times depend only on M and the parameters: kept per M until ``eff`` is replaced."""
        if self._cache_eff is not self.eff:
            self._gemm_cache.clear()
            self._cache_eff = self.eff
        return self._gemm_cache.get(key)

    def _lm_head_seconds(self, rows: int) -> float:
        cached = self._cached(("lm_head", rows))
        if cached is None:
            head = self.c.shapes.lm_head
            # a quantised checkpoint keeps its LM head in 16 bits (memory.UNQUANTISED_BYTES)
            head_bytes = max(self.c.weight_bytes_per_param, UNQUANTISED_BYTES)
            cached = self._gemm_cache[("lm_head", rows)] = gemm_seconds(rows, head.k, head.n, self._gemm_peak, self.eff, weight_bytes=head_bytes)
        return cached

    def _gemm_seconds(self, tokens: int) -> float:
        """All layers' GEMMs at M = ``tokens``."""
        cached = self._cached(("layers", tokens))
        if cached is not None:
            return cached
        c, eff, peak, wb = self.c, self.eff, self._gemm_peak, self.c.weight_bytes_per_param
        dense = sum(gemm_seconds(tokens, g.k, g.n, peak, eff, weight_bytes=wb) for g in c.shapes.dense_layer)
        total = (c.num_layers - c.num_moe_layers) * dense
        if c.num_moe_layers:
            layer = sum(gemm_seconds(tokens, g.k, g.n, peak, eff, weight_bytes=wb) for g in c.shapes.moe_layer)
            rows, experts = tokens * c.experts_per_token, self._experts_touched(tokens)
            for g in (c.shapes.expert_gate_up, c.shapes.expert_down):
                if g is not None:
                    layer += grouped_gemm_seconds(
                        rows, experts, g.k, g.n, peak, eff, weight_bytes=wb, compute_factor=eff.moe_compute_factor, memory_factor=eff.moe_memory_factor
                    )
            total += c.num_moe_layers * layer
        self._gemm_cache[("layers", tokens)] = total
        return total

    @property
    def affine_in_context(self) -> bool:
        """Whether a step's time is affine in its context lengths at a fixed batch shape (decode
        attention reads the context, prefill attention is linear in the chunk's depth). A sliding
        window caps the context it reads, so it is not; the simulator then checks each stretch. The
        host time of a request whose prefill starts (a chunk at depth 0) is a step in the depth, not
        affine either: with that term the simulator checks each stretch too. Nor is an eager step that
        takes the longer of its launches and its kernels: it bends where the kernels overtake."""
        return not self.c.has_sliding_window and not self.eff.prefill_request_overhead_ms and not (self.enforce_eager and EAGER_OVERLAP)

    def breakdown(self, batch: StepBatch) -> StepBreakdown:
        gemm, attn_decode, attn_prefill, comm, lm_head, overhead = self._parts_ms(batch)
        return StepBreakdown(gemm_ms=gemm, attn_decode_ms=attn_decode, attn_prefill_ms=attn_prefill, comm_ms=comm, lm_head_ms=lm_head, overhead_ms=overhead)

    def _parts_ms(self, batch: StepBatch) -> tuple[float, float, float, float, float, float]:
        """The six parts of :class:`StepBreakdown` as plain floats (the simulator calls this per
        step: no model object built)."""
        c, eff = self.c, self.eff
        tokens = batch.total_tokens
        if tokens == 0:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        layers = c.num_layers
        gemm = self._gemm_seconds(tokens)
        attn_decode = 0.0
        if batch.num_decodes:
            layer_bytes = self._decode_kv_tokens_read(batch) * c.kv_bytes_per_token / layers
            attn_decode = layers * decode_attention_seconds(layer_bytes, batch.num_decodes * c.kv_heads_per_gpu, self._attn_peak, eff)
        attn_prefill = 0.0
        if batch.prefill_chunks:
            # Causal: the chunk's tokens see depth+1 ... depth+chunk tokens, on average depth + chunk/2.
            flops = sum(chunk * c.prefill_attn_flops(int(depth + chunk / 2)) for chunk, depth in batch.prefill_chunks)
            tail = eff.attn_prefill_tail_rows * max(chunk for chunk, _ in batch.prefill_chunks) * c.attn_flops_per_query_key
            attn_prefill = layers * prefill_attention_seconds(flops / layers, tail, self._attn_peak, eff)
        comm = 0.0
        if self.tp > 1:
            msg = tokens * c.hidden_size * 2.0
            per_call = eff.allreduce_latency_us * 1e-6 + msg * 2.0 * (self.tp - 1) / self.tp / (self.link_bw * eff.eff_comm)
            comm = 2 * layers * per_call
        lm_head = self._lm_head_seconds(batch.num_decodes + len(batch.prefill_chunks))
        n_chunks = len(batch.prefill_chunks)
        starts = sum(1 for _, depth in batch.prefill_chunks if depth == 0)
        overhead = eff.step_overhead_ms * 1e-3 + eff.per_seq_overhead_us * 1e-6 * (batch.num_decodes + n_chunks) + eff.prefill_request_overhead_ms * 1e-3 * starts
        kernels_ms = eff.sustained_factor * 1e3 * self._graph_factor(bool(batch.prefill_chunks))
        parts = (gemm * kernels_ms, attn_decode * kernels_ms, attn_prefill * kernels_ms, comm * 1e3, lm_head * kernels_ms)
        overhead_ms = overhead * 1e3 + (self._eager_ms(sum(parts)) if self.enforce_eager else 0.0)
        return (*parts, overhead_ms)

    def _eager_ms(self, gpu_ms):
        """Host time a step without CUDA graphs adds: every layer's kernels are launched from Python
        one by one (torch.compile is off too), EAGER_OVERLAP: the GPU runs them while later ones are
        launched, so the step takes the longer of the two (the excess is charged here); else the
        launches add to the kernels. ``gpu_ms``: a number or a numpy array."""
        c, eff = self.c, self.eff
        launch_ms = ((c.num_layers - c.num_moe_layers) * eff.eager_launch_us_per_layer + c.num_moe_layers * eff.eager_moe_launch_us_per_layer) * 1e-3
        if not EAGER_OVERLAP:
            return launch_ms
        return np.maximum(launch_ms - gpu_ms, 0.0) if isinstance(gpu_ms, np.ndarray) else max(launch_ms - gpu_ms, 0.0)

    def _graph_factor(self, has_prefill: bool) -> float:
        """How vLLM's CUDA graphs and torch.compile change the kernels' time (1 when eager)."""
        if self.enforce_eager:
            return 1.0
        return self.eff.mixed_step_factor if has_prefill else self.eff.decode_graph_factor

    def __call__(self, batch: StepBatch) -> float:
        gemm, attn_decode, attn_prefill, comm, lm_head, overhead = self._parts_ms(batch)
        return (gemm + attn_decode + attn_prefill + comm + lm_head + overhead) / 1e3

    def cost_plan(self, batches: list[StepBatch]) -> "CostPlan":
        """The times of these batches under whatever ``eff`` holds when the plan is called."""
        return CostPlan(self, batches)


class CostPlan:
    """Step times of a fixed list of batches, re-evaluated cheaply under other efficiency factors.

    Calibration asks for the same simulated schedule's timings under dozens of efficiencies (see
    :mod:`.retime`). Everything in ``StepTimeModel._parts_ms`` that does not depend on ``eff`` (token
    and sequence counts, KV bytes read, prefill-attention FLOPs) is computed here once; a call is
    then numpy arithmetic plus one GEMM and one LM-head time per distinct token / row count, with the
    same formulas (``tests/test_calibrate_fast.py`` holds it equal to calling the model per batch).
    """

    def __init__(self, model: StepTimeModel, batches: list[StepBatch]) -> None:
        c = model.c
        self.model = model
        layers = c.num_layers
        self.tokens = np.array([b.total_tokens for b in batches], dtype=np.int64)
        decodes = np.array([b.num_decodes for b in batches], dtype=np.int64)
        self.seqs = decodes + np.array([len(b.prefill_chunks) for b in batches], dtype=np.int64)
        self.streams = (decodes * c.kv_heads_per_gpu).astype(float)
        self.kv_layer_bytes = np.array(
            [model._decode_kv_tokens_read(b) * c.kv_bytes_per_token / layers if b.num_decodes else 0.0 for b in batches], dtype=float
        )
        self.prefill_layer_flops = np.array(
            [sum(chunk * c.prefill_attn_flops(int(depth + chunk / 2)) for chunk, depth in b.prefill_chunks) / layers for b in batches], dtype=float
        )
        self.max_chunk = np.array([max((chunk for chunk, _ in b.prefill_chunks), default=0) for b in batches], dtype=float)
        self.has_prefill = np.array([bool(b.prefill_chunks) for b in batches], dtype=bool)
        self.starts = np.array([sum(1 for _, depth in b.prefill_chunks if depth == 0) for b in batches], dtype=np.int64)
        self.uniq_tokens, self.tokens_at = np.unique(self.tokens, return_inverse=True)
        self.uniq_rows, self.rows_at = np.unique(self.seqs, return_inverse=True)

    def __call__(self) -> np.ndarray:
        """Seconds per batch, with the model's current ``eff``."""
        m, c = self.model, self.model.c
        eff, layers = m.eff, c.num_layers
        gemm = np.array([m._gemm_seconds(int(t)) for t in self.uniq_tokens])[self.tokens_at]
        lm_head = np.array([m._lm_head_seconds(int(r)) for r in self.uniq_rows])[self.rows_at]
        streams = self.streams
        decoding = (self.kv_layer_bytes > 0) & (streams > 0)
        parallel = np.where(decoding, streams / (streams + eff.attn_decode_half_streams), 1.0)
        attn_decode = np.where(
            decoding, layers * (eff.attn_decode_latency_us * 1e-6 + self.kv_layer_bytes / (m._attn_peak.bandwidth * eff.eff_attn_decode * parallel)), 0.0
        )
        tail = eff.attn_prefill_tail_rows * self.max_chunk * c.attn_flops_per_query_key
        attn_prefill = np.where(
            self.prefill_layer_flops > 0,
            layers * (eff.attn_prefill_latency_us * 1e-6 + (self.prefill_layer_flops + tail) / (m._attn_peak.flops * eff.eff_attn_prefill)),
            0.0,
        )
        comm = 0.0
        if m.tp > 1:
            msg = self.tokens * c.hidden_size * 2.0
            comm = 2 * layers * (eff.allreduce_latency_us * 1e-6 + msg * 2.0 * (m.tp - 1) / m.tp / (m.link_bw * eff.eff_comm))
        overhead = eff.step_overhead_ms * 1e-3 + eff.per_seq_overhead_us * 1e-6 * self.seqs + eff.prefill_request_overhead_ms * 1e-3 * self.starts
        kernels_ms = eff.sustained_factor * 1e3 * np.where(self.has_prefill, m._graph_factor(True), m._graph_factor(False))
        gpu_ms = gemm * kernels_ms + attn_decode * kernels_ms + attn_prefill * kernels_ms + comm * 1e3 + lm_head * kernels_ms
        total_ms = gpu_ms + overhead * 1e3 + (m._eager_ms(np.asarray(gpu_ms, dtype=float)) if m.enforce_eager else 0.0)
        return np.where(self.tokens > 0, total_ms / 1e3, 0.0)

"""GPU memory: weights, activations, CUDA graphs and what is left for the KV cache.

vLLM sizes its KV cache at start-up (vllm/v1/worker/gpu_worker.py ``determine_available_memory``):

    requested   = total GPU memory x gpu_memory_utilization
    KV memory   = requested - weights - non-torch memory - peak activations of a profiling
                  forward pass at max_num_batched_tokens - CUDA-graph memory (estimated in
                  recent versions)
    num_blocks  = KV memory // bytes per block (all layers, per GPU)
    KV tokens   = num_blocks x block_size
    "Maximum concurrency for L tokens per request" = num_blocks / ceil(L / block_size)

(shared/corpus/vllm-facts/engine-defaults.md has the file and line references for 0.34.0.) The
activation and overhead terms are estimates with named parameters; weights and KV sizes are exact
arithmetic from the model's shapes. Every result says which of its numbers are which.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from .catalog import GpuSpec, ModelSpec
from .defaults import ResolvedConfig

GiB = 1024**3

#: Bytes per parameter for weight formats. int4 formats carry group scales and zero points:
#: about 4.25 bits per weight with group size 128 (AWQ/GPTQ), i.e. 0.53 bytes.
WEIGHT_BYTES = {
    "bfloat16": 2.0,
    "float16": 2.0,
    "half": 2.0,
    "auto": 2.0,
    "float32": 4.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "compressed-tensors-fp8": 1.0,
    "mxfp4": 0.53,
    "nvfp4": 0.56,
    "awq": 0.53,
    "awq_marlin": 0.53,
    "gptq": 0.53,
    "gptq_marlin": 0.53,
    "bitsandbytes": 0.53,
    "int8": 1.0,
    "w8a8": 1.0,
    "exl3": 0.53,
    "w4a16": 0.53,
}

#: Bytes per parameter of what a quantised checkpoint keeps unquantised: the embedding, the LM head,
#: the norms and a vision tower stay in 16 bits in AWQ, GPTQ, FP8 and NVFP4 checkpoints (their
#: quantisation configs leave out ``lm_head``; embeddings are lookups, not GEMMs). Counted at the
#: quantised width, Qwen2.5-32B-AWQ's weights came out 16.2 GiB where the checkpoint holds ~18 (a
#: reviewer's arithmetic), and its KV cache on a 24 GB card 1.7x too large.
UNQUANTISED_BYTES = 2.0
#: Formats that quantise the routed experts only (gpt-oss's MXFP4: attention, router, embeddings in BF16).
EXPERTS_ONLY_FORMATS = ("mxfp4",)

KV_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "auto": 2.0, "float32": 4.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}


class MemoryParams(BaseModel):
    """Named estimates of what vLLM's profiling run sees besides weights and KV cache.

    ``non_torch_gib``: CUDA context, NCCL buffers and allocator slack outside PyTorch. vLLM logs it as
    "non-torch memory"; typical values are 0.2-1.5 GiB per GPU, more with TP (NCCL). Calibrated on
    vllm-project/vllm#10517 (Llama-3.1-8B on an RTX 3090: 21.6 GiB requested - 17.06 GiB peak torch
    memory - 3.81 GiB KV = 0.73 GiB).
    ``activation_bytes_per_token_factor``: peak activation bytes per batched token, as a multiple of
    ``(3 x intermediate/tp + 4 x hidden) x 2 bytes`` (the MLP's gate/up output, its activation and a
    few hidden-sized buffers alive at once). 1.0 reproduces #10517's 2.07 GiB at 20,000 tokens and
    2.99 GiB at 29,000 tokens within 10%.
    ``cuda_graph_gib``: memory held by captured CUDA graphs; subtracted only for versions that
    estimate it before sizing the KV cache (0.11 and later); 0 with enforce_eager.
    ``logged_correction_gib``: what a server log of this deployment measured beyond these estimates
    (signed: the estimate's KV pool minus the log's "GPU KV cache size"), so that the deployment and
    every what-if of it start from the pool the server really had; 0 without a log.
    """

    non_torch_gib: float = 0.7
    non_torch_gib_per_extra_tp_rank: float = 0.3
    activation_bytes_per_token_factor: float = 1.0
    cuda_graph_gib: float = 0.5
    logged_correction_gib: float = 0.0
    #: KV blocks a served deployment proves it had: vLLM starts only with room for one request of its
    #: max_model_len, so a server that ran with it had at least that many (0: no such floor)
    served_floor_blocks: int = 0


class MemoryEstimate(BaseModel):
    """Per-GPU memory budget and KV capacity. ``basis`` says which figures are exact and which estimated."""

    gpu_total_gib: float
    gpu_memory_utilization: float
    requested_gib: float
    weights_gib: float
    non_torch_gib: float
    activation_peak_gib: float
    cuda_graph_gib: float
    kv_cache_gib: float
    kv_bytes_per_token: float = Field(description="per GPU, all layers (full-attention layers; sliding layers capped)")
    #: the part of kv_bytes_per_token in sliding-window layers, which keep at most ``sliding_window``
    #: tokens (plus one block) of a request: gpt-oss, Gemma 2/3 and others interleave them
    kv_bytes_per_token_sliding: float = 0.0
    sliding_window: int | None = None
    block_size: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float = Field(description="vLLM's 'Maximum concurrency' figure: requests of max_model_len tokens")
    fits: bool
    basis: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def pool_measured(self) -> bool:
        """The KV pool is the one a server log printed (MemoryParams.logged_correction_gib), not an estimate."""
        return self.basis.get("kv_cache_gib", "").startswith("measured")

    @property
    def has_sliding_layers(self) -> bool:
        """Some layers keep only a window of each request (the capacity figures differ then)."""
        return bool(self.kv_bytes_per_token_sliding and self.sliding_window)

    @property
    def kv_bytes_per_token_full(self) -> float:
        """Per GPU, the full-attention layers: every token of a request stays there."""
        return self.kv_bytes_per_token - self.kv_bytes_per_token_sliding

    def request_kv_bytes(self, tokens_per_request: int) -> float:
        """KV bytes one request of this many tokens holds on one GPU, in whole blocks: all of them in
        the full-attention layers, at most the window plus one block in the sliding-window layers."""
        return request_kv_bytes(tokens_per_request, self.block_size, self.kv_bytes_per_token_full, self.kv_bytes_per_token_sliding, self.sliding_window)

    def kv_bytes_per_token_at(self, tokens_per_request: int) -> float:
        """Per GPU, the KV bytes one token of a request this long costs on average: every layer's for
        a model without sliding-window layers (or a request inside the window), less for a longer one
        (gpt-oss-120b at 65,000 tokens: 36 of its 72 KiB)."""
        if not self.has_sliding_layers or tokens_per_request <= 0:
            return self.kv_bytes_per_token
        return self.request_kv_bytes(tokens_per_request) / tokens_per_request

    def requests_that_fit(self, tokens_per_request: int) -> float:
        """How many requests of this many tokens (prompt + output) the KV cache holds at once."""
        blocks = math.ceil(tokens_per_request / self.block_size)
        if not self.has_sliding_layers:
            return self.num_gpu_blocks / blocks if blocks else math.inf
        need = self.request_kv_bytes(tokens_per_request)
        return self.num_gpu_blocks * self.block_size * self.kv_bytes_per_token / need if need else math.inf


def request_kv_bytes(tokens: int, block: int, full_bpt: float, sliding_bpt: float, window: int | None) -> float:
    """KV bytes one request of ``tokens`` holds on one GPU, in whole blocks: every token in the
    full-attention layers, at most the window plus one block in the sliding-window layers (vLLM's
    per-request need in "Maximum concurrency" for a hybrid model)."""
    sliding_tokens = min(tokens, window + block) if window else tokens
    return math.ceil(tokens / block) * full_bpt * block + math.ceil(sliding_tokens / block) * sliding_bpt * block


def max_concurrency(num_blocks: int, max_model_len: int, block_size: int) -> float:
    """vLLM's "Maximum concurrency for L tokens per request" for full-attention layers:
    ``num_blocks / ceil(L / block_size)`` (vllm/v1/core/kv_cache_utils.py,
    get_max_concurrency_for_kv_cache_config)."""
    per_request = math.ceil(max_model_len / block_size)
    return num_blocks / per_request if per_request else math.inf


def blocks_from_kv_tokens(kv_tokens: int, max_model_len: int, block_size: int) -> int:
    """Invert the "GPU KV cache size: N tokens" line: vLLM prints ``int(concurrency x L)``, which for
    full attention is the block count times the block size (to within one block's rounding)."""
    per_request = math.ceil(max_model_len / block_size)
    # N = int(blocks / per_request * L); the nearest block count that reproduces N.
    guess = round(kv_tokens * per_request / max_model_len)
    for candidate in (guess, guess + 1, guess - 1):
        if int(candidate / per_request * max_model_len) == kv_tokens:
            return candidate
    return guess


def weight_format(model: ModelSpec, quantization: str | None, dtype: str | None) -> str:
    """The weights' format as WEIGHT_BYTES keys it: the quantisation, else the dtype given, else the model's."""
    return (quantization or dtype or model.dtype or "bfloat16").lower()


def weight_bytes_per_param(model: ModelSpec, quantization: str | None, dtype: str | None) -> float:
    key = weight_format(model, quantization, dtype)
    if key not in WEIGHT_BYTES:
        return 2.0
    return WEIGHT_BYTES[key]


def weight_bytes(model: ModelSpec, quantization: str | None, dtype: str | None) -> float:
    """The whole model's weight bytes (not split across GPUs): the quantised parameters at the
    format's width, what the checkpoint keeps unquantised at UNQUANTISED_BYTES (the MoE router too:
    quantisation configs leave the gate out)."""
    bpp = weight_bytes_per_param(model, quantization, dtype)
    if bpp >= UNQUANTISED_BYTES:
        return model.weight_bytes(bpp)
    parts = model.param_breakdown()
    if weight_format(model, quantization, dtype) in EXPERTS_ONLY_FORMATS and parts["routed_experts"]:
        quantised = parts["routed_experts"]
    else:
        quantised = model.total_params - parts["embedding"] - parts["lm_head"] - parts["norms"] - parts["vision"] - model.router_params
    return quantised * bpp + (model.total_params - quantised) * UNQUANTISED_BYTES


def replicated_bytes_per_gpu(model: ModelSpec, quantization: str | None, dtype: str | None, tp: int, pp: int = 1) -> float:
    """Bytes each tensor-parallel rank holds beyond its 1/TP share: what vLLM keeps whole on every
    rank (MLA's q_a and kv_a down-projections and their norms, each MoE layer's router: its
    ReplicatedLinear layers) and the k/v projection copies when TP exceeds the KV heads (each rank
    holds a whole head). DeepSeek-R1 on eight H20s: +0.9 GiB a GPU, its KV pool ~18% smaller (an
    audit's arithmetic; a real TP8 log loaded 79.4 GiB where 1/8 of the weights is 78.1)."""
    if tp <= 1:
        return 0.0
    bpp = weight_bytes_per_param(model, quantization, dtype)
    quantised_bpp = bpp if weight_format(model, quantization, dtype) not in EXPERTS_ONLY_FORMATS else UNQUANTISED_BYTES
    share = 1.0 - 1.0 / tp  # a replicated part already counts 1/TP of itself in the split weights
    layers = model.num_layers / pp
    extra = 0.0
    if model.attention == "mla":
        h = model.hidden_size
        down = h * (model.q_lora_rank or 0) + h * (model.kv_lora_rank + model.qk_rope_head_dim)  # type: ignore[operator]
        norms = (model.q_lora_rank or 0) + model.kv_lora_rank  # type: ignore[operator]
        extra += layers * (down * quantised_bpp + norms * UNQUANTISED_BYTES) * share
    elif model.num_kv_heads and tp > model.num_kv_heads:
        per_head = 2 * model.hidden_size * model.head_dim  # k and v
        extra += layers * per_head * (model.kv_heads_per_gpu(tp) - model.num_kv_heads / tp) * quantised_bpp
    extra += model.router_params / pp * UNQUANTISED_BYTES * share
    return extra


def kv_dtype_bytes(kv_cache_dtype: str) -> float:
    return KV_BYTES.get(kv_cache_dtype.lower(), 2.0)


def estimate_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    cfg: ResolvedConfig,
    *,
    quantization: str | None = None,
    dtype: str | None = None,
    params: MemoryParams | None = None,
) -> MemoryEstimate:
    """Weights, activations and KV capacity per GPU for one engine (one TP x PP group)."""
    p = params or MemoryParams()
    tp, pp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size
    notes: list[str] = []
    total_gib = gpu.memory_bytes / GiB
    requested = total_gib * cfg.gpu_memory_utilization
    bpp = weight_bytes_per_param(model, quantization, dtype)
    replicated = replicated_bytes_per_gpu(model, quantization, dtype, tp, pp) / GiB
    weights = weight_bytes(model, quantization, dtype) / (tp * pp) / GiB + replicated
    non_torch = p.non_torch_gib + p.non_torch_gib_per_extra_tp_rank * (1 if tp > 1 else 0)
    act_per_token = p.activation_bytes_per_token_factor * (3 * model.intermediate_size_for_activation / tp + 4 * model.hidden_size) * 2
    activation = cfg.max_num_batched_tokens * act_per_token / GiB
    graphs = 0.0 if cfg.enforce_eager or tuple(map(int, cfg.vllm_version.split("."))) < (0, 11, 0) else p.cuda_graph_gib
    kv_gib = requested - weights - non_torch - activation - graphs - p.logged_correction_gib
    whole = f" + {replicated:.2f} GiB each rank holds whole (replicated layers, copied KV heads)" if replicated >= 0.005 else ""
    basis = {
        "weights_gib": f"exact: {model.total_params / 1e9:.2f}B parameters x {bpp:g} bytes / (TP {tp} x PP {pp}){whole}" if bpp >= UNQUANTISED_BYTES
        else f"exact: {model.total_params / 1e9:.2f}B parameters, the quantised ones x {bpp:g} bytes, the rest (embedding, LM head, norms, MoE routers) x {UNQUANTISED_BYTES:g}, / (TP {tp} x PP {pp}){whole}",
        "kv_bytes_per_token": "exact: from the model's attention shapes",
        "non_torch_gib": "estimate (MemoryParams.non_torch_gib)",
        "activation_peak_gib": f"estimate at max_num_batched_tokens={cfg.max_num_batched_tokens}",
        "cuda_graph_gib": "estimate" if graphs else "none (eager or version without the estimate)",
    }
    if p.logged_correction_gib:
        basis["kv_cache_gib"] = f"measured: the server log's KV cache size (the estimate {p.logged_correction_gib:+.2f} GiB)"
    if cfg.kv_cache_memory_bytes:
        kv_gib = cfg.kv_cache_memory_bytes / GiB
        basis["kv_cache_gib"] = "user: --kv-cache-memory-bytes"
    kv_dtype = kv_dtype_bytes(cfg.kv_cache_dtype)
    layers_per_gpu_fraction = 1.0 / pp
    full_bpt = model.kv_bytes_per_token_full_layers(kv_dtype, tp) * layers_per_gpu_fraction
    sliding_bpt = model.kv_bytes_per_token_sliding_layers(kv_dtype, tp) * layers_per_gpu_fraction
    block = cfg.block_size
    block_bytes = (full_bpt + sliding_bpt) * block
    if cfg.num_gpu_blocks_override:
        num_blocks = cfg.num_gpu_blocks_override
        basis["num_gpu_blocks"] = "user: --num-gpu-blocks-override"
    else:
        num_blocks = max(0, int(kv_gib * GiB // block_bytes)) if block_bytes > 0 else 0
        if 0 < num_blocks < p.served_floor_blocks and not sliding_bpt:
            num_blocks = p.served_floor_blocks
            kv_gib = num_blocks * block_bytes / GiB
            basis["kv_cache_gib"] = "at least one request of max_model_len: the server ran with it (the estimate was a little under it)"
    # Per-request need at max_model_len, as vLLM computes "Maximum concurrency".
    L = cfg.max_model_len
    window = model.sliding_window or 0
    per_request_bytes = request_kv_bytes(L, block, full_bpt, sliding_bpt, window)
    if sliding_bpt:
        max_conc = (num_blocks * block_bytes) / per_request_bytes if per_request_bytes else math.inf
    else:
        max_conc = max_concurrency(num_blocks, L, block)
    kv_tokens = int(max_conc * L) if sliding_bpt else num_blocks * block
    fits = kv_gib > 0 and max_conc >= 1.0
    if kv_gib <= 0:
        notes.append(
            f"weights ({weights:.1f} GiB) and overheads exceed the {requested:.1f} GiB allowed per GPU: the engine will not start"
        )
    elif max_conc < 1.0:
        notes.append(
            f"the KV cache ({kv_tokens:,} tokens) cannot hold one request of max_model_len {L:,}: vLLM refuses to start"
        )
    return MemoryEstimate(
        gpu_total_gib=total_gib,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        requested_gib=requested,
        weights_gib=weights,
        non_torch_gib=non_torch,
        activation_peak_gib=activation,
        cuda_graph_gib=graphs,
        kv_cache_gib=max(kv_gib, 0.0),
        kv_bytes_per_token=full_bpt + sliding_bpt,
        kv_bytes_per_token_sliding=sliding_bpt,
        sliding_window=window or None,
        block_size=block,
        num_gpu_blocks=num_blocks,
        kv_cache_tokens=kv_tokens,
        max_model_len=L,
        max_concurrency=max_conc,
        fits=fits,
        basis=basis,
        notes=notes,
    )

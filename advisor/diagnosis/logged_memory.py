"""The KV pool a server log measured, carried into the memory model of that deployment.

Why: vLLM prints the pool it allocated ("GPU KV cache size: N tokens"); the memory model estimates
the same figure from the GPU, the weights and named overheads, within 1-2% at a memory fraction of
0.9 but 5-8% low on an 8B at 0.3-0.35 (real H100 runs, benchmarks/RESULTS.md). A user who attached
the log should read their own pool, and every what-if of the deployment (fp8 KV, the default memory
fraction) should start from it: the difference is kept as one signed correction of the overheads
(``MemoryParams.logged_correction_gib``) that every engine model of the deployment is built with.
"""

from __future__ import annotations

from typing import Any

from ..perf.memory import GiB, MemoryParams

#: A log whose pool is further from the estimate than this (GiB, or this share of the memory the
#: deployment may use) is taken to describe another configuration than the one modelled: not used.
MAX_CORRECTION_GIB = 1.5
MAX_CORRECTION_SHARE = 0.10


def logged_memory_params(inputs: Any, engine: Any) -> MemoryParams | None:
    """MemoryParams that make ``engine``'s KV pool the one the attached server log reports, or None
    when there is no such log, it cannot be compared (several engines, pipeline stages, sliding-window
    layers, a pool the user sized by hand) or it is too far from the estimate to be this deployment."""
    logged = [log.kv_cache_tokens for log in inputs.server_logs if log.kv_cache_tokens]
    mem, cfg = engine.memory, engine.config
    if len(logged) != 1 or engine.replicas != 1 or (cfg.pipeline_parallel_size or 1) != 1 or mem.has_sliding_layers:
        return None
    if cfg.kv_cache_memory_bytes or cfg.num_gpu_blocks_override or mem.kv_bytes_per_token <= 0:
        return None
    block_bytes = mem.kv_bytes_per_token * mem.block_size
    if abs(logged[0] - mem.kv_cache_tokens) < mem.block_size:
        return None
    # half a block below the logged pool, so that whole blocks come out at the logged count
    logged_gib = (logged[0] * mem.kv_bytes_per_token + block_bytes / 2) / GiB
    correction = mem.kv_cache_gib - logged_gib
    if abs(correction) > max(MAX_CORRECTION_GIB, MAX_CORRECTION_SHARE * mem.requested_gib):
        return None
    return MemoryParams(logged_correction_gib=correction)

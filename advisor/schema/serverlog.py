"""What a vLLM server log says about the deployment and its run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ServerStatsLine(BaseModel):
    """One periodic ``loggers.py`` line: throughput, running/waiting, KV usage, prefix-cache hits."""

    model_config = ConfigDict(extra="forbid")

    line_no: int
    timestamp: str | None = None
    engine: str | None = None
    prompt_tok_s: float | None = None
    generation_tok_s: float | None = None
    running: int | None = None
    waiting: int | None = None
    swapped: int | None = None
    kv_cache_usage_pct: float | None = None
    prefix_cache_hit_rate_pct: float | None = None
    preemptions: int | None = Field(None, description="V1 'Preemptions: N' (requests preempted in this interval)")


class ServerLogInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    vllm_version: str | None = None
    model: str | None = None
    device: str | None = Field(None, description="GPU / CPU / XPU, as the KV cache line names it")
    non_default_args: dict[str, Any] = Field(default_factory=dict)
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = Field(None, description="'GPU KV cache size: N tokens' (summed if several lines)")
    kv_cache_memory_gib: float | None = None
    #: each GPU's memory as vLLM read it at start-up ("Free memory on device (78.66/79.18 GiB)",
    #: "total_gpu_memory (79.11GiB)"): with kv_cache_memory_gib and the memory fraction, what the KV
    #: cache would hold at another fraction, with no model of the GPU
    gpu_memory_total_gib: float | None = None
    max_concurrency: float | None = Field(None, description="'Maximum concurrency for L tokens per request: X'")
    max_concurrency_tokens_per_request: int | None = None
    attention_backend: str | None = None
    enforce_eager: bool | None = None
    cudagraph_capture_sizes: list[int] | None = None
    chunked_prefill: bool | None = None
    prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    preemption_warnings: int = 0
    preemptions_total: int | None = Field(
        None,
        description="preemptions the log accounts for: the highest V0 'total_num_cumulative_preemption=N' "
        "(V0 warns only every 50th time) or the sum of V1 stats lines' 'Preemptions: N'",
    )
    kv_cache_blocks: int | None = Field(None, description="'# GPU blocks: N' (V0) or num_gpu_blocks_override (V1)")
    cudagraph_mode: str | None = Field(None, description="compilation_config cudagraph_mode, e.g. NONE, PIECEWISE")
    #: speculative decoding's "SpecDecoding metrics" lines (vLLM V1): accepted and drafted tokens summed
    #: over them, and how many there were (none where the drafter never proposed a token)
    spec_accepted_tokens: int | None = None
    spec_drafted_tokens: int | None = None
    #: drafts proposed (drafted tokens over the draft length, the per-position list's length)
    spec_drafts: float | None = None
    spec_metric_lines: int = 0
    #: stats lines the log holds; ``stats`` keeps the last MAX_STATS_LINES of them
    stats_lines_seen: int = 0
    stats: list[ServerStatsLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

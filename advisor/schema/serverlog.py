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
    stats: list[ServerStatsLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

"""What is deployed: engine, model, GPUs, and the engine arguments that matter.

``Deployment`` mirrors the ``deployment:`` block of a case file (FORMAT.md). ``EngineArgs`` is the
typed view of the flags that the performance model and the diagnosis read; it is derived from the
serve command and ``flags`` by :func:`vllm_advisor.probe.serve_cmd.engine_args_for`, never stored
twice.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


#: Largest token count a flag may hold (issue 19: ranges checked where the data is typed; a flag
#: past these is a typo or an overflow, refused with the flag named).
MAX_TOKENS = 100_000_000


class Deployment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: str | None = Field(None, description="vllm | sglang | tgi")
    vllm_version: str | None = None
    model: str | None = Field(None, description="catalog name, Hugging Face id, or path to a config.json")
    quantization: str | None = None
    gpu: str | None = None
    num_gpus: int | None = Field(None, ge=1, le=1_000_000)
    interconnect: str | None = Field(None, description="nvlink | pcie")
    serve_command: str | None = None
    flags: dict[str, Any] = Field(default_factory=dict, description="engine args not in serve_command")

    @property
    def is_vllm(self) -> bool:
        """The deployment runs vLLM (no engine given means vLLM, the advisor's engine; any spelling)."""
        return (self.engine or "vllm").lower() == "vllm"


class EngineArgs(BaseModel):
    """Engine arguments with vLLM's own names (underscored). ``None`` = not set by the user, so the
    version's default applies; the performance model resolves defaults, this type never guesses."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str | None = None
    served_model_name: list[str] | None = None
    tensor_parallel_size: int | None = Field(None, ge=1, le=4096)
    pipeline_parallel_size: int | None = Field(None, ge=1, le=4096)
    data_parallel_size: int | None = Field(None, ge=1, le=65536)
    enable_expert_parallel: bool | None = None
    max_model_len: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    max_num_seqs: int | None = Field(None, ge=1, le=10_000_000)
    max_num_batched_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    max_num_partial_prefills: int | None = Field(None, ge=1, le=1_000_000)
    long_prefill_token_threshold: int | None = Field(None, ge=0, le=MAX_TOKENS)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(None, ge=0, le=2**60)
    num_gpu_blocks_override: int | None = Field(None, ge=1, le=10**12)
    block_size: int | None = Field(None, ge=1, le=1_048_576)
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool | None = None
    cuda_graph_sizes: list[int] | None = None
    max_seq_len_to_capture: int | None = Field(None, ge=1, le=MAX_TOKENS)
    compilation_config: Any | None = None
    speculative_config: Any | None = None
    attention_backend: str | None = None
    disable_custom_all_reduce: bool | None = None
    swap_space: float | None = Field(None, ge=0, le=1e7)
    cpu_offload_gb: float | None = Field(None, ge=0, le=1e7)
    scheduling_policy: str | None = None
    async_scheduling: bool | None = None
    api_server_count: int | None = Field(None, ge=1, le=100_000)
    disable_log_requests: bool | None = None
    trust_remote_code: bool | None = None
    kv_transfer_config: Any | None = None
    host: str | None = None
    port: int | None = Field(None, ge=0, le=65535)

    extra: dict[str, Any] = Field(default_factory=dict, description="flags and env vars without a typed field")
    env: dict[str, str] = Field(default_factory=dict, description="environment variables given on the command line")

"""vLLM's engine defaults by version: what a flag the user did not set actually was.

The same serve command means different things on different vLLM releases (block size 16 vs 64,
gpu_memory_utilization 0.9 vs 0.92 vs 1.0, max_num_batched_tokens 2048 vs 8192, chunked prefill
and prefix caching off in V0 and on in V1). :func:`resolve_engine_config` fills every field the
performance model needs and records for each one whether the user set it, which version's default
applied, or whether we had to assume a version.

Sources:
- vLLM 0.34.0 source, summarised in shared/corpus/vllm-facts/engine-defaults.md
  (vllm/engine/arg_utils.py get_batch_defaults, vllm/config/cache.py, vllm/config/scheduler.py).
- https://docs.vllm.ai/en/v0.26.0/api/vllm/config/cache/ (DEFAULT_BLOCK_SIZE = 16 in v0.26.0).
- https://docs.vllm.ai/en/latest/configuration/optimization/ (V1: chunked prefill always on;
  V0 defaults: gpu_memory_utilization 0.9, max_num_seqs 256, prefix caching off).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..schema import EngineArgs

#: The newest release whose defaults are encoded here.
LATEST_KNOWN_VERSION = (0, 34, 0)

#: What an unknown version is taken to be. Reports in the wild lag releases by months and most
#: published V1 reports come from the 0.8-0.10 line (V1 became the default engine in 0.8.0), so an
#: unstated version is more likely one of those than the newest release. Always said in a note,
#: and the answer to "which version?" (`vllm --version`, the server log) replaces it.
ASSUMED_VERSION_WHEN_UNKNOWN = (0, 8, 5)

Provenance = Literal["user", "default", "assumed", "derived"]


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.8.5' -> (0, 8, 5); 'v0.10.1.1', '0.11.0rc2', '0.1.dev12986+g...' -> best effort; junk -> None."""
    if not text:
        return None
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if (major, minor) == (0, 1) and "dev" in str(text):
        return None  # a source build from main: its defaults are unknowable from the number
    return (major, minor, patch)


class ResolvedConfig(BaseModel):
    """Every engine setting the model reads, with where each value came from."""

    vllm_version: str
    version_assumed: bool
    engine_v1: bool
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_num_partial_prefills: int
    long_prefill_token_threshold: int
    gpu_memory_utilization: float
    block_size: int
    kv_cache_dtype: str
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    enforce_eager: bool
    num_gpu_blocks_override: int | None = None
    kv_cache_memory_bytes: int | None = None
    provenance: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def source_of(self, key: str) -> str:
        return self.provenance.get(key, "default")


def _batch_defaults(version: tuple[int, int, int], gpu_memory_gib: float, gpu_name: str, v1: bool) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` when the user sets neither.

    - V0 with chunked prefill: 512 tokens until vllm-project/vllm#10544 (Nov 2024, 0.6.5), then 2048;
      256 sequences.
    - V1 from vllm-project/vllm#12369 (Jan 2025, 0.7.x-0.8.x): 8192 tokens for the API server when
      the GPU's name contains "h100" or "h200" (an H800 or H20 does not match), else 2048.
    - From the memory-tiered rule (vllm-project/vllm#17073 and #17885, spring 2025; taken as 0.9.0):
      >=70 GiB and not A100/GB10 -> 8192 tokens / 1024 sequences, else 2048 / 256; the >=160 GiB tier
      (16384 / 1024) is in 0.34.0 (shared/corpus/vllm-facts/engine-defaults.md), taken from 0.30.
    """
    name = gpu_name.lower()
    if not v1:
        return (2048 if version >= (0, 6, 5) else 512), 256
    if version < (0, 9, 0):
        return (8192 if ("h100" in name or "h200" in name) else 2048), 256
    if gpu_memory_gib >= 160 and version >= (0, 30, 0):
        return 16384, 1024
    if gpu_memory_gib >= 70 and "a100" not in name and "gb10" not in name:
        return 8192, 1024
    return 2048, 256


def _default_block_size(version: tuple[int, int, int]) -> tuple[int, str]:
    if version >= (0, 34, 0):
        return 64, "default"
    if version > (0, 26, 0):
        return 16, "assumed"  # 16 in v0.26.0, 64 in v0.34.0; the release in between that changed it is not pinned down
    return 16, "default"


def _default_gpu_memory_utilization(version: tuple[int, int, int], v1: bool) -> tuple[float, str]:
    if version >= (0, 34, 0):
        return 1.0, "default"  # resolved with the extensible KV cache (CUDA/ROCm default in 0.34)
    if version >= (0, 26, 0):
        return 0.92, "assumed"
    return 0.9, "default"


def default_gpu_memory_utilization(vllm_version: str | None) -> float:
    """vLLM's default --gpu-memory-utilization for a release as written (the assumed one when not given)."""
    return _default_gpu_memory_utilization(parse_version(vllm_version) or ASSUMED_VERSION_WHEN_UNKNOWN, True)[0]


def resolve_engine_config(
    args: EngineArgs,
    *,
    vllm_version: str | None,
    gpu_memory_gib: float,
    gpu_name: str,
    model_max_len: int,
    model_dtype: str = "bfloat16",
) -> ResolvedConfig:
    """Fill every setting the model needs, saying for each whether the user set it or which default applied."""
    prov: dict[str, str] = {}
    notes: list[str] = []
    parsed = parse_version(vllm_version)
    assumed = parsed is None
    version = parsed or ASSUMED_VERSION_WHEN_UNKNOWN
    version_text = ".".join(map(str, version))
    if assumed:
        notes.append(
            f"vLLM version {'unknown' if not vllm_version else repr(vllm_version) + ' not a release'}: "
            f"defaults of v{version_text} assumed"
        )
    v1 = version >= (0, 8, 0)
    if v1 and str(args.env.get("VLLM_USE_V1", args.extra.get("VLLM_USE_V1", ""))) == "0":
        v1 = False
        notes.append("VLLM_USE_V1=0: the V0 engine's defaults apply")

    def pick(key: str, user_value: Any, default_value: Any, default_prov: str = "default") -> Any:
        if user_value is not None:
            prov[key] = "user"
            return user_value
        prov[key] = "assumed" if assumed else default_prov
        return default_value

    tp = pick("tensor_parallel_size", args.tensor_parallel_size, 1)
    pp = pick("pipeline_parallel_size", args.pipeline_parallel_size, 1)
    dp = pick("data_parallel_size", args.data_parallel_size, 1)
    max_model_len = pick("max_model_len", args.max_model_len, model_max_len)
    if max_model_len is not None and max_model_len <= 0:  # -1 = auto-fit (0.34); treat as the model's length
        max_model_len = model_max_len
        prov["max_model_len"] = "derived"

    chunked_default = True if v1 else max_model_len > 32768
    chunked = pick("enable_chunked_prefill", args.enable_chunked_prefill, chunked_default)
    prefix = pick("enable_prefix_caching", args.enable_prefix_caching, v1)
    tokens_default, seqs_default = _batch_defaults(version, gpu_memory_gib, gpu_name, v1)
    max_num_seqs = pick("max_num_seqs", args.max_num_seqs, seqs_default)
    if args.max_num_batched_tokens is not None:
        batched = args.max_num_batched_tokens
        prov["max_num_batched_tokens"] = "user"
    else:
        batched = tokens_default
        if not chunked:
            batched = max(max_model_len, tokens_default)
        batched = min(max_num_seqs * max_model_len, batched)
        prov["max_num_batched_tokens"] = "assumed" if assumed else "default"
    if args.max_num_seqs is None:
        max_num_seqs = min(max_num_seqs, batched)

    block_default, block_prov = _default_block_size(version)
    block_size = pick("block_size", args.block_size, block_default, block_prov)
    gmu_default, gmu_prov = _default_gpu_memory_utilization(version, v1)
    gmu = pick("gpu_memory_utilization", args.gpu_memory_utilization, gmu_default, gmu_prov)
    kv_dtype = pick("kv_cache_dtype", args.kv_cache_dtype, "auto")
    if kv_dtype == "auto":
        kv_dtype = model_dtype
    partial = pick("max_num_partial_prefills", args.max_num_partial_prefills, 1)
    threshold = pick("long_prefill_token_threshold", args.long_prefill_token_threshold, 0)
    eager = pick("enforce_eager", args.enforce_eager, False)
    return ResolvedConfig(
        vllm_version=version_text,
        version_assumed=assumed,
        engine_v1=v1,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        max_num_partial_prefills=partial,
        long_prefill_token_threshold=threshold,
        gpu_memory_utilization=gmu,
        block_size=block_size,
        kv_cache_dtype=str(kv_dtype),
        enable_chunked_prefill=chunked,
        enable_prefix_caching=prefix,
        enforce_eager=eager,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        provenance=prov,
        notes=notes,
    )

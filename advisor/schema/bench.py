"""One benchmark load point, whatever tool measured it.

Metric definitions (the same for every loader, the performance model and the diagnosis):

- ``ttft_ms``: time to first token, per request, from sending the request to receiving the first
  generated token (client side; includes any queueing on the server).
- ``tpot_ms``: time per output token *excluding the first*: ``(e2e - ttft) / (output_len - 1)``
  per request, over requests with ``output_len > 1`` (as ``vllm bench serve`` defines it).
- ``itl_ms``: inter-token latency: every gap between consecutive streamed chunks of every request,
  pooled (one sample per gap, not per request).
- ``e2e_ms``: end-to-end latency per request, send to last token.
- ``request_decode_tok_s``: per-request decode speed ``(output_len - 1) / (e2e - ttft)``, i.e.
  ``1000 / tpot``: how fast a user sees tokens once the stream has started.
- ``request_output_tok_s``: per-request ``output_len / e2e``: tokens over the whole request time,
  TTFT included. This is what people usually mean by "generation speed per request" when they
  divide generated tokens by elapsed time, and it falls when prefill or queueing grows.
- ``output_throughput_tok_s``: all output tokens of successful requests / benchmark duration.
- ``total_throughput_tok_s``: (input + output tokens) / duration.
- ``request_throughput_req_s``: completed requests / duration.
- ``offered_concurrency``: the client's concurrency cap (closed loop), if any.
- ``offered_request_rate``: the client's request rate in req/s (``inf`` = all at once), if any.
- ``achieved_concurrency``: mean number of requests in flight, ``sum(e2e) / duration`` when the
  per-request latencies are known, else the tool's own figure.

A figure the source does not have stays ``None``: loaders never invent one.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .metrics import MetricsWindow

#: Percentiles computed from per-request samples when a loader has them.
STANDARD_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)


def percentile_key(p: float) -> str:
    """``99.0 -> 'p99'``, ``99.9 -> 'p99.9'`` (the spelling ``vllm bench serve`` uses)."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


class Distribution(BaseModel):
    """Summary of one per-request (or per-gap) quantity. Every field may be missing."""

    model_config = ConfigDict(extra="forbid")

    unit: str
    count: int | None = None
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    percentiles: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def from_samples(
        cls, values: Iterable[float], unit: str, percentiles: Iterable[float] = STANDARD_PERCENTILES
    ) -> "Distribution | None":
        """Summarise raw samples the way ``vllm bench serve`` does (numpy, linear percentiles,
        population std). Returns ``None`` for no samples, so a missing figure stays missing."""
        arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
        if arr.size == 0:
            return None
        qs = list(percentiles)
        pct = np.percentile(arr, qs) if qs else []
        return cls(
            unit=unit,
            count=int(arr.size),
            mean=float(arr.mean()),
            median=float(np.median(arr)),
            std=float(arr.std()),
            min=float(arr.min()),
            max=float(arr.max()),
            percentiles={percentile_key(q): float(v) for q, v in zip(qs, pct)},
        )

    def pct(self, p: float) -> float | None:
        """A percentile if known; p50 falls back to the median."""
        value = self.percentiles.get(percentile_key(p))
        if value is None and p == 50:
            return self.median
        return value

    def is_empty(self) -> bool:
        return self.mean is None and self.median is None and not self.percentiles


class ConsistencyCheck(BaseModel):
    """A figure the file states next to the same figure recomputed from its per-request data."""

    field: str
    stated: float
    computed: float
    rel_diff: float
    ok: bool

    @classmethod
    def compare(cls, field: str, stated: float, computed: float, tolerance: float = 0.01) -> "ConsistencyCheck":
        scale = max(abs(stated), abs(computed), 1e-12)
        rel = abs(stated - computed) / scale
        # Absolute slack for figures near zero (e.g. 0.0004 ms vs 0.0005 ms).
        ok = rel <= tolerance or abs(stated - computed) < 1e-6
        return cls(field=field, stated=stated, computed=computed, rel_diff=rel, ok=ok)


#: A gap between two streamed chunks shorter than this is no engine step's (ms). vLLM sends a chunk per
#: step, and a decode step of a served model takes milliseconds; such gaps are chunks held and released
#: together. Real GPU runs of other people (vllm bench serve, Llama-3.3-70B and DeepSeek-V2.5, 42,000
#: gaps a file) have none; the CPU runs in shared/fixtures (vllm-cpu-real) 6-32% at one request at a
#: time; the real-vLLM harness on our 2-core host, whose API server starves beside the engine, 40-100%.
HELD_GAP_MS = 0.2


class StreamDelivery(BaseModel):
    """How the streamed chunks reached the client: how many of the gaps between them were shorter
    than any engine step (read from per-request chunk gaps, ``itls``).

    WHY: vLLM sends a chunk per engine step, and a step of a served model takes milliseconds. Gaps
    far below that mean the chunks were held somewhere and released together: a proxy or gateway
    buffering the event stream, or an API server too busy to send each step. TTFT then includes the
    holding time and ITL is squeezed, so neither times the engine."""

    model_config = ConfigDict(extra="forbid")

    gaps: int = Field(description="gaps between consecutive chunks of the successful requests")
    held_gaps: int = Field(description="of those, gaps shorter than held_below_ms")
    held_below_ms: float = Field(description="the gap no engine step is short enough to explain, ms")

    @property
    def held_share(self) -> float:
        return self.held_gaps / self.gaps if self.gaps else 0.0


class ServerView(BaseModel):
    """What the server does during a load point as the performance model simulates it: requests
    running and waiting (time-weighted), KV usage, preemptions and the engine steps. Typed here so
    the diagnosis, the answer, the memo and the chat read one set of fields (no string keys)."""

    model_config = ConfigDict(extra="forbid")

    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    kv_usage_pct_mean: float | None = None
    preemptions: float | None = None
    steps: int | None = None
    mixed_step_ms_mean: float | None = Field(None, description="mean duration of a step that carries a prefill chunk beside decodes")
    decode_only_step_ms_mean: float | None = None
    share_of_time_in_mixed_steps: float | None = Field(None, description="0-1")
    queue_ms: Distribution | None = Field(None, description="time from arrival to first scheduled step, per request")


class BenchmarkRun(BaseModel):
    """One load point: a fixed concurrency or request rate, measured (or predicted) once."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    # Where it came from
    source: str = Field(description="file path, URL or 'model' for predictions")
    format: str = Field(description="loader id, e.g. 'vllm-bench', 'guidellm', 'genai-perf', 'observations'")
    index: int = Field(0, description="position of this run inside its source (JSON-lines, multi-benchmark reports)")
    label: str | None = None
    tool_version: str | None = None
    date: str | None = None
    model: str | None = None
    backend: str | None = None
    endpoint: str | None = None
    streaming: bool | None = None

    # What was offered
    offered_concurrency: int | None = None
    offered_request_rate: float | None = Field(None, description="req/s; inf = all requests sent at once")
    num_prompts: int | None = None

    # What happened
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    achieved_concurrency: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    input_len: Distribution | None = None
    output_len: Distribution | None = None

    ttft_ms: Distribution | None = None
    tpot_ms: Distribution | None = None
    itl_ms: Distribution | None = None
    e2e_ms: Distribution | None = None
    request_decode_tok_s: Distribution | None = None
    request_output_tok_s: Distribution | None = None
    client_queue_ms: Distribution | None = None
    stream_delivery: StreamDelivery | None = Field(None, description="how the chunks reached the client, where per-request gaps are known")

    output_throughput_tok_s: float | None = None
    total_throughput_tok_s: float | None = None
    request_throughput_req_s: float | None = None
    request_goodput_req_s: float | None = None

    server_metrics: MetricsWindow | None = Field(
        None, description="the server's /metrics over this load point, when the client sampled it (probe bench)"
    )

    server_view: ServerView | None = Field(None, description="the model's view of the server during a predicted load point")
    calibrated: bool | None = Field(None, description="a prediction: whether its efficiencies were fitted to the user's figures")
    ceiling: bool = Field(False, description="a prediction at the hardware ceiling (every kernel at its physical peak)")

    has_per_request_data: bool = False
    checks: list[ConsistencyCheck] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="caveats found while loading")
    metadata: dict[str, Any] = Field(default_factory=dict, description="extra keys the tool recorded")

    @property
    def load_label(self) -> str:
        """A short human label for the load point: 'c=8', 'rate=4 req/s', 'rate=inf'."""
        parts = []
        if self.offered_concurrency is not None:
            parts.append(f"c={self.offered_concurrency}")
        if self.offered_request_rate is not None and not (self.offered_concurrency is not None and math.isinf(self.offered_request_rate)):
            rate = self.offered_request_rate
            parts.append("rate=inf" if math.isinf(rate) else f"rate={rate:g}/s")
        return " ".join(parts) or f"run {self.index}"

    def failed_checks(self) -> list[ConsistencyCheck]:
        return [c for c in self.checks if not c.ok]

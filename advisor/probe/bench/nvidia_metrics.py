"""The metric blocks shared by genai-perf (``*_genai_perf.json``) and AIPerf
(``profile_export_aiperf.json``): ``{"unit": "ms", "avg": .., "p1".."p99": .., "min", "max", "std"}``.

Both tools define their per-request metrics the same way (AIPerf docs, metrics reference;
genai-perf README), which is not always ours:

- ``time_to_first_token``: first non-empty chunk; only meaningful when streaming. Without
  streaming genai-perf still writes it, equal to ``request_latency`` (the whole answer arrives
  in one response), so it is not a first-token time and is left out here.
- ``inter_token_latency``: per request ``(request_latency - ttft) / (output tokens - 1)``,
  one value per request: our **TPOT**, not a pooled ITL. (genai-perf releases before mid-2024
  averaged per-response gaps instead; the file does not say which.)
- ``output_token_throughput_per_user``: per request ``1 / inter_token_latency``: our
  ``request_decode_tok_s``.
- ``inter_chunk_latency`` (AIPerf): every gap between chunks, pooled: our ``itl_ms`` when each
  chunk carries one token.
- ``output_token_throughput``, ``request_throughput``: totals over the benchmark duration.
"""

from __future__ import annotations

from typing import Any

from ...schema import BenchmarkRun, Distribution
from .fields import FieldReader, stat_block_distribution

STATS = {"mean": "avg", "median": "median", "std": "std", "min": "min", "max": "max", "count": "count"}

#: Metric names that identify a genai-perf/AIPerf summary.
CORE_METRICS = ("request_latency", "time_to_first_token", "request_throughput", "output_token_throughput")


def is_metric_block(value: Any) -> bool:
    return isinstance(value, dict) and "avg" in value and ("unit" in value or "tag" in value)


def has_core_metrics(mapping: dict[str, Any]) -> bool:
    return any(is_metric_block(mapping.get(name)) for name in CORE_METRICS)


def metric(metrics: FieldReader, name: str, unit: str, scale: float = 1.0) -> Distribution | None:
    """One metric block as a Distribution, after checking its stated unit."""
    block = metrics.sub(name)
    if block is None:
        return None
    stated_unit = block.text("unit")
    factor = _unit_factor(stated_unit, unit)
    if factor is None:
        raise metrics.error(name, f"unit {stated_unit!r} cannot be read as {unit}")
    return stat_block_distribution(metrics, name, unit, scale=scale * factor, names=STATS)


def average(metrics: FieldReader, name: str, unit: str) -> float | None:
    block = metrics.sub(name)
    if block is None:
        return None
    factor = _unit_factor(block.text("unit"), unit)
    value = block.number("avg")
    if value is None:
        return None
    if factor is None:
        raise metrics.error(name, f"unit {block.text('unit')!r} cannot be read as {unit}")
    return value * factor


def _unit_factor(stated: str | None, wanted: str) -> float | None:
    """How to convert ``stated`` into ``wanted``; unknown/absent units are taken as ``wanted``."""
    if stated is None:
        return 1.0
    s = stated.strip().lower().replace(" ", "")
    if wanted == "ms":
        return {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 0.001, "ns": 1e-6}.get(s)
    if wanted == "s":
        return {"s": 1.0, "sec": 1.0, "ms": 0.001}.get(s)
    if wanted == "tokens":
        return 1.0 if s in ("tokens", "token", "count") else None
    if wanted in ("tok/s", "req/s"):
        return 1.0 if "/" in s or "per" in s else None
    if wanted == "count":
        return 1.0
    return 1.0 if s == wanted else None


def apply_request_metrics(run: BenchmarkRun, metrics: FieldReader, streaming: bool | None, tool: str) -> None:
    """Fill the run's per-request figures from the metric blocks (shared by both tools)."""
    run.e2e_ms = metric(metrics, "request_latency", "ms")
    ttft = metric(metrics, "time_to_first_token", "ms")
    itl_block = metric(metrics, "inter_token_latency", "ms")
    looks_unstreamed = (
        ttft is not None and run.e2e_ms is not None and ttft.mean == run.e2e_ms.mean and itl_block is None
    )
    if streaming is False or (streaming is None and looks_unstreamed):
        if ttft is not None:
            run.metadata[f"{tool}_time_to_first_token_ms_nonstreaming"] = ttft.mean
            run.notes.append(
                f"non-streaming run: {tool}'s time_to_first_token equals the request latency (the "
                "whole answer arrives at once), so it is not a first-token time and is left out"
            )
        if streaming is None:
            run.streaming = False
    else:
        run.ttft_ms = ttft
    run.tpot_ms = itl_block
    if itl_block is not None:
        run.notes.append(
            f"{tool}'s inter_token_latency is per request (latency - TTFT) / (tokens - 1): recorded as TPOT; "
            "no pooled ITL unless inter_chunk_latency is present"
        )
    run.itl_ms = metric(metrics, "inter_chunk_latency", "ms")
    run.request_decode_tok_s = metric(metrics, "output_token_throughput_per_user", "tok/s")
    run.input_len = metric(metrics, "input_sequence_length", "tokens")
    run.output_len = metric(metrics, "output_sequence_length", "tokens")
    run.output_throughput_tok_s = average(metrics, "output_token_throughput", "tok/s")
    run.request_throughput_req_s = average(metrics, "request_throughput", "req/s")
    completed = average(metrics, "request_count", "count")
    run.completed = None if completed is None else int(round(completed))
    second = metric(metrics, "time_to_second_token", "ms")
    if second is not None:
        run.metadata["time_to_second_token_ms_mean"] = second.mean


def telemetry_averages(stats: dict[str, Any] | None) -> dict[str, Any]:
    """genai-perf ``telemetry_stats``: ``{metric: {"unit": u, "0": {"avg": ..}, "1": ...}}`` ->
    ``{metric: {"unit": u, "avg_per_gpu": {"0": ..}}}`` (the averages only, to keep runs small)."""
    summary: dict[str, Any] = {}
    if not isinstance(stats, dict):
        return summary
    for name, per_gpu in stats.items():
        if not isinstance(per_gpu, dict):
            continue
        averages = {
            gpu: block.get("avg") for gpu, block in per_gpu.items() if isinstance(block, dict) and "avg" in block
        }
        summary[name] = {"unit": per_gpu.get("unit"), "avg_per_gpu": averages}
    return summary

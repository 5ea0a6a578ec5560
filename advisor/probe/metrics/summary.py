"""The handful of server-side figures the advisor reasons with, per (model_name, engine).

WHY: a window has ~90 series per engine; the diagnosis needs a dozen of them, in units a person
reads (percent, tokens/s, seconds), per engine so that one overloaded data-parallel rank is not
averaged away. Every key names its unit: ``_pct``, ``_per_s``, ``_s``, ``_tokens``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ...schema.metrics import MetricsWindow, SeriesWindow

#: histogram families summarised, and the key (with unit) each is reported under
LATENCY_HISTOGRAMS: dict[str, str] = {
    "vllm:time_to_first_token_seconds": "ttft_s",
    "vllm:inter_token_latency_seconds": "itl_s",
    "vllm:request_time_per_output_token_seconds": "tpot_per_request_s",
    "vllm:e2e_request_latency_seconds": "e2e_latency_s",
    "vllm:request_queue_time_seconds": "queue_time_s",
    "vllm:request_prefill_time_seconds": "prefill_time_s",
    "vllm:request_decode_time_seconds": "decode_time_s",
    "vllm:request_inference_time_seconds": "inference_time_s",
    "vllm:request_prompt_tokens": "prompt_len_tokens",
    "vllm:request_generation_tokens": "output_len_tokens",
}
#: finished_reason values of vllm:request_success that are not a success
FAILED_REASONS = ("abort", "error")

GroupKey = tuple[str | None, str | None]


def summarize_window(window: MetricsWindow) -> dict[str, Any]:
    """Per (model_name, engine): load, KV usage, preemptions, token rates, prefix-cache hit rate,
    latency quantiles and request outcomes over the window. Missing figures are ``None``."""
    index: dict[tuple[str, GroupKey], list[SeriesWindow]] = defaultdict(list)
    groups: dict[GroupKey, None] = {}
    for s in window.series:
        if not s.family.startswith("vllm:"):
            continue
        key = (s.labels.get("model_name"), s.labels.get("engine"))
        index[(s.family, key)].append(s)
        if s.family in _GROUP_DEFINING:
            groups.setdefault(key, None)
    engines = [_summarize_group(g, index, window.duration_s) for g in sorted(groups, key=_sort_key)]
    return {
        "source": window.source,
        "duration_s": window.duration_s,
        "num_snapshots": window.num_snapshots,
        "instances": window.instances,
        "notes": list(window.notes),
        "engines": engines,
    }


_GROUP_DEFINING = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    *LATENCY_HISTOGRAMS,
}


def _summarize_group(
    group: GroupKey, index: dict[tuple[str, GroupKey], list[SeriesWindow]], duration_s: float | None
) -> dict[str, Any]:
    def series(family: str) -> list[SeriesWindow]:
        return index.get((family, group), [])

    def counter(family: str) -> float | None:
        found = series(family)
        return sum(s.delta for s in found if s.delta is not None) if found else None

    def per_s(value: float | None) -> float | None:
        return value / duration_s if (value is not None and duration_s) else None

    out: dict[str, Any] = {"model_name": group[0], "engine": group[1], "notes": []}
    out["requests_running"] = _gauge(series("vllm:num_requests_running"))
    out["requests_waiting"] = _gauge(series("vllm:num_requests_waiting"))
    out["kv_cache_usage_pct"] = _gauge(series("vllm:kv_cache_usage_perc"), scale=100.0)
    # V1 (0.32) splits the waiting queue by reason: "capacity" = ordinary waiting (no room yet: token
    # budget, max_num_seqs or KV blocks), "deferred" = held back by LoRA budget, KV transfer and the like
    by_reason = series("vllm:num_requests_waiting_by_reason")
    capacity = [s for s in by_reason if s.labels.get("reason") == "capacity"]
    out["requests_waiting_for_capacity"] = _gauge(capacity) if capacity else None

    preemptions = counter("vllm:num_preemptions")
    out["preemptions"] = preemptions
    out["preemptions_per_s"] = per_s(preemptions)

    for family, key in (("vllm:prompt_tokens", "prompt_tokens"), ("vllm:generation_tokens", "generation_tokens")):
        value = counter(family)
        out[key] = value
        out[f"{key}_per_s"] = per_s(value)

    _drop_gauges_that_missed_the_load(out, duration_s)

    queries = counter("vllm:prefix_cache_queries")
    hits = counter("vllm:prefix_cache_hits")
    out["prefix_cache_queries_tokens"] = queries
    out["prefix_cache_hits_tokens"] = hits
    out["prefix_cache_hit_rate_pct"] = 100.0 * hits / queries if (queries and hits is not None) else None
    if out["prefix_cache_hit_rate_pct"] is None:
        v0_rate = _gauge(series("vllm:gpu_prefix_cache_hit_rate"), scale=100.0)
        if v0_rate["mean"] is not None:
            out["prefix_cache_hit_rate_pct"] = v0_rate["mean"]
            out["notes"].append("prefix-cache hit rate from the V0 gauge vllm:gpu_prefix_cache_hit_rate (mean)")

    # speculative decoding (V1): drafts proposed, draft tokens, those the target model accepted
    out["spec_drafts"] = counter("vllm:spec_decode_num_drafts")
    out["spec_draft_tokens"] = counter("vllm:spec_decode_num_draft_tokens")
    out["spec_accepted_tokens"] = counter("vllm:spec_decode_num_accepted_tokens")

    finished: dict[str, float] = {}
    for s in series("vllm:request_success"):
        reason = s.labels.get("finished_reason", "unknown")
        finished[reason] = finished.get(reason, 0.0) + (s.delta or 0.0)
    total = sum(finished.values()) if finished else None
    failed = sum(v for r, v in finished.items() if r in FAILED_REASONS)
    out["requests_finished"] = finished
    out["requests_finished_total"] = total
    out["requests_per_s"] = per_s(total)
    out["request_success_rate_pct"] = 100.0 * (total - failed) / total if total else None

    for family, key in LATENCY_HISTOGRAMS.items():
        out[key] = _histogram(series(family))
    return out


#: the gauges that only say something when a sample lands while requests run
LOAD_GAUGES = ("requests_running", "requests_waiting", "kv_cache_usage_pct", "requests_waiting_for_capacity")


def _drop_gauges_that_missed_the_load(out: dict[str, Any], duration_s: float | None) -> None:
    """Set the load gauges to unknown when the counters show work but no sample saw a request running.

    WHY: a gauge is read only at the instants /metrics is sampled. A short run between two samples,
    or a server too busy to answer /metrics while it runs (CI's 2-core host answered none of a 1 s
    load point's samples, stop 41), leaves only idle readings: "0 running, 0 waiting" would then be
    taken as measured. The counters and histograms, which no sampling misses, still stand. Any load
    gauge above 0 means a sample did land on a busy server (a real-vLLM run under KV pressure read 0
    running and 7 waiting for capacity): then every reading is kept."""
    out["gauges_missed_load"] = False
    worked = (out.get("prompt_tokens") or 0) > 0 or (out.get("generation_tokens") or 0) > 0
    if not duration_s or not worked or (out["requests_running"] or {}).get("max") != 0:
        return
    if any((out.get(key) or {}).get("max") for key in LOAD_GAUGES):
        return
    for key in LOAD_GAUGES:
        if out.get(key) is not None:
            out[key] = _gauge([])
    out["gauges_missed_load"] = True


def _gauge(found: list[SeriesWindow], scale: float = 1.0) -> dict[str, float | None]:
    """min/mean/max/last of a gauge; several series (unexpected for these families) are summed."""
    if not found:
        return {"min": None, "mean": None, "max": None, "last": None}

    def total(attr: str) -> float | None:
        values = [getattr(s, attr) for s in found if getattr(s, attr) is not None]
        return scale * sum(values) if values else None

    return {"min": total("min"), "mean": total("mean"), "max": total("max"), "last": total("last")}


def _histogram(found: list[SeriesWindow]) -> dict[str, Any]:
    """count/avg/p50/p90/p99 of one histogram series, plus the bucket each quantile lies in
    (``p99_bounds``: [lower, upper]); ``coarse`` is True when p50 and p99 come from the same bucket,
    i.e. the buckets are too wide to tell them apart and only ``avg`` is a measured figure."""
    if not found:
        return {"count": None, "avg": None, "p50": None, "p90": None, "p99": None, "coarse": None}
    s = found[0]
    q = s.quantiles
    out: dict[str, Any] = {"count": s.count, "avg": s.avg}
    for label in ("p50", "p90", "p99"):
        out[label] = q.get(label)
        if label in s.quantile_bounds:
            # JSON has no infinity: an open-ended bucket (+Inf) has upper bound None
            out[f"{label}_bounds"] = [b if math.isfinite(b) else None for b in s.quantile_bounds[label]]
    b50, b99 = s.quantile_bounds.get("p50"), s.quantile_bounds.get("p99")
    out["coarse"] = (b50 == b99) if (b50 is not None and b99 is not None) else None
    return out


def _sort_key(group: GroupKey) -> tuple[str, int, str]:
    model, engine = group
    engine_num = int(engine) if engine is not None and engine.isdigit() else -1
    return (model or "", engine_num, engine or "")

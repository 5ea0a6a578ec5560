"""Old vLLM metric names and the current (V1) names they became.

WHY: a dump from vLLM 0.5 (V0), from an early V1 release (0.7-0.9) and from 0.10+ name the same
quantity differently (``vllm:gpu_cache_usage_perc`` vs ``vllm:kv_cache_usage_perc``). The rest of the
advisor reads one name per quantity, so the parser stores every family under its current name and
keeps what the server exported in ``MetricFamily.original_name``.

Source of the pairs: the project's fact sheet ``corpus/vllm-facts/metrics.json``
(``legacy_names_not_in_this_version``), compiled from vLLM 0.34.0 (commit 62d4bc3c7)
``docs/design/metrics.md`` and the metric definitions in ``vllm/v1/metrics/loggers.py``
(PrometheusStatLogger), and checked against real dumps: vLLM 0.5.x (V0, MeetKai/functionary#263),
early V1 (vllm-project/production-stack#318) and 0.10.0 (production-stack#617, where the help text of
``vllm:gpu_prefix_cache_queries`` says "DEPRECATED: Use vllm:prefix_cache_queries instead").
Names are family names: counters without ``_total``, histograms without ``_bucket``/``_sum``/``_count``.
"""

from __future__ import annotations

#: legacy family name -> current V1 family name (same quantity, same unit unless noted).
RENAMED: dict[str, str] = {
    # V0 and early V1 (<= 0.9): KV usage was named after the GPU; V1 0.10 renamed it.
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    # Early V1 counted prefix-cache queries/hits in blocks, 0.10+ in tokens; hits/queries is a
    # ratio either way, so the hit rate the advisor reads is unaffected.
    "vllm:gpu_prefix_cache_queries": "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits": "vllm:prefix_cache_hits",
    # Per-token decode interval; renamed when vllm:request_time_per_output_token_seconds (per request) arrived.
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
    # V0 exported this next to vllm:request_queue_time_seconds with the same meaning (seconds in queue).
    "vllm:time_in_queue_requests": "vllm:request_queue_time_seconds",
}

#: legacy names with no current equivalent: kept under their own name; the text says what replaced them.
REMOVED: dict[str, str] = {
    "vllm:cpu_cache_usage_perc": "V0 swap mode; removed in V1",
    "vllm:num_requests_swapped": "V0 swap mode; removed in V1",
    "vllm:gpu_prefix_cache_hit_rate": "V0 gauge; replaced by the vllm:prefix_cache_queries/hits counters",
    "vllm:cpu_prefix_cache_hit_rate": "V0 gauge; replaced by the vllm:prefix_cache_queries/hits counters",
    "vllm:avg_prompt_throughput_toks_per_s": "V0 gauge; use rate(vllm:prompt_tokens_total)",
    "vllm:avg_generation_throughput_toks_per_s": "V0 gauge; use rate(vllm:generation_tokens_total)",
    "vllm:num_requests_max": "V0 only",
    "vllm:model_forward_time_milliseconds": "V0 only",
    "vllm:model_execute_time_milliseconds": "V0 only",
    "vllm:spec_decode_draft_acceptance_rate": "V0 only",
    "vllm:spec_decode_efficiency": "V0 only",
    "vllm:tokens_total": "V0 only",
}

#: suffixes of companion families that follow their base family's rename
#: (prometheus_client exports ``X_created`` as its own gauge family next to counter/histogram ``X``).
_COMPANION_SUFFIXES = ("_created",)


def canonical_name(family_name: str) -> str:
    """The current V1 name for a family name as exported (unchanged when it is already current)."""
    renamed = RENAMED.get(family_name)
    if renamed is not None:
        return renamed
    for suffix in _COMPANION_SUFFIXES:
        if family_name.endswith(suffix):
            base = RENAMED.get(family_name[: -len(suffix)])
            if base is not None:
                return base + suffix
    return family_name


def is_legacy(family_name: str) -> bool:
    """True for a name that only older vLLM releases export."""
    return canonical_name(family_name) != family_name or family_name in REMOVED

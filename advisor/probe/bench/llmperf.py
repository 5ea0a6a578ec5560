"""LLMPerf (ray-project/llmperf) ``*_summary.json`` files.

Key names looked up with the search tool in ray-project/llmperf:

- ``token_benchmark_ray.py`` (``metrics_summary``, ``get_token_throughput_latencies``,
  ``run_token_benchmark``): for each of ``inter_token_latency_s``, ``ttft_s``,
  ``end_to_end_latency_s``, ``request_output_throughput_token_per_s``, ``number_input_tokens``,
  ``number_output_tokens`` it stores ``quantiles`` (p25, p50, p75, p90, p95, p99, pandas'
  linear quantiles), ``mean``, ``min``, ``max`` and ``stddev`` (pandas: sample std, ddof=1), over
  requests without an error code; then ``num_requests_started``, ``error_rate``,
  ``number_errors``, ``error_code_frequency``, ``mean_output_throughput_token_per_s`` (output
  tokens of successful requests / test time), ``num_completed_requests``,
  ``num_completed_requests_per_min``; all under ``results``, next to ``model``,
  ``mean_input_tokens``, ``stddev_input_tokens``, ``mean_output_tokens``,
  ``stddev_output_tokens``, ``num_concurrent_requests``, ``additional_sampling_params`` and
  any user metadata.
- ``src/llmperf/utils.py``: ``LLMPerfResults.to_dict`` adds ``version`` (``"2023-08-31"``),
  ``name`` and ``timestamp`` (epoch s) and flattens nested keys with ``_``, giving
  ``results_ttft_s_mean``, ``results_inter_token_latency_s_quantiles_p50``... Written with
  ``json.dump(default=str)``, so some figures are strings (``"results_number_input_tokens_min": "550"``).
- ``src/llmperf/common_metrics.py``: the metric key constants above.
- ``src/llmperf/ray_clients/openai_chat_completions_client.py``: ``inter_token_latency_s`` is
  ``sum(time to each chunk, the first one included)`` and is then divided by the output tokens:
  it is ``e2e / output_tokens``, TTFT included, not a gap between tokens. It is therefore kept in
  ``metadata`` and neither ``tpot_ms`` nor ``itl_ms`` is filled.
  ``request_output_throughput_token_per_s`` is ``output_tokens / e2e`` per request: our
  ``request_output_tok_s``.

The tests use a summary constructed from these key names (no real LLMPerf file is in shared/).
"""

from __future__ import annotations

from ...schema import BenchmarkRun, Distribution
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import FieldReader, distribution, iso_from_epoch

FORMAT_ID = "llmperf"

QUANTILES = (25.0, 50.0, 75.0, 90.0, 95.0, 99.0)
#: Top-level keys turned into BenchmarkRun fields (the rest goes to metadata).
MAPPED_KEYS = {"model", "name", "timestamp", "num_concurrent_requests"}
KEPT_RESULT_KEYS = {"results_error_rate", "results_error_code_frequency"}
MARKER_KEYS = ("results_ttft_s_mean", "results_end_to_end_latency_s_mean", "results_num_completed_requests")


def detect(document: InputDocument) -> Detection:
    data = document.mapping()
    if data is None:
        return Detection.no("not a single JSON object")
    if not any(key in data for key in MARKER_KEYS):
        return Detection.no("no 'results_*' summary keys")
    return Detection.yes()


def _metric(reader: FieldReader, name: str, unit: str, scale: float = 1.0) -> Distribution | None:
    base = f"results_{name}"

    def value(suffix: str) -> float | None:
        number = reader.number(f"{base}_{suffix}")
        return None if number is None else number * scale

    return distribution(
        unit,
        mean=value("mean"),
        std=value("stddev"),
        minimum=value("min"),
        maximum=value("max"),
        percentiles={q: value(f"quantiles_p{int(q)}") for q in QUANTILES},
    )


def load(document: InputDocument) -> list[BenchmarkRun]:
    reader = FieldReader(document.mapping() or {}, document.source)
    run = BenchmarkRun(source=document.source, format=FORMAT_ID)
    run.model = reader.text("model")
    run.label = reader.text("name")
    run.date = iso_from_epoch(reader.number("timestamp"))
    run.offered_concurrency = reader.integer("num_concurrent_requests")
    run.ttft_ms = _metric(reader, "ttft_s", "ms", 1000.0)
    run.e2e_ms = _metric(reader, "end_to_end_latency_s", "ms", 1000.0)
    run.request_output_tok_s = _metric(reader, "request_output_throughput_token_per_s", "tok/s")
    run.input_len = _metric(reader, "number_input_tokens", "tokens")
    run.output_len = _metric(reader, "number_output_tokens", "tokens")
    run.output_throughput_tok_s = reader.number("results_mean_output_throughput_token_per_s")
    per_minute = reader.number("results_num_completed_requests_per_min")
    run.request_throughput_req_s = None if per_minute is None else per_minute / 60.0
    run.completed = reader.integer("results_num_completed_requests")
    run.failed = reader.integer("results_number_errors")
    started = reader.integer("results_num_requests_started")
    if started is not None:
        run.num_prompts = started

    itl = _metric(reader, "inter_token_latency_s", "ms", 1000.0)
    if itl is not None:
        run.metadata["llmperf_inter_token_latency_ms"] = itl.model_dump(exclude_none=True)
        run.notes.append(
            "LLMPerf's inter_token_latency is end-to-end latency / output tokens (TTFT included), "
            "not a token gap: kept in metadata, TPOT and ITL left unknown"
        )
    for name in (run.ttft_ms, run.e2e_ms, run.request_output_tok_s):
        if name is not None and name.std is not None:
            run.notes.append("LLMPerf's std figures are sample standard deviations (ddof=1)")
            break
    # Everything else (workload settings, sampling params, user metadata, error breakdown) is kept.
    for key, value in reader.obj.items():
        if key in MAPPED_KEYS or (key.startswith("results_") and key not in KEPT_RESULT_KEYS):
            continue
        run.metadata[key] = value
    return [run]


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="LLMPerf (ray-project/llmperf) *_summary.json (flattened results_* keys)",
    detect=detect,
    load=load,
)

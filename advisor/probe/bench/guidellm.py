"""GuideLLM benchmark reports (``guidellm benchmark --outputs json|yaml``), 0.5.x layout.

Layout (checked against the real 0.5.0.dev0 reports in shared/fixtures/real-bench/guidellm):
``{"metadata": {"guidellm_version"...}, "args": {...}, "benchmarks": [{"config": {"strategy":
{"type_", "streams" | "rate" | "max_concurrency"}}, "metrics": {NAME: {"successful": STATS,
"errored", "incomplete", "total"}}, "requests": {"successful": [...], ...}, "start_time",
"end_time", "duration", ...}]}`` where STATS is ``{mean, median, mode, variance, std_dev, min,
max, count, total_sum, percentiles: {p001, p01, p05, p10, p25, p50, p75, p90, p95, p99, p999}}``.
The same report written as YAML is detected by content and loaded the same way.

How GuideLLM's figures map onto ours (they do not all mean the same thing):

- ``time_to_first_token_ms`` -> ``ttft_ms``; ``request_latency`` (seconds) -> ``e2e_ms``.
- ``inter_token_latency_ms``: per request ``(last token - first token) / (output tokens - 1)``,
  then weighted by token count over requests. That is a pooled ITL with each request's gaps
  replaced by their average -> ``itl_ms`` (noted).
- ``time_per_output_token_ms`` is GuideLLM's ``latency / output tokens``, TTFT included: not
  our TPOT. Our ``tpot_ms`` is recomputed per request as ``(latency - TTFT) / (tokens - 1)``
  from the per-request records, when the report has them.
- Throughputs (``output_tokens_per_second``, ``requests_per_second``, ``tokens_per_second``)
  and ``request_concurrency`` are GuideLLM's own time-weighted rates over the measurement window
  (warm-up and cool-down excluded); they are taken as stated.
- Only requests overlapping the window ``[start_time, end_time]`` count in GuideLLM's metrics,
  so the cross-checks use the same selection. GuideLLM's percentiles are the inverse-CDF kind
  (the first sample whose rank reaches p), not numpy's linear ones, and are checked as such.

Older 0.2/0.3 report layouts are not supported: no real file with provenance was found to test on.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...schema import BenchmarkRun, ConsistencyCheck, Distribution
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import FieldReader, iso_from_epoch, stat_block_distribution

FORMAT_ID = "guidellm"

GUIDELLM_STATS = {"mean": "mean", "median": "median", "std": "std_dev", "min": "min", "max": "max", "count": "count"}


def detect(document: InputDocument) -> Detection:
    data = document.mapping()
    if data is None:
        return Detection.no("not a single JSON/YAML object")
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list):
        return Detection.no("no 'benchmarks' list")
    if not benchmarks or not all(isinstance(b, dict) and isinstance(b.get("metrics"), dict) for b in benchmarks):
        return Detection.no("'benchmarks' entries have no 'metrics'")
    return Detection.yes()


def load(document: InputDocument) -> list[BenchmarkRun]:
    report = FieldReader(document.mapping() or {}, document.source)
    meta = report.sub("metadata")
    args = report.sub("args")
    version = meta.text("guidellm_version") if meta else None
    benchmarks = report.list("benchmarks") or []
    runs = []
    for index, _ in enumerate(benchmarks):
        bench = FieldReader(benchmarks[index], document.source, f"benchmarks[{index}]")
        runs.append(_load_benchmark(bench, args, document.source, index, version))
    return runs


def _load_benchmark(
    bench: FieldReader, args: FieldReader | None, source: str, index: int, version: str | None
) -> BenchmarkRun:
    run = BenchmarkRun(source=source, format=FORMAT_ID, index=index, tool_version=version)
    metrics = bench.sub("metrics")
    config = bench.sub("config")
    backend = config.sub("backend") if config else None
    run.model = (backend.text("model") if backend else None) or (args.text("model") if args else None)
    run.backend = args.text("backend") if args else None
    run.endpoint = args.text("request_format") if args else None
    run.duration_s = bench.number("duration")
    run.date = iso_from_epoch(bench.number("start_time"))

    strategy = config.sub("strategy") if config else None
    _apply_strategy(run, strategy)

    if metrics is not None:
        def dist(name: str, unit: str, scale: float = 1.0) -> Distribution | None:
            """The ``successful`` statistics of one metric; None when no request succeeded."""
            block = metrics.sub(name)
            stats = block.sub("successful") if block else None
            if stats is None or (stats.number("count") or 0) == 0:
                return None
            return stat_block_distribution(block, "successful", unit, scale=scale, names=GUIDELLM_STATS)

        run.ttft_ms = dist("time_to_first_token_ms", "ms")
        run.e2e_ms = dist("request_latency", "ms", scale=1000.0)
        run.itl_ms = dist("inter_token_latency_ms", "ms")
        run.input_len = dist("prompt_token_count", "tokens")
        run.output_len = dist("output_token_count", "tokens")
        run.output_throughput_tok_s = _mean(metrics, "output_tokens_per_second")
        run.total_throughput_tok_s = _mean(metrics, "tokens_per_second")
        run.request_throughput_req_s = _mean(metrics, "requests_per_second")
        run.achieved_concurrency = _mean(metrics, "request_concurrency")
        totals = metrics.sub("request_totals")
        if totals is not None:
            run.completed = totals.integer("successful")
            run.failed = totals.integer("errored")
            incomplete = totals.integer("incomplete")
            if incomplete:
                run.metadata["incomplete_requests"] = incomplete
        prompt_sum = _successful_stat(metrics, "prompt_token_count", "total_sum")
        output_sum = _successful_stat(metrics, "output_token_count", "total_sum")
        run.total_input_tokens = None if prompt_sum is None else int(round(prompt_sum))
        run.total_output_tokens = None if output_sum is None else int(round(output_sum))
        if run.itl_ms is not None:
            run.notes.append(
                "GuideLLM's ITL is each request's average gap weighted by its tokens, not every gap pooled"
            )
        run.notes.append(
            "throughputs and achieved concurrency are GuideLLM's time-weighted figures over its "
            "measurement window (warm-up/cool-down excluded), not tokens / duration"
        )

    _apply_requests(run, bench)
    _apply_metadata(run, bench, config, args)
    return run


def _apply_strategy(run: BenchmarkRun, strategy: FieldReader | None) -> None:
    if strategy is None:
        return
    kind = strategy.text("type_")
    run.label = kind
    if kind == "synchronous":
        run.offered_concurrency = 1
    elif kind == "concurrent":
        run.offered_concurrency = strategy.integer("streams") or strategy.integer("max_concurrency")
    elif kind == "throughput":
        run.offered_request_rate = float("inf")
        run.offered_concurrency = strategy.integer("max_concurrency")
    elif kind in ("constant", "poisson", "async"):
        run.offered_request_rate = strategy.number("rate", allow_inf=True, allow_negative=True)
        run.offered_concurrency = strategy.integer("max_concurrency")
    if kind is not None:
        run.label = kind if run.load_label.startswith("run ") else f"{kind} {run.load_label}"


def _mean(metrics: FieldReader, name: str) -> float | None:
    return _successful_stat(metrics, name, "mean")


def _successful_stat(metrics: FieldReader, name: str, stat: str) -> float | None:
    block = metrics.sub(name)
    stats = block.sub("successful") if block else None
    return stats.number(stat) if stats else None


def _apply_requests(run: BenchmarkRun, bench: FieldReader) -> None:
    """Per-request records: our TPOT and speeds, plus cross-checks of GuideLLM's own figures."""
    requests = bench.sub("requests")
    records = requests.list("successful") if requests else None
    if not records:
        return
    start, end = bench.number("start_time"), bench.number("end_time")
    rows = []
    for position, record in enumerate(records):
        r = FieldReader(record, bench.source, f"{requests.prefix}.successful[{position}]")
        rows.append(
            (
                r.number("request_start_time"),
                r.number("request_end_time"),
                r.number("request_latency"),
                r.number("time_to_first_token_ms"),
                r.number("inter_token_latency_ms"),
                r.number("time_per_output_token_ms"),
                r.number("output_tokens"),
                r.number("prompt_tokens"),
            )
        )
        if run.streaming is None:
            run.streaming = _streaming(record.get("request_args"))
    table = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)
    started, ended, latency_s, ttft_ms, itl_ms, tpot_gl_ms, out, prompt = table.T
    in_window = np.ones(len(rows), dtype=bool)
    if start is not None and end is not None and not np.isnan(started).any() and not np.isnan(ended).any():
        in_window = (ended >= start) & (started <= end)
    left_out = int((~in_window).sum())
    if left_out:
        run.notes.append(
            f"{left_out} of {len(rows)} successful requests fall outside GuideLLM's measurement window "
            "(warm-up/cool-down) and are left out, as GuideLLM does"
        )
    run.has_per_request_data = True
    w = in_window & ~np.isnan(latency_s) & ~np.isnan(ttft_ms) & ~np.isnan(out)
    e2e_ms = latency_s[w] * 1000.0
    multi = out[w] > 1
    decode_ms = e2e_ms[multi] - ttft_ms[w][multi]
    tpot = decode_ms / (out[w][multi] - 1)
    run.tpot_ms = Distribution.from_samples(tpot, "ms")
    positive = tpot > 0
    run.request_decode_tok_s = Distribution.from_samples(1000.0 / tpot[positive], "tok/s")
    timed = e2e_ms > 0
    run.request_output_tok_s = Distribution.from_samples(out[w][timed] / (e2e_ms[timed] / 1000.0), "tok/s")
    _cross_check(run, in_window, latency_s, ttft_ms, itl_ms, out, prompt)


def _cross_check(run: BenchmarkRun, window, latency_s, ttft_ms, itl_ms, out, prompt) -> None:
    checks: list[ConsistencyCheck] = run.checks

    def against(name: str, stated: Distribution | None, samples: np.ndarray, scale: float = 1.0) -> None:
        samples = samples[~np.isnan(samples)] * scale
        if stated is None or samples.size == 0:
            return
        if stated.count is not None:
            checks.append(ConsistencyCheck.compare(f"{name}.count", stated.count, samples.size))
        if stated.mean is not None:
            checks.append(ConsistencyCheck.compare(f"{name}.mean", stated.mean, float(samples.mean())))
        if stated.std is not None:
            checks.append(ConsistencyCheck.compare(f"{name}.std", stated.std, float(samples.std())))
        for key, value in stated.percentiles.items():
            p = float(key[1:])
            mine = float(np.percentile(samples, p, method="inverted_cdf"))
            checks.append(ConsistencyCheck.compare(f"{name}.{key}", value, mine))

    against("ttft_ms", run.ttft_ms, ttft_ms[window])
    against("e2e_ms", run.e2e_ms, latency_s[window], scale=1000.0)
    if run.completed is not None:
        checks.append(ConsistencyCheck.compare("completed", run.completed, int(window.sum())))
    if run.total_input_tokens is not None:
        checks.append(ConsistencyCheck.compare("total_input_tokens", run.total_input_tokens, float(np.nansum(prompt[window]))))
    if run.total_output_tokens is not None:
        checks.append(ConsistencyCheck.compare("total_output_tokens", run.total_output_tokens, float(np.nansum(out[window]))))
    weights = out[window] - 1
    gaps = itl_ms[window]
    usable = ~np.isnan(gaps) & (weights > 0)
    if run.itl_ms is not None and run.itl_ms.mean is not None and usable.any():
        weighted = float(np.average(gaps[usable], weights=weights[usable]))
        checks.append(ConsistencyCheck.compare("itl_ms.mean", run.itl_ms.mean, weighted))


def _streaming(request_args: Any) -> bool | None:
    """GuideLLM stores each request's arguments as a JSON string with a ``stream`` flag."""
    if isinstance(request_args, str):
        try:
            request_args = json.loads(request_args)
        except json.JSONDecodeError:
            return None
    if isinstance(request_args, dict):
        stream = request_args.get("stream")
        if stream is None and isinstance(request_args.get("body"), dict):
            stream = request_args["body"].get("stream")
        return stream if isinstance(stream, bool) else None
    return None


def _apply_metadata(run: BenchmarkRun, bench: FieldReader, config: FieldReader | None, args: FieldReader | None) -> None:
    if args is not None:
        for key in ("target", "profile", "rate", "max_seconds", "max_requests", "data", "random_seed"):
            if args.raw(key) is not None:
                run.metadata[f"guidellm_{key}"] = args.raw(key)
    for key in ("warmup_duration", "cooldown_duration"):
        value = bench.number(key)
        if value is not None:
            run.metadata[f"{key}_s"] = value
    strategy = config.mapping("strategy") if config else None
    if strategy:
        run.metadata["strategy"] = strategy
    scheduler = bench.sub("scheduler_metrics")
    made = scheduler.mapping("requests_made") if scheduler else None
    if made:
        run.metadata["requests_made_incl_warmup_cooldown"] = made


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="GuideLLM benchmark report, JSON or YAML (0.5.x layout: benchmarks[].metrics.*.successful)",
    detect=detect,
    load=load,
)

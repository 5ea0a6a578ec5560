"""``vllm bench serve --save-result`` / ``benchmarks/benchmark_serving.py`` result files.

Key reference: shared/corpus/vllm-facts/bench-serve-result-keys.md (vLLM 0.34.0 source, and the
older benchmark_serving.py). What this loader handles:

- old and new key sets, including the historic ``"request_goodput:"`` key (with the colon),
  ``request_rate`` as a number or the string ``"inf"``, ``max_concurrency`` null or a number;
- one JSON object, JSON Lines (``--append-result`` appends one object per line) and a JSON
  array of objects: one :class:`BenchmarkRun` per object;
- aggregates in milliseconds (``mean_ttft_ms``, ``p99_itl_ms``, ``p99.9_e2el_ms``...) and
  per-request arrays in seconds (``ttfts``, ``itls``, ``latencies``, ``queue_times``...): when
  the arrays are there, the run's distributions are recomputed from them (see
  :mod:`.vllm_requests`) and every stated figure is checked against the recomputation;
- ``--metadata KEY=VALUE`` pairs (any unknown top-level key) go to ``metadata``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...schema import BenchmarkRun, ConsistencyCheck, Distribution
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import FieldReader, distribution, iso_from_compact
from .vllm_requests import (
    ARRAY_KEYS,
    RequestArrays,
    compare_distribution,
    read_request_arrays,
    summarize_requests,
)

FORMAT_ID = "vllm-bench"

#: ``mean_ttft_ms``, ``p99.9_e2el_ms``, ``median_client_queue_time_ms``...
STATED_METRIC = re.compile(
    r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|client_queue_time|e2el_including_client_queue)_ms$"
)

#: Our field for each vLLM metric name.
METRIC_FIELDS = {
    "ttft": "ttft_ms",
    "tpot": "tpot_ms",
    "itl": "itl_ms",
    "e2el": "e2e_ms",
    "client_queue_time": "client_queue_ms",
}

SETUP_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency",
}
AGGREGATE_KEYS = {
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "request_goodput", "request_goodput:", "output_throughput",
    "total_token_throughput",
}
#: Per-request arrays that are not loaded (text, server-side timings) and stay out of metadata.
UNUSED_ARRAYS = {"generated_texts", "start_times", "server_queue_times", "server_ttfts"}


def detect(document: InputDocument) -> Detection:
    objects = document.json_objects()
    if objects is None:
        return Detection.no("not a JSON object or JSON Lines of objects")
    for number, obj in enumerate(objects, 1):
        if "duration" not in obj or "completed" not in obj:
            where = f"object {number} has" if len(objects) > 1 else "has"
            return Detection.no(f"{where} no 'duration'/'completed' keys")
    return Detection.yes()


def load(document: InputDocument) -> list[BenchmarkRun]:
    objects = document.json_objects() or []
    many = len(objects) > 1
    runs = []
    for index, obj in enumerate(objects):
        where = f"{document.source} (run {index + 1} of {len(objects)})" if many else document.source
        runs.append(load_result(obj, source=document.source, index=index, where=where))
    _note_repeated_prompts(runs, objects)
    return runs


def load_result(obj: dict[str, Any], *, source: str, index: int = 0, where: str | None = None) -> BenchmarkRun:
    """One result object as a BenchmarkRun."""
    reader = FieldReader(obj, where or source)
    run = BenchmarkRun(source=source, format=FORMAT_ID, index=index)
    run.label = reader.text("label")
    run.date = iso_from_compact(reader.text("date"))
    run.model = reader.text("model_id")
    run.backend = reader.text("backend") or reader.text("endpoint_type")
    run.num_prompts = reader.integer("num_prompts")
    run.offered_request_rate = reader.number("request_rate", allow_inf=True, allow_negative=True)
    run.offered_concurrency = reader.integer("max_concurrency")

    run.duration_s = reader.number("duration")
    run.completed = reader.integer("completed")
    run.failed = reader.integer("failed")
    run.total_input_tokens = reader.integer("total_input_tokens")
    run.total_output_tokens = reader.integer("total_output_tokens")
    run.request_throughput_req_s = reader.number("request_throughput")
    run.output_throughput_tok_s = reader.number("output_throughput")
    run.total_throughput_tok_s = reader.number("total_token_throughput")
    goodput_key = "request_goodput" if "request_goodput" in obj else "request_goodput:"
    run.request_goodput_req_s = reader.number(goodput_key)

    stated = _stated_statistics(reader)
    for metric, statistics in stated.items():
        if metric in METRIC_FIELDS:
            setattr(run, METRIC_FIELDS[metric], _stated_distribution(statistics))

    arrays = read_request_arrays(reader)
    if arrays is not None:
        _apply_per_request_data(run, arrays, stated)
    else:
        run.notes.append("summary only (no per-request arrays): distributions are the file's own figures")

    if run.streaming is None and run.itl_ms is not None and (run.itl_ms.mean or 0) > 0:
        run.streaming = True
    run.metadata = _metadata(obj)
    _add_caveats(run)
    return run


def _stated_statistics(reader: FieldReader) -> dict[str, dict[str, float]]:
    """``{'ttft': {'mean': 50.3, 'median': 49.5, 'p99': 67.6}, ...}`` as stated in ms."""
    stated: dict[str, dict[str, float]] = {}
    for key in reader.obj:
        match = STATED_METRIC.match(key)
        if not match:
            continue
        value = reader.number(key)
        if value is not None:
            stated.setdefault(match.group(2), {})[match.group(1)] = value
    return stated


def _stated_distribution(statistics: dict[str, float]) -> Distribution | None:
    percentiles = {float(k[1:]): v for k, v in statistics.items() if k.startswith("p")}
    return distribution(
        "ms",
        mean=statistics.get("mean"),
        median=statistics.get("median"),
        std=statistics.get("std"),
        percentiles=percentiles,
    )


def _apply_per_request_data(run: BenchmarkRun, arrays: RequestArrays, stated: dict[str, dict[str, float]]) -> None:
    extra = {metric: {float(s[1:]) for s in stats if s.startswith("p")} for metric, stats in stated.items()}
    summary = summarize_requests(arrays, run.failed, extra)
    if summary is None:
        run.notes.append(
            "per-request arrays present but failed requests cannot be told apart (no 'errors' or "
            "'output_lens'): distributions are the file's own figures"
        )
        return
    run.has_per_request_data = True
    run.notes.extend(summary.notes)
    checks: list[ConsistencyCheck] = run.checks
    for metric, field_name in METRIC_FIELDS.items():
        computed = getattr(summary, field_name)
        if computed is None:
            continue
        compare_distribution(field_name, stated.get(metric, {}), computed, checks)
        setattr(run, field_name, computed)
    run.request_decode_tok_s = summary.request_decode_tok_s
    run.request_output_tok_s = summary.request_output_tok_s
    run.stream_delivery = summary.stream_delivery
    run.input_len = summary.input_len
    run.output_len = summary.output_len

    def check_and_fill(field_name: str, computed: float | int | None, label: str | None = None) -> None:
        if computed is None:
            return
        stated_value = getattr(run, field_name)
        if stated_value is None:
            setattr(run, field_name, computed)
        else:
            checks.append(ConsistencyCheck.compare(label or field_name, float(stated_value), float(computed)))

    check_and_fill("completed", summary.completed)
    check_and_fill("failed", summary.failed)
    check_and_fill("total_input_tokens", summary.total_input_tokens)
    check_and_fill("total_output_tokens", summary.total_output_tokens)
    duration = run.duration_s
    if duration and duration > 0:
        check_and_fill("request_throughput_req_s", summary.completed / duration)
        if summary.total_output_tokens is not None:
            check_and_fill("output_throughput_tok_s", summary.total_output_tokens / duration)
            if summary.total_input_tokens is not None:
                check_and_fill(
                    "total_throughput_tok_s", (summary.total_input_tokens + summary.total_output_tokens) / duration
                )
        if summary.sum_e2e_s is not None:
            run.achieved_concurrency = summary.sum_e2e_s / duration
    if arrays.itl_counts is not None and len(arrays.itl_counts):
        run.streaming = bool(arrays.itl_counts.max() > 0)


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """--metadata pairs and every other key that is not a loaded figure (peak counts, spec-decode...)."""
    metadata: dict[str, Any] = {}
    for key, value in obj.items():
        if key in SETUP_KEYS or key in AGGREGATE_KEYS or key in ARRAY_KEYS or key in UNUSED_ARRAYS:
            continue
        match = STATED_METRIC.match(key)
        if match and match.group(2) in METRIC_FIELDS:
            continue
        metadata[key] = value
    for key in ("tokenizer_id", "burstiness", "endpoint_type"):
        if obj.get(key) is not None:
            metadata[key] = obj[key]
    return metadata


def _add_caveats(run: BenchmarkRun) -> None:
    peak = run.metadata.get("max_concurrent_requests")
    if peak is not None:
        run.notes.append(
            f"max_concurrent_requests ({peak}) counts requests per 1-second bucket and over-counts "
            "real concurrency (it reads 6 with --max-concurrency 1); use achieved_concurrency instead"
        )
    seed = run.metadata.get("seed")
    if seed is not None and str(seed).strip() == "0":
        run.notes.append(
            "seed 0: vllm bench serve draws the same prompts in every run with the same seed, so "
            "later runs hit the prefix cache and show a too-low TTFT"
        )
    if run.offered_request_rate is not None and math.isinf(run.offered_request_rate) and run.offered_concurrency is None:
        run.notes.append("request rate inf without --max-concurrency: all requests were sent at once, TTFT includes queueing")


def _note_repeated_prompts(runs: list[BenchmarkRun], objects: list[dict[str, Any]]) -> None:
    """Runs of one file whose per-request prompt lengths are identical (and not all equal) used
    the same prompts, e.g. the same ``--seed``: later ones may be inflated by prefix-cache hits."""
    fingerprints: dict[tuple, int] = {}
    for run, obj in zip(runs, objects):
        lens = obj.get("input_lens")
        if not isinstance(lens, list) or len(set(map(str, lens[:1000]))) < 2:
            continue
        key = tuple(lens)
        if key in fingerprints:
            first = fingerprints[key]
            run.notes.append(
                f"same per-request prompt lengths as run {first + 1} of this file: probably the same "
                "prompts (same seed); prefix-cache hits can make this run look faster"
            )
        else:
            fingerprints[key] = run.index


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="vllm bench serve / benchmark_serving.py --save-result JSON (also JSON Lines from --append-result)",
    detect=detect,
    load=load,
)

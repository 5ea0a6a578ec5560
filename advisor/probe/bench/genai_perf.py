"""NVIDIA genai-perf summary exports (``<profile_export>_genai_perf.json``).

Layout (real files in shared/fixtures/real-bench/genai-perf): one object per metric
(``request_latency``, ``time_to_first_token``, ``inter_token_latency``, ``request_throughput``,
``output_token_throughput``, ``output_token_throughput_per_user``, ``time_to_second_token``,
``input_sequence_length``, ``output_sequence_length``, ``request_count``) with ``unit``, ``avg``
and, for distributions, ``p1..p99``, ``min``, ``max``, ``std``; optional ``telemetry_stats``
(DCGM, per GPU); and ``input_config``, the whole genai-perf configuration. The load point is
``input_config.perf_analyzer.stimulus`` (``concurrency`` or ``request_rate``); streaming is
``input_config.endpoint.streaming``. Older releases kept a flat ``input_config`` (``concurrency``,
``request_rate``, ``streaming``, ``model``...), read as a fallback.

Metric meanings and the non-streaming TTFT caveat: see :mod:`.nvidia_metrics`.
"""

from __future__ import annotations

from ...schema import BenchmarkRun
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import FieldReader
from .nvidia_metrics import apply_request_metrics, has_core_metrics, telemetry_averages

FORMAT_ID = "genai-perf"


def detect(document: InputDocument) -> Detection:
    data = document.mapping()
    if data is None:
        return Detection.no("not a single JSON object")
    if not has_core_metrics(data):
        return Detection.no("no metric objects with 'unit'/'avg'")
    if not isinstance(data.get("input_config"), dict):
        return Detection.no("no 'input_config'")
    return Detection.yes()


def load(document: InputDocument) -> list[BenchmarkRun]:
    reader = FieldReader(document.mapping() or {}, document.source)
    config = reader.sub("input_config")
    run = BenchmarkRun(source=document.source, format=FORMAT_ID)
    streaming = _apply_config(run, config)
    run.streaming = streaming
    apply_request_metrics(run, reader, streaming, "genai-perf")
    telemetry = telemetry_averages(reader.mapping("telemetry_stats"))
    if telemetry:
        run.metadata["gpu_telemetry"] = telemetry
    return [run]


def _apply_config(run: BenchmarkRun, config: FieldReader | None) -> bool | None:
    """Model, load point and streaming from ``input_config`` (new nested or old flat layout)."""
    if config is None:
        return None
    models = config.raw("model_names") or config.raw("model")
    if isinstance(models, list) and models:
        run.model = str(models[0])
    elif isinstance(models, str):
        run.model = models
    endpoint = config.sub("endpoint")
    streaming = None
    if endpoint is not None:
        streaming = endpoint.boolean("streaming")
        run.backend = endpoint.text("service_kind")
        run.endpoint = endpoint.text("custom") or endpoint.text("type")
        if endpoint.text("url"):
            run.metadata["url"] = endpoint.text("url")
    else:
        streaming = config.boolean("streaming")
        run.backend = config.text("service_kind")
        run.endpoint = config.text("endpoint") or config.text("endpoint_type")
    analyzer = config.sub("perf_analyzer")
    stimulus = analyzer.sub("stimulus") if analyzer else None
    load_source = stimulus or config
    run.offered_concurrency = load_source.integer("concurrency")
    run.offered_request_rate = load_source.number("request_rate", allow_inf=True, allow_negative=True)
    if analyzer is not None:
        measurement = analyzer.mapping("measurement")
        if measurement:
            run.metadata["measurement"] = measurement
        warmup = analyzer.integer("warmup_request_count")
        if warmup is not None:
            run.metadata["warmup_request_count"] = warmup
    tokenizer = config.sub("tokenizer")
    if tokenizer is not None and tokenizer.text("name"):
        run.metadata["tokenizer"] = tokenizer.text("name")
    return streaming


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="NVIDIA genai-perf summary export (*_genai_perf.json: metrics with unit/avg/pXX + input_config)",
    detect=detect,
    load=load,
)

"""NVIDIA AIPerf aggregate exports (``profile_export_aiperf.json``), genai-perf's successor.

No real AIPerf export with provenance exists in shared/; this loader follows the documented
shape, found with the search tool:

- ai-dynamo/aiperf ``docs/tutorials/working-with-profile-exports.md`` (mirror nvda-ci/aiperf,
  commit 8e6a033d): the current export puts each metric at the top level as
  ``{"unit", "avg", "p1".."p99", "min", "max", "std"}`` (genai-perf's layout), then
  ``benchmark_duration`` (``sec``), ``request_count``, ``total_isl``, ``total_osl``,
  ``was_cancelled``, ``start_time``/``end_time`` (ISO 8601), ``error_summary``
  (``[{"error_details": {"code", "type", "message"}, "count"}]``), ``error_request_count``,
  ``telemetry_data`` and ``input_config`` (``endpoint.model_names``, ``endpoint.streaming``,
  ``endpoint.type``, ``endpoint.url``, ``loadgen.concurrency``, ``loadgen.request_rate``).
- the exporter of earlier releases (``aiperf/exporters/json_exporter.py``, class
  ``JsonExportData``): ``{"records": {tag: MetricResult}, "input_config", "was_cancelled",
  "error_summary" | "errors_by_type", "start_time", "end_time"}`` where each MetricResult is
  ``{"tag", "header", "unit", "avg", "min", "max", "p1".."p99", "std", "count"}``.
- metric definitions: ai-dynamo/aiperf ``docs/metrics_reference.md`` (see :mod:`.nvidia_metrics`).

The tests use a file constructed from this documented shape (marked as constructed there).
"""

from __future__ import annotations

from typing import Any

from ...schema import BenchmarkRun
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import FieldReader
from .nvidia_metrics import apply_request_metrics, average, has_core_metrics, is_metric_block

FORMAT_ID = "aiperf"

#: Top-level keys written by AIPerf and not by genai-perf.
AIPERF_MARKERS = ("was_cancelled", "error_summary", "errors_by_type", "benchmark_duration", "telemetry_data", "total_isl")


def _records(data: dict[str, Any]) -> dict[str, Any] | None:
    records = data.get("records")
    if isinstance(records, dict) and any(is_metric_block(v) for v in records.values()):
        return records
    return None


def detect(document: InputDocument) -> Detection:
    data = document.mapping()
    if data is None:
        return Detection.no("not a single JSON object")
    if _records(data) is not None:
        return Detection.yes()
    if not has_core_metrics(data):
        return Detection.no("no metric objects with 'unit'/'avg' (top level or under 'records')")
    config = data.get("input_config")
    loadgen = isinstance(config, dict) and "loadgen" in config
    if loadgen or any(key in data for key in AIPERF_MARKERS):
        return Detection.yes()
    return Detection.no("metric objects but none of AIPerf's run keys (benchmark_duration, error_summary, loadgen...)")


def load(document: InputDocument) -> list[BenchmarkRun]:
    data = document.mapping() or {}
    top = FieldReader(data, document.source)
    records = _records(data)
    metrics = FieldReader(records, document.source, "records") if records is not None else top
    run = BenchmarkRun(source=document.source, format=FORMAT_ID)
    config = top.sub("input_config")
    streaming = _apply_config(run, config)
    run.streaming = streaming
    apply_request_metrics(run, metrics, streaming, "AIPerf")
    run.duration_s = average(metrics, "benchmark_duration", "s")
    total_isl = average(metrics, "total_isl", "tokens")
    total_osl = average(metrics, "total_osl", "tokens")
    run.total_input_tokens = None if total_isl is None else int(round(total_isl))
    run.total_output_tokens = None if total_osl is None else int(round(total_osl))
    failed = average(metrics, "error_request_count", "count")
    run.failed = None if failed is None else int(round(failed))
    run.date = top.text("start_time")
    if top.boolean("was_cancelled"):
        run.notes.append("AIPerf reports the benchmark was cancelled before it completed")
    errors = top.list("error_summary") or top.list("errors_by_type")
    if errors:
        run.metadata["error_summary"] = errors
    if top.text("end_time"):
        run.metadata["end_time"] = top.text("end_time")
    if top.mapping("telemetry_data"):
        run.metadata["telemetry_data"] = top.mapping("telemetry_data")
    return [run]


def _apply_config(run: BenchmarkRun, config: FieldReader | None) -> bool | None:
    if config is None:
        return None
    endpoint = config.sub("endpoint")
    streaming = None
    if endpoint is not None:
        models = endpoint.raw("model_names")
        if isinstance(models, list) and models:
            run.model = str(models[0])
        streaming = endpoint.boolean("streaming")
        run.endpoint = endpoint.text("custom_endpoint") or endpoint.text("type")
        if endpoint.text("url"):
            run.metadata["url"] = endpoint.text("url")
    loadgen = config.sub("loadgen")
    if loadgen is not None:
        run.offered_concurrency = loadgen.integer("concurrency")
        run.offered_request_rate = loadgen.number("request_rate", allow_inf=True, allow_negative=True)
        if loadgen.text("request_rate_mode"):
            run.metadata["request_rate_mode"] = loadgen.text("request_rate_mode")
    if config.text("cli_command"):
        run.metadata["cli_command"] = config.text("cli_command")
    return streaming


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="NVIDIA AIPerf aggregate export (profile_export_aiperf.json, flat or under 'records')",
    detect=detect,
    load=load,
)

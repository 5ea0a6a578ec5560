"""A load point as a result file: ``vllm bench serve``'s own JSON keys, plus the server's view.

Why vllm bench's layout: every tool that reads ``vllm bench serve --save-result --save-detailed``
files (ours included) reads these, and the figures are computed by the same code that checks such
files (:mod:`vllm_advisor.probe.bench.vllm_requests`), so ``probe bench`` and ``vllm bench serve``
cannot drift apart in what "TPOT" or "p99 TTFT" means. Our additions live under one key,
``vllm_advisor``: the sweep's settings (seed, prefix), and the ``/metrics`` window and timeline of
the load point. The file is JSON Lines, one load point per line, appended as each one finishes.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...schema import BenchmarkRun
from ..bench.vllm_requests import RequestArrays, summarize_requests
from ..metrics import compute_window
from ..metrics.scrape import display_url
from .runner import LoadPoint
from .sampler import timeline_point
from .spec import BenchSpec

TOOL_ID = "vllm-advisor probe bench"
#: the percentiles written as keys, as ``--metric-percentiles 50,90,99`` would
STATED_PERCENTILES = (50.0, 90.0, 99.0)
_METRICS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms"}


def _arrays(point: LoadPoint) -> RequestArrays:
    records = point.records
    itl_counts = np.array([len(r.itls_s) for r in records], dtype=float)
    return RequestArrays(
        count=len(records),
        ttfts_s=np.array([r.ttft_s for r in records], dtype=float),
        latencies_s=np.array([r.latency_s for r in records], dtype=float),
        itl_values_s=np.array([g for r in records for g in r.itls_s], dtype=float),
        itl_counts=itl_counts.astype(int),
        input_lens=np.array([r.prompt_tokens or 0 for r in records], dtype=float),
        output_lens=np.array([(r.output_tokens or 0) if r.ok else 0 for r in records], dtype=float),
        errors=[r.error for r in records],
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm-advisor")
    except PackageNotFoundError:
        return "unknown"


def load_point_record(spec: BenchSpec, point: LoadPoint, model: str, prompt_notes: list[str]) -> dict[str, Any]:
    """The JSON object for one load point (see the module docstring)."""
    summary = summarize_requests(_arrays(point), None, {m: set(STATED_PERCENTILES) for m in _METRICS})
    assert summary is not None  # errors are always known here
    duration = point.duration_s
    out: dict[str, Any] = {
        "date": time.strftime("%Y%m%d-%H%M%S", time.localtime(point.started_at)),
        "endpoint_type": "openai-chat" if spec.endpoint == "chat" else "openai",
        "backend": "openai-chat" if spec.endpoint == "chat" else "openai",
        "label": None,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": point.num_prompts,
        "request_rate": "inf" if math.isinf(point.request_rate) else point.request_rate,
        "burstiness": 1.0,
        "max_concurrency": point.concurrency,
        "duration": duration,
        "completed": summary.completed,
        "failed": summary.failed,
        "total_input_tokens": summary.total_input_tokens or 0,
        "total_output_tokens": summary.total_output_tokens or 0,
        "request_throughput": summary.completed / duration if duration > 0 else 0.0,
        "request_goodput": None,
        "output_throughput": (summary.total_output_tokens or 0) / duration if duration > 0 else 0.0,
        "total_token_throughput": ((summary.total_input_tokens or 0) + (summary.total_output_tokens or 0)) / duration if duration > 0 else 0.0,
    }
    for metric, field_name in _METRICS.items():
        dist = getattr(summary, field_name)
        out[f"mean_{metric}_ms"] = dist.mean if dist else 0.0
        out[f"median_{metric}_ms"] = dist.median if dist else 0.0
        out[f"std_{metric}_ms"] = dist.std if dist else 0.0
        for p in STATED_PERCENTILES:
            key = f"p{int(p)}"
            out[f"{key}_{metric}_ms"] = dist.percentiles.get(key, 0.0) if dist else 0.0
    out.update({
        "input_lens": [r.prompt_tokens or 0 for r in point.records],
        "output_lens": [(r.output_tokens or 0) if r.ok else 0 for r in point.records],
        "ttfts": [r.ttft_s for r in point.records],
        "itls": [r.itls_s for r in point.records],
        "latencies": [r.latency_s for r in point.records],
        "errors": [r.error for r in point.records],
    })
    out["vllm_advisor"] = _advisor_block(spec, point, prompt_notes)
    return out


def _advisor_block(spec: BenchSpec, point: LoadPoint, prompt_notes: list[str]) -> dict[str, Any]:
    exact = [p.exact for p in point.prompts]
    block: dict[str, Any] = {
        "tool": TOOL_ID,
        "version": _version(),
        "seed": spec.seed,
        "endpoint": spec.endpoint,
        "input_len": spec.input_len,
        "output_len": spec.output_len,
        "shared_prefix_len": spec.shared_prefix_len,
        "ignore_eos": spec.ignore_eos,
        "prompts_exact": bool(exact) and all(exact),
        "interrupted": point.interrupted,
        "token_chunks": [r.token_chunks for r in point.records],
        "notes": [*prompt_notes, *point.notes],
    }
    if spec.metrics_url:
        server: dict[str, Any] = {"metrics_url": display_url(spec.metrics_url), "samples": len(point.snapshots)}
        if len(point.snapshots) >= 2:
            t0 = point.snapshots[0].timestamp or point.started_at
            # model_dump_json keeps an infinite bucket bound as "Infinity" (mode="json" would write null)
            server["window"] = orjson.loads(compute_window(point.snapshots).model_dump_json())
            server["timeline"] = [timeline_point(s, t0) for s in point.snapshots]
        block["server"] = server
    return block


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one load point as a JSON line (a crash or Ctrl-C later keeps the points written)."""
    with path.open("ab") as fh:
        fh.write(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def runs_from_records(records: list[dict[str, Any]], source: str) -> list[BenchmarkRun]:
    """The BenchmarkRuns the saved lines load as (the same loader ``ask``/``memo`` use)."""
    from ..bench.advisor_bench import run_from_object

    return [run_from_object(obj, source=source, index=i) for i, obj in enumerate(records)]

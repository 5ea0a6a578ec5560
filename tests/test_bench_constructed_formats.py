"""Formats with no real file in ../shared, tested on files CONSTRUCTED here from their documented
shape (AIPerf, LLMPerf), plus constructed vllm-bench edge cases (failed requests, new key set,
JSON arrays) and the GuideLLM report re-written as YAML.

Every constructed file is built in tmp_path from per-request samples drawn here, with the
summary computed the way the tool documents it, so the loader's figures can be checked exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from vllm_advisor.probe.bench import FORMATS, detect_format, load_runs

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _stats(values: np.ndarray, unit: str) -> dict:
    """A genai-perf/AIPerf metric block (unit, avg, p1..p99, min, max, std)."""
    block = {"unit": unit, "avg": float(values.mean())}
    for p in (1, 5, 10, 25, 50, 75, 90, 95, 99):
        block[f"p{p}"] = float(np.percentile(values, p))
    block.update({"min": float(values.min()), "max": float(values.max()), "std": float(values.std())})
    return block


def test_registry_lists_every_format():
    assert [f.id for f in FORMATS] == ["vllm-advisor-bench", "vllm-bench", "guidellm", "aiperf", "genai-perf", "llmperf", "observations", "vllm-bench-text"]
    assert all(f.description and callable(f.detect) and callable(f.load) for f in FORMATS)


# ---------------------------------------------------------------------------------------------
# AIPerf: CONSTRUCTED from the documented profile_export_aiperf.json shape
# (ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md; metric definitions from
# docs/metrics_reference.md). No real AIPerf export exists in ../shared.

def _aiperf_requests(seed: int = 3):
    rng = np.random.default_rng(seed)
    n = 40
    ttft = rng.gamma(3.0, 40.0, n)  # ms
    osl = rng.integers(80, 120, n).astype(float)
    itl = rng.normal(12.0, 0.5, n)  # per request (latency - ttft) / (osl - 1), ms
    latency = ttft + itl * (osl - 1)
    isl = np.full(n, 550.0)
    return n, ttft, osl, itl, latency, isl


def _aiperf_metrics(n, ttft, osl, itl, latency, isl, duration_s):
    return {
        "request_throughput": {"unit": "requests/sec", "avg": n / duration_s},
        "request_latency": _stats(latency, "ms"),
        "time_to_first_token": _stats(ttft, "ms"),
        "inter_token_latency": _stats(itl, "ms"),
        "output_token_throughput_per_user": _stats(1000.0 / itl, "tokens/sec/user"),
        "output_sequence_length": _stats(osl, "tokens"),
        "input_sequence_length": _stats(isl, "tokens"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": osl.sum() / duration_s},
        "benchmark_duration": {"unit": "sec", "avg": duration_s},
        "request_count": {"unit": "requests", "avg": float(n)},
        "total_isl": {"unit": "tokens", "avg": float(isl.sum())},
        "total_osl": {"unit": "tokens", "avg": float(osl.sum())},
    }


def test_aiperf_current_layout_constructed(tmp_path):
    n, ttft, osl, itl, latency, isl = _aiperf_requests()
    duration = 15.2
    export = _aiperf_metrics(n, ttft, osl, itl, latency, isl, duration) | {
        "was_cancelled": False,
        "start_time": "2025-10-17T20:22:08.939332",
        "end_time": "2025-10-17T20:22:24.967633",
        "error_summary": [{"error_details": {"code": 500, "type": "InternalServerError", "message": "boom"}, "count": 3}],
        "error_request_count": {"unit": "requests", "avg": 3.0},
        "goodput": None,
        "input_config": {
            "endpoint": {"model_names": ["openai/gpt-oss-20b"], "type": "chat", "streaming": True, "url": "localhost:9000"},
            "loadgen": {"concurrency": 100, "request_rate_mode": "concurrency_burst", "request_count": 1000},
            "cli_command": "aiperf profile -m openai/gpt-oss-20b --streaming --concurrency 100",
        },
    }
    path = _write_json(tmp_path / "profile_export_aiperf.json", export)
    assert detect_format(path) == "aiperf"
    run = load_runs(path)[0]
    assert run.format == "aiperf" and run.model == "openai/gpt-oss-20b"
    assert run.streaming is True and run.offered_concurrency == 100
    assert run.duration_s == pytest.approx(duration)
    assert run.completed == n and run.failed == 3
    assert run.total_output_tokens == int(osl.sum()) and run.total_input_tokens == 550 * n
    assert run.ttft_ms.mean == pytest.approx(ttft.mean())
    assert run.ttft_ms.pct(99) == pytest.approx(np.percentile(ttft, 99))
    assert run.ttft_ms.median == pytest.approx(np.median(ttft))
    assert run.e2e_ms.std == pytest.approx(latency.std())
    assert run.tpot_ms.mean == pytest.approx(itl.mean())  # AIPerf ITL = our TPOT
    assert run.itl_ms is None
    assert run.request_decode_tok_s.mean == pytest.approx((1000.0 / itl).mean())
    assert run.output_throughput_tok_s == pytest.approx(osl.sum() / duration)
    assert run.request_throughput_req_s == pytest.approx(n / duration)
    assert run.date == "2025-10-17T20:22:08.939332"
    assert run.metadata["error_summary"][0]["count"] == 3
    assert run.metadata["request_rate_mode"] == "concurrency_burst"


def test_aiperf_early_records_layout_constructed(tmp_path):
    """Earlier AIPerf releases nested MetricResults under 'records' (aiperf/exporters/json_exporter.py)."""
    n, ttft, osl, itl, latency, isl = _aiperf_requests(seed=5)
    metrics = _aiperf_metrics(n, ttft, osl, itl, latency, isl, 20.0)
    records = {tag: block | {"tag": tag, "header": tag.replace("_", " ").title(), "count": n} for tag, block in metrics.items()}
    export = {
        "records": records,
        "input_config": {"endpoint": {"model_names": ["Qwen/Qwen3-0.6B"], "streaming": True},
                         "loadgen": {"request_rate": 8.0}},
        "was_cancelled": False,
        "errors_by_type": [],
        "start_time": "2025-08-01T10:00:00",
        "end_time": "2025-08-01T10:00:20",
    }
    path = _write_json(tmp_path / "export.json", export)
    run = load_runs(path)[0]
    assert run.format == "aiperf" and run.model == "Qwen/Qwen3-0.6B"
    assert run.offered_request_rate == 8.0 and run.offered_concurrency is None
    assert run.ttft_ms.mean == pytest.approx(ttft.mean()) and run.ttft_ms.count == n
    assert run.e2e_ms.pct(90) == pytest.approx(np.percentile(latency, 90))
    assert run.duration_s == pytest.approx(20.0)


def test_genai_perf_layout_without_aiperf_keys_stays_genai_perf(tmp_path):
    n, ttft, osl, itl, latency, isl = _aiperf_requests()
    data = {k: v for k, v in _aiperf_metrics(n, ttft, osl, itl, latency, isl, 10.0).items()
            if k not in ("benchmark_duration", "total_isl", "total_osl")}
    data["input_config"] = {"model_names": ["m"], "endpoint": {"streaming": True},
                            "perf_analyzer": {"stimulus": {"request_rate": 2.5}}}
    path = _write_json(tmp_path / "x_genai_perf.json", data)
    assert detect_format(path) == "genai-perf"
    run = load_runs(path)[0]
    assert run.offered_request_rate == 2.5 and run.ttft_ms.mean == pytest.approx(ttft.mean())


# ---------------------------------------------------------------------------------------------
# LLMPerf: CONSTRUCTED from ray-project/llmperf token_benchmark_ray.py (metrics_summary) and
# src/llmperf/utils.py (LLMPerfResults.to_dict, flatten_dict): per-request samples drawn here,
# summarised as metrics_summary does (pandas linear quantiles = numpy linear; sample std).

def _llmperf_summary(seed: int = 11) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    n = 100
    samples = {
        "ttft_s": rng.gamma(4.0, 0.1, n),
        "end_to_end_latency_s": rng.normal(9.5, 0.15, n),
        "number_input_tokens": np.full(n, 550.0),
        "number_output_tokens": rng.integers(150, 170, n).astype(float),
    }
    samples["inter_token_latency_s"] = samples["end_to_end_latency_s"] / samples["number_output_tokens"]
    samples["request_output_throughput_token_per_s"] = samples["number_output_tokens"] / samples["end_to_end_latency_s"]
    results = {}
    for key, values in samples.items():
        for q in (25, 50, 75, 90, 95, 99):
            results[f"results_{key}_quantiles_p{q}"] = float(np.percentile(values, q))
        results[f"results_{key}_mean"] = float(values.mean())
        results[f"results_{key}_min"] = float(values.min())
        results[f"results_{key}_max"] = float(values.max())
        results[f"results_{key}_stddev"] = float(values.std(ddof=1))
    # json.dump(default=str) writes numpy ints as strings, as in real summaries.
    results["results_number_input_tokens_min"] = "550"
    results["results_number_input_tokens_max"] = "550"
    test_time_s = 410.0
    summary = {
        "version": "2023-08-31",
        "name": "my-model_550_150_summary",
        "model": "my-org/my-model",
        "mean_input_tokens": 550, "stddev_input_tokens": 0,
        "mean_output_tokens": 150, "stddev_output_tokens": 0,
        "num_concurrent_requests": 4,
        "additional_sampling_params_temperature": 0.0,
        **results,
        "results_num_requests_started": n,
        "results_error_rate": 0.0,
        "results_number_errors": 0,
        "results_error_code_frequency": "{}",
        "results_mean_output_throughput_token_per_s": float(samples["number_output_tokens"].sum() / test_time_s),
        "results_num_completed_requests": n,
        "results_num_completed_requests_per_min": n / test_time_s * 60,
        "timestamp": 1718208921,
        "gpu": "4xA10G",
    }
    return summary, samples


def test_llmperf_summary_constructed(tmp_path):
    summary, samples = _llmperf_summary()
    path = _write_json(tmp_path / "my-model_550_150_summary.json", summary)
    assert detect_format(path) == "llmperf"
    run = load_runs(path)[0]
    assert run.format == "llmperf" and run.model == "my-org/my-model"
    assert run.offered_concurrency == 4
    assert run.completed == 100 and run.failed == 0 and run.num_prompts == 100
    assert run.ttft_ms.mean == pytest.approx(samples["ttft_s"].mean() * 1000)
    assert run.ttft_ms.pct(99) == pytest.approx(np.percentile(samples["ttft_s"], 99) * 1000)
    assert run.ttft_ms.median == pytest.approx(np.median(samples["ttft_s"]) * 1000)
    assert run.e2e_ms.std == pytest.approx(samples["end_to_end_latency_s"].std(ddof=1) * 1000)
    assert run.request_output_tok_s.mean == pytest.approx(samples["request_output_throughput_token_per_s"].mean())
    assert run.input_len.min == 550.0  # the "550" string is read as a number
    assert run.output_throughput_tok_s == pytest.approx(summary["results_mean_output_throughput_token_per_s"])
    assert run.request_throughput_req_s == pytest.approx(100 / 410.0)
    # LLMPerf's ITL includes TTFT (e2e / tokens): kept aside, never presented as TPOT or ITL.
    assert run.tpot_ms is None and run.itl_ms is None
    assert run.metadata["llmperf_inter_token_latency_ms"]["mean"] == pytest.approx(
        samples["inter_token_latency_s"].mean() * 1000)
    assert run.metadata["gpu"] == "4xA10G" and run.metadata["additional_sampling_params_temperature"] == 0.0
    assert run.date == "2024-06-12T16:15:21+00:00"
    assert any("sample standard deviations" in note for note in run.notes)


# ---------------------------------------------------------------------------------------------
# GuideLLM report written as YAML (GuideLLM can output .yaml): same content, same runs.

def test_guidellm_yaml_report_loads_like_the_json(tmp_path):
    source = SHARED / "fixtures/real-bench/guidellm/guidellm-bench_qwen3-4b-thinking_tp4_fp8_concurrent4_benchmarks.json"
    as_yaml = tmp_path / "report.data"  # detection is by content, not by the file name
    as_yaml.write_text(yaml.safe_dump(json.loads(source.read_text())), encoding="utf-8")
    assert detect_format(as_yaml) == "guidellm"
    from_yaml = load_runs(as_yaml)[0].model_dump(exclude={"source"})
    from_json = load_runs(source)[0].model_dump(exclude={"source"})
    assert from_yaml == from_json
    assert from_yaml["ttft_ms"]["mean"] == pytest.approx(171.7655062675476)


# ---------------------------------------------------------------------------------------------
# vllm bench serve edge cases, constructed

def _vllm_detailed(seed: int, n: int = 12, failed: tuple[int, ...] = (), with_latencies: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    out = rng.integers(2, 30, n)
    out[0] = 1  # a one-token answer has no TPOT
    ttfts = rng.uniform(0.05, 0.3, n)
    itls = [list(rng.uniform(0.01, 0.03, k - 1)) for k in out]
    errors = [""] * n
    for i in failed:
        out[i], ttfts[i], itls[i], errors[i] = 0, 0.0, [], "Server disconnected"
    latencies = [t + sum(g) for t, g in zip(ttfts, itls)]
    data = {
        "date": "20260101-101010", "backend": "vllm", "model_id": "org/model", "tokenizer_id": "org/model",
        "num_prompts": n, "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None,
        "duration": 9.0, "completed": n - len(failed), "failed": len(failed),
        "input_lens": [int(x) for x in rng.integers(10, 500, n)], "output_lens": [int(x) for x in out],
        "ttfts": [float(x) for x in ttfts], "itls": [[float(x) for x in g] for g in itls], "errors": errors,
    }
    if with_latencies:
        data["latencies"] = [float(x) for x in latencies]
    return data


def test_vllm_failed_requests_are_left_out(tmp_path):
    data = _vllm_detailed(seed=1, failed=(3, 7))
    ok = [i for i in range(12) if i not in (3, 7)]
    ttft_ok = np.array(data["ttfts"])[ok] * 1000
    data["mean_ttft_ms"] = float(ttft_ok.mean())
    data["p99.9_ttft_ms"] = float(np.percentile(ttft_ok, 99.9))
    data["request_goodput"] = 0.5
    path = _write_json(tmp_path / "r.json", data)
    run = load_runs(path)[0]
    assert run.completed == 10 and run.failed == 2
    assert run.ttft_ms.count == 10 and run.ttft_ms.min > 0
    assert run.ttft_ms.pct(99.9) == pytest.approx(data["p99.9_ttft_ms"])
    assert run.request_goodput_req_s == 0.5
    out = np.array(data["output_lens"])[ok]
    assert run.total_output_tokens == int(out.sum())
    assert run.tpot_ms.count == int((out > 1).sum())  # the one-token answer has no TPOT
    assert run.itl_ms.count == int((out - 1).sum())
    assert run.failed_checks() == []
    assert {"ttft_ms.mean", "ttft_ms.p99.9", "completed", "failed"} <= {c.field for c in run.checks}


def test_vllm_inconsistent_summary_is_flagged(tmp_path):
    data = _vllm_detailed(seed=2)
    data["mean_ttft_ms"] = 1.0  # not what the requests say
    run = load_runs(_write_json(tmp_path / "r.json", data))[0]
    assert [c.field for c in run.failed_checks()] == ["ttft_ms.mean"]
    assert run.ttft_ms.mean == pytest.approx(np.mean(data["ttfts"]) * 1000)  # the requests win


def test_vllm_json_array_of_runs_with_repeated_prompts_and_seed_0(tmp_path):
    first, second = _vllm_detailed(seed=4), _vllm_detailed(seed=4, with_latencies=False)
    first["seed"] = "0"  # e.g. --metadata seed=0
    runs = load_runs(_write_json(tmp_path / "runs.json", [first, second]))
    assert [r.index for r in runs] == [0, 1]
    assert any("seed 0" in note for note in runs[0].notes)
    assert any("same per-request prompt lengths as run 1" in note for note in runs[1].notes)
    assert runs[0].e2e_ms.mean == pytest.approx(runs[1].e2e_ms.mean)  # latencies == ttft + sum(itls)


def test_vllm_json_lines_with_blank_lines(tmp_path):
    a, b = _vllm_detailed(seed=5), _vllm_detailed(seed=6)
    b["request_rate"] = "inf"
    path = tmp_path / "results.json"
    path.write_text("\n" + json.dumps(a) + "\n\n" + json.dumps(b) + "\n", encoding="utf-8")
    runs = load_runs(path)
    assert [r.offered_request_rate for r in runs] == [2.0, math.inf]
    assert all(r.has_per_request_data for r in runs)


def test_vllm_034_without_save_detailed_keeps_latencies(tmp_path):
    """0.34 drops the detailed arrays without --save-detailed but keeps 'latencies' and 'queue_times'."""
    full = _vllm_detailed(seed=7)
    latencies = np.array(full["latencies"])
    data = {k: v for k, v in full.items() if k not in ("input_lens", "output_lens", "ttfts", "itls", "errors")}
    data["queue_times"] = [0.0] * 12
    data["mean_e2el_ms"] = float(latencies.mean() * 1000)
    data["p99_e2el_ms"] = float(np.percentile(latencies, 99) * 1000)
    run = load_runs(_write_json(tmp_path / "r.json", data))[0]
    assert run.has_per_request_data and run.failed_checks() == []
    assert run.e2e_ms.pct(95) == pytest.approx(np.percentile(latencies, 95) * 1000)
    assert run.achieved_concurrency == pytest.approx(latencies.sum() / 9.0)
    assert run.ttft_ms is None and run.tpot_ms is None and run.itl_ms is None

    data["failed"] = 2  # then nothing tells which latencies belong to failed requests
    run = load_runs(_write_json(tmp_path / "r.json", data))[0]
    assert not run.has_per_request_data and run.achieved_concurrency is None
    assert run.e2e_ms.pct(95) is None and run.e2e_ms.mean == pytest.approx(data["mean_e2el_ms"])
    assert any("cannot be told apart" in note for note in run.notes)

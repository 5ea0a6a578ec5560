"""Every real benchmark result in ../shared loads, and the loaded figures equal the files' own.

The file list is a glob, so a result added to shared/fixtures is covered without editing this file.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from vllm_advisor.probe.bench import detect_format, load_runs

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REAL_BENCH = SHARED / "fixtures" / "real-bench"
CPU_RESULTS = SHARED / "fixtures" / "vllm-cpu-real" / "results"

REAL_FILES = sorted(
    [p for p in REAL_BENCH.rglob("*") if p.suffix in (".json", ".jsonl", ".yaml", ".yml")]
    + list(CPU_RESULTS.rglob("*.json"))
)
EXPECTED_FORMAT = {"vllm-bench": "vllm-bench", "guidellm": "guidellm", "genai-perf": "genai-perf"}


def _rel(path: Path) -> str:
    return str(path.relative_to(SHARED))


def test_the_glob_finds_the_real_files():
    assert len(REAL_FILES) >= 28, [str(p) for p in REAL_FILES]


@pytest.mark.parametrize("path", REAL_FILES, ids=_rel)
def test_every_real_file_loads_consistently(path: Path):
    runs = load_runs(path)
    assert runs
    folder = path.parent.name
    expected = EXPECTED_FORMAT.get(folder, "vllm-bench")
    assert detect_format(path) == expected
    for index, run in enumerate(runs):
        assert run.format == expected
        assert run.source == str(path)
        assert run.index == index
        assert run.model
        # The figures the file states are reproduced by the recomputation from its own requests.
        assert run.failed_checks() == [], [c for c in run.failed_checks()]
        if run.has_per_request_data:
            assert len(run.checks) >= 8
        assert run.e2e_ms is not None or run.ttft_ms is not None
        assert run.offered_concurrency is not None or run.offered_request_rate is not None


# ---------------------------------------------------------------------------------------------
# vllm-cpu-real: the README's table lists the expected figures, rounded.

def _readme_rows() -> list[dict[str, str]]:
    text = (SHARED / "fixtures" / "vllm-cpu-real" / "README.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 11 and cells[0].startswith("results/"):
            rows.append(dict(zip(
                ["file", "in", "conc", "n", "okfail", "dur", "rps", "out", "ttft", "tpot", "e2el"], cells
            )))
    return rows


README_ROWS = _readme_rows()


def _close_to_printed(actual: float, printed: str) -> bool:
    """``actual`` rounds to ``printed`` (as many decimals as printed; half-unit slack)."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(actual - float(printed)) <= 0.5 * 10 ** -decimals + 1e-9


def test_the_readme_table_was_parsed():
    assert len(README_ROWS) == 17
    assert {row["file"] for row in README_ROWS} == {f"results/{_rel(p).split('results/')[1]}" for p in CPU_RESULTS.rglob("*.json")}


@pytest.mark.parametrize("row", README_ROWS, ids=lambda r: r["file"])
def test_cpu_results_match_the_readme_table(row: dict[str, str]):
    run = load_runs(SHARED / "fixtures" / "vllm-cpu-real" / row["file"])[0]
    ok, fail = row["okfail"].split("/")
    assert run.completed == int(ok) and run.failed == int(fail)
    assert run.num_prompts == int(row["n"])
    assert run.offered_concurrency == int(row["conc"])
    assert math.isinf(run.offered_request_rate)
    assert run.input_len.median == float(row["in"])  # re-tokenised prompts can be 1-2 tokens longer
    assert _close_to_printed(run.duration_s, row["dur"])
    assert _close_to_printed(run.request_throughput_req_s, row["rps"])
    assert _close_to_printed(run.output_throughput_tok_s, row["out"])
    ttft = [s.strip() for s in row["ttft"].split("/")]
    tpot = [s.strip() for s in row["tpot"].split("/")]
    assert _close_to_printed(run.ttft_ms.mean, ttft[0])
    assert _close_to_printed(run.ttft_ms.median, ttft[1])
    assert _close_to_printed(run.ttft_ms.pct(99), ttft[2])
    assert _close_to_printed(run.tpot_ms.mean, tpot[0])
    assert _close_to_printed(run.tpot_ms.median, tpot[1])
    assert _close_to_printed(run.tpot_ms.pct(99), tpot[2])
    assert _close_to_printed(run.e2e_ms.mean, row["e2el"])


def test_cpu_c8_long_prompt_run_in_detail():
    path = CPU_RESULTS / "compiled" / "bench_in6000_out64_c8_n32_seed105.json"
    run = load_runs(path)[0]
    raw = json.loads(path.read_text())
    assert run.has_per_request_data and run.streaming is True
    assert run.model == "tiny-qwen2" and run.backend == "openai"
    assert run.date == "2026-12-02T13:14:36"
    assert run.ttft_ms.mean == pytest.approx(921.58, rel=1e-4)
    assert run.ttft_ms.mean == pytest.approx(raw["mean_ttft_ms"], rel=1e-9)
    assert run.ttft_ms.pct(90) == pytest.approx(raw["p90_ttft_ms"], rel=1e-9)
    assert run.itl_ms.count == 32 * 63
    assert run.itl_ms.pct(99) == pytest.approx(raw["p99_itl_ms"], rel=1e-9)
    assert run.e2e_ms.std == pytest.approx(raw["std_e2el_ms"], rel=1e-9)
    # Percentiles the file does not state are there too.
    assert run.ttft_ms.pct(95) is not None and "p95_ttft_ms" not in raw
    # Achieved concurrency: sum of E2E over the duration; close to the --max-concurrency 8.
    latencies = np.asarray(raw["latencies"])
    assert run.achieved_concurrency == pytest.approx(latencies.sum() / raw["duration"], rel=1e-9)
    assert 7.5 < run.achieved_concurrency <= 8.0
    # Per-request speeds: decode speed = 1000 / TPOT per request (its mean over tokens: every token after
    # the first over all their time), output speed = tokens / E2E.
    tpot_s = (latencies - np.asarray(raw["ttfts"])) / 63
    assert run.request_decode_tok_s.median == pytest.approx(float(np.median(1 / tpot_s)), rel=1e-9)
    assert run.request_decode_tok_s.mean == pytest.approx(63 * len(tpot_s) / float((latencies - np.asarray(raw["ttfts"])).sum()), rel=1e-9)
    assert run.request_output_tok_s.median == pytest.approx(float(np.median(64 / latencies)), rel=1e-9)
    assert run.client_queue_ms.mean == pytest.approx(float(np.mean(raw["queue_times"])) * 1000, rel=1e-9)
    # --metadata keys, and the max_concurrent_requests caveat.
    assert run.metadata["machine"] == "2core-cpu-amx" and run.metadata["model"] == "tiny-qwen2-dummy"
    assert run.metadata["max_concurrent_requests"] == 16
    assert any("max_concurrent_requests (16)" in note for note in run.notes)
    checked = {c.field for c in run.checks}
    assert {"ttft_ms.mean", "ttft_ms.p99", "tpot_ms.median", "itl_ms.std", "e2e_ms.p90", "completed",
            "output_throughput_tok_s", "total_throughput_tok_s", "total_input_tokens"} <= checked


# ---------------------------------------------------------------------------------------------
# vllm 0.8.3 benchmark_serving.py files (no 'latencies': E2E = TTFT + sum of gaps)

@pytest.mark.parametrize(
    "name, rate, completed, ttft_mean, tpot_mean, itl_p99, out_tok_s",
    [
        ("llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json", 4.0, 200, 50.32546663501307,
         27.083319078977674, 29.629998059913305, 673.9184869835061),
        ("llm-k8s_llama33-70b_tp8_qpsinf_vllm083_detailed.json", math.inf, 200, None, None, None, None),
        ("llm-k8s_llama33-70b_tp4pp2-noib_qps01_vllm083_detailed.json", 1.0, 200, None, None, None, None),
        ("llm-k8s_deepseek-v25_tp8pp2_qpsinf_vllm083_detailed.json", math.inf, 200, None, None, None, None),
    ],
)
def test_vllm083_detailed_files(name, rate, completed, ttft_mean, tpot_mean, itl_p99, out_tok_s):
    path = REAL_BENCH / "vllm-bench" / name
    raw = json.loads(path.read_text())
    run = load_runs(path)[0]
    assert run.offered_request_rate == rate
    assert run.offered_concurrency is None
    assert run.completed == completed == raw["completed"]
    assert run.has_per_request_data
    assert any("TTFT + sum of inter-token gaps" in note for note in run.notes)
    assert run.request_goodput_req_s is None and "request_goodput:" not in run.metadata
    for key, value in (("mean_ttft_ms", run.ttft_ms.mean), ("median_tpot_ms", run.tpot_ms.median),
                       ("p99_itl_ms", run.itl_ms.pct(99)), ("std_itl_ms", run.itl_ms.std)):
        assert value == pytest.approx(raw[key], rel=1e-6), key
    assert run.output_throughput_tok_s == raw["output_throughput"]
    assert run.total_output_tokens == raw["total_output_tokens"]
    if ttft_mean is not None:
        assert run.ttft_ms.mean == pytest.approx(ttft_mean, rel=1e-9)
        assert run.tpot_ms.mean == pytest.approx(tpot_mean, rel=1e-6)
        assert run.itl_ms.pct(99) == pytest.approx(itl_p99, rel=1e-6)
        assert run.output_throughput_tok_s == pytest.approx(out_tok_s, rel=1e-12)
        assert run.model == "meta-llama/Llama-3.3-70B-Instruct"
        assert run.date == "2025-04-14T14:16:21"


def test_vllm_jsonl_holds_nine_runs_with_metadata():
    path = REAL_BENCH / "vllm-bench" / "vllm-bench-automation_results_llama32-3b_l40s.jsonl"
    runs = load_runs(path)
    assert [r.index for r in runs] == list(range(9))
    assert [r.offered_request_rate for r in runs] == [10.0, 30.0, math.inf] * 3
    assert [r.metadata["deployment"] for r in runs] == ["no-features"] * 3 + ["base"] * 3 + ["kvcache"] * 3
    first = runs[0]
    assert first.metadata["gpu"] == "4xNVIDIA_L40S" and first.metadata["gateway"] == "kgateway"
    assert first.model == "meta-llama/Llama-3.2-3B-Instruct"
    assert first.num_prompts == 300 and first.completed == 300
    assert first.duration_s == pytest.approx(35.84472489100017)
    assert first.ttft_ms.mean == pytest.approx(54.59561144333596)
    assert first.ttft_ms.pct(99) == pytest.approx(98.69780922984769)
    assert first.itl_ms.median == pytest.approx(13.098381999952835)
    assert first.output_throughput_tok_s == pytest.approx(2258.212337970085)
    assert first.request_goodput_req_s is None
    assert not first.has_per_request_data and first.checks == []
    assert first.tpot_ms.count is None  # summary only: nothing invented
    assert first.request_decode_tok_s is None and first.achieved_concurrency is None
    kvcache_inf = runs[8]
    assert kvcache_inf.ttft_ms.mean == pytest.approx(884.9588357166714)
    assert kvcache_inf.output_throughput_tok_s == pytest.approx(11011.349280220396)
    assert any("all requests were sent at once" in note for note in kvcache_inf.notes)


# ---------------------------------------------------------------------------------------------
# GuideLLM 0.5 reports

def test_guidellm_concurrent_report():
    path = REAL_BENCH / "guidellm" / "guidellm-bench_qwen3-4b-thinking_tp4_fp8_concurrent4_benchmarks.json"
    run = load_runs(path)[0]
    assert run.format == "guidellm" and run.tool_version == "0.5.0.dev0"
    assert run.model == "Qwen/Qwen3-4B-Thinking-2507"
    assert run.offered_concurrency == 4 and run.offered_request_rate is None
    assert run.streaming is True and run.endpoint == "/v1/completions"
    assert run.completed == 4 and run.failed == 0
    assert run.duration_s == pytest.approx(24.909644603729248)
    assert run.ttft_ms.mean == pytest.approx(171.7655062675476)
    assert run.ttft_ms.median == pytest.approx(171.52166366577148)
    assert run.ttft_ms.pct(99.9) == pytest.approx(172.63293266296387)
    assert run.e2e_ms.mean == pytest.approx(24908.65981578827)  # request_latency is in seconds
    assert run.itl_ms.mean == pytest.approx(24.17877651496134)
    assert run.output_throughput_tok_s == pytest.approx(165.59511945248636)
    assert run.achieved_concurrency == pytest.approx(3.9998399194047565)
    assert run.total_output_tokens == 4096 and run.total_input_tokens == 396
    # Our TPOT excludes the first token: (latency - TTFT) / 1023 for each 1024-token request.
    assert run.tpot_ms.mean == pytest.approx((24908.65981578827 - 171.7655062675476) / 1023, rel=1e-6)
    assert run.request_output_tok_s.mean == pytest.approx(1024 / 24.90865981578827, rel=1e-5)
    assert {"ttft_ms.mean", "ttft_ms.p50", "e2e_ms.std", "itl_ms.mean", "completed"} <= {c.field for c in run.checks}


def test_guidellm_synchronous_report_uses_the_measurement_window():
    path = REAL_BENCH / "guidellm" / "guidellm-bench_gpt-oss-20b_tp4_benchmarks.json"
    run = load_runs(path)[0]
    assert run.offered_concurrency == 1 and run.label == "synchronous c=1"
    assert run.completed == 25  # 30 requests ran; 5 fell in warm-up/cool-down
    assert any("5 of 30 successful requests" in note for note in run.notes)
    assert run.ttft_ms.mean == pytest.approx(48.843650817871094)
    assert run.ttft_ms.pct(90) == pytest.approx(52.314043045043945)
    assert run.e2e_ms.mean == pytest.approx(30644.14818763733)
    assert run.request_throughput_req_s == pytest.approx(0.03333333333333333)
    assert run.tpot_ms.count == 25
    assert run.metadata["warmup_duration_s"] == pytest.approx(89.99700593948364)


def test_guidellm_incomplete_requests_are_kept_in_metadata():
    path = REAL_BENCH / "guidellm" / "guidellm-bench_qwen3-30b-a3b_tp4_fp8_benchmarks.json"
    run = load_runs(path)[0]
    assert run.completed == 19 and run.failed == 0
    made = run.metadata["requests_made_incl_warmup_cooldown"]
    assert made == {"successful": 23, "errored": 0, "incomplete": 2, "total": 25}
    assert run.ttft_ms.mean == pytest.approx(59.9928153188605)
    assert run.tpot_ms.mean == pytest.approx(38.65, abs=0.01)


# ---------------------------------------------------------------------------------------------
# genai-perf

def test_genai_perf_streaming_vllm_run():
    path = REAL_BENCH / "genai-perf" / "k8s-dev_vllm_gpt-oss-20b_c1_profile_export_genai_perf.json"
    run = load_runs(path)[0]
    assert run.format == "genai-perf" and run.model == "openai/gpt-oss-20b"
    assert run.streaming is True and run.offered_concurrency == 1
    assert run.ttft_ms.mean == pytest.approx(1524.6265132)
    assert run.ttft_ms.pct(99) == pytest.approx(2342.05304546)
    assert run.ttft_ms.median == pytest.approx(1416.927935)
    assert run.e2e_ms.mean == pytest.approx(2083.0211264285713)
    # genai-perf's inter_token_latency is per request (latency - TTFT)/(tokens - 1): our TPOT.
    assert run.tpot_ms.mean == pytest.approx(7.7534012) and run.itl_ms is None
    assert run.request_decode_tok_s.mean == pytest.approx(129.22766466149542)
    assert run.output_throughput_tok_s == pytest.approx(12.095750218698175)
    assert run.request_throughput_req_s == pytest.approx(0.4701030011153585)
    assert run.completed == 35
    assert run.input_len.mean == pytest.approx(152.65714285714284)
    gpu3 = run.metadata["gpu_telemetry"]["gpu_utilization"]
    assert gpu3["unit"] == "%" and gpu3["avg_per_gpu"]["3"] == pytest.approx(77.36560693641619)
    assert run.duration_s is None  # not stated: not invented


@pytest.mark.parametrize(
    "name, concurrency, latency_mean, count",
    [
        ("adaptive_simple_medium_response_c10_genai_perf.json", 10, 9611.462467961537, 26),
        ("adaptive_simple_long_response_c50_genai_perf.json", 50, None, 154),
    ],
)
def test_genai_perf_non_streaming_ttft_is_not_a_ttft(name, concurrency, latency_mean, count):
    path = REAL_BENCH / "genai-perf" / name
    raw = json.loads(path.read_text())
    run = load_runs(path)[0]
    assert run.streaming is False and run.offered_concurrency == concurrency
    assert raw["time_to_first_token"]["avg"] == raw["request_latency"]["avg"]
    assert run.ttft_ms is None and run.tpot_ms is None
    assert any("non-streaming run" in note for note in run.notes)
    assert run.metadata["genai-perf_time_to_first_token_ms_nonstreaming"] == raw["request_latency"]["avg"]
    assert run.e2e_ms.mean == pytest.approx(raw["request_latency"]["avg"])
    assert run.completed == count
    if latency_mean is not None:
        assert run.e2e_ms.mean == pytest.approx(latency_mean)
        assert run.output_len.mean == pytest.approx(447.11538461538464)


def test_loaded_runs_serialise_to_json():
    run = load_runs(REAL_BENCH / "vllm-bench" / "llm-k8s_llama33-70b_tp8_qpsinf_vllm083_detailed.json")[0]
    text = run.model_dump_json()
    assert '"offered_request_rate":"Infinity"' in text
    assert re.search(r'"ttft_ms":\{"unit":"ms","count":200', text)

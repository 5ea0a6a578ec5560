"""Streamed chunks held and released together (a buffering proxy or a starved API server).

Real inputs: other people's `vllm bench serve --save-detailed` files from GPU clusters (no gap
shorter than an engine step among 42,000 a file), the CPU harness's c=1 run from shared/fixtures
(a third of its gaps short, below the threshold), and one of the GPU files passed through what a
buffering proxy does to it: each request's chunks leave the proxy together once the answer is
complete (nginx with proxy_buffering on and a short answer, dstack's gateway below 16 KB).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.diagnosis.measured import HELD_SHARE
from vllm_advisor.probe.bench import load_runs

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
GPU_FILES = sorted((SHARED / "real-bench" / "vllm-bench").glob("llm-k8s_*_detailed.json"))
CPU_C1 = SHARED / "vllm-cpu-real" / "results" / "compiled" / "bench_in1024_out64_c1_n32_seed101.json"
GENAI_PERF = SHARED / "real-bench" / "genai-perf" / "k8s-dev_vllm_gpt-oss-20b_c1_profile_export_genai_perf.json"
QUESTION = "Why is TTFT so high and why is ITL so uneven?"


def _held_evidence(diagnosis) -> dict[str, list]:
    return {f.cause: [e for e in f.evidence if e.label.id == "ev.stream_held"] for f in diagnosis.findings}


def _proxy_buffered(src: Path, dst: Path) -> Path:
    """The same requests as a client behind a buffering proxy sees them: the first chunk arrives when
    the last one left the engine, the rest 20 us apart (one read of the socket)."""
    data = json.loads(src.read_text())
    ttfts, itls = [], []
    for ttft, gaps in zip(data["ttfts"], data["itls"]):
        ttfts.append(ttft + sum(gaps))
        itls.append([2e-5] * len(gaps))
    data.update(ttfts=ttfts, itls=itls)
    for key in [k for k in data if k.endswith(("_ttft_ms", "_itl_ms", "_tpot_ms"))]:
        del data[key]  # the proxy's client computes its own figures; the file's stated ones were the engine's
    dst.write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.name[:40])
def test_gpu_runs_have_no_held_gaps(path: Path) -> None:
    [run] = load_runs(path)
    sd = run.stream_delivery
    assert sd is not None and sd.gaps > 40_000 and sd.held_gaps == 0 and sd.held_below_ms == 0.2


def test_a_third_short_gaps_is_not_held() -> None:
    """The CPU harness at one request at a time: 623 of 2,016 gaps short (its API server starves now
    and then beside the engine), most chunks still one per step: not reported as held."""
    [run] = load_runs(CPU_C1)
    assert (run.stream_delivery.gaps, run.stream_delivery.held_gaps) == (2016, 623)
    assert run.stream_delivery.held_share < HELD_SHARE
    d = diagnose(gather(question=QUESTION, attachments=[CPU_C1]))
    assert not any(_held_evidence(d).values())


def test_a_buffering_proxy_is_found_and_its_itl_spread_not_read_as_chunked_prefill(tmp_path: Path) -> None:
    src = SHARED / "real-bench" / "vllm-bench" / "llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
    [direct] = load_runs(src)
    [held] = load_runs(_proxy_buffered(src, tmp_path / "through-proxy.json"))
    # what the client sees: the same requests ending when they ended (plus the 20 us per released
    # chunk), their first tokens at the end
    assert held.e2e_ms.median == pytest.approx(direct.e2e_ms.median, rel=0.01)
    assert held.ttft_ms.median > 10 * direct.ttft_ms.median and held.itl_ms.median < 0.1
    assert held.stream_delivery.held_share > 0.99

    d = diagnose(gather(question=QUESTION, attachments=[tmp_path / "through-proxy.json"]))
    found = _held_evidence(d)
    assert found.get("cpu_frontend") and found.get("benchmark_methodology"), found
    [ev] = found["cpu_frontend"]
    assert ev.kind == "measured" and ev.value == 100.0 and ev.unit == "%"
    front = next(f for f in d.findings if f.cause == "cpu_frontend")
    assert any(r.flag and "proxy_buffering off" in r.flag and "probe bench" in (r.verify or "") for r in front.recommendations)
    # a held stream's ITL p99 / p50 is no step-time spread: no chunked-prefill evidence from it
    for f in d.findings:
        assert not [e for e in f.evidence if e.label.id == "ev.itl_ratio"], f.cause


def test_the_direct_run_names_no_held_stream() -> None:
    src = SHARED / "real-bench" / "vllm-bench" / "llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
    d = diagnose(gather(question=QUESTION, attachments=[src]))
    assert not any(_held_evidence(d).values())


def _genai_perf_through_proxy(dst: Path) -> Path:
    """A streamed genai-perf run (gpt-oss-20b on vLLM, c=1) as it reads behind a buffering proxy: the
    first chunk comes when the answer is complete, so TTFT takes the request latency and the per-request
    inter-token latency, (latency - TTFT) / (tokens - 1), falls to about 20 us."""
    data = json.loads(GENAI_PERF.read_text())
    stats = ("avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")
    data["time_to_first_token"] = {**data["request_latency"], "unit": "ms"}
    data["inter_token_latency"] = {"unit": "ms", **{k: 0.02 for k in stats}, "std": 0.0}
    dst.write_text(json.dumps(data))
    return dst


def test_a_summary_with_an_inter_token_latency_under_any_step_is_held(tmp_path: Path) -> None:
    """No per-request gaps (a genai-perf summary): the per-request inter-token latency's median says it."""
    [direct] = load_runs(GENAI_PERF)
    assert direct.streaming is True and direct.stream_delivery is None and direct.tpot_ms.median > 7
    assert not any(_held_evidence(diagnose(gather(question=QUESTION, attachments=[GENAI_PERF]))).values())

    held_file = _genai_perf_through_proxy(tmp_path / "via-proxy_genai_perf.json")
    d = diagnose(gather(question=QUESTION, attachments=[held_file]))
    found = {f.cause: [e for e in f.evidence if e.label.id == "ev.p50_below_step"] for f in d.findings}
    assert found.get("cpu_frontend") and found.get("benchmark_methodology"), found
    [ev] = found["cpu_frontend"]
    assert (ev.kind, ev.value, ev.unit, ev.label.args["figure"]) == ("measured", 0.02, "ms", "TPOT")

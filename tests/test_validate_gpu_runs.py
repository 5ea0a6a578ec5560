"""`vllm-advisor validate` on the real-vLLM runs shipped in benchmarks/gpu/runs (H200, vLLM 0.26.0).

No GPU: the measured side is the shipped per-request arrays; the predicted side is the model.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllm_advisor.cli.main import cli
from vllm_advisor.perf.validation import measured_figures, validate_runs
from vllm_advisor.schema.validation import FIGURES

ALL_RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "runs"
RUNS = ALL_RUNS / "2026-12-03-h200-vllm0.26"


@pytest.fixture(scope="module")
def report():
    return validate_runs(RUNS)


@pytest.fixture(scope="module")
def all_runs():
    """Every run folder, split by benchmarks/gpu/runs/split.json (the session-23 refit's)."""
    return validate_runs(ALL_RUNS)


def test_every_measured_point_is_repredicted(report):
    files = sorted(RUNS.rglob("results.json.gz"))
    assert len(files) == 6
    measured = 0
    for f in files:
        data = json.loads(gzip.decompress(f.read_bytes()))
        measured += sum(1 for p in data["points"] if p.get("requests") and not p.get("skipped"))
    assert len(report.points) == measured >= 35
    models = {p.model for p in report.points}
    assert {"Llama-3.1-8B-Instruct", "Qwen2.5-14B-Instruct", "Qwen3-30B-A3B"} <= models
    for p in report.points:
        figs = {f.figure: f for f in p.figures}
        assert list(figs) == list(FIGURES)
        for name in ("ttft_p50", "tpot_p50", "e2e_p50", "output_throughput"):
            f = figs[name]
            assert f.measured and f.measured > 0 and f.predicted and f.predicted > 0, (p.point, name)
            assert f.error == pytest.approx(f.predicted / f.measured - 1.0)


def test_split_follows_split_json(report):
    split = json.loads((RUNS / "split.json").read_text())
    assert split["fit"] == ["llama8b-b8192"]
    for p in report.points:
        assert p.split == ("fit" if p.run in split["fit"] else "holdout")
    assert {s.split for s in report.summary} == {"fit", "holdout", "all"}


def test_kv_cache_size_within_three_percent_of_the_server_log(report):
    assert len(report.kv_cache) == 6
    for k in report.kv_cache:
        assert abs(k.error) <= 0.03, k


def test_measured_figures_recomputed_match_the_harness_summary():
    data = json.loads(gzip.decompress((RUNS / "qwen14b-b8192" / "results.json.gz").read_bytes()))
    p = next(p for p in data["points"] if p["id"] == "c32-in8k")
    m, s = measured_figures(p), p["summary"]
    assert m["ttft_p50"] == pytest.approx(s["ttft_p50_s"], rel=1e-9)
    assert m["ttft_p90"] == pytest.approx(s["ttft_p90_s"], rel=1e-9)
    assert m["tpot_p50"] == pytest.approx(s["tpot_p50_ms"], rel=1e-9)
    assert m["e2e_p50"] == pytest.approx(s["e2e_p50_s"], rel=1e-9)
    assert m["output_throughput"] == pytest.approx(s["output_throughput_tok_s"], rel=1e-9)
    assert m["running_mean"] > 10 and m["waiting_mean"] >= 0


def test_cli_json_and_table():
    runner = CliRunner()
    res = runner.invoke(cli, ["validate", str(RUNS / "qwen3moe-b8192"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["kv_cache"][0]["model"] == "Qwen3-30B-A3B"
    assert {p["point"] for p in data["points"]} >= {"c1-in2k", "burst6-in32k", "poisson4-in4k", "c16-in8k-prefix6k"}
    assert all(not math.isnan(f["measured"]) for p in data["points"] for f in p["figures"] if f["measured"] is not None)
    res = runner.invoke(cli, ["validate", str(RUNS / "llama8b-b2048")])
    assert res.exit_code == 0, res.output
    assert "TTFT p50" in res.output and "KV cache size" in res.output


def test_bad_input_is_one_line(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "results.json"
    bad.write_text("{}")
    res = runner.invoke(cli, ["validate", str(bad)])
    assert res.exit_code == 3
    assert "not a benchmarks/gpu/vllm_e2e.py results file" in res.output
    res = runner.invoke(cli, ["validate", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "no such file" in res.output
    (tmp_path / "broken.json.gz").write_bytes(b"nope")
    (tmp_path / "results.json.gz").write_bytes(b"nope")
    res = runner.invoke(cli, ["validate", str(tmp_path / "results.json.gz")])
    assert res.exit_code == 3 and "not a readable results file" in res.output
    # A real run file with one load point damaged (its spec lost): one line naming the file.
    data = json.loads(gzip.decompress((RUNS / "qwen3moe-b8192" / "results.json.gz").read_bytes()))
    del data["points"][2]["spec"]["input_len"]
    damaged = tmp_path / "damaged" / "results.json"
    damaged.parent.mkdir()
    damaged.write_text(json.dumps(data))
    res = runner.invoke(cli, ["validate", str(damaged.parent)])
    assert res.exit_code == 3 and "missing or malformed" in res.output and "internal error" not in res.output


def test_the_root_split_scores_eager_and_other_backends_apart(all_runs):
    """The root split.json: its fit runs (and the MoE servers the MoE kernel factors were fitted on) are
    fitted, eager / other attention backends scored apart ("other": terms the engine fit does not
    cover), every other run held out, across H200 and H100."""
    split = json.loads((ALL_RUNS / "split.json").read_text())
    runs = {p.run for p in all_runs.points}
    fitted = set(split["fit"]) | set(split["moe_fit"])
    assert fitted | set(split["other"]) <= runs and len(runs) >= 40
    for p in all_runs.points:
        assert p.split == ("fit" if p.run in fitted else "other" if p.run in split["other"] else "holdout")
    assert "H100" in all_runs.engine and "H200" in all_runs.engine


def test_held_out_errors_meet_the_issue_bars_and_match_the_catalog(all_runs):
    """The shipped fit of vLLM's own costs (catalog/vllm-h200.yaml), judged on runs it was not fitted
    to (every run folder, H200 and H100): TPOT, output throughput and E2E within 10% (median
    absolute), TTFT p50 within 15%, KV cache size within 3%; and the catalog's recorded hold-out
    errors are what validate computes now."""
    from vllm_advisor.perf.efficiency import shipped_engine_fit

    report = all_runs
    held = {s.figure: s for s in report.summary if s.split == "holdout"}
    bars = {"tpot_p50": 0.10, "output_throughput": 0.10, "e2e_p50": 0.10, "ttft_p50": 0.15, "kv_cache_tokens": 0.03}
    for fig, bar in bars.items():
        assert held[fig].median_abs_error <= bar, (fig, held[fig])
    # (each H200 server's KV cache within 3%: test_kv_cache_size_within_three_percent_of_the_server_log;
    # later H100 servers reach 8%, planted-8b-preempt, so the bar here is the median's)
    fit = shipped_engine_fit()
    assert set(fit.fit_runs) | set(fit.moe_fit_runs) == {p.run for p in report.points if p.split == "fit"}
    assert set(fit.holdout_runs) == {p.run for p in report.points if p.split == "holdout"}
    for fig, value in fit.holdout_error.items():
        assert held[fig].median_abs_error == pytest.approx(value, abs=0.01), fig  # refit when the model moves more


def test_the_fit_is_what_closes_the_gap():
    """With vLLM's own costs as they were before the real-vLLM runs (sourced overheads, no graph
    factors), TPOT is a fifth too high over the held-out points and a quarter at low load: the fitted
    terms, not luck, meet the bar. (Above 0.2 while open loops were simulated from a fresh Poisson
    draw; 0.197 since they replay the client's recorded send times, session 28, where the fitted terms
    give 0.042 on the same points.)"""
    from vllm_advisor.perf.efficiency import PRE_FIT_ENGINE_VALUES, Efficiency

    before = validate_runs(RUNS, efficiency=Efficiency().model_copy(update=PRE_FIT_ENGINE_VALUES))
    held = {s.figure: s for s in before.summary if s.split == "holdout"}
    assert held["tpot_p50"].median_abs_error > 0.15 and held["tpot_p50"].median_signed_error > 0.15
    c1 = next(p for p in before.points if p.run == "qwen14b-b8192" and p.point == "c1-in2k")
    assert next(f for f in c1.figures if f.figure == "tpot_p50").error > 0.25


def test_estimate_says_how_far_the_model_was_from_real_vllm():
    from vllm_advisor.perf.efficiency import shipped_engine_fit

    runner = CliRunner()
    base = ["estimate", "--model", "Llama-3.1-8B", "--gpu", "H200", "--input-len", "4000", "--output-len", "64", "--concurrency", "1", "--json"]
    data = json.loads(runner.invoke(cli, base + ["--vllm-version", "0.26.0"]).output)["vs_real_vllm"]
    assert data["applies"] is True
    assert data["median_abs_error_holdout"] == shipped_engine_fit().holdout_error
    assert set(data["median_abs_error_holdout"]) >= {"ttft_p50", "tpot_p50", "e2e_p50", "output_throughput", "kv_cache_tokens"}
    assert json.loads(runner.invoke(cli, base).output)["vs_real_vllm"]["applies"] is False  # version unknown
    text = runner.invoke(cli, base[:-1] + ["--vllm-version", "0.26.0"]).output
    assert "Held to real vLLM 0.26.0" in text and "TPOT p50" in text


def _load_harness():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "vllm_e2e.py"
    spec = importlib.util.spec_from_file_location("vllm_e2e", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_harness_client_times_requests_like_vllm_bench(tmp_path):
    """The harness's client against a loopback server that streams like vLLM (first chunk after
    60 ms, then one chunk every 8 ms, usage at the end): TTFT, ITL, TPOT and token counts come out as
    `vllm bench serve` defines them, and validate's recomputation agrees with the harness summary."""
    pytest.importorskip("aiohttp")
    import asyncio
    import socket
    import threading

    from aiohttp import web

    seen: list[dict] = []

    async def completions(request):
        body = await request.json()
        seen.append(body)
        resp = web.StreamResponse()
        await resp.prepare(request)
        await asyncio.sleep(0.06)
        for _ in range(body["max_tokens"]):
            await resp.write(b'data: {"choices": [{"text": "x"}]}\n\n')
            await asyncio.sleep(0.008)
        usage = {"choices": [], "usage": {"completion_tokens": body["max_tokens"], "prompt_tokens": len(body["prompt"])}}
        await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.add_routes([web.post("/v1/completions", completions)])
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        h = _load_harness()
        point = {"input_len": 600, "output_len": 12, "num_prompts": 4, "concurrency": 2, "prefix_len": 200}
        recs, duration, pending = asyncio.run(h.run_point(f"http://127.0.0.1:{port}", "m", point, 11, 128000, 20))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert pending == 0 and all(r["ok"] for r in recs)
    prompts = [b["prompt"] for b in seen]
    assert all(len(p) == 600 and min(p) >= 300 and max(p) < 128000 for p in prompts)
    assert all(p[:200] == prompts[0][:200] for p in prompts) and len({tuple(p[200:]) for p in prompts}) == 4
    for r in recs:
        assert r["output_tokens"] == 12 and len(r["itl"]) == 11
        assert 0.055 <= r["ttft"] < 0.5 and r["e2e"] > r["ttft"] + 11 * 0.007
    # c=2, 4 requests: two rounds, so the second pair is sent when the first pair is done.
    sends = sorted(r["sent"] for r in recs)
    assert sends[2] > 0.1 and duration > 2 * 0.15
    summary = h.client_summary(recs, duration)
    m = measured_figures({"requests": recs, "duration_s": duration})
    assert m["ttft_p50"] == pytest.approx(summary["ttft_p50_s"]) and m["tpot_p50"] == pytest.approx(summary["tpot_p50_ms"])
    assert 7.0 <= m["tpot_p50"] < 40 and m["output_throughput"] == pytest.approx(48 / duration)


def test_memo_says_how_far_the_model_was_from_real_vllm():
    from types import SimpleNamespace

    from vllm_advisor.memo.sections import _real_vllm_line
    from vllm_advisor.perf.efficiency import shipped_engine_fit

    tpot = f"TPOT p50 {shipped_engine_fit().holdout_error['tpot_p50'] * 100:.1f}%"
    en = _real_vllm_line("en", SimpleNamespace(vllm_version="0.26.0", version_assumed=False))
    assert "real vLLM server (vLLM 0.26.0 on one H200 or H100 80GB HBM3" in en and tpot in en and "older or unknown" not in en
    zh = _real_vllm_line("zh", SimpleNamespace(vllm_version="0.8.5", version_assumed=True))
    assert "真实 vLLM" in zh and "H200或H100 80GB HBM3" in zh and tpot in zh and "较旧或未知" in zh


def test_the_fp8_kv_cache_the_advice_gives_holds_on_real_vllm():
    """The advice's first change for a full KV pool, checked on one H100 (session 20,
    runs/2026-12-06-h100-kvfp8, predictions committed before the run): 64 clients of 8K prompts with
    vLLM's default KV dtype, then with --kv-cache-dtype fp8. The pool doubles (449,968 -> 899,936
    tokens measured), and the model's change in throughput and first-token time is the measured one."""
    runs = validate_runs(RUNS.parent / "2026-12-06-h100-kvfp8")
    kv = {k.run: k for k in runs.kv_cache}
    assert kv["check-8b-kvfp8"].measured_tokens == 2 * kv["check-8b-kvauto"].measured_tokens
    assert all(abs(k.error) <= 0.03 for k in kv.values())

    def fig(run, name):
        point = next(p for p in runs.points if p.run == run and p.point == "c64-in8k")
        return next(f for f in point.figures if f.figure == name)

    for name, rel in (("output_throughput", 0.05), ("ttft_p50", 0.25)):
        measured = fig("check-8b-kvfp8", name).measured / fig("check-8b-kvauto", name).measured
        predicted = fig("check-8b-kvfp8", name).predicted / fig("check-8b-kvauto", name).predicted
        assert predicted == pytest.approx(measured, rel=rel), name  # x1.19 / x0.22 predicted, x1.19 / x0.28 measured


def test_a_server_with_chunked_prefill_off_is_modelled_as_one_step_prefills():
    """planted-8b-nochunk (session 21, runs/2026-12-06-h100-nochunk, predictions committed before the run in
    834a66f): --no-enable-chunked-prefill with a 32,768-token budget on one H100. `validate` reads the flag from
    the plan, and every figure of both points lands within 15% of the measurement (TTFT p50 2.32 / 2.68 s
    predicted, 2.24 / 2.40 s measured)."""
    runs = validate_runs(RUNS.parent / "2026-12-06-h100-nochunk")
    assert {p.point for p in runs.points} == {"c32-in8k", "c8-in24k"}
    for point in runs.points:
        for f in point.figures:
            if f.figure in ("ttft_p50", "ttft_p90", "tpot_p50", "e2e_p50", "output_throughput"):
                assert abs(f.error) <= 0.15, (point.point, f.figure, f.error)


def test_an_eager_step_takes_its_host_launches_fitted_to_real_vllm():
    """--enforce-eager on one H100 (session 21, runs/2026-12-06-h100-eager, plans and predictions committed
    first): an eager step is host-bound, 44.6 / 44.9 ms TPOT at 1 / 4 clients on Qwen3-30B-A3B (4.8 / 8.5 ms
    with CUDA graphs) and 14.2 / 15.4 ms at 1 / 32 clients on Llama-3.1-8B. The step takes the longer of its
    launches and its kernels (benchmarks/gpu/fit_eager.py, 962 µs an MoE layer, 446 µs a dense one; 958 / 439 before session 23's engine refit); the
    sourced 60 µs added to the kernels said 9.1 ms for the MoE at one client. Held out: the eager points of
    sessions 18 and 19 on other H100 machines (host CPUs differ by about 15%)."""
    import subprocess
    import sys

    from vllm_advisor.perf.efficiency import Efficiency

    def tpot(folder, run, point, eff=None):
        p = next(p for p in validate_runs(RUNS.parent / folder, efficiency=eff).points if (p.run, p.point) == (run, point))
        return next(f for f in p.figures if f.figure == "tpot_p50")

    for run, point in (("check-moe-eager", "c1-in1k"), ("check-moe-eager", "c4-in1k"), ("check-8b-eager", "c1-in1k"), ("check-8b-eager", "c32-in1k")):
        assert abs(tpot("2026-12-06-h100-eager", run, point).error) <= 0.10, (run, point)
    # 64 clients: -9% with session 21's terms, -10.1% since session 23's refit of vLLM's per-request host
    # time (21.7 -> 10.3 us, fitted on large graph-mode batches; an eager step of 64 requests keeps 0.7 ms less),
    # -11.1% since session 24's step-level refit of the host time per starting prefill (4.0 -> 0.4 ms, fitted on
    # graph-mode engine steps; the eager launch terms refitted on top moved by 1-2 us), -9.7% since session 25's
    # MoE kernel factors (an eager step's kernels are vLLM's fused MoE kernels too; the MoE launch term refitted
    # on top: 965.5 -> 961.8 us)
    assert abs(tpot("2026-12-06-h100-eager", "check-moe-eager", "c64-in1k").error) <= 0.12
    for folder, run, point in (("2026-12-06-h100-planted-e", "planted-moe-eager", "c16-in1k"), ("2026-12-06-h100-planted", "planted-8b-eager", "c8-in1k"),
                               ("2026-12-06-h100-planted", "planted-14b-eager", "c16-in512")):
        assert abs(tpot(folder, run, point).error) <= 0.20, (run, point)
    old = Efficiency().model_copy(update={"eager_launch_us_per_layer": 60.0, "eager_moe_launch_us_per_layer": 60.0})
    assert tpot("2026-12-06-h100-eager", "check-moe-eager", "c1-in1k", old).error < -0.7  # what the fit closes
    fitted = subprocess.run([sys.executable, str(RUNS.parents[1] / "fit_eager.py")], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    defaults = Efficiency()
    assert f"'eager_moe_launch_us_per_layer': {defaults.eager_moe_launch_us_per_layer}" in fitted
    assert f"'eager_launch_us_per_layer': {defaults.eager_launch_us_per_layer}" in fitted


def test_open_loops_replay_the_send_times_the_client_recorded():
    """An open loop is compared with the arrivals it really had: a fresh Poisson draw of the same rate
    put 60 4K-token prompts at 3 req/s anywhere from TPOT 13 to 18 ms in the model (the server: 12.2)."""
    from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
    from vllm_advisor.perf.validation import _recorded_sends, deployment_of, read_results

    path = next((ALL_RUNS / "2026-12-07-h100-moe-mixed").rglob("results.json*"))
    result = read_results(path)
    point = next(p for p in result["points"] if p["id"] == "r3-in4k-out128")
    sends = _recorded_sends(point)
    assert sends is not None and len(sends) == 60 and min(sends) >= 0
    assert _recorded_sends({"requests": [{"sent": 0.1}, {"ok": False}]}) is None  # one missing: drawn from the rate
    dep, args = deployment_of(result, path)
    engine = build_engine_model(dep, args, needed_model_len=4096 + 128)
    lp = LoadPoint(concurrency=None, request_rate=3.0)

    def tpot(**kw):
        run, _ = predict_load_point(engine, lp, input_len=4096, output_len=128, num_prompts=60, **kw)
        return run.tpot_ms.median

    assert tpot(seed=1, arrivals=sends) == tpot(seed=2, arrivals=sends)  # the draw no longer matters
    assert abs(tpot(seed=1, arrivals=sends) / 12.17 - 1) < 0.05  # measured TPOT p50 12.17 ms
    assert len({round(tpot(seed=s), 3) for s in (1, 2, 3)}) > 1  # without them, it does

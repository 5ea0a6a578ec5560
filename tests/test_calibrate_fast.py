"""Calibration in a handful of simulations: closed loops re-timed, not re-simulated.

A closed loop's schedule does not depend on step times, so ``perf.retime`` recomputes a simulated
load point's timings under another efficiency from the recorded batches. These tests hold the
shortcut to the long way: the vectorised step costs equal the model called per batch, the re-timed
figures equal a fresh simulation's, and calibration runs one simulation per closed-loop load point.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.perf import predict as predict_mod
from vllm_advisor.perf.calibrate import FIGURES, calibrate, scaled_efficiency
from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
from vllm_advisor.perf.retime import Retimer, can_retime
from vllm_advisor.perf.simulator import StepBatch
from vllm_advisor.probe.bench import load_runs, observations_to_runs
from vllm_advisor.probe.casefile import load_case
from vllm_advisor.probe.serve_cmd import engine_args_for
from vllm_advisor.schema import Deployment, EngineArgs

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"


@pytest.fixture(scope="module")
def seed():
    case = load_case(SEED)
    em = build_engine_model(case.deployment, engine_args_for(case.deployment), needed_model_len=64000)
    return case, em


def _engine(model, gpu, n, **args):
    return build_engine_model(Deployment(engine="vllm", model=model, gpu=gpu, num_gpus=n, vllm_version="0.8.5"), EngineArgs(**args), needed_model_len=9000)


BATCHES = [
    StepBatch(1, 64000, ()),
    StepBatch(5, 250000, ((2043, 40000),)),
    StepBatch(0, 0, ((2048, 0),)),
    StepBatch(0, 0, ((700, 100), (1348, 0))),
    StepBatch(40, 40 * 3000, (), 2048, 40),  # a shared prefix read once (cascade attention)
    StepBatch(256, 256 * 1200, ((1792, 4000),)),
    StepBatch(0, 0, ()),
]


@pytest.mark.parametrize(
    "model,gpu,n,args",
    [
        ("Qwen/Qwen2.5-32B-Instruct", "H800", 2, {"tensor_parallel_size": 2}),
        ("Qwen/Qwen3-30B-A3B", "H100", 1, {"enforce_eager": True}),
        ("deepseek-ai/DeepSeek-V3", "H200", 8, {"tensor_parallel_size": 8, "quantization": "fp8"}),
    ],
    ids=["dense-tp2", "moe-eager", "mla-fp8"],
)
def test_cost_plan_equals_the_model_per_batch(model, gpu, n, args):
    em = _engine(model, gpu, n, **args)
    plan = em.step.cost_plan(BATCHES)
    base = em.step.eff
    for d, p in ((1.0, 1.0), (1.3, 0.7), (0.5, 1.9)):
        em.step.eff = scaled_efficiency(base, d, p).model_copy(update={"step_overhead_ms": 1.5 * base.step_overhead_ms})
        expected = [em.step(b) for b in BATCHES]
        assert plan().tolist() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    em.step.eff = base


@pytest.mark.parametrize("concurrency,prompts", [(1, 3), (40, 60)])
def test_retimed_figures_equal_a_fresh_simulation(seed, concurrency, prompts):
    _, em = seed
    point = LoadPoint(concurrency=concurrency)
    _, result = predict_load_point(em, point, input_len=63000, output_len=1000, num_prompts=prompts)
    assert can_retime(result, em.step)
    retimer = Retimer(result, em.step)
    base = em.step.eff
    try:
        for d, p in ((1.0, 1.0), (1.33, 1.34), (0.6, 2.0)):
            em.step.eff = scaled_efficiency(base, d, p)
            fresh = predict_load_point(em, point, input_len=63000, output_len=1000, num_prompts=prompts)[0]
            fast = retimer.figures()
            for name, get in FIGURES.items():
                assert fast[name] == pytest.approx(get(fresh), rel=1e-9), (d, p, name)
    finally:
        em.step.eff = base


def test_calibration_simulates_each_closed_loop_point_once(seed, monkeypatch):
    case, em = seed
    calls = []
    real = predict_mod.simulate

    def counting(*a, **kw):
        calls.append(a[2])
        return real(*a, **kw)

    monkeypatch.setattr(predict_mod, "simulate", counting)
    measured = observations_to_runs(case.observations, "profile")
    result = calibrate(em, measured, input_len=63000, output_len=1000)
    assert result.calibrated and len(calls) == 3  # c=1, 40, 100: one simulation each, then re-timed
    # The fit itself: the single-request speed is reached, the KV-bound points are set aside.
    c1 = [r for r in result.residuals if r.load == "c=1"]
    assert c1 and all(abs(r.ratio - 1) < 0.02 for r in c1)
    assert {r.load for r in result.unreachable} == {"c=40", "c=100"}


def test_open_loop_points_are_still_simulated(fixtures_dir, monkeypatch):
    """A measured Poisson point (Llama-3.3-70B, TP8 on 8 x A100-40GB, 4 req/s, a real vllm bench
    file) depends on the clock: calibration simulates it at every evaluation and still fits."""
    runs = load_runs(fixtures_dir / "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json")
    run = runs[0]
    assert run.offered_request_rate == 4 and not run.offered_concurrency
    em = _engine("meta-llama/Llama-3.3-70B-Instruct", "A100-SXM4-40GB", 8, tensor_parallel_size=8)
    calls = []
    real = predict_mod.simulate
    monkeypatch.setattr(predict_mod, "simulate", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    result = calibrate(em, [run], input_len=int(run.input_len.mean), output_len=int(run.output_len.mean), rounds=1, evaluations_per_search=4)
    assert result.calibrated and len(calls) > 4
    # Never worse than the shipped efficiencies, even with a search this coarse.
    assert result.rms_log_error_after <= result.rms_log_error_before + 1e-12

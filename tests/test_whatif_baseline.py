"""Several what-ifs of one deployment share the simulation of their common "before" and answer
exactly as if each had simulated it (the diagnosis asks two or more per answer)."""

from __future__ import annotations

from pathlib import Path

from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.perf import whatif
from vllm_advisor.perf.predict import LoadPoint

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"


def test_shared_before_runs_give_the_same_results(monkeypatch):
    inputs = gather(profile=SEED, predict=False)
    kwargs = dict(input_len=inputs.input_len, output_len=inputs.output_len, num_prompts=60)
    points = [LoadPoint(concurrency=40), LoadPoint(concurrency=100)]
    changes = [["max_num_seqs=64"], ["gpu_memory_utilization=0.95"], ["tp=4"]]
    alone = [whatif.what_if(inputs.deployment, inputs.engine_args, c, points, **kwargs).to_dict() for c in changes]
    calls = []
    real = whatif.predict_load_point
    monkeypatch.setattr(whatif, "predict_load_point", lambda *a, **k: calls.append(1) or real(*a, **k))
    shared: dict = {}
    together = [whatif.what_if(inputs.deployment, inputs.engine_args, c, points, baseline_runs=shared, **kwargs).to_dict() for c in changes]
    assert together == alone
    assert len(calls) == len(points) + len(changes) * len(points)  # each "before" once, every "after"
    assert len(shared) == len(points)

"""The KV pool an attached server log measured becomes the deployment's pool (diagnosis.logged_memory),
for the deployment and every what-if of it; a log that cannot be this deployment's is not used."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.diagnosis.logged_memory import logged_memory_params
from vllm_advisor.schema.serverlog import ServerLogInfo

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "gpu" / "runs" / "2026-12-06-h100-planted-d" / "planted-8b-preempt"
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    # real vLLM 0.26 on an H100, Llama-3.1-8B at --gpu-memory-utilization 0.3: "GPU KV cache size:
    # 60,784 tokens" in its log, where the memory model estimates 55,952 (-7.9%)
    import planted_artifacts

    results, log, snaps = planted_artifacts.load_run(RUN)
    point = results["points"][0]
    return planted_artifacts.write_point(results, point, snaps[point["id"]], log, tmp_path_factory.mktemp("preempt"), planted_artifacts.QUESTION)


def test_the_logged_pool_is_the_deployments_pool(folder) -> None:
    inputs = gather(profile=folder / "case.yaml")
    memory = inputs.engine.memory
    assert memory.kv_cache_tokens == 60_784
    assert memory.basis["kv_cache_gib"].startswith("measured")
    assert inputs.memory_params.logged_correction_gib == pytest.approx(-0.59, abs=0.02)


def test_without_the_log_the_estimate_stands(folder) -> None:
    inputs = gather(profile=folder / "case.yaml", predict=False)
    inputs.server_logs = []
    from vllm_advisor.perf.predict import build_engine_model

    engine = build_engine_model(inputs.deployment, inputs.engine_args, needed_model_len=3072)
    assert engine.memory.kv_cache_tokens == 55_952 and logged_memory_params(inputs, engine) is None


def test_a_what_if_starts_from_the_logged_pool(folder) -> None:
    # fp8 KV halves the bytes per token: twice the logged pool, not twice the estimate (111,904)
    from vllm_advisor.diagnosis.engine import diagnose

    diagnosis = diagnose(gather(profile=folder / "case.yaml"))
    effects = [r.predicted_effect for f in diagnosis.findings for r in f.recommendations if r.flag == "--kv-cache-dtype fp8"]
    kv = next(p for p in effects[0].args["parts"] if p.id == "effect.kv")
    assert kv.args["before"].value == 60_784 and kv.args["after"].value == pytest.approx(2 * 60_784, abs=32)


def test_a_log_too_far_from_the_estimate_is_another_deployments(folder) -> None:
    inputs = gather(profile=folder / "case.yaml", predict=False)
    from vllm_advisor.perf.predict import build_engine_model

    engine = build_engine_model(inputs.deployment, inputs.engine_args, needed_model_len=3072)
    inputs.server_logs = [ServerLogInfo(source="other.log", kv_cache_tokens=400_000)]  # a 0.9 server's pool
    assert logged_memory_params(inputs, engine) is None
    inputs.server_logs = [ServerLogInfo(source="a.log", kv_cache_tokens=60_784), ServerLogInfo(source="b.log", kv_cache_tokens=61_000)]  # whose?
    assert logged_memory_params(inputs, engine) is None

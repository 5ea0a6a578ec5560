"""A deployment that was measured did fit: when the memory model says it cannot (DeepSeek-R1 671B on
one RTX 4090, its experts offloaded to the CPUs by KTransformers), the model's estimate of the
weights is what is wrong, not the user's settings. No memory evidence then, and a note says why;
the same deployment described without any measurement still gets the model's verdict."""

from __future__ import annotations

from pathlib import Path

from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.diagnosis.physics import detect_physics

CASE = Path(__file__).resolve().parents[1] / "knowledge" / "cases" / "ktransformers-806-4-socket-ddr4-4toks.yaml"


def _model_evidence(inputs) -> dict[str, float]:
    board = Board()
    detect_physics(inputs, board)
    return {cause: h.by_kind.get("model", 0.0) for cause, h in board.hypotheses.items()}


def test_a_measured_deployment_gets_no_does_not_fit_evidence_and_a_note():
    inputs = gather(profile=CASE)
    assert inputs.served and inputs.engine is not None and not inputs.engine.memory.fits
    evidence = _model_evidence(inputs)
    assert evidence.get("memory_config", 0.0) == 0 and evidence.get("kv_capacity", 0.0) == 0
    notes = [n.id for n in diagnose(inputs).notes]
    assert "note.served_but_does_not_fit" in notes


def test_an_unmeasured_deployment_keeps_the_models_verdict():
    inputs = gather(profile=CASE)
    inputs.measured = []
    assert not inputs.served
    evidence = _model_evidence(inputs)
    assert evidence.get("memory_config", 0.0) > 0 and evidence.get("kv_capacity", 0.0) > 0
    assert "note.served_but_does_not_fit" not in [n.id for n in diagnose(inputs).notes]

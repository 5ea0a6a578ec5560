"""vLLM's release history (no chunked prefill before 0.4, upgrades before 0.8) is evidence only for
vLLM: another engine's version number in the same field says nothing about it."""

from __future__ import annotations

from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.config_facts import detect_config
from vllm_advisor.diagnosis.inputs import DiagnosisInputs
from vllm_advisor.schema.deployment import Deployment

QUESTION = "After the upgrade, a long prompt of 16k tokens stalls everyone else. Why?"


def _config_evidence(engine: str | None) -> dict[str, float]:
    inputs = DiagnosisInputs(question=QUESTION, deployment=Deployment(engine=engine, vllm_version="0.3.3"))
    board = Board()
    detect_config(inputs, board)
    return {cause: h.by_kind.get("config", 0.0) for cause, h in board.hypotheses.items()}


def test_an_old_vllm_version_is_evidence():
    evidence = _config_evidence("vllm")
    assert evidence.get("chunked_prefill_interference", 0.0) > 0
    assert evidence.get("version_regression", 0.0) > 0
    assert _config_evidence(None) == evidence  # no engine given: vLLM, the advisor's engine
    assert _config_evidence("vLLM") == evidence  # any spelling (Deployment.is_vllm)


def test_another_engines_version_is_not_read_as_vllms():
    for engine in ("sglang", "tgi"):
        evidence = _config_evidence(engine)
        assert evidence.get("chunked_prefill_interference", 0.0) == 0
        assert evidence.get("version_regression", 0.0) == 0


def test_the_approximation_note_is_for_other_engines_only():
    """The performance model is vLLM's scheduler: an input of another engine is told it is applied as
    an approximation; vLLM in any spelling is not."""
    from vllm_advisor.diagnosis import inputs as inputs_module

    def notes(engine):
        inputs = DiagnosisInputs(question=QUESTION, deployment=Deployment(engine=engine))
        inputs_module._model(inputs, calibrate=False)
        return [n for n in inputs.notes if "approximation" in n]

    assert notes("vllm") == notes("vLLM") == notes(None) == []
    assert notes("sglang") and "sglang" in notes("sglang")[0]

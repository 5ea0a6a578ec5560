"""Real vLLM 0.26.0 runs on an H100 with one cause set on purpose (benchmarks/gpu/plans/planted-*.json):
each run handed over as a user would (case file with a neutral question, vllm bench serve JSON, /metrics,
server log; planted_artifacts.py) must get its set cause first. Four runs were developed against
(8B: --enforce-eager, --max-num-seqs 4 under 32 clients, a KV pool cut to 0.35 of the GPU under 48
clients of 8K tokens, 24K-token prompts beside decodes); the 14B --enforce-eager run was held out and
scored once after the fixes (benchmarks/RESULTS.md, session 17)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "benchmarks" / "gpu" / "runs" / "2026-12-06-h100-planted"
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))


def _folder(run: str, tmp_path: Path) -> tuple[Path, list[str]]:
    import planted_artifacts

    results, log, snaps = planted_artifacts.load_run(RUNS / run)
    point = results["points"][0]
    out = planted_artifacts.write_point(results, point, snaps[point["id"]], log, tmp_path, planted_artifacts.QUESTION)
    return out, results["plan"]["planted"]["causes"]


@pytest.mark.parametrize("run", ["planted-8b-eager", "planted-8b-seqs4", "planted-8b-kv", "planted-8b-longmix", "planted-14b-eager"])
def test_the_set_cause_comes_first(run, tmp_path) -> None:
    folder, causes = _folder(run, tmp_path)
    inputs = gather(profile=folder / "case.yaml")
    assert inputs.deployment.gpu == "H100"
    found = diagnose(inputs, with_effects=False).causes
    assert found[0] in causes, found[:3]
    assert causes[0] in found[:3], found[:3]


def test_an_eager_server_is_told_which_setting_holds_it_back(tmp_path) -> None:
    # the model reproduces the eager run's figures because it models --enforce-eager: the reply says
    # the speed is what these settings give and names the setting, not "nothing points to a fault"
    from vllm_advisor.answer.question import question_verdict

    folder, _ = _folder("planted-8b-eager", tmp_path)
    inputs = gather(profile=folder / "case.yaml")
    diagnosis = diagnose(inputs, with_effects=False)
    _, said = question_verdict(inputs.question, diagnosis)
    assert said is not None and said.id == "verdict.matches_model_setting"


def test_a_capped_server_log_establishes_max_num_seqs(tmp_path) -> None:
    from vllm_advisor.diagnosis.board import Board
    from vllm_advisor.diagnosis.measured import detect_measured

    folder, _ = _folder("planted-8b-seqs4", tmp_path)
    board = Board()
    detect_measured(gather(profile=folder / "case.yaml", predict=False), board)
    h = board.hypotheses["max_num_seqs_limit"]
    assert h.by_kind.get("measured", 0) >= 3.0 and [r.id for r in h.reasons] == ["reason.max_num_seqs_capped"]

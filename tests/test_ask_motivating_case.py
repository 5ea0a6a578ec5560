"""The motivating report, asked in Chinese: the answer explains it with numbers, in Chinese.

Issue 5's bar: how many requests fit in the KV cache, what the other clients are doing, why
per-request speed halves, why 100 looks like 40, what the user's throughput formula assumes; then
the changes with predicted effects. ``ask`` prints the short answer; the full analysis
(``ask --full``, ``full_answer`` in ``--json``) holds every finding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllm_advisor.cli.main import cli

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    result = CliRunner(env={"VLLM_ADVISOR_HOME": str(home)}).invoke(cli, ["ask", "--profile", str(SEED), "--json", "--no-log"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_answer_is_in_chinese(answer):
    assert answer["language"] == "zh"
    text = answer["answer"]
    assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 300


def test_how_many_requests_fit_in_the_kv_cache(answer):
    text = answer["full_answer"]
    assert "KV 缓存" in text and "327,120" in text  # tokens the cache holds (model)
    assert re.search(r"同时只能跑约 5\.\d 个请求", text)


def test_what_the_other_clients_are_doing(answer):
    assert re.search(r"其余都在排队", answer["full_answer"])


def test_why_per_request_speed_halves(answer):
    text = answer["full_answer"]
    assert "分块预填充" in text and re.search(r"带预填充块的一步约 \d+ 毫秒，而纯解码一步只要 \d+ 毫秒", text)


def test_why_100_looks_like_40(answer):
    assert re.search(r"100 并发和 40 并发看起来差不多的原因", answer["full_answer"])


def test_what_the_throughput_formula_assumes(answer):
    text = answer["full_answer"]
    assert "40 × 22" in text and "假设 40 个客户端同时在生成" in text


def test_changes_come_with_predicted_effects_and_sources(answer):
    text = answer["answer"]
    assert "--kv-cache-dtype fp8" in text and "预计效果" in text
    assert answer["sources"] and all(s["url"] for s in answer["sources"])
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
    assert cited and cited <= {s["number"] for s in answer["sources"]}


def test_the_modelled_stall_stays_in_the_findings_whatever_the_ranker_says(monkeypatch):
    """The prefill-chunk stall is the performance model's figure for this deployment: a ranker fitted
    on words (refitted whenever the library grows) may put the cause last, yet the finding and its
    numbers stay in the full answer; a cause with words alone is cut past the sixth place."""
    from vllm_advisor.diagnosis import ranker
    from vllm_advisor.diagnosis.engine import MAX_FINDINGS, diagnose
    from vllm_advisor.diagnosis.inputs import gather

    real_rank = ranker.rank

    def stall_last(board, sem, model, *args, **kwargs):
        order = real_rank(board, sem, model, *args, **kwargs)
        return [r for r in order if r.cause != "chunked_prefill_interference"] + [r for r in order if r.cause == "chunked_prefill_interference"]

    monkeypatch.setattr(ranker, "rank", stall_last)
    findings = diagnose(gather(profile=SEED), with_effects=False).findings
    causes = [f.cause for f in findings]
    assert "chunked_prefill_interference" in causes[MAX_FINDINGS:]
    stall = findings[causes.index("chunked_prefill_interference")]
    assert any(e.kind == "model" and e.unit == "ms" for e in stall.evidence)
    assert all(any(e.kind in ("model", "measured") for e in f.evidence) for f in findings[MAX_FINDINGS:])

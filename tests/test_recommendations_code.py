"""What a recommendation shows as code is code: a flag or a command, PromQL one query per line. The
words around it are the change's message, written in the asker's language (a Chinese answer carried
"(or an AWQ/GPTQ checkpoint)" and "should drop to 0" inside its code). And the generic moves fit the
deployment: a checkpoint already quantised is not told to quantise; severity reads like confidence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.board import Hypothesis
from vllm_advisor.diagnosis.causes import GENERIC, WEIGHT_QUANT_FLAG
from vllm_advisor.diagnosis.engine import _finding
from vllm_advisor.diagnosis.inputs import DiagnosisInputs
from vllm_advisor.schema.deployment import Deployment

CASES = Path(__file__).resolve().parents[1] / "knowledge" / "cases"


def _short_answer(case: str) -> str:
    """The short answer ``ask --profile`` gives a library case (no knowledge base)."""
    from vllm_advisor import Session

    return Session(profile=CASES / f"{case}.yaml", kb=False).answer().answer.markdown


PROSE = re.compile(r"\b(or|with|vs|should|the|and|on|each|default|more|at|when)\b|#|;")


@pytest.mark.parametrize("cause", sorted(GENERIC))
def test_flags_and_verify_lines_are_code_only(cause):
    for rec in GENERIC[cause]:
        for text in filter(None, [rec.flag, *(rec.verify or "").splitlines()]):
            assert not PROSE.search(text.replace("sum by (le)", "")), (cause, text)


@pytest.mark.parametrize(
    ("model", "quantised"),
    [("Qwen/Qwen2.5-32B-Instruct-AWQ", True), ("DeepSeek-R1 Q4_K_M", True), ("Llama-3.3-70B NVFP4", True), ("Qwen/Qwen2.5-32B-Instruct", False), ("meta-llama/Llama-3.1-8B", False)],
)
def test_a_quantised_checkpoint_is_not_told_to_quantise(model, quantised):
    inputs = DiagnosisInputs(question="Why is decode slow?", deployment=Deployment(model=model))
    finding = _finding(Hypothesis("decode_bandwidth", score=1.0, probability=0.5), inputs)
    flags = [r.flag for r in finding.recommendations]
    assert (WEIGHT_QUANT_FLAG in flags) is not quantised, flags
    changes = [r.change.id for r in finding.recommendations]
    assert ("rec.decode_bandwidth_quantised" in changes) is quantised, changes  # words that do not ask to quantise


@pytest.mark.parametrize(("gpu", "offered"), [("H100", True), ("RTX4090", True), ("A100", False), ("V100", False), ("Ascend-910B", False), ("T4", False)])
def test_fp8_weights_are_not_offered_without_fp8_tensor_cores(gpu, offered):
    inputs = DiagnosisInputs(question="Why is decode slow?", deployment=Deployment(model="meta-llama/Llama-3.1-8B", gpu=gpu))
    flags = [r.flag for r in _finding(Hypothesis("decode_bandwidth", score=1.0, probability=0.5), inputs).recommendations]
    assert (WEIGHT_QUANT_FLAG in flags) is offered, (gpu, flags)


def test_severity_reads_like_the_confidence_shown():
    inputs = DiagnosisInputs(question="q")
    assert _finding(Hypothesis("queueing", score=0.8, probability=0.93), inputs).severity == "high"
    assert _finding(Hypothesis("queueing", score=0.8, probability=0.7), inputs).severity == "medium"
    assert _finding(Hypothesis("queueing", score=5.0, probability=0.2), inputs).severity == "low"
    assert _finding(Hypothesis("queueing", score=5.0), inputs).severity == "high"  # no fitted weights: the board's scale


def test_chinese_answers_name_what_the_catalog_lacks_in_chinese():
    """A GPU or model the catalog does not have, a model the memory model cannot fit although the
    deployment ran: said in Chinese, not as the catalog's or the memory model's English line."""
    import sys

    from vllm_advisor import Session

    sys.path.insert(0, str(Path(__file__).parent))
    from test_answer_question import english_prose

    for name, expect in (("vllm-ascend-171-910b-dense-32b-slow", "内置的 GPU 表里没有 GPU Ascend-910B"), ("dotsocr-22-a10-single-image-15s", "内置的模型表里没有模型"), ("ktransformers-806-4-socket-ddr4-4toks", "不据此给出内存方面的结论")):
        answer = Session(profile=CASES / f"{name}.yaml", kb=False).answer().answer
        assert expect in answer.full_markdown, name
        assert "will not start" not in answer.full_markdown
        for text in (answer.markdown, answer.full_markdown, *answer.notes):
            assert english_prose(text) == [], (name, english_prose(text)[:10])


@pytest.mark.parametrize(
    ("text", "engine"),
    [
        ("On Ollama 0.17.4 I set OLLAMA_NUM_PARALLEL=8. Engine is Ollama (llama.cpp runner), not vLLM.", "Ollama"),
        ("用 KTransformers 部署 DeepSeek-R1，解码只有 4 token/s", "KTransformers"),
        ("TGI 1.3.3 with speculation gives 3.08 req/s", "TGI"),
        ("LMDeploy is 1.6x faster than vLLM for one request", None),  # a comparison: the advice may be for vLLM
        ("Serving Qwen with vllm serve at 40 clients", None),
        ("Why is TTFT 30 s at 40 clients?", None),
    ],
)
def test_the_engine_a_report_is_about(text, engine):
    from vllm_advisor.diagnosis.report_facts import engine_named_in_text

    assert engine_named_in_text(text) == engine


def test_the_short_answer_says_its_flags_are_vllms_for_another_engine():
    md = _short_answer("ollama-14510-qwen35-one-active-request")
    assert "use Ollama's equivalents" in " ".join(md.split())


def test_drop_enforce_eager_is_said_only_to_a_user_who_set_it():
    from vllm_advisor.schema.deployment import EngineArgs

    eager = DiagnosisInputs(question="q", engine_args=EngineArgs(enforce_eager=True))
    plain = DiagnosisInputs(question="q")
    assert [r.change.id for r in _finding(Hypothesis("cuda_graph", score=2.0), eager).recommendations] == ["rec.cuda_graph_1"]
    assert [r.change.id for r in _finding(Hypothesis("cuda_graph", score=2.0), plain).recommendations] == ["rec.cuda_graph_sizes"]


def test_every_card_has_a_chinese_title_and_chinese_answers_use_it():
    """Our own cards are named in Chinese in a Chinese answer's sources (the review found every card
    title in English there); other documents keep their own titles."""
    import re as _re

    from vllm_advisor.answer.embedded import source_line
    from vllm_advisor.schema import Citation
    from vllm_advisor_knowledge.cards import card_titles_zh, load_cards

    cards = load_cards()
    titles = card_titles_zh()
    assert {c.doc_id for c in cards} == set(titles)
    assert all(_re.search(r"[\u4e00-\u9fff]", t) for t in titles.values())
    card = cards[0]
    cite = Citation(doc_id=card.doc_id, title=card.title, url=card.url, kind="card")
    assert titles[card.doc_id] in source_line(cite, "zh") and card.title in source_line(cite, "en")
    doc = Citation(doc_id="doc:x", title="Optimization and Tuning", url="https://docs.vllm.ai/x", kind="doc")
    assert "Optimization and Tuning" in source_line(doc, "zh")


@pytest.mark.parametrize(
    ("gpu", "text", "platform"),
    [("Ascend-910B", "slow decode", "ascend"), (None, "在 910B 上用 vllm-ascend 部署", "ascend"), (None, "On a MacBook Pro with M4 Pro and 24 GB", "apple"), ("H100", "slow decode on our NPU cluster", None), (None, "Llama 70B on 8x H100", None)],
)
def test_the_platform_a_report_runs_on(gpu, text, platform):
    from vllm_advisor.diagnosis.report_facts import platform_named

    assert platform_named(DiagnosisInputs(question=text, deployment=Deployment(gpu=gpu))) == platform


def test_an_offline_run_is_not_told_to_add_api_servers():
    offline = DiagnosisInputs(question="Offline batch inference with LLM(model=...).generate on 2 A100s is slow; GPU 40% busy")
    served = DiagnosisInputs(question="vllm serve at 64 clients: GPU 40% busy")
    assert [r.flag for r in _finding(Hypothesis("cpu_frontend", score=1.0), offline).recommendations] == [None]
    assert [r.flag for r in _finding(Hypothesis("cpu_frontend", score=1.0), served).recommendations] == ["--api-server-count 4"]


#: Reports on other accelerators (Ascend, Gaudi) and one on NVIDIA's: which of their short answers list an
#: NVIDIA-only change moves with each refit of the ranker (two chosen cases lost theirs in sessions 25 and 27),
#: so the test holds the rule on all of them and asks only that both sides of it occur.
PLATFORM_CASES = (
    "vllm-ascend-5739-piecewise-default-full-decode-only",
    "vllm-ascend-4167-upgrade-matmul-tpot-regression",
    "vllm-ascend-6189-omni-prefill-graph-vs-eager",
    "vllm-ascend-11593-qwen3vl-235b-a2-tutorial-config-no-graph",
    "vllm-ascend-16049-max-num-seqs-12-eager-decode",
    "opea-genaiexamples-1210-gaudi-enforce-eager-hpu-graphs",
    "vllm-ascend-8126-qwen3-8b-c2-ttft-waiting",
    "vllm-ascend-3269-ttft-regression-0102rc1",
)


def test_the_platform_note_stands_only_above_nvidia_changes():
    """The note that the deployment runs on another accelerator speaks of attention-backend, CUDA-graph
    and FP8 changes: it comes before a list with one (a CUDA-graph change on Ascend had none), and not
    above a list without one, such as a benchmark command, where it pointed at nothing (reviewers'
    finds, session 14). Held on each report; both sides must occur among them."""
    from vllm_advisor import Session
    from vllm_advisor.answer.embedded import _asked, _top_changes, nvidia_only
    from vllm_advisor.answer.question import direct_reply

    sides = set()
    for case in PLATFORM_CASES:
        result = Session(profile=CASES / f"{case}.yaml", kb=False).answer()
        diagnosis = result.diagnosis
        reply = direct_reply(_asked(result.inputs), diagnosis)
        listed = any(nvidia_only(r) for _, r in _top_changes(diagnosis, reply.findings))
        md = result.answer.markdown
        assert ("NVIDIA" in md) is listed, (case, md)
        sides.add(listed)
    assert sides == {True, False}, "every report fell on one side of the rule: pick reports for the other"


def test_an_engine_note_about_flags_stands_only_above_flags():
    """"The flags in this answer are vLLM's" above a list of changes without a flag points at nothing:
    a NVIDIA-only change without a flag brings the platform note, not the engine's."""
    md = _short_answer("qwen-872-flash-attn-speed-column-is-tokens-per-second")
    changes = md.split("## 建议的修改")[1].split("## 参考来源")[0]
    assert "`" not in changes.split("_完整分析")[0] and "transformers" not in changes, md


def test_the_full_answer_says_whose_flags_above_them_and_once():
    """The engine note stood in the full answer's caveats, after the flags it is about (a reviewer's
    find of session 16); it now stands above the changes, as in the short answer, and only there."""
    from vllm_advisor.session import Session

    case = CASES / "ollama-14510-qwen35-one-active-request.yaml"
    full = Session(profile=case, kb=False).answer(short=False).answer.markdown
    note = "use Ollama's equivalents"
    assert full.count(note) == 1 and full.index("## What to change") < full.index(note) < full.index("1. **")

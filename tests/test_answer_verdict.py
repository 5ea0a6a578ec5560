"""A question that asks whether something is the cause gets its yes or no first (answer/question.py):
likely, in part, not shown yet, or probably not, from the ranked findings and what supports them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vllm_advisor.answer.question import asked_causes
from vllm_advisor.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"


@pytest.mark.parametrize(
    ("question", "cause"),
    [
        ("Serving Llama-3.1-8B on one A100. Is --enforce-eager the reason throughput is low?", "cuda_graph"),
        ("我用 vLLM 0.6.3 跑 Llama-3.1-8B，启动时加了 --enforce-eager，并发 32 时吞吐很低，是这个参数导致的吗？", "cuda_graph"),
        ("是 KV cache 不够导致的吗？", "kv_capacity"),
        ("Could the tokenizer be the bottleneck here?", "cpu_frontend"),
        # found by a review of fitting-part reports, and probes written beside it (session 11)
        ("是不是 context decode 这一步的问题？", "prefill_compute"),
        ("是因为 CUDA graph 没开吗？", "cuda_graph"),  # "没开" in a question asks about it; it does not rule it out
        ("Is chunked prefill causing this?", "chunked_prefill_interference"),
        ("Is the KV cache too small, causing preemption?", "kv_capacity"),
        ("Does --enforce-eager matter here, or is the bottleneck elsewhere?", "cuda_graph"),
        ("Serving it with --enforce-eager, is that the reason?", "cuda_graph"),
    ],
)
def test_yes_no_questions_about_a_cause(question, cause):
    asked = asked_causes(question)
    assert asked is not None and asked.causes[0] == cause


@pytest.mark.parametrize(
    "question",
    [
        "Why is TTFT 30 s at 40 clients with --enforce-eager?",  # asks why, not whether
        "Can I speed it up with --enable-chunked-prefill?",  # asks for advice
        "为什么40并发的时候生成速率变的这么慢？",
        "Is this expected?",  # names no cause
        "Is there a reason max-num-seqs defaults to 256?",  # asks for an explanation
        "Could you explain why --enforce-eager causes slowdowns in general?",
        # advice someone gave ("check whether tokenization is the bottleneck"), pasted with the question
        "建议关注max-num-seqs、max-num-batched-tokens等参数设置，或检查tokenization是否成为瓶颈。",
        None,
    ],
)
def test_questions_that_ask_no_verdict(question):
    assert asked_causes(question) is None


def _opening(*args: str) -> str:
    result = CliRunner().invoke(cli, ["ask", *args, "--no-log"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output.split("\n\n")[1]  # the first paragraph after the heading


def test_yes_when_the_users_own_setup_names_it():
    opening = _opening("我用 vLLM 0.6.3 在一张 A100 上跑 Llama-3.1-8B，启动时加了 --enforce-eager，并发 32 时吞吐很低，是这个参数导致的吗？")
    # leading, and supported by the user's own flag (not "not shown yet"); "yes" or "possibly" follows the
    # fitted confidence either side of one half (0.49 after session 12's refit)
    assert opening.startswith(("是的", "有可能")) and "CUDA graph" in opening


def test_not_shown_when_only_the_question_names_it():
    """The question's words raise a cause's rank; they are not evidence that it is the cause."""
    opening = _opening("Qwen2.5-32B-Instruct on two H800s with TP2, 63K-token prompts. Is speculative decoding the cause?")
    assert opening.startswith("Not shown yet") and "speculative decoding off" in opening


def test_the_deployments_own_figures_answer_yes_or_probably_not():
    """The motivating case: its KV figures are computed, so a question about the KV cache gets yes on
    those figures, and one about the tokenizer gets 'probably not' with what would rule it out."""
    yes = _opening("是 KV cache 不够导致的吗？", "--profile", str(SEED))
    assert yes.startswith("是的") and "KV 缓存" in yes and "算出的数字" in yes
    no = _opening("是 tokenizer 导致的吗？", "--profile", str(SEED))
    assert no.startswith("多半不是") and "CPU" in no


def test_a_why_question_opens_with_the_reasons_as_before():
    opening = _opening("--profile", str(SEED))
    assert not opening.startswith(("是的", "多半不是", "还不能确定", "部分是"))


def test_a_weak_first_cause_is_possibly_not_yes():
    """A question about a cause that leads at a low confidence gets "possibly", once (second review)."""
    text = CliRunner().invoke(cli, ["ask", "聊天越久越慢，变慢是不是因为累积的上下文太长？", "--no-log"], catch_exceptions=False).output
    opening = text.split("\n\n")[1]
    assert opening.startswith("有可能") and "预填充" in opening
    assert text.count("置信度") == 1  # the headline does not repeat the confidence the verdict gave


def test_only_the_question_pointing_to_a_cause_never_makes_it_a_flat_headline():
    text = CliRunner().invoke(cli, ["ask", "Serving Llama-3.1-8B-Instruct with vLLM on one H100. TTFT is 3 s at 16 concurrent requests. Is prefix caching the culprit?", "--no-log"], catch_exceptions=False).output
    verdict, headline = text.split("\n\n")[1:3]
    assert verdict.startswith("Not shown yet") and headline.startswith("Likeliest cause")


@pytest.mark.parametrize(
    ("question", "cause"),
    [
        ("Is this a regression in v0.28.0?", "version_regression"),  # the version's dots end no sentence
        ("Is the prefix cache broken on this build?", "prefix_cache"),
        ("Is chunked prefill slowing decode down?", "chunked_prefill_interference"),
        ("Is TP8 hurting us here?", "tp_comm"),
    ],
)
def test_fault_words_ask_for_a_verdict(question, cause):
    """A reviewer's probes (session 12): "broken", "a regression", "slowing down" ask whether something
    is at fault as much as "the cause" does."""
    from vllm_advisor.answer.question import asked_causes

    asked = asked_causes(question)
    assert asked is not None and asked.causes[0] == cause

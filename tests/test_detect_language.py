"""The answer's language is the question's: Chinese questions full of flags and code still read as Chinese."""

from __future__ import annotations

import pytest

from vllm_advisor.cases import load_dev_cases, load_library
from vllm_advisor.diagnosis.inputs import DiagnosisInputs, detect_language


def test_every_reports_question_reads_in_the_language_its_writer_gave(shared_dir):
    cases = [*load_library(), *load_dev_cases(shared_dir / "cases" / "dev")]
    wrong = [c.id for c in cases if detect_language(c.case.question) != c.language]
    wrong += [c.id for c in cases if detect_language(DiagnosisInputs(question=c.case.question, case=c.case).text) != c.language]
    assert {c.language for c in cases} == {"en", "zh"}
    assert wrong == []


def test_a_chinese_question_with_a_config_line_is_chinese():
    question = "单卡 T4，lmdeploy 0.4.2 用 pipeline 加 TurbomindEngineConfig(cache_max_entry_count=0.9) 跑 qwen 0.5B（max_new_tokens=512，top_p 0.95）。vLLM 只要 1.3 s，为什么？"
    assert detect_language(question) == "zh"


def test_an_english_question_naming_a_chinese_model_is_english():
    assert detect_language("Why is Qwen 通义千问 slow on vLLM with two GPUs and 60K-token prompts at 40 clients?") == "en"
    assert detect_language("为什么 TTFT 这么高") == "zh"
    assert detect_language("") == "en" and detect_language(None) == "en"


@pytest.mark.parametrize(
    "text,language",
    [
        # a reviewer's find: 18 Chinese characters beside a pasted benchmark command (41 Latin words) got an English answer
        ("H100 跑 Qwen2.5-7B-Instruct，压测命令 vllm bench serve --dataset-name random --random-input-len 1024 --random-output-len 256 "
         "--num-prompts 200 --request-rate 2 --max-concurrency 100，结果 Output token throughput 只有 510 tok/s，Mean TTFT 45ms，"
         "Mean TPOT 6.5ms。并发一百才 500 tok/s，H100 这么拉胯？", "zh"),
        ("vllm serve Qwen/Qwen2.5-32B --tensor-parallel-size 2 --max-model-len 65536 --gpu-memory-utilization 0.95 启动后吞吐很低", "zh"),
        # English prose after a command is still counted: the command ends with its clause
        ("Why is vllm serve Qwen/Qwen2.5-7B --max-num-seqs 8 slow? It is much slower than expected on our box 为什么", "en"),
    ],
)
def test_commands_and_names_are_not_counted_as_words(text, language):
    assert detect_language(text) == language

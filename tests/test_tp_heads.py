"""A tensor-parallel size vLLM refuses is not modelled (perf/predict._heads_divide).

A reviewer's find: `estimate --tp 3` on a 70B (64 attention heads, 8 KV heads) modelled a deployment
vLLM will not start, its KV cache split four ways. vLLM checks that the attention heads divide by the
tensor-parallel size.
"""

from __future__ import annotations

from click.testing import CliRunner

from vllm_advisor import Session
from vllm_advisor.cli.main import cli


def test_estimate_refuses_a_tp_that_does_not_divide_the_heads():
    result = CliRunner().invoke(cli, ["estimate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100", "--tp", "3", "--input-len", "1000", "--output-len", "100"])
    assert result.exit_code == 2
    assert "tensor_parallel_size 3 does not divide Llama-3.1-70B-Instruct's 64 attention heads" in result.output
    assert "Traceback" not in result.output


def test_ask_says_so_in_the_askers_language_and_answers_the_rest():
    result = Session(kb=False).answer("Llama-3.1-70B-Instruct 三张 A100-80G TP=3，输入1000，输出100，并发4，很慢")
    assert result.inputs.engine is None
    assert "没有性能模型：张量并行 3 不能整除 Llama-3.1-70B-Instruct 的 64 个注意力头，vLLM 会拒绝启动（可用的大小：1, 2, 4, 8, 16）" in result.answer.markdown
    assert result.diagnosis.findings  # the words still get a ranking


def test_sizes_that_divide_are_modelled():
    assert Session(kb=False).answer("Llama-3.1-70B-Instruct on 4 A100-80G with TP=4, 1000 input, 100 output, 4 clients").inputs.engine is not None


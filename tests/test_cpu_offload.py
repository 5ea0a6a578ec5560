"""Weights kept in host memory (`--cpu-offload-gb`) are copied over PCIe every step (physics._cpu_offload).

A reviewer's find: a 32B on two H100s at 12 tok/s for one request with `--cpu-offload-gb 4` was answered
with "the memory configuration makes the KV cache small". 4 GB over a PCIe Gen5 x16 link (63 GB/s at best)
is at least 63 ms a step, so no request decodes faster than about 12 tok/s.
"""

from __future__ import annotations

import re

from vllm_advisor import Session
from vllm_advisor.probe.stated_facts import read_stated_facts

QUESTION = ("两张 H100 TP2 跑 Qwen2.5-32B-Instruct，单请求只有 12 tok/s！命令：vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --max-model-len 32768 "
            "--cpu-offload-gb 4 --gpu-memory-utilization 0.9（之前报 KV cache 不够，网上说加 cpu-offload）。输入 2K 输出 1K，正常应该多少？")


def test_the_offload_flag_is_read_from_the_words():
    assert read_stated_facts(QUESTION).flags["cpu_offload_gb"] == 4


def test_offloaded_weights_bound_every_requests_speed():
    result = Session(kb=False).answer(QUESTION)
    top = result.diagnosis.findings[0]
    assert top.cause == "decode_bandwidth" and top.reasons[0].id == "reason.cpu_offload"
    first = result.answer.markdown.split("\n\n")[1]
    # 4 GB / 63 GB/s = 63.5 ms a step beside the GPU's own ~20 ms: about 12 tok/s at most
    m = re.search(r"至少再多 ([\d.]+) 毫秒，所以无论同时跑几个请求，单个请求的解码都快不过约 ([\d.]+) tok/s", first)
    assert m and float(m.group(1)) == 63.5 and 10 < float(m.group(2)) < 14, first
    assert "去掉 --cpu-offload-gb" in result.answer.markdown


def test_no_offload_no_finding():
    result = Session(kb=False).answer(QUESTION.replace("--cpu-offload-gb 4 ", ""))
    assert not any(r.id == "reason.cpu_offload" for f in result.diagnosis.findings for r in f.reasons)

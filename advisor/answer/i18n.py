"""The words of an answer in each language, and how numbers are spelled.

The writer never builds a sentence from English words and a translation step: every fixed phrase
is looked up here by key, so a Chinese answer reads as Chinese written by someone who tunes vLLM
(KV cache 容量, 并发, 排队, 预填充, 解码, 吞吐) and not as a word-for-word rendering.
Phrases hold no figures: every number in an answer comes from a finding, the memory estimate or a
benchmark run, and is formatted by :func:`fmt_number`.
"""

from __future__ import annotations

import math

SUPPORTED = ("en", "zh")

PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "h_answer": "## Answer",
        "h_similar": "## Reports like yours",
        "similar_line": "{id}: {causes} (similarity {similarity}){fix} - {url}",
        "similar_fix": "; fix: {fix}",
        "undecided": "The evidence does not separate {causes}; the first measurement below decides between them.",
        "h_figures": "## The figures behind it",
        "h_why": "## Why",
        "h_change": "## What to change",
        "h_missing": "## What would decide it",
        "h_notes": "## Caveats",
        "h_sources": "## Sources",
        "key_figures": "Key figures",
        "also_found": "Also contributing",
        "no_findings": "No cause could be established from what was given. The measurements below would decide it.",
        "no_findings_no_missing": "No cause could be established from what was given.",
        "severity": "severity",
        "sev_high": "high",
        "sev_medium": "medium",
        "sev_low": "low",
        "no_evidence": "No figures were recorded for this finding; it rests on the mechanism and the sources cited.",
        "sources_inline": "Sources",
        "flag": "Flag",
        "predicted": "Predicted effect",
        "cost": "Cost",
        "verify": "Verify",
        "modelled_by": "Modelled by what-if",
        "decides": "decides between",
        "no_recommendations": "No change to recommend yet: take the measurements below first.",
        "workload": "Workload",
        "input_len": "prompt length",
        "output_len": "output length",
        "memory": "KV cache (per GPU)",
        "kv_cache_gib": "KV cache memory per GPU",
        "weights_gib": "model weights per GPU",
        "kv_bytes_per_token": "KV cache per token per GPU",
        "kv_cache_tokens": "KV cache capacity",
        "requests_fit": "requests of {tokens} tokens (prompt + output) that fit in the KV cache at once",
        "max_concurrency": "vLLM's \"Maximum concurrency\" at max_model_len",
        "config": "Engine settings used by the model",
        "load_points": "Load points (measured or reported beside the model's prediction)",
        "col_load": "load",
        "col_source": "source",
        "col_req_speed": "per-request tok/s (output / e2e)",
        "col_decode": "decode tok/s per request",
        "col_ttft": "mean TTFT (s)",
        "col_throughput": "output tok/s (server)",
        "col_running": "running (mean)",
        "col_waiting": "waiting (mean)",
        "col_preempt": "preemptions",
        "exact": "exact",
        "estimate": "estimate",
        "calibrated": "calibrated to your figures",
        "version_assumed": "vLLM version not given: defaults of {version} assumed",
        "tokens": "tokens",
        "requests": "requests",
        "based_on": "based on",
        "kind_card": "tuning card",
        "kind_doc": "vLLM docs",
        "kind_issue": "issue thread",
        "no_sources": "No sources were attached.",
        "llm_bad_citations": "the LLM's answer cited sources that do not exist ({markers}); the embedded answer is shown",
        "llm_no_citations": "the LLM's answer cited no source; the embedded answer is shown",
        "llm_repaired": "removed citation markers that match no source: {markers}",
        "llm_empty": "the LLM endpoint returned an empty answer; the embedded answer is shown",
        "llm_unsupported_numbers": "the LLM's answer states figures found neither in the findings nor in the sources: {numbers}",
        "llm_unreachable": "cannot reach the LLM endpoint {url} ({reason}); the embedded answer is shown",
        "llm_timeout": "the LLM endpoint {url} did not finish within {seconds} s; the embedded answer is shown",
        "llm_http": "the LLM endpoint {url} answered HTTP {status} ({reason}); the embedded answer is shown",
        "llm_bad_response": "the LLM endpoint {url} did not answer like an OpenAI chat-completions API ({reason}); the embedded answer is shown",
        "llm_bad_url": "the LLM base URL {url} is not an http(s) URL; the embedded answer is shown",
        "llm_missing_package": "the LLM path needs langchain-openai ({reason}); the embedded answer is shown",
    },
    "zh": {
        "h_answer": "## 结论",
        "h_similar": "## 类似的报告",
        "similar_line": "{id}：{causes}（相似度 {similarity}）{fix} - {url}",
        "similar_fix": "；解决办法：{fix}",
        "undecided": "现有证据无法区分{causes}；下面第一项测量可以判断是哪一个。",
        "h_figures": "## 计算依据",
        "h_why": "## 原因分析",
        "h_change": "## 建议的修改",
        "h_missing": "## 还缺哪些测量",
        "h_notes": "## 说明",
        "h_sources": "## 参考来源",
        "key_figures": "关键数字",
        "also_found": "其他同时起作用的原因",
        "no_findings": "根据现有数据还不能确定原因。下面这些测量可以做出判断。",
        "no_findings_no_missing": "根据现有数据还不能确定原因。",
        "severity": "严重程度",
        "sev_high": "高",
        "sev_medium": "中",
        "sev_low": "低",
        "no_evidence": "这一条没有可引用的数字，依据是机制本身和所引用的资料。",
        "sources_inline": "来源",
        "flag": "参数",
        "predicted": "预计效果",
        "cost": "代价",
        "verify": "验证方法",
        "modelled_by": "对应的 what-if 模拟",
        "decides": "用于区分",
        "no_recommendations": "暂时没有可以给出的修改建议：请先做下面的测量。",
        "workload": "负载",
        "input_len": "输入长度",
        "output_len": "输出长度",
        "memory": "KV cache（每张卡）",
        "kv_cache_gib": "每张卡用于 KV cache 的显存",
        "weights_gib": "每张卡的模型权重",
        "kv_bytes_per_token": "每个 token 在每张卡上占用的 KV cache",
        "kv_cache_tokens": "KV cache 容量",
        "requests_fit": "KV cache 能同时容纳的请求数（每个请求 {tokens} tokens，输入 + 输出）",
        "max_concurrency": "vLLM 日志里的 \"Maximum concurrency\"（按 max_model_len 计）",
        "config": "模型所用的引擎参数",
        "load_points": "各并发点：实测/用户报告的数字与模型预测并列",
        "col_load": "负载",
        "col_source": "来源",
        "col_req_speed": "单请求 tok/s（输出 / 端到端耗时）",
        "col_decode": "单请求解码 tok/s",
        "col_ttft": "平均 TTFT（秒）",
        "col_throughput": "服务端输出吞吐 tok/s",
        "col_running": "运行中（均值）",
        "col_waiting": "排队中（均值）",
        "col_preempt": "抢占次数",
        "exact": "精确值",
        "estimate": "估计值",
        "calibrated": "已按你的数据校准",
        "version_assumed": "未给出 vLLM 版本：按 {version} 的默认值计算",
        "tokens": "tokens",
        "requests": "个请求",
        "based_on": "依据",
        "kind_card": "调优卡片",
        "kind_doc": "vLLM 文档",
        "kind_issue": "issue 讨论",
        "no_sources": "没有附上参考来源。",
        "llm_bad_citations": "LLM 的回答引用了不存在的来源（{markers}），改为显示内置回答",
        "llm_no_citations": "LLM 的回答没有引用任何来源，改为显示内置回答",
        "llm_repaired": "已删除对不上任何来源的引用标记：{markers}",
        "llm_empty": "LLM 接口返回了空回答，改为显示内置回答",
        "llm_unsupported_numbers": "LLM 的回答中有些数字在诊断结果和来源里都找不到：{numbers}",
        "llm_unreachable": "无法连接 LLM 接口 {url}（{reason}），改为显示内置回答",
        "llm_timeout": "LLM 接口 {url} 在 {seconds} 秒内没有完成回答，改为显示内置回答",
        "llm_http": "LLM 接口 {url} 返回 HTTP {status}（{reason}），改为显示内置回答",
        "llm_bad_response": "LLM 接口 {url} 的返回不符合 OpenAI chat completions 格式（{reason}），改为显示内置回答",
        "llm_bad_url": "LLM 的 base URL {url} 不是 http(s) 地址，改为显示内置回答",
        "llm_missing_package": "LLM 路径需要 langchain-openai（{reason}），改为显示内置回答",
    },
}

#: Where a figure came from, as a reader-facing tag. Keys are Evidence.kind values plus the
#: provenance words of the engine configuration ('user' is a setting the user gave).
TAGS: dict[str, dict[str, str]] = {
    "en": {
        "measured": "measured",
        "reported": "reported",
        "model": "model",
        "config": "config",
        "text": "text",
        "source": "source",
        "user": "your setting",
        "default": "default",
        "assumed": "assumed default",
        "derived": "derived",
    },
    "zh": {
        "measured": "实测",
        "reported": "用户报告",
        "model": "模型估算",
        "config": "配置",
        "text": "原文",
        "source": "文献",
        "user": "用户设置",
        "default": "默认值",
        "assumed": "假定的默认值",
        "derived": "推导值",
    },
}

#: What each cause id of shared/cases/FORMAT.md is called in an answer.
CAUSE_NAMES: dict[str, dict[str, str]] = {
    "en": {
        "kv_capacity": "KV cache capacity",
        "queueing": "Queueing",
        "preemption": "Preemption",
        "chunked_prefill_interference": "Long prefills slowing running decodes",
        "batched_tokens_limit": "max_num_batched_tokens sizing",
        "max_num_seqs_limit": "max_num_seqs sizing",
        "prefix_cache": "Prefix cache",
        "benchmark_methodology": "How it was measured",
        "cpu_frontend": "CPU front end",
        "detokenize": "Detokenization",
        "tp_comm": "Tensor-parallel communication",
        "memory_config": "Memory configuration",
        "attention_backend": "Attention backend",
        "cuda_graph": "CUDA graphs",
        "version_regression": "vLLM version",
        "spec_decode": "Speculative decoding",
        "disagg": "Prefill/decode disaggregation",
        "kv_quant": "KV cache quantization",
        "prefill_compute": "Prefill compute",
        "decode_bandwidth": "Decode memory bandwidth",
    },
    "zh": {
        "kv_capacity": "KV cache 容量",
        "queueing": "排队",
        "preemption": "抢占（preemption）",
        "chunked_prefill_interference": "长预填充（prefill）拖慢正在解码的请求",
        "batched_tokens_limit": "max_num_batched_tokens 的设置",
        "max_num_seqs_limit": "max_num_seqs 的设置",
        "prefix_cache": "前缀缓存（prefix cache）",
        "benchmark_methodology": "测量方法",
        "cpu_frontend": "CPU 前端（API server / tokenizer）",
        "detokenize": "反分词（detokenize）",
        "tp_comm": "张量并行通信",
        "memory_config": "显存配置",
        "attention_backend": "attention 后端",
        "cuda_graph": "CUDA graph",
        "version_regression": "vLLM 版本",
        "spec_decode": "投机解码",
        "disagg": "PD 分离（prefill/decode disaggregation）",
        "kv_quant": "KV cache 量化",
        "prefill_compute": "预填充算力",
        "decode_bandwidth": "解码的显存带宽",
    },
}

#: Units spelled the Chinese way where a Chinese reader expects it; the rest stay as written.
UNITS_ZH = {"requests": "个请求", "request": "个请求", "GPUs": "张卡", "GPU": "张卡", "steps": "步", "seconds": "秒", "s": "秒"}


def normalize_language(language: str | None) -> str:
    """'zh', 'zh-CN', 'zh_TW' -> 'zh'; anything unsupported -> 'en'."""
    code = (language or "en").lower().replace("_", "-").split("-")[0]
    return code if code in SUPPORTED else "en"


def phrase(language: str, key: str, **values: str) -> str:
    text = PHRASES[normalize_language(language)][key]
    return text.format(**values) if values else text


def tag(language: str, kind: str) -> str:
    """'[measured]' / '[实测]'; an unknown kind is shown as itself."""
    return "[" + TAGS[normalize_language(language)].get(kind, kind) + "]"


def cause_name(language: str, cause: str) -> str:
    return CAUSE_NAMES[normalize_language(language)].get(cause, cause.replace("_", " "))


def unit_text(language: str, unit: str | None) -> str:
    if not unit:
        return ""
    return UNITS_ZH.get(unit, unit) if normalize_language(language) == "zh" else unit


def fmt_number(value: float | int) -> str:
    """A figure as a reader wants it: thousands separators, no more digits than it deserves.

    327120 -> '327,120'; 5.11125 -> '5.11'; 38.2037 -> '38.2'; 0.01234 -> '0.0123'; 2000.0 -> '2,000'.
    """
    if isinstance(value, bool):
        return str(value).lower()
    v = float(value)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    a = abs(v)
    if a >= 100 or (v.is_integer() and a >= 1):
        return f"{v:,.0f}"
    if a >= 10:
        text = f"{v:.1f}"
    elif a >= 1:
        text = f"{v:.2f}"
    elif a == 0:
        return "0"
    else:
        text = f"{v:.3g}"
        return text if "e" not in text else f"{v:.2e}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_value(language: str, value: float | int | str | bool | None, unit: str | None) -> str:
    """'63,000 tokens', '22 tok/s', '4.8 个请求'; text values as given."""
    if value is None:
        return ""
    if isinstance(value, str):
        shown = value
    else:
        shown = fmt_number(value)
    u = unit_text(language, unit)
    return f"{shown} {u}" if u else shown

"""Evidence from the deployment's facts: flags, environment, versions, hardware, model size."""

from __future__ import annotations

import re

from ..perf.defaults import parse_version
from ..schema import Evidence
from .board import Board
from .inputs import DiagnosisInputs
from .text_cues import find_number, params_from_name

#: GPU names that mean PCIe cards when the catalog does not know the GPU (whole words only).
PCIE_NAME = re.compile(r"\b(rtx|geforce|3090|4090|5090|a6000|l40s?|l20|l4|a10g?|a40|a30|t4|pcie)\b", re.IGNORECASE)


def detect_config(inputs: DiagnosisInputs, board: Board) -> None:
    args, dep = inputs.engine_args, inputs.deployment
    text = inputs.text.lower()

    def cfg(label: str, value) -> Evidence:
        return Evidence(kind="config", source="deployment", label=label, value=value if isinstance(value, (int, float)) else str(value))

    if args.speculative_config is not None:
        board.add(
            "spec_decode",
            3.0,
            cfg("speculative_config", args.speculative_config),
            reason="Speculative decoding is on: each step verifies drafted tokens, which pays off only when most drafts are accepted and the GPU has spare compute.",
            reason_zh="开启了投机解码：只有在草稿 token 大多被接受且 GPU 有富余算力时才划算。",
        )
    if args.kv_transfer_config is not None:
        board.add(
            "disagg",
            3.0,
            cfg("kv_transfer_config", args.kv_transfer_config),
            reason="Prefill and decode run on separate instances with KV transfer between them; TTFT then includes the prefill instance's queue and the transfer, and ITL depends on how the decode instance is sized.",
            reason_zh="预填充与解码分在不同实例并通过 KV 传输衔接；首 token 延迟包含预填充实例的排队和传输，ITL 取决于解码实例的配置。",
        )
    if args.kv_cache_dtype and args.kv_cache_dtype.startswith("fp8"):
        board.add("kv_quant", 1.5, cfg("kv_cache_dtype", args.kv_cache_dtype))
    if args.enforce_eager:
        board.add("cuda_graph", 2.0, cfg("enforce_eager", True), reason="CUDA graphs are off (--enforce-eager): every step pays kernel-launch overhead.", reason_zh="CUDA graph 被关闭（--enforce-eager），每一步都要付出内核启动开销。")
    _tensor_parallel(inputs, board, cfg)
    _versions(inputs, board, cfg, text)
    _batched_tokens(inputs, board, cfg, text)
    _max_num_seqs(inputs, board, cfg, text)
    _small_model(inputs, board)


def _tensor_parallel(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    args, dep = inputs.engine_args, inputs.deployment
    env = {**{k.upper(): v for k, v in args.env.items()}, **{k.upper(): v for k, v in dep.flags.items() if k.isupper()}}
    tp = args.tensor_parallel_size or 1
    if str(env.get("NCCL_P2P_DISABLE", "")) in ("1", "True", "true"):
        board.add(
            "tp_comm",
            3.0,
            cfg("NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"]),
            reason="NCCL peer-to-peer is disabled, so every tensor-parallel all-reduce (two per layer per step) is staged through host memory.",
            reason_zh="NCCL 点对点通信被关闭，每层每步两次的张量并行 all-reduce 都要经过主机内存中转。",
        )
    if args.disable_custom_all_reduce:
        board.add("tp_comm", 1.0, cfg("disable_custom_all_reduce", True))
    if inputs.engine is not None:
        over_pcie = inputs.engine.gpu.interconnect == "pcie" and dep.interconnect != "nvlink"
    else:
        over_pcie = bool(PCIE_NAME.search((dep.gpu or "").replace("-", " ")))
    if tp > 1 and (dep.interconnect == "pcie" or over_pcie):
        board.add(
            "tp_comm",
            2.0,
            cfg("tensor_parallel_size", tp),
            cfg("interconnect", dep.interconnect or f"PCIe ({dep.gpu})"),
            reason=f"Tensor parallelism {tp} over PCIe: two all-reduces per layer per decode step cross a link 10-30x slower than NVLink.",
            reason_zh=f"在 PCIe 上做 {tp} 路张量并行：每个解码步每层两次 all-reduce 都走比 NVLink 慢 10-30 倍的链路。",
        )


def _versions(inputs: DiagnosisInputs, board: Board, cfg, text: str) -> None:
    v = parse_version(inputs.deployment.vllm_version)
    if v is None:
        return
    if v < (0, 4, 0):
        # Chunked prefill arrived in 0.4 (opt-in) and became the V1 default: before it, a long prompt's
        # prefill ran as one step that stalled every running decode.
        if any(w in text for w in ("long prompt", "long input", "8k", "16k", "prompt of", "prompts of")):
            board.add(
                "chunked_prefill_interference",
                2.0,
                cfg("vllm_version", inputs.deployment.vllm_version),
                reason="This vLLM version has no chunked prefill: a long prompt's whole prefill runs as one engine step, and every running decode waits for it.",
                reason_zh="该版本没有分块预填充：长输入的整个预填充作为一步执行，所有正在解码的请求都要等它。",
            )
    if v < (0, 8, 0) and any(w in text for w in ("upgrad", "regress", "slower than", "became slower", "升级")):
        board.add("version_regression", 1.0, cfg("vllm_version", inputs.deployment.vllm_version))


def _batched_tokens(inputs: DiagnosisInputs, board: Board, cfg, text: str) -> None:
    args = inputs.engine_args
    budget = args.max_num_batched_tokens
    inp = inputs.input_len
    if budget and inp and budget < inp and args.enable_chunked_prefill:
        chunks = -(-inp // budget)
        offline = any(w in text for w in ("offline", "throughput", "benchmark_throughput"))
        board.add(
            "batched_tokens_limit",
            3.0 if offline else 2.0,
            cfg("max_num_batched_tokens", budget),
            Evidence(kind="reported", source="workload", label="input_len", value=inp, unit="tokens", detail=f"= {chunks} chunks per prompt"),
            reason=f"With a budget of {budget} tokens per step, each {inp:,}-token prompt is split into {chunks} chunks; every chunk re-reads the KV of the chunks before it and pays a step's fixed cost, so offline throughput drops.",
            reason_zh=f"每步预算 {budget} 个 token 时，每个 {inp:,} token 的输入要分成 {chunks} 块；每块都要重读之前块的 KV 并支付一步的固定开销，离线吞吐因此下降。",
        )
        if offline:
            board.add(
                "benchmark_methodology",
                1.5,
                Evidence(kind="text", source="workload", label="benchmark", value="offline throughput"),
                reason="Chunked prefill is built to keep inter-token latency steady in online serving; an offline throughput benchmark measures what it gives up, not what it buys.",
                reason_zh="分块预填充是为在线服务稳定 ITL 设计的；离线吞吐测试只量到它付出的代价，量不到它的收益。",
            )


def _max_num_seqs(inputs: DiagnosisInputs, board: Board, cfg, text: str) -> None:
    seqs = inputs.engine_args.max_num_seqs
    if not seqs:
        return
    reported = find_number(inputs.text, r"maximum concurrency for [\d,]+ tokens per request:?\s*([\d.]+)\s*x")
    if reported is None and inputs.engine is not None:
        reported = inputs.engine.memory.max_concurrency
    if reported is not None and seqs > reported:
        board.add(
            "max_num_seqs_limit",
            2.5,
            cfg("max_num_seqs", seqs),
            Evidence(kind="reported" if "maximum concurrency" in text else "model", source="start-up line" if "maximum concurrency" in text else "model", label="Maximum concurrency", value=round(reported, 2), unit="x"),
            reason=f"max_num_seqs={seqs} admits more requests than the KV cache holds at full length ({reported:.2f}x): admitted requests then fight for blocks and get preempted.",
            reason_zh=f"max_num_seqs={seqs} 允许的并发超过 KV cache 在满长度下能容纳的 {reported:.2f} 个请求：被接纳的请求会争抢块并被抢占。",
        )
        board.add("kv_capacity", 1.5, Evidence(kind="reported", source="start-up line", label="Maximum concurrency", value=round(reported, 2), unit="x"))


def _small_model(inputs: DiagnosisInputs, board: Board) -> None:
    """Small models make each GPU step short, so per-token CPU work (detokenization, scheduling,
    HTTP streaming) becomes a large share of the time."""
    params = inputs.engine.model.total_params if inputs.engine is not None else params_from_name(inputs.deployment.model)
    if params is None or params > 3e9:
        return
    ev = Evidence(kind="config", source="deployment", label="model size", value=round(params / 1e9, 2), unit="B parameters")
    board.add(
        "detokenize",
        1.2,
        ev,
        reason="With a model this small a decode step takes about a millisecond on the GPU, so per-token CPU work (detokenization, output processing) is a large share of each token's time.",
        reason_zh="模型这么小，GPU 上一个解码步只需约 1 毫秒，逐 token 的 CPU 工作（反分词、输出处理）占了每个 token 时间的很大一部分。",
    )
    board.add("cpu_frontend", 0.8, ev)

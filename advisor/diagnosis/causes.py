"""What each cause id means to a reader: its title and the changes that usually address it.

Cause ids are the project's contract (shared/cases/FORMAT.md). Recommendations here are the
generic, sourced moves for a cause; the detectors add case-specific ones with predicted effects.
Titles are given in English and Chinese because answers follow the question's language.
"""

from __future__ import annotations

from ..schema import Recommendation

TITLES: dict[str, tuple[str, str]] = {
    "kv_capacity": ("The KV cache holds too few requests of this length", "KV cache 只能同时容纳很少的长请求"),
    "queueing": ("Latency is mostly waiting for admission, not compute", "延迟主要来自排队等待，而不是计算"),
    "preemption": ("Running requests are preempted and recomputed", "运行中的请求被抢占并重算"),
    "chunked_prefill_interference": ("Long prefills share engine steps with decodes and slow them", "长输入的预填充与解码挤在同一步里，拖慢解码"),
    "batched_tokens_limit": ("max_num_batched_tokens is mis-sized for this workload", "max_num_batched_tokens 与负载不匹配"),
    "max_num_seqs_limit": ("max_num_seqs does not fit the KV pool or the load", "max_num_seqs 与 KV 容量或负载不匹配"),
    "prefix_cache": ("Prefix-cache hits (or their absence) explain the figures", "前缀缓存命中与否决定了这些数字"),
    "benchmark_methodology": ("The measurement itself misleads", "测量方法本身有误导"),
    "cpu_frontend": ("CPU work in the API server starves the GPU", "API 服务器的 CPU 开销让 GPU 空等"),
    "detokenize": ("Per-token CPU post-processing (detokenization) limits speed", "逐 token 的 CPU 后处理（反分词）限制了速度"),
    "tp_comm": ("Tensor-parallel communication limits speed", "张量并行通信限制了速度"),
    "memory_config": ("Memory settings leave less KV cache than expected", "显存配置让 KV cache 比预期小"),
    "attention_backend": ("The attention kernel decides long-context speed", "注意力内核决定了长上下文速度"),
    "cuda_graph": ("CUDA graphs are off or do not cover the batch sizes", "CUDA graph 未开启或未覆盖实际批大小"),
    "version_regression": ("The vLLM version itself is the cause", "vLLM 版本本身导致变慢"),
    "spec_decode": ("Speculative decoding hurts at this load", "投机解码在该负载下反而变慢"),
    "disagg": ("Prefill/decode disaggregation explains the result", "预填充/解码分离部署决定了结果"),
    "kv_quant": ("KV-cache quantization trades capacity against speed", "KV cache 量化在容量与速度之间取舍"),
    "prefill_compute": ("TTFT is the compute-bound prefill of a long prompt", "首 token 延迟就是长输入预填充的计算时间"),
    "decode_bandwidth": ("Decode speed is bounded by memory bandwidth", "解码速度受显存带宽限制"),
}

BENCH = (
    "vllm bench serve --model MODEL --dataset-name random --random-input-len {inp} --random-output-len {out} "
    "--max-concurrency {conc} --num-prompts {n} --seed $RANDOM --percentile-metrics ttft,tpot,itl,e2el --save-result --save-detailed"
)

GENERIC: dict[str, list[Recommendation]] = {
    "kv_capacity": [
        Recommendation(
            change="Halve KV bytes per token with an fp8 KV cache",
            flag="--kv-cache-dtype fp8",
            whatif=["kv_cache_dtype=fp8"],
            cost="small accuracy risk; check quality on your data",
            verify="max_over_time(vllm:num_requests_running[5m]) and vllm:kv_cache_usage_perc during the same load",
        ),
        Recommendation(
            change="Serve the load with more GPUs as data-parallel replicas (each with its own KV cache)",
            flag="--data-parallel-size 2 (or a second server behind a load balancer)",
            whatif=["num_gpus=4", "dp=2"],
            cost="twice the GPUs",
        ),
    ],
    "queueing": [
        Recommendation(
            change="Keep the offered load at or below the measured service rate, and report TTFT with and without queue time",
            flag="client: --max-concurrency / --request-rate at the knee",
            verify="sum(vllm:num_requests_waiting) and histogram_quantile(0.5, sum by (le) (rate(vllm:request_queue_time_seconds_bucket[5m])))",
        )
    ],
    "preemption": [
        Recommendation(
            change="Admit fewer requests than the KV cache can grow (lower max_num_seqs) or add KV capacity",
            flag="--max-num-seqs N (N below the maximum concurrency vLLM logs at start-up)",
            verify="rate(vllm:num_preemptions_total[5m]) should drop to 0",
        )
    ],
    "chunked_prefill_interference": [
        Recommendation(
            change="Separate prefill from decode (disaggregated prefill) when ITL must stay flat under long prompts",
            flag="--kv-transfer-config '{...}' on a prefill and a decode instance",
            whatif=["disagg=1x1"],
            cost="more GPUs and KV transfer",
        ),
    ],
    "batched_tokens_limit": [
        Recommendation(
            change="Size the per-step token budget to the latency target: larger for offline throughput, smaller for steady ITL",
            flag="--max-num-batched-tokens 8192 (or 16384 offline)",
            whatif=["max_num_batched_tokens=16384"],
            verify="compare output_throughput and p99 ITL of two `vllm bench serve` runs",
        )
    ],
    "max_num_seqs_limit": [
        Recommendation(
            change="Set max_num_seqs to what the KV cache can actually hold at your lengths",
            flag="--max-num-seqs N",
            verify="vllm:num_requests_running vs vllm:num_requests_waiting and rate(vllm:num_preemptions_total[5m])",
        )
    ],
    "prefix_cache": [
        Recommendation(
            change="Measure with distinct prompts (a fresh seed per run) to see the uncached cost, and keep shared prefixes identical to get hits in production",
            flag="client: --seed $RANDOM; server: prefix caching is on by default in V1",
            verify="rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])",
        )
    ],
    "benchmark_methodology": [
        Recommendation(
            change="Measure with `vllm bench serve` at fixed client concurrency and read throughput from its output, not concurrency x per-request speed",
            flag="client: vllm bench serve --max-concurrency C --save-result",
        )
    ],
    "cpu_frontend": [
        Recommendation(
            change="Spread HTTP handling and tokenization over several API-server processes",
            flag="--api-server-count 4",
            verify="GPU utilisation and output_throughput at the same load",
        )
    ],
    "detokenize": [
        Recommendation(
            change="Reduce per-token post-processing: stream fewer, larger chunks and avoid logprobs unless needed; upgrade past the known regression",
            flag="--stream-interval / request: logprobs off",
        )
    ],
    "tp_comm": [
        Recommendation(
            change="Compare tensor parallelism with one replica per GPU when the model fits on one GPU; on PCIe without P2P every all-reduce goes through host memory",
            flag="-tp 1 with two servers (or --data-parallel-size 2)",
            whatif=["tp=1", "dp=2"],
            verify="nvidia-smi topo -m; NCCL_DEBUG=INFO shows the transport",
        )
    ],
    "memory_config": [
        Recommendation(
            change="Give the KV cache the memory it needs: raise gpu_memory_utilization, lower max_model_len to what you use, or turn chunked prefill on so the profiling pass is small",
            flag="--gpu-memory-utilization 0.95 --max-model-len <needed>",
            whatif=["gpu_memory_utilization=0.95"],
            verify="the start-up lines 'GPU KV cache size' and 'Maximum concurrency'",
        )
    ],
    "attention_backend": [
        Recommendation(
            change="Try the other attention backend for long contexts on this GPU",
            flag="--attention-backend FLASHINFER (or FLASH_ATTN)",
            verify="TTFT of a single long prompt with each backend",
        )
    ],
    "cuda_graph": [
        Recommendation(
            change="Run with CUDA graphs (drop --enforce-eager) and capture the batch sizes you serve",
            flag="--compilation-config '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32, 64]}'",
        )
    ],
    "version_regression": [
        Recommendation(
            change="Pin the previous version and bisect releases with the same benchmark",
            flag="pip install vllm==<previous>",
        )
    ],
    "spec_decode": [
        Recommendation(
            change="Turn speculative decoding off at high concurrency, or draft fewer tokens",
            flag="drop --speculative-config (or num_speculative_tokens 2-3)",
            verify="vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_draft_tokens_total",
        )
    ],
    "disagg": [
        Recommendation(
            change="Size prefill and decode instances to the prompt/output ratio and check the KV transfer path",
            flag="--kv-transfer-config on each instance",
            verify="TTFT split into prefill time + transfer + first decode step",
        )
    ],
    "kv_quant": [
        Recommendation(change="Compare fp8 and bf16 KV at the same load", flag="--kv-cache-dtype fp8 vs auto", whatif=["kv_cache_dtype=fp8"])
    ],
    "prefill_compute": [
        Recommendation(
            change="TTFT of a long prompt is set by FLOPs: cut prompt tokens (reuse a cached prefix) or add compute for the prefill",
            flag="--enable-prefix-caching (default in V1) with a stable shared prefix; more GPUs / TP",
            verify="vllm:request_prefill_time_seconds",
        )
    ],
    "decode_bandwidth": [
        Recommendation(
            change="Single-stream speed is bounded by reading the weights each token: quantized weights or faster memory raise it; batching raises total throughput, not per-request speed",
            flag="-q fp8 (or an AWQ/GPTQ checkpoint)",
        )
    ],
}


def title(cause: str, language: str) -> str:
    en, zh = TITLES.get(cause, (cause, cause))
    return zh if language == "zh" else en

"""The measurement that confirms or rules out each cause, for when the evidence cannot separate them.

When the ranker's leading causes are too close to order (ranker.undecided), the answer does not put
a guess first: it names, for those causes, the one measurement that tells them apart. Each entry is
what to measure and the command that measures it; the commands are standard tools (vllm bench
serve, the advisor's own probes, nvidia-smi, py-spy), never a guess of ours.
"""

from __future__ import annotations

from ..schema import MissingMeasurement

#: cause -> (what to measure, a command that measures it)
DECIDING: dict[str, tuple[str, str]] = {
    "kv_capacity": (
        "KV-cache usage and requests running vs waiting while the load runs (the server log's KV cache size and maximum concurrency)",
        "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    ),
    "queueing": (
        "the server's queue time next to its first-token time (vllm:request_queue_time_seconds vs vllm:time_to_first_token_seconds)",
        "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    ),
    "preemption": (
        "the preemption counter (vllm:num_preemptions_total) during the load, or 'preempted' warnings in the server log",
        "vllm-advisor probe log server.log",
    ),
    "chunked_prefill_interference": (
        "per-request inter-token latency (ITL p99 and max) while long prompts arrive, vs the same load with short prompts",
        "vllm bench serve --dataset-name random --random-input-len LONG --random-output-len 256 --max-concurrency C --percentile-metrics ttft,tpot,itl --save-detailed",
    ),
    "batched_tokens_limit": (
        "the same benchmark at two --max-num-batched-tokens values (e.g. 2048 and 8192)",
        "vllm serve MODEL --max-num-batched-tokens 8192   (then re-run the same vllm bench serve)",
    ),
    "max_num_seqs_limit": (
        "requests running at the peak vs --max-num-seqs, with KV usage below 100%",
        "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    ),
    "prefix_cache": (
        "the prefix-cache hit rate (vllm:prefix_cache_hits / queries) and a run with fresh random prompts (--seed $RANDOM)",
        "vllm bench serve --dataset-name random --seed $RANDOM ...   (and vllm-advisor probe metrics http://HOST:8000/metrics)",
    ),
    "benchmark_methodology": (
        "per-request TTFT, TPOT and ITL from a standard client with fresh prompts at the same concurrency",
        "vllm bench serve --dataset-name random --seed $RANDOM --max-concurrency C --percentile-metrics ttft,tpot,itl,e2el --save-detailed",
    ),
    "cpu_frontend": (
        "the API server's CPU use (one core at 100%?) next to GPU utilisation during the load",
        "py-spy top --pid $(pgrep -f 'vllm serve' | head -1)   (and nvidia-smi dmon -s u)",
    ),
    "detokenize": (
        "the same load with streaming/logprobs off, or with --skip-tokenizer-init and token ids",
        "vllm bench serve ... --extra-body '{\"logprobs\": null}'   (compare output tok/s)",
    ),
    "tp_comm": (
        "GPU-to-GPU bandwidth and topology (P2P, NVLink) and the same load at a smaller TP with replicas",
        "nvidia-smi topo -m   (and all_reduce_perf from nccl-tests)",
    ),
    "memory_config": (
        "the KV cache size and 'Maximum concurrency' lines of the server log at the current settings",
        "vllm-advisor probe log server.log",
    ),
    "attention_backend": (
        "the attention backend in the server log, and the same load with another backend",
        "VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve ...   (compare with the default)",
    ),
    "cuda_graph": (
        "whether CUDA graphs are captured (no --enforce-eager; capture sizes cover the running batch) in the server log",
        "vllm-advisor probe log server.log",
    ),
    "version_regression": (
        "the same benchmark on the previous vLLM version, same flags and prompts",
        "pip install vllm==PREVIOUS && vllm bench serve ...   (same seed and settings)",
    ),
    "spec_decode": (
        "the same load with speculative decoding off, and the draft acceptance rate",
        "vllm serve MODEL   (without --speculative-config; compare vllm bench serve results)",
    ),
    "disagg": (
        "the same load on one aggregated instance with the same GPUs, and the KV transfer time",
        "vllm bench serve ... against the aggregated deployment   (compare TTFT/ITL)",
    ),
    "kv_quant": (
        "the same load with --kv-cache-dtype auto vs fp8",
        "vllm serve MODEL --kv-cache-dtype fp8   (then the same vllm bench serve)",
    ),
    "prefill_compute": (
        "TTFT of one request alone at the same prompt length (no other load)",
        "vllm bench serve --max-concurrency 1 --num-prompts 5 --random-input-len LONG --random-output-len 16",
    ),
    "decode_bandwidth": (
        "TPOT of one request alone (c=1): compare with weight bytes per GPU / memory bandwidth",
        "vllm bench serve --max-concurrency 1 --num-prompts 10 --random-output-len 256",
    ),
}


def deciding_measurements(causes: list[str], already: list[MissingMeasurement]) -> list[MissingMeasurement]:
    """One measurement per undecided cause whose command is not already asked for."""
    seen = {m.command for m in already}
    out = []
    for cause in causes:
        entry = DECIDING.get(cause)
        if entry is None or entry[1] in seen:
            continue
        seen.add(entry[1])
        out.append(MissingMeasurement(decides=[cause], what=entry[0], command=entry[1]))
    return out

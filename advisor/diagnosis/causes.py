"""The changes that usually address each cause id.

Cause ids are the project's contract (shared/cases/FORMAT.md). Recommendations here are the
generic, sourced moves for a cause; the detectors add case-specific ones with predicted effects.
Their words are message ids (``rec.<cause>...`` and ``cost...`` in ``advisor/messages``); a cause's
name and headline are the catalog's ``cause.<id>`` and ``title.<id>``.
"""

from __future__ import annotations

from ..schema import Recommendation
from ..schema.message import msg

BENCH = (
    "vllm bench serve --model MODEL --dataset-name random --random-input-len {inp} --random-output-len {out} "
    "--max-concurrency {conc} --num-prompts {n} --seed $RANDOM --percentile-metrics ttft,tpot,itl,e2el --save-result --save-detailed"
)

#: The weight-quantisation flag; not offered to a deployment whose weights are already quantised
#: (engine._finding), where it would tell a user of an AWQ or 4-bit checkpoint to quantise it.
WEIGHT_QUANT_FLAG = "--quantization fp8"

#: Flags and verify lines are code only (a flag, a command, PromQL one query per line): the words
#: around them are the change's message, so a Chinese answer carries no English prose in code.
GENERIC: dict[str, list[Recommendation]] = {
    "kv_capacity": [
        Recommendation(
            change=msg("rec.kv_capacity_1"),
            flag="--kv-cache-dtype fp8",
            whatif=["kv_cache_dtype=fp8"],
            cost=msg("cost.kv_capacity_1"),
            verify="max_over_time(vllm:num_requests_running[5m])\nmax_over_time(vllm:kv_cache_usage_perc[5m])",
        ),
        Recommendation(
            change=msg("rec.kv_capacity_2"),
            flag="--data-parallel-size 2",
            whatif=["dp=2"],  # twice the deployment's GPUs: what_if scales num_gpus with dp
            cost=msg("cost.kv_capacity_2"),
        ),
    ],
    "queueing": [
        Recommendation(
            change=msg("rec.queueing_1"),
            flag="vllm bench serve --max-concurrency N",
            verify="sum(vllm:num_requests_waiting)\nhistogram_quantile(0.5, sum by (le) (rate(vllm:request_queue_time_seconds_bucket[5m])))",
        )
    ],
    "preemption": [
        Recommendation(
            change=msg("rec.preemption_1"),
            flag="--max-num-seqs N",
            verify="rate(vllm:num_preemptions_total[5m])",
        )
    ],
    "chunked_prefill_interference": [
        Recommendation(
            change=msg("rec.chunked_prefill_interference_1"),
            flag="--kv-transfer-config '{...}'",
            whatif=["disagg=1x1"],
            cost=msg("cost.chunked_prefill_interference_1"),
        ),
    ],
    "batched_tokens_limit": [
        Recommendation(
            change=msg("rec.batched_tokens_limit_1"),
            flag="--max-num-batched-tokens 8192",
            whatif=["max_num_batched_tokens=16384"],
        )
    ],
    "max_num_seqs_limit": [
        Recommendation(
            change=msg("rec.max_num_seqs_limit_1"),
            flag="--max-num-seqs N",
            verify="vllm:num_requests_running\nvllm:num_requests_waiting\nrate(vllm:num_preemptions_total[5m])",
        )
    ],
    "prefix_cache": [
        Recommendation(
            change=msg("rec.prefix_cache_1"),
            flag="vllm bench serve --seed $RANDOM",
            verify="rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])",
        )
    ],
    "benchmark_methodology": [
        Recommendation(
            change=msg("rec.benchmark_methodology_1"),
            flag="vllm bench serve --max-concurrency C --save-result",
        )
    ],
    "cpu_frontend": [
        Recommendation(
            change=msg("rec.cpu_frontend_1"),
            flag="--api-server-count 4",
            verify="nvidia-smi dmon -s u",
        )
    ],
    "detokenize": [
        Recommendation(
            change=msg("rec.detokenize_1"),
            flag=None,
        )
    ],
    "tp_comm": [
        Recommendation(
            change=msg("rec.tp_comm_1"),
            flag="-tp 1 --data-parallel-size 2",
            whatif=["tp=1", "dp=2"],
            verify="nvidia-smi topo -m",
        )
    ],
    "memory_config": [
        Recommendation(
            change=msg("rec.memory_config_1"),
            flag="--gpu-memory-utilization 0.95 --max-model-len <needed>",
            whatif=["gpu_memory_utilization=0.95"],
            verify="grep -E 'GPU KV cache size|Maximum concurrency' SERVER.log",
        )
    ],
    "attention_backend": [
        Recommendation(
            change=msg("rec.attention_backend_1"),
            flag="--attention-backend FLASHINFER",
        )
    ],
    "cuda_graph": [
        Recommendation(
            change=msg("rec.cuda_graph_1"),
            flag="--compilation-config '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32, 64]}'",
        )
    ],
    "version_regression": [
        Recommendation(
            change=msg("rec.version_regression_1"),
            flag="pip install vllm==<previous>",
        )
    ],
    "spec_decode": [
        Recommendation(
            change=msg("rec.spec_decode_1"),
            flag=None,
            verify="vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_draft_tokens_total",
        )
    ],
    "disagg": [
        Recommendation(
            change=msg("rec.disagg_1"),
            flag="--kv-transfer-config '{...}'",
        )
    ],
    "kv_quant": [
        Recommendation(change=msg("rec.kv_quant_1"), flag="--kv-cache-dtype auto", whatif=["kv_cache_dtype=fp8"])
    ],
    "prefill_compute": [
        Recommendation(
            change=msg("rec.prefill_compute_1"),
            flag="--enable-prefix-caching",
            verify="histogram_quantile(0.5, sum by (le) (rate(vllm:request_prefill_time_seconds_bucket[5m])))",
        )
    ],
    "decode_bandwidth": [
        Recommendation(
            change=msg("rec.decode_bandwidth_1"),
            flag=WEIGHT_QUANT_FLAG,
        )
    ],
}

"""The measurement that confirms or rules out each cause, for when the evidence cannot separate them.

When the ranker's leading causes are too close to order (ranker.undecided), the answer does not put
a guess first: it names, for those causes, the one measurement that tells them apart. What to
measure is a catalog message (``decide.<cause>``); the command uses standard tools (vllm bench
serve, the advisor's own probes, nvidia-smi, py-spy), never a guess of ours.
"""

from __future__ import annotations

from ..schema import MissingMeasurement
from ..schema.message import msg

#: cause -> a command that measures what ``decide.<cause>`` describes
COMMANDS: dict[str, str] = {
    "kv_capacity": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "queueing": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "preemption": "vllm-advisor probe log server.log",
    "chunked_prefill_interference": "vllm bench serve --dataset-name random --random-input-len LONG --random-output-len 256 --max-concurrency C --percentile-metrics ttft,tpot,itl --save-detailed",
    "batched_tokens_limit": "vllm serve MODEL --max-num-batched-tokens 8192   (then re-run the same vllm bench serve)",
    "max_num_seqs_limit": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "prefix_cache": "vllm bench serve --dataset-name random --seed $RANDOM ...   (and vllm-advisor probe metrics http://HOST:8000/metrics)",
    "benchmark_methodology": "vllm bench serve --dataset-name random --seed $RANDOM --max-concurrency C --percentile-metrics ttft,tpot,itl,e2el --save-detailed",
    "cpu_frontend": "py-spy top --pid $(pgrep -f 'vllm serve' | head -1)   (and nvidia-smi dmon -s u)",
    'detokenize': 'vllm bench serve ... --extra-body \'{"logprobs": null}\'   (compare output tok/s)',
    "tp_comm": "nvidia-smi topo -m   (and all_reduce_perf from nccl-tests)",
    "memory_config": "vllm-advisor probe log server.log",
    "attention_backend": "VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve ...   (compare with the default)",
    "cuda_graph": "vllm-advisor probe log server.log",
    "version_regression": "pip install vllm==PREVIOUS && vllm bench serve ...   (same seed and settings)",
    "spec_decode": "vllm serve MODEL   (without --speculative-config; compare vllm bench serve results)",
    "disagg": "vllm bench serve ... against the aggregated deployment   (compare TTFT/ITL)",
    "kv_quant": "vllm serve MODEL --kv-cache-dtype fp8   (then the same vllm bench serve)",
    "prefill_compute": "vllm bench serve --max-concurrency 1 --num-prompts 5 --random-input-len LONG --random-output-len 16",
    "decode_bandwidth": "vllm bench serve --max-concurrency 1 --num-prompts 10 --random-output-len 256",
}


def deciding_measurements(causes: list[str], already: list[MissingMeasurement]) -> list[MissingMeasurement]:
    """One measurement per undecided cause whose command is not already asked for."""
    seen = {m.command for m in already}
    out = []
    for cause in causes:
        command = COMMANDS.get(cause)
        if command is None or command in seen:
            continue
        seen.add(command)
        out.append(MissingMeasurement(decides=[cause], what=msg(f"decide.{cause}"), command=command))
    return out

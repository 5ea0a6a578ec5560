"""The measurement that confirms or rules out each cause, for when the evidence cannot separate them.

When the ranker's leading causes are too close to order (ranker.undecided), the answer does not put
a guess first: it names, for those causes, the one measurement that tells them apart. What to
measure is a catalog message (``decide.<cause>``); the command uses standard tools (vllm bench
serve, the advisor's own probes, nvidia-smi, py-spy), never a guess of ours.
"""

from __future__ import annotations

import re

from ..schema import MissingMeasurement
from ..schema.message import msg

#: Tools that exist only with NVIDIA's driver and NCCL.
NVIDIA_TOOLS = re.compile(r"nvidia-smi|all_reduce_perf|nccl", re.I)
#: What runs or reads vLLM: its commands and the advisor's probes of it, its metrics, its log lines.
VLLM_ONLY = re.compile(r"vllm|GPU KV cache size|Maximum concurrency", re.I)

#: cause -> a command that measures what ``decide.<cause>`` describes: code only, one command per line
#: (the comparison it makes is said by the message, in the asker's language; "(same seed and
#: settings)" inside the code was English prose in Chinese answers, a reviewer's find)
COMMANDS: dict[str, str] = {
    "kv_capacity": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "queueing": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "preemption": "vllm-advisor probe log server.log",
    "chunked_prefill_interference": "vllm bench serve --dataset-name random --random-input-len LONG --random-output-len 256 --max-concurrency C --percentile-metrics ttft,tpot,itl --save-detailed",
    "batched_tokens_limit": "vllm serve MODEL --max-num-batched-tokens 8192\nvllm bench serve ...",
    "max_num_seqs_limit": "vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl",
    "prefix_cache": "vllm bench serve --dataset-name random --seed $RANDOM ...\nvllm-advisor probe metrics http://HOST:8000/metrics",
    "benchmark_methodology": "vllm bench serve --dataset-name random --seed $RANDOM --max-concurrency C --percentile-metrics ttft,tpot,itl,e2el --save-detailed",
    "cpu_frontend": "py-spy top --pid $(pgrep -f 'vllm serve' | head -1)\nnvidia-smi dmon -s u",
    'detokenize': 'vllm bench serve ... --extra-body \'{"logprobs": null}\'',
    "tp_comm": "nvidia-smi topo -m\nall_reduce_perf -b 8M -e 256M -f 2 -g 2",
    "memory_config": "vllm-advisor probe log server.log",
    "attention_backend": "VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve ...",
    "cuda_graph": "vllm-advisor probe log server.log",
    "version_regression": "pip install vllm==PREVIOUS\nvllm bench serve ...",
    "spec_decode": "vllm serve MODEL\nvllm bench serve ...",
    "disagg": "vllm bench serve ...",
    "kv_quant": "vllm serve MODEL --kv-cache-dtype fp8\nvllm bench serve ...",
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


def fitted_command(command: str, *, vllm: bool, nvidia: bool) -> str:
    """The command's lines this deployment can run: none that runs or reads vLLM (its bench client,
    its metrics, its log) for another engine, none of NVIDIA's tools on other accelerators (reviewers
    found `vllm bench serve` and `vllm:` queries given to LMDeploy and KTransformers users, and
    nvidia-smi on Tenstorrent, MI250 and Apple silicon). Empty when no line is left: the measurement
    is still named, in words."""
    lines = [line for line in command.splitlines() if (vllm or not VLLM_ONLY.search(line)) and (nvidia or not NVIDIA_TOOLS.search(line))]
    return "\n".join(lines)

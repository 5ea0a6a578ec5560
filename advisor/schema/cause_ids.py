"""The root-cause ids a diagnosis names: the project's contract (shared/cases/FORMAT.md).

Defined once, as a Literal for typed fields and a tuple for iteration, so case files, findings,
the case library and the fitted ranker all agree on the same twenty names.
"""

from __future__ import annotations

from typing import Literal, get_args

CauseId = Literal[
    "kv_capacity",
    "queueing",
    "preemption",
    "chunked_prefill_interference",
    "batched_tokens_limit",
    "max_num_seqs_limit",
    "prefix_cache",
    "benchmark_methodology",
    "cpu_frontend",
    "detokenize",
    "tp_comm",
    "memory_config",
    "attention_backend",
    "cuda_graph",
    "version_regression",
    "spec_decode",
    "disagg",
    "kv_quant",
    "prefill_compute",
    "decode_bandwidth",
]

CAUSE_IDS: tuple[str, ...] = get_args(CauseId)

"""Turn a simulation into the probe's :class:`BenchmarkRun`, so predicted and measured compare 1:1.

The definitions are the ones in :mod:`vllm_advisor.schema.bench` (TTFT from send to first token,
TPOT excluding the first token, ITL pooled over all gaps, and so on), computed from simulated
per-request timelines exactly as ``vllm bench serve`` computes them from measured ones.
"""

from __future__ import annotations

import math

import numpy as np

from ..schema import BenchmarkRun, Distribution
from .simulator import SimResult


def sim_to_run(result: SimResult, *, label: str | None = None, model: str | None = None) -> BenchmarkRun:
    done = result.finished()
    w = result.workload
    notes: list[str] = []
    rejected = [r for r in result.requests if r.rejected]
    if rejected:
        notes.append(f"{len(rejected)} request(s) could not be served: {rejected[0].rejected}")
    if result.total_preemptions:
        notes.append(f"{result.total_preemptions} preemption(s) (recompute) in the simulation")
    run = BenchmarkRun(
        source="model",
        format="model",
        label=label,
        model=model,
        offered_concurrency=w.concurrency,
        offered_request_rate=(w.request_rate if w.request_rate is not None else (None if w.concurrency else math.inf)),
        num_prompts=w.num_prompts,
        completed=len(done),
        failed=len(rejected),
        notes=notes,
    )
    if not done:
        return run
    arrivals = np.array([r.arrival for r in done])
    finish = np.array([r.finish for r in done], dtype=float)
    ttft = np.array([r.token_times[0] - r.arrival for r in done])
    e2e = finish - arrivals
    out_len = np.array([r.num_generated for r in done])
    in_len = np.array([r.prompt_len for r in done])
    multi = out_len > 1
    tpot = (e2e[multi] - ttft[multi]) / (out_len[multi] - 1)
    gaps = np.concatenate([np.diff(r.token_times) for r in done if len(r.token_times) > 1] or [np.array([])])
    queue = np.array([(r.first_scheduled - r.arrival) for r in done if r.first_scheduled is not None])
    start = float(min(r.arrival for r in result.requests))
    duration = float(finish.max() - start)
    run.duration_s = duration
    run.total_input_tokens = int(in_len.sum())
    run.total_output_tokens = int(out_len.sum())
    run.input_len = Distribution.from_samples(in_len, "tokens")
    run.output_len = Distribution.from_samples(out_len, "tokens")
    run.ttft_ms = Distribution.from_samples(ttft * 1e3, "ms")
    run.tpot_ms = Distribution.from_samples(tpot * 1e3, "ms")
    run.itl_ms = Distribution.from_samples(gaps * 1e3, "ms")
    run.e2e_ms = Distribution.from_samples(e2e * 1e3, "ms")
    run.request_decode_tok_s = Distribution.from_samples(1.0 / tpot[tpot > 0], "tok/s")
    run.request_output_tok_s = Distribution.from_samples(out_len / e2e, "tok/s")
    run.client_queue_ms = None
    if duration > 0:
        run.output_throughput_tok_s = float(out_len.sum() / duration)
        run.total_throughput_tok_s = float((out_len.sum() + in_len.sum()) / duration)
        run.request_throughput_req_s = float(len(done) / duration)
        run.achieved_concurrency = float(e2e.sum() / duration)
    run.has_per_request_data = True
    run.metadata["server_queue_ms"] = Distribution.from_samples(queue * 1e3, "ms").model_dump() if queue.size else None
    return run

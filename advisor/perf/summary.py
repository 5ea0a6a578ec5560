"""Turn a simulation into the probe's :class:`BenchmarkRun`, so predicted and measured compare 1:1.

The definitions are the ones in :mod:`vllm_advisor.schema.bench` (TTFT from send to first token,
TPOT excluding the first token, ITL pooled over all gaps, and so on), computed from simulated
per-request timelines exactly as ``vllm bench serve`` computes them from measured ones.
"""

from __future__ import annotations

import math

import numpy as np

from ..schema import BenchmarkRun, Distribution, ServerView
from ..schema.bench import STANDARD_PERCENTILES, percentile_key
from .simulator import SimRequest, SimResult


def itl_gaps(done: list[SimRequest], result: SimResult | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every gap between consecutive tokens of every request, as (values, multiplicities).

    A stretch of k identical steps stores its k end times once for all the requests that sampled in
    it, so its k - 1 inner gaps are counted once with the number of those requests as weight; the
    gaps that join a request's segments are counted one by one. The multiset is the same as pooling
    ``np.diff(token_times)`` over the requests, without building a million-element array. The
    simulator pools them as it goes (``SimResult.itl_joins`` / ``itl_stretches``); that pool is
    used when every request that sampled a token is among ``done``, else they are gathered here.
    """
    if result is not None and result.itl_joins is not None and result.itl_stretches is not None:
        sampled = [r for r in result.requests if r.token_segments]
        if len(sampled) == len(done) and all(r.finish is not None and r.rejected is None for r in sampled):
            joins = np.asarray(result.itl_joins, dtype=float)
            stretches = result.itl_stretches
            if not stretches:
                return joins, np.ones(joins.size, dtype=np.int64)
            sizes = np.array([gaps.size for gaps, _ in stretches])
            counts = np.repeat(np.array([count for _, count in stretches], dtype=np.int64), sizes)
            gaps = np.concatenate([joins] + [gaps for gaps, _ in stretches])
            return gaps, np.concatenate((np.ones(joins.size, dtype=np.int64), counts))
    shared: dict[int, list] = {}
    joins: list[float] = []
    for r in done:
        prev = None
        for seg in r.token_segments:
            if isinstance(seg, np.ndarray):
                first, last = seg[0], seg[-1]
                entry = shared.get(id(seg))
                if entry is None:
                    shared[id(seg)] = [seg, 1]
                else:
                    entry[1] += 1
            else:
                first = last = seg
            if prev is not None:
                joins.append(first - prev)
            prev = last
    values = [np.asarray(joins, dtype=float)]
    weights = [np.ones(len(joins), dtype=np.int64)]
    for seg, count in shared.values():
        if seg.size > 1:
            values.append(np.diff(seg))
            weights.append(np.full(seg.size - 1, count, dtype=np.int64))
    return np.concatenate(values), np.concatenate(weights)


def weighted_distribution(values: np.ndarray, weights: np.ndarray, unit: str) -> Distribution | None:
    """``Distribution.from_samples`` of the samples ``values`` repeated ``weights`` times, without
    repeating them: the same linear-interpolation percentiles as numpy's default, population std."""
    values = np.asarray(values, dtype=float)
    if values.size and weights.min() <= 0:
        keep = weights > 0
        values, weights = values[keep], weights[keep]
    if values.size == 0:
        return None
    if np.all(weights == 1):
        return Distribution.from_samples(values, unit)
    order = np.argsort(values, kind="stable")  # timsort: the gaps come in monotone runs (a stretch each)
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    n = int(cum[-1])
    qs = np.asarray(list(STANDARD_PERCENTILES) + [50.0], dtype=float)
    rank = qs / 100.0 * (n - 1)
    lo = np.floor(rank).astype(np.int64)  # integer ranks: a float key would convert all of ``cum``
    frac = rank - lo
    v_lo = v[np.searchsorted(cum, lo, side="right")]
    v_hi = v[np.searchsorted(cum, np.minimum(lo + 1, n - 1), side="right")]
    pct = v_lo + (v_hi - v_lo) * frac
    # Elementwise products, not np.dot: BLAS threads cost milliseconds on a busy machine.
    mean = float((v * w).sum() / n)
    std = float(np.sqrt((w * (v - mean) ** 2).sum() / n))
    return Distribution(
        unit=unit,
        count=n,
        mean=mean,
        median=float(pct[-1]),
        std=std,
        min=float(v[0]),
        max=float(v[-1]),
        percentiles={percentile_key(q): float(x) for q, x in zip(qs[:-1], pct[:-1])},
    )


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
    ttft = np.array([r.first_token_time - r.arrival for r in done])
    e2e = finish - arrivals
    out_len = np.array([r.num_generated for r in done])
    in_len = np.array([r.prompt_len for r in done])
    multi = out_len > 1
    tpot = (e2e[multi] - ttft[multi]) / (out_len[multi] - 1)
    gap_values, gap_weights = itl_gaps(done, result)
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
    run.itl_ms = weighted_distribution(gap_values * 1e3, gap_weights, "ms")
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
    run.server_view = ServerView(queue_ms=Distribution.from_samples(queue * 1e3, "ms") if queue.size else None)
    return run

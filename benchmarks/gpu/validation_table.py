#!/usr/bin/env python3
"""Markdown tables of `vllm-advisor validate` for benchmarks/RESULTS.md: per point, KV cache, and
the median absolute error per figure on fit and held-out points, with the shipped parameters and
with the parameters as they were before the fit to real vLLM (sourced overheads, no graph factors).

    python benchmarks/gpu/validation_table.py benchmarks/gpu/runs/2026-12-03-h200-vllm0.26
"""

from __future__ import annotations

import sys
from pathlib import Path

from vllm_advisor.perf.efficiency import PRE_FIT_ENGINE_VALUES as BEFORE
from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.validation import validate_runs

TARGET = {"tpot_p50": 0.10, "output_throughput": 0.10, "e2e_p50": 0.10, "ttft_p50": 0.15, "kv_cache_tokens": 0.03}
COLS = ("ttft_p50", "ttft_p90", "tpot_p50", "itl_p50", "e2e_p50", "output_throughput", "running_mean", "waiting_mean")
NAMES = {"ttft_p50": "TTFT p50 s", "ttft_p90": "TTFT p90 s", "tpot_p50": "TPOT p50 ms", "itl_p50": "ITL p50 ms", "e2e_p50": "E2E p50 s",
         "output_throughput": "out tok/s", "running_mean": "running", "waiting_mean": "waiting", "kv_cache_tokens": "KV cache tokens"}


def num(v):
    if v is None:
        return "-"
    a = abs(v)
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3f}"


def main() -> None:
    root = Path(sys.argv[1])
    now = validate_runs(root)
    before = validate_runs(root, efficiency=Efficiency().model_copy(update=BEFORE))
    print("| run / point | split | load | " + " | ".join(NAMES[c] + " pred / meas (err)" for c in COLS) + " |")
    print("| --- | --- | --- | " + " | ".join("---:" for _ in COLS) + " |")
    for p in now.points:
        load = f"c={p.concurrency}" if p.concurrency else ("burst" if p.request_rate == float("inf") else f"Poisson {p.request_rate:g}/s")
        load += f", {p.input_len}/{p.output_len}, n={p.num_prompts}" + (f", prefix {p.prefix_len}" if p.prefix_len else "")
        if p.max_num_batched_tokens != 8192:
            load += f", budget {p.max_num_batched_tokens}"
        f = {x.figure: x for x in p.figures}
        cells = [f"{num(f[c].predicted)} / {num(f[c].measured)} ({'' if f[c].error is None else f'{f[c].error * 100:+.0f}%'})" for c in COLS]
        print(f"| {p.run} / {p.point} | {p.split} | {load} | " + " | ".join(cells) + " |")
    print()
    print("| run | model | split | KV tokens predicted | server log | error |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for k in now.kv_cache:
        print(f"| {k.run} | {k.model} | {k.split} | {k.predicted_tokens:,} | {k.measured_tokens:,} | {k.error * 100:+.1f}% |")
    print()
    print("| figure | target (held out) | fit points: before -> shipped | held out: before -> shipped (signed) | worst held-out point (shipped) |")
    print("| --- | ---: | ---: | ---: | --- |")
    b = {(s.figure, s.split): s for s in before.summary}
    for s in now.summary:
        if s.split != "holdout":
            continue
        fit_now = next((x for x in now.summary if x.figure == s.figure and x.split == "fit"), None)
        fit_b = b.get((s.figure, "fit"))
        hb = b.get((s.figure, "holdout"))
        tgt = TARGET.get(s.figure)
        ok = "" if tgt is None else (" ✓" if s.median_abs_error <= tgt else " ✗")
        print(
            f"| {NAMES[s.figure]} | {'-' if tgt is None else f'{tgt * 100:.0f}%'} | "
            f"{fit_b.median_abs_error * 100:.1f}% -> {fit_now.median_abs_error * 100:.1f}% | "
            f"{hb.median_abs_error * 100:.1f}% -> **{s.median_abs_error * 100:.1f}%** ({s.median_signed_error * 100:+.1f}%){ok} | "
            f"{s.worst_point} {s.worst_abs_error * 100:.0f}% |"
        )


if __name__ == "__main__":
    main()

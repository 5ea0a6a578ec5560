#!/usr/bin/env python3
"""Fit the host time of an eager step (``--enforce-eager``: no CUDA graphs, no torch.compile) to real vLLM.

Two parameters of :class:`advisor.perf.efficiency.Efficiency`: ``eager_launch_us_per_layer`` (a dense
layer) and ``eager_moe_launch_us_per_layer`` (an MoE layer), each fitted alone (the MoE model has no
dense layer) by squared log-ratios of TPOT p50 and ITL p50 on its fit points, for both ways the launches
can meet the kernels (``step_time.EAGER_OVERLAP``: the longer of the two, or their sum). The fit points
were named in the plans before the runs (check-moe-eager's three points for the MoE term; the dense term
was added after check-8b-eager's points came back, fitted on them); every other eager point is held out.

    python benchmarks/gpu/fit_eager.py
"""

from __future__ import annotations

import math
from pathlib import Path

from scipy.optimize import minimize_scalar

from vllm_advisor.perf import step_time
from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.validation import validate_runs

RUNS = Path(__file__).resolve().parent / "runs"
FIT = {"eager_moe_launch_us_per_layer": [("2026-12-06-h100-eager", "check-moe-eager")], "eager_launch_us_per_layer": [("2026-12-06-h100-eager", "check-8b-eager")]}
HELD_OUT = [("2026-12-06-h100-planted-e", "planted-moe-eager"), ("2026-12-06-h100-planted", "planted-8b-eager"), ("2026-12-06-h100-planted", "planted-14b-eager")]
FIGS = ("tpot_p50", "itl_p50")


def points(runs, eff):
    out = []
    for folder, run in runs:
        out += [p for p in validate_runs(RUNS / folder, efficiency=eff).points if p.run == run]
    return out


def loss(runs, eff) -> float:
    return sum(math.log(f.predicted / f.measured) ** 2 for p in points(runs, eff) for f in p.figures if f.figure in FIGS and f.predicted and f.measured)


def fit(overlap: bool) -> dict[str, float]:
    shipped = step_time.EAGER_OVERLAP
    step_time.EAGER_OVERLAP = overlap
    try:
        values = {}
        for name, runs in FIT.items():
            res = minimize_scalar(lambda us: loss(runs, Efficiency().model_copy(update={name: us})), bounds=(0.0, 3000.0), method="bounded", options={"xatol": 1.0})
            values[name] = round(float(res.x), 1)
        return values
    finally:
        step_time.EAGER_OVERLAP = shipped


def table(runs, eff) -> list[str]:
    rows = []
    for p in points(runs, eff):
        errs = {f.figure: f"{f.error * 100:+.0f}%" for f in p.figures if f.error is not None and f.figure in ("ttft_p50", "tpot_p50", "itl_p50", "e2e_p50", "output_throughput")}
        rows.append(f"  {p.run} {p.point} {errs}")
    return rows


def main() -> None:
    fit_runs = [r for rs in FIT.values() for r in rs]
    for overlap in (True, False):
        values = fit(overlap)
        eff = Efficiency().model_copy(update=values)
        shipped, step_time.EAGER_OVERLAP = step_time.EAGER_OVERLAP, overlap
        try:
            lines = [f"EAGER_OVERLAP={overlap}: {values}; fit loss {loss(fit_runs, eff):.3f}, held-out loss {loss(HELD_OUT, eff):.3f}", "  fit:"]
            lines += table(fit_runs, eff) + ["  held out:"] + table(HELD_OUT, eff)
        finally:
            step_time.EAGER_OVERLAP = shipped
        print("\n".join(lines))


if __name__ == "__main__":
    main()

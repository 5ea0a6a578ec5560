#!/usr/bin/env python3
"""Median |predicted / measured - 1| per figure over every run folder under benchmarks/gpu/runs:
the 2026-12-03 H200 runs by their split (fit / held out), every later folder as held out ("later":
never fitted on). ``-v`` adds each point's signed errors; an optional JSON object of Efficiency
fields scores other engine terms (e.g. the fit before session 19's intake delay).

    python benchmarks/gpu/validation_summary.py [-v] ['{"intake_delay_ms": 0, "prefill_request_overhead_ms": 17.3344, ...}']
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.validation import validate_runs

RUNS = Path(__file__).resolve().parent / "runs"
FIGS = ("ttft_p50", "ttft_p90", "tpot_p50", "itl_p50", "e2e_p50", "output_throughput", "running_mean", "waiting_mean")
FITTED_FOLDER = "2026-12-03-h200-vllm0.26"


def main() -> None:
    verbose = "-v" in sys.argv
    extra = [a for a in sys.argv[1:] if a != "-v"]
    eff = Efficiency().model_copy(update=json.loads(extra[0]) if extra else {})
    groups: dict[str, list] = {"fit": [], "holdout": [], "later": []}
    for folder in sorted(d for d in RUNS.iterdir() if d.is_dir()):
        for p in validate_runs(folder, efficiency=eff).points:
            groups[p.split if folder.name == FITTED_FOLDER else "later"].append(p)
            if verbose:
                errs = {f.figure: f"{f.error * 100:+.0f}%" for f in p.figures if f.error is not None and f.figure in FIGS[:6]}
                print(f"{folder.name} {p.run} {p.point} {errs}")
    for name, points in groups.items():
        parts = []
        for fig in FIGS:
            errs = [abs(f.error) for p in points for f in p.figures if f.figure == fig and f.error is not None]
            if errs:
                parts.append(f"{fig} {statistics.median(errs) * 100:.1f}% (n={len(errs)}, >30%: {sum(e > 0.3 for e in errs)})")
        print(f"{name} ({len(points)} points): " + "; ".join(parts))


if __name__ == "__main__":
    main()

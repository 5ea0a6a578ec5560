"""``vllm-advisor validate RUN_DIR``: the performance model beside real vLLM, figure by figure.

Re-predicts every load point measured by ``benchmarks/gpu/vllm_e2e.py`` (one ``results.json[.gz]``
per server start under RUN_DIR) from its own deployment and workload, and prints predicted vs
measured with the signed error (predicted / measured - 1) for TTFT p50/p90, TPOT p50, ITL p50, E2E
p50, output throughput, mean running and waiting requests, and the KV cache size of each server; then
the median absolute error per figure on the points used to fit vLLM's own costs and on those held out.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Group
from rich.table import Table

from ..schema.validation import FIGURES, ValidationReport
from .output import emit, json_option

_SHORT = {
    "ttft_p50": "TTFT p50",
    "ttft_p90": "TTFT p90",
    "tpot_p50": "TPOT p50",
    "itl_p50": "ITL p50",
    "e2e_p50": "E2E p50",
    "output_throughput": "out tok/s",
    "running_mean": "running",
    "waiting_mean": "waiting",
}


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3f}"


def _err(e: float | None) -> str:
    return "" if e is None else f" ({e * 100:+.0f}%)"


def render_report(report: ValidationReport) -> Group:
    pts = Table(title=f"Predicted vs measured, per load point ({report.engine})", show_lines=False)
    for col in ("run / point", "split", "load"):
        pts.add_column(col, no_wrap=True)
    for fig, unit in FIGURES.items():
        pts.add_column(f"{_SHORT[fig]} [{unit}]\npred vs meas (err)", justify="right")
    for p in report.points:
        load = f"c={p.concurrency}" if p.concurrency else ("burst" if p.request_rate in (None, float("inf")) else f"{p.request_rate:g}/s")
        load += f" {p.input_len // 1000}K/{p.output_len}" + (f" pfx{p.prefix_len // 1000}K" if p.prefix_len else "")
        cells = [f"{_num(f.predicted)} vs {_num(f.measured)}{_err(f.error)}" for f in p.figures]
        pts.add_row(f"{p.run}/{p.point}", p.split, load, *cells)
    kv = Table(title="KV cache size (tokens): predicted vs the server log's")
    for col in ("run", "split", "model", "predicted", "measured", "error"):
        kv.add_column(col, justify="right" if col in ("predicted", "measured", "error") else "left")
    for k in report.kv_cache:
        kv.add_row(k.run, k.split, k.model, f"{k.predicted_tokens:,}", f"{k.measured_tokens:,}", f"{k.error * 100:+.1f}%")
    summ = Table(title="Median absolute error per figure (signed median in brackets; worst point)")
    for col in ("figure", "split", "points", "median |err|", "worst"):
        summ.add_column(col, justify="right" if col in ("points", "median |err|") else "left")
    for s in report.summary:
        summ.add_row(_SHORT.get(s.figure, s.figure), s.split, str(s.points), f"{s.median_abs_error * 100:.1f}% ({s.median_signed_error * 100:+.1f}%)", f"{s.worst_abs_error * 100:.0f}% {s.worst_point}")
    parts: list = [pts, kv, summ]
    if report.split_rule:
        parts.append(f"split: {report.split_rule}")
    parts += [f"note: {n}" for n in report.notes]
    return Group(*parts)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@json_option
def validate(run_dir: Path, as_json: bool) -> None:
    """Re-predict every load point of real-vLLM runs (benchmarks/gpu/vllm_e2e.py) and print predicted
    vs measured per figure, with the error and its sign.

    \b
    vllm-advisor validate benchmarks/gpu/runs/2026-12-03-h200-vllm0.26
    vllm-advisor validate benchmarks/gpu/runs/2026-12-03-h200-vllm0.26/qwen14b-b8192 --json
    """
    from ..perf.validation import validate_runs

    emit(validate_runs(run_dir), as_json, render_report)

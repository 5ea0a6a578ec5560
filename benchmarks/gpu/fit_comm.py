"""Fit the step-time model's all-reduce term to multi-GPU measurements and report the fit error (issue 9).

The model (``vllm_advisor.perf.step_time``) charges each tensor-parallel all-reduce of
``bytes = tokens x hidden x 2``::

    t = allreduce_latency_us + bytes x 2 (n-1)/n / (link bandwidth x eff_comm)

``bytes x 2 (n-1)/n`` is what nccl-tests calls the bus bytes, so ``link bandwidth x eff_comm`` is
the bus bandwidth. This script fits ``t = latency + bus_bytes / busbw`` to the rows that
``measure_allreduce.py`` wrote on 2, 4 and 8 GPUs:

- per (mode, world size), and jointly over the world sizes of one mode (the model has one latency
  and one ``eff_comm`` for every TP, so the joint fit is the model's own form);
- by weighted least squares on the relative error (``minimise sum((pred - t) / t)^2``, linear in
  the two unknowns, so one deterministic solve): times span four decades and a 10 µs point
  matters as much as a 1 ms one;
- on the log-grid sizes; the catalog models' exact decode/prefill sizes that are not on the grid
  are held out and their errors reported separately. Errors are also given per range (decode
  messages, up to 256 tokens; prefill chunks) and for the shipped constants (15 µs, 0.70 x the
  GPU's link bandwidth) on the same points.

``eff_comm`` is reported as the fitted bus bandwidth over the catalog's per-direction link
bandwidth of the measured GPU (H200: 450 GB/s). Other interconnects (PCIe, the H800's narrower
NVLink) are not measured: the model scales to them by their link bandwidth, with this eff_comm.

The layer rows (one TP layer's GEMMs and two all-reduces, timed whole and part by part) are
checked against the sum of their parts, and against the parts' GEMMs plus two fitted all-reduces.

Rows with ``purpose`` other than ``data`` (world size 1 smoke runs, CPU checks) are never fitted;
with none left the script stops with one line saying so (exit code 3).

Usage: .venv/bin/python benchmarks/gpu/fit_comm.py [CSV ...] [--json fit.json] [--gpu H200]
(default: every ``data/allreduce-*.csv``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vllm_advisor.errors import AdvisorError, InputFileError
from vllm_advisor.perf.catalog import get_gpu
from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.probe.files import read_text

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REQUIRED_COLUMNS = ("purpose", "part", "mode", "op", "world_size", "bytes", "median_us")
DECODE_MAX_TOKENS = 256


class NoMultiGpuData(InputFileError):
    """The CSVs hold no multi-GPU all-reduce rows to fit."""


@dataclass(frozen=True)
class Sample:
    """One measured all-reduce: the slowest rank's median time of one message size."""

    world_size: int
    mode: str
    bytes: int
    median_us: float
    size_source: str
    size_users: str
    gpu: str
    source: str

    @property
    def bus_bytes(self) -> float:
        return self.bytes * 2.0 * (self.world_size - 1) / self.world_size

    @property
    def on_log_grid(self) -> bool:
        return "log" in self.size_source.split("+")

    @property
    def phase(self) -> str:
        """decode if some catalog model sends this size from a decode step of <= 256 tokens."""
        return "decode" if "model-decode" in self.size_source else "prefill" if "model-prefill" in self.size_source else "grid"


@dataclass(frozen=True)
class LineFit:
    """``t = latency_us + bus_bytes / busbw``; errors are relative (predicted / measured - 1)."""

    latency_us: float
    busbw_gbs: float

    def predict_us(self, bus_bytes: float) -> float:
        return self.latency_us + bus_bytes / (self.busbw_gbs * 1e3)  # GB/s = 1e3 bytes per µs


@dataclass(frozen=True)
class Errors:
    points: int
    median_abs: float
    worst_abs: float
    signed_median: float
    worst_point: str


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows, or one line naming the file and the missing column."""
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputFileError(f"not a measure_allreduce.py CSV: no column {missing[0]!r}", source=str(path))
    return list(reader)


def load_samples(paths: list[Path]) -> tuple[list[Sample], list[dict[str, str]], dict[str, int]]:
    """All-reduce samples usable for the fit, the layer rows that are data, and a count of the rows
    left out by purpose (smoke, cpu-check) so the caller can say why nothing is left."""
    samples: list[Sample] = []
    layer: list[dict[str, str]] = []
    skipped: dict[str, int] = defaultdict(int)
    for path in paths:
        for i, row in enumerate(read_rows(path), start=2):
            try:
                world = int(row["world_size"])
                purpose = row["purpose"]
                if purpose != "data" or world < 2:
                    skipped[f"{purpose} (world size {world})"] += 1
                    continue
                if row["part"] == "layer":
                    layer.append({**row, "_source": str(path)})
                    continue
                if row["part"] != "allreduce" or not row["median_us"]:
                    continue  # a FAILED row (graph capture refused) has no time
                samples.append(Sample(world, row["mode"], int(row["bytes"]), float(row["median_us"]),
                                      row.get("size_source", ""), row.get("size_users", ""), row.get("gpu", ""), str(path)))
            except (KeyError, ValueError) as exc:
                raise InputFileError(f"line {i}: unreadable value ({exc})", source=str(path)) from None
    return samples, layer, dict(skipped)


def fit_line(bus_bytes: list[float], times_us: list[float]) -> LineFit:
    """Least squares on relative error of ``t = a + x / busbw``. With a negative intercept (possible
    when only large messages are given) the latency is pinned at 0 and the bandwidth refitted."""
    if len(times_us) < 2:
        raise ValueError("need at least two points to fit latency and bandwidth")
    x = np.asarray(bus_bytes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    design = np.column_stack([1.0 / t, x / t])
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if a < 0:
        r = x / t
        a, b = 0.0, float(r.sum() / (r * r).sum())
    if b <= 0:
        raise ValueError("the times do not grow with message size: no bandwidth to fit")
    return LineFit(latency_us=float(a), busbw_gbs=float(1e-3 / b))


def errors(samples: list[Sample], fit: LineFit) -> Errors | None:
    if not samples:
        return None
    rel = [(fit.predict_us(s.bus_bytes) / s.median_us - 1.0, s) for s in samples]
    worst_rel, worst = max(rel, key=lambda p: abs(p[0]))
    return Errors(
        points=len(rel),
        median_abs=statistics.median(abs(r) for r, _ in rel),
        worst_abs=abs(worst_rel),
        signed_median=statistics.median(r for r, _ in rel),
        worst_point=f"n={worst.world_size} {worst.mode} {worst.bytes} B: {worst.median_us:.2f} us measured, "
                    f"{fit.predict_us(worst.bus_bytes):.2f} predicted",
    )


def fit_group(samples: list[Sample], link_gbs: float) -> dict:
    """Fit on the log grid, judge on everything, on the held-out model sizes, and per phase."""
    grid = [s for s in samples if s.on_log_grid]
    try:
        fit = fit_line([s.bus_bytes for s in grid], [s.median_us for s in grid])
    except ValueError as exc:
        first = samples[0]
        raise InputFileError(f"n={first.world_size} {first.mode}: {exc}", source=first.source) from None
    held = [s for s in samples if not s.on_log_grid]
    return {
        "latency_us": round(fit.latency_us, 3),
        "busbw_gbs": round(fit.busbw_gbs, 2),
        "eff_comm": round(fit.busbw_gbs / link_gbs, 4),
        "fit": errors(grid, fit),
        "holdout_model_sizes": errors(held, fit),
        "decode_sizes": errors([s for s in samples if s.phase == "decode"], fit),
        "prefill_sizes": errors([s for s in samples if s.phase == "prefill"], fit),
        "all": errors(samples, fit),
        "_line": fit,
    }


def shipped_line(link_gbs: float) -> LineFit:
    """The model's term as it ships (sourced constants), for comparison on the same points."""
    eff = Efficiency()
    return LineFit(latency_us=eff.allreduce_latency_us, busbw_gbs=link_gbs * eff.eff_comm)


def layer_checks(layer_rows: list[dict[str, str]], fits: dict[tuple[str, int], LineFit]) -> list[dict]:
    """Per measured layer: whole / sum of parts, and whole / (GEMMs + 2 fitted all-reduces).

    The layer's parts are timed per call on the GPU (queue filled), so the GPU-only ``graph`` fit is
    the comparable one; the eager fit is used where no graph fit exists."""
    steps: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
    for row in layer_rows:
        steps[(row["_source"], row["measurement_id"])][row["op"]] = row
    out = []
    for ops in steps.values():
        if "step_total" not in ops or "allreduce" not in ops:
            continue
        total = ops["step_total"]
        n = int(total["world_size"])
        gemms = sum(float(r["median_us"]) for op, r in ops.items() if op not in ("step_total", "allreduce"))
        ar = float(ops["allreduce"]["median_us"])
        whole = float(total["median_us"])
        line = fits.get(("graph", n)) or fits.get(("eager", n))
        item = {"model": total["model"], "tp": n, "tokens": int(total["tokens"]), "whole_us": whole,
                "parts_us": round(gemms + 2 * ar, 2), "whole_over_parts": round(whole / (gemms + 2 * ar), 4),
                "allreduce_share": round(2 * ar / (gemms + 2 * ar), 4)}
        if line:
            bus = int(total["bytes"]) * 2.0 * (n - 1) / n
            pred = gemms + 2 * line.predict_us(bus)
            item.update({"with_fitted_comm_us": round(pred, 2), "error_with_fitted_comm": round(pred / whole - 1, 4)})
        out.append(item)
    return sorted(out, key=lambda r: (r["model"], r["tp"], r["tokens"]))


def fit_all(samples: list[Sample], layer_rows: list[dict[str, str]], link_gbs: float) -> dict:
    by_group: dict[tuple[str, int], list[Sample]] = defaultdict(list)
    for s in samples:
        by_group[(s.mode, s.world_size)].append(s)
    per_world = {f"{mode} n={n}": fit_group(group, link_gbs) for (mode, n), group in sorted(by_group.items())}
    joint = {}
    for mode in sorted({s.mode for s in samples}):
        group = [s for s in samples if s.mode == mode]
        if len({s.world_size for s in group}) > 1:
            joint[f"{mode} all n"] = fit_group(group, link_gbs)
    shipped = shipped_line(link_gbs)
    shipped_errors = {f"{mode} n={n}": errors(group, shipped) for (mode, n), group in sorted(by_group.items())}
    lines = {(mode, n): per_world[f"{mode} n={n}"]["_line"] for mode, n in by_group}
    return {"per_world_size": per_world, "joint": joint,
            "shipped": {"latency_us": shipped.latency_us, "busbw_gbs": shipped.busbw_gbs, "errors": shipped_errors},
            "layer": layer_checks(layer_rows, lines), "link_gbs": link_gbs}


def _pct(e: Errors | None) -> str:
    return "-" if e is None else f"{e.median_abs:.1%} / {e.worst_abs:.1%} ({e.points})"


def report(result: dict) -> str:
    lines = [f"link bandwidth {result['link_gbs']:.0f} GB/s per direction (catalog); errors: median / worst abs (points)", "",
             "| fit | latency µs | busbw GB/s | eff_comm | fit (log grid) | held-out model sizes | decode sizes | prefill sizes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, g in [*result["per_world_size"].items(), *result["joint"].items()]:
        lines.append(f"| {name} | {g['latency_us']:.2f} | {g['busbw_gbs']:.1f} | {g['eff_comm']:.3f} | {_pct(g['fit'])} | "
                     f"{_pct(g['holdout_model_sizes'])} | {_pct(g['decode_sizes'])} | {_pct(g['prefill_sizes'])} |")
    sh = result["shipped"]
    lines += ["", f"shipped term ({sh['latency_us']:.0f} µs, {sh['busbw_gbs']:.0f} GB/s) on the same points:"]
    lines += [f"- {name}: {_pct(e)}; worst {e.worst_point if e else '-'}" for name, e in sh["errors"].items()]
    if result["layer"]:
        lines += ["", "| layer | tp | tokens | whole µs | parts µs | whole/parts | all-reduce share | error with fitted comm |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in result["layer"]:
            err = r.get("error_with_fitted_comm")
            lines.append(f"| {r['model']} | {r['tp']} | {r['tokens']} | {r['whole_us']:.1f} | {r['parts_us']:.1f} | "
                         f"{r['whole_over_parts']:.3f} | {r['allreduce_share']:.1%} | {'-' if err is None else f'{err:+.1%}'} |")
    return "\n".join(lines)


def to_json(result: dict) -> dict:
    def clean(v):
        if isinstance(v, Errors):
            return asdict(v)
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items() if not k.startswith("_")}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return clean(result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="*", type=Path, help="measure_allreduce.py CSVs (default: data/allreduce-*.csv)")
    p.add_argument("--gpu", help="catalog GPU whose link bandwidth eff_comm is relative to (default: from the rows)")
    p.add_argument("--json", type=Path, help="also write the fit here")
    args = p.parse_args(argv)
    paths = args.csv or sorted(DATA.glob("allreduce-*.csv"))
    try:
        if not paths:
            raise NoMultiGpuData(f"no all-reduce CSV in {DATA}", source="fit_comm")
        samples, layer_rows, skipped = load_samples(paths)
        if not samples:
            left_out = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "no rows"
            raise NoMultiGpuData(
                f"no multi-GPU all-reduce data to fit ({left_out}): run measure_allreduce.py on nvidia-h200-x2/x4/x8 "
                f"(benchmarks/gpu/README.md, 'All-reduce (issue 9)')", source=", ".join(str(x) for x in paths))
        gpu_name = args.gpu or samples[0].gpu or "H200"
        link = get_gpu(gpu_name).interconnect_bw_gbs
        if not link:
            raise InputFileError(f"catalog GPU {gpu_name} has no interconnect bandwidth", source="--gpu")
        result = fit_all(samples, layer_rows, float(link))
    except AdvisorError as exc:
        print(f"fit_comm: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(to_json(result), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fit the step-time model's kernel parameters to the H200 sweeps and report hold-out errors (issue 8).

Reads ``data/nvidia-h200.csv`` and ``data/nvidia-h200_repeat.csv``, takes the mean of the two
sweeps' medians per point, splits the points into a fit set and a hold-out set by a fixed rule,
fits each component of :mod:`vllm_advisor.perf.kernels` by least squares on log(predicted /
measured), and reports, per component, the median and worst absolute relative error on the held-out
points. With ``--write`` it stores the result as the package's calibration
(``advisor/perf/catalog/kernels-h200.yaml``), which the step model loads as its defaults.

The split (deterministic, by shape, so the hold-out tests shapes the fit never saw):

- GEMM: fit on every GEMM of Qwen2.5-32B and Llama-3.1-8B (TP 1, 2, 4, 8); hold out Qwen2.5-72B,
  Llama-3.1-70B and the dense GEMMs of Qwen3-30B-A3B (attention, router, one expert).
- Attention: each (q heads, KV heads) configuration was measured once. Configurations of
  Qwen2.5-32B or Llama-3.1-8B are fitted; the others (64/8, 32/4, 16/2, 8/1: Qwen2.5-72B,
  Llama-3.1-70B) are held out.
- Grouped MoE GEMM: one MoE model only, so the split is by its four TP slices: fit on the widest
  and narrowest experts (TP 1, TP 8), hold out TP 2 and TP 4. (``--report-alternatives`` also prints the
  TP 1+4 / 2+8 split and the every-other-M split.)
- Mixed step: fit ``sustained_factor`` (whole layer / sum of its parts timed alone) on the
  Qwen2.5-32B TP 2 steps; hold out the Llama-3.1-70B TP 4 steps, predicted whole from the fitted
  components (with torch's flash attention, the kernel that ran in them).

Kernels: decode attention is fitted on the faster of the two backends per point (vLLM's decode
kernels are bandwidth-efficient; cuDNN was the faster one at every point). Prefill attention is
fitted on cuDNN's sm90 kernel (FA3-class, what vLLM runs on Hopper) at depth 0, the only depth cuDNN
was measured at; the depth behaviour of the same formula is checked on torch's flash kernel (FA2),
fitted separately over all depths as a reference.

Usage: .venv/bin/python benchmarks/gpu/fit_efficiency.py [--write] [--report-alternatives]
Prints a markdown table and, last, one JSON line with the hold-out errors and the fit's wall time.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from vllm_advisor.perf.catalog import get_gpu
from vllm_advisor.perf.efficiency import CALIBRATION_FILE, ComponentFit, Efficiency, HoldoutError, KernelCalibration
from vllm_advisor.perf.kernels import (
    Peak,
    decode_attention_seconds,
    gemm_seconds,
    grouped_gemm_seconds,
    prefill_attention_seconds,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = HERE / "data"
SWEEPS = ("nvidia-h200.csv", "nvidia-h200_repeat.csv")
OUTPUT = REPO / "advisor" / "perf" / "catalog" / CALIBRATION_FILE
GPU = "H200"

FIT_MODELS = frozenset({"Qwen2.5-32B-Instruct", "Llama-3.1-8B-Instruct"})
MOE_FIT_TPS = frozenset({1, 8})
MIXED_FIT_MODELS = frozenset({"Qwen2.5-32B-Instruct"})
BARS = {"median_abs_error": 0.10, "worst_abs_error": 0.25}

_INT_FIELDS = ("tp", "m", "k", "n", "batch", "kv_len", "chunk", "depth", "q_heads", "kv_heads", "head_dim")
_KEY_FIELDS = ("part", "op", "model", "backend") + _INT_FIELDS


@dataclass(frozen=True)
class Point:
    """One measured shape: the mean over the sweeps of each sweep's median time."""

    part: str
    op: str
    model: str
    backend: str
    tp: int
    m: int
    k: int
    n: int
    batch: int
    kv_len: int
    chunk: int
    depth: int
    q_heads: int
    kv_heads: int
    head_dim: int
    seconds: float
    sweeps: int
    experts: int = 0  # MoE: experts that received rows
    users: frozenset[str] = field(default_factory=frozenset)  # attention: models that share this head configuration

    def label(self) -> str:
        if self.part in ("gemm", "moe"):
            return f"{self.model} TP{self.tp} {self.op} M={self.m} (K={self.k}, N={self.n})"
        if self.part == "decode":
            return f"decode {self.backend} {self.q_heads}/{self.kv_heads} heads B={self.batch} L={self.kv_len}"
        if self.part == "prefill":
            return f"prefill {self.backend} {self.q_heads}/{self.kv_heads} heads C={self.chunk} D={self.depth}"
        return f"{self.model} TP{self.tp} {self.op} B={self.batch} L={self.kv_len} C={self.chunk} D={self.depth}"


def _int(value: str) -> int:
    return int(float(value)) if value else 0


def load_points(data_dir: Path = DATA) -> list[Point]:
    """Every measured point, averaged over the sweeps. Attention rows written once per (model, TP)
    that shares a head configuration are one point (with the models as ``users``)."""
    times: dict[tuple, list[float]] = defaultdict(list)
    first: dict[tuple, dict] = {}
    for name in SWEEPS:
        with (data_dir / name).open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row["part"] == "ceiling" or row["note"].startswith("FAILED"):
                    continue
                key = tuple(row[f] for f in _KEY_FIELDS)
                times[key].append(float(row["median_ms"]) * 1e-3)
                first.setdefault(key, row)
    merged: dict[tuple, Point] = {}
    for key, values in times.items():
        row = first[key]
        ints = {f: _int(row[f]) for f in _INT_FIELDS}
        touched = re.search(r"(\d+) experts touched", row["note"])
        p = Point(row["part"], row["op"], row["model"], row["backend"], **ints, seconds=statistics.mean(values),
                  sweeps=len(values), experts=int(touched.group(1)) if touched else 0, users=frozenset({row["model"]}))
        if p.part in ("decode", "prefill"):  # one measurement per head configuration
            akey = (p.part, p.backend, p.q_heads, p.kv_heads, p.head_dim, p.batch, p.kv_len, p.chunk, p.depth)
            if akey in merged:
                merged[akey] = replace(merged[akey], users=merged[akey].users | p.users)
                continue
            merged[akey] = replace(p, model="", tp=0)
        else:
            merged[key] = p
    return list(merged.values())


# ----- what each component predicts for a point ---------------------------------------------------


def h200_peak() -> Peak:
    gpu = get_gpu(GPU)
    return Peak(flops=gpu.bf16_tflops * 1e12, bandwidth=gpu.mem_bandwidth_gbs * 1e9)  # type: ignore[operator]


def predict_gemm(p: Point, eff: Efficiency, peak: Peak) -> float:
    return gemm_seconds(p.m, p.k, p.n, peak, eff)


def predict_moe(p: Point, eff: Efficiency, peak: Peak) -> float:
    return grouped_gemm_seconds(p.batch, p.experts, p.k, p.n, peak, eff)


def predict_decode(p: Point, eff: Efficiency, peak: Peak) -> float:
    kv_bytes = 2.0 * p.batch * p.kv_heads * p.kv_len * p.head_dim * 2.0  # K and V, bf16
    return decode_attention_seconds(kv_bytes, p.batch * p.kv_heads, peak, eff)


def predict_prefill(p: Point, eff: Efficiency, peak: Peak) -> float:
    per_query_key = 4.0 * p.head_dim  # 2 FLOPs per multiply-add, QK^T and PV: 2 (qk_dim + v_dim)
    flops = p.q_heads * per_query_key * p.chunk * (p.depth + p.chunk / 2)  # the step model's formula
    tail = eff.attn_prefill_tail_rows * p.chunk * per_query_key
    return prefill_attention_seconds(flops, tail, peak, eff)


def predict_mixed(parts: dict[str, Point], eff: Efficiency, flash: Efficiency, peak: Peak) -> float:
    """One layer of a mixed step, whole: its GEMMs at M = B + C with the fitted GEMM parameters,
    its two attention calls with the flash reference fits (torch's flash ran them), times the
    sustained factor."""
    kernels = sum(predict_gemm(p, eff, peak) for op, p in parts.items() if op in ("qkv_proj", "o_proj", "gate_up", "down"))
    kernels += predict_decode(parts["attn_decode"], flash, peak) + predict_prefill(parts["attn_prefill_chunk"], flash, peak)
    return eff.sustained_factor * kernels


# ----- split ---------------------------------------------------------------------------------------


def component_points(points: list[Point]) -> dict[str, tuple[list[Point], list[Point]]]:
    """(fit, hold-out) points per component, by the fixed rules in the module doc."""
    by = lambda pred: ([p for p in points if pred(p) and _is_fit(p)], [p for p in points if pred(p) and not _is_fit(p)])  # noqa: E731
    best: dict[tuple, Point] = {}
    for p in points:
        if p.part == "decode":
            key = (p.q_heads, p.kv_heads, p.head_dim, p.batch, p.kv_len)
            if key not in best or p.seconds < best[key].seconds:
                best[key] = p
    best_points = [replace(p, backend=f"best({p.backend})") for p in best.values()]
    decode_fit = [p for p in best_points if _is_fit(p)]
    return {
        "gemm": by(lambda p: p.part == "gemm"),
        "moe": by(lambda p: p.part == "moe"),
        "attn_decode": (decode_fit, [p for p in best_points if p not in decode_fit]),
        "attn_prefill": by(lambda p: p.part == "prefill" and p.backend == "cudnn"),
        "flash_prefill": by(lambda p: p.part == "prefill" and p.backend == "flash"),
        "flash_decode": by(lambda p: p.part == "decode" and p.backend == "flash"),
    }


def _is_fit(p: Point) -> bool:
    if p.part == "moe":
        return p.tp in MOE_FIT_TPS
    if p.part in ("decode", "prefill"):
        return bool(p.users & FIT_MODELS)
    if p.part == "mixed":
        return p.model in MIXED_FIT_MODELS
    return p.model in FIT_MODELS


def mixed_steps(points: list[Point]) -> tuple[list[dict[str, Point]], list[dict[str, Point]]]:
    """Mixed-step measurements grouped per step: (fit steps, held-out steps), each {op: point}."""
    steps: dict[tuple, dict[str, Point]] = defaultdict(dict)
    for p in points:
        if p.part == "mixed":
            steps[(p.model, p.tp, p.batch, p.kv_len, p.chunk, p.depth)][p.op] = p
    ordered = [steps[k] for k in sorted(steps)]
    return [s for s in ordered if _is_fit(s["step_total"])], [s for s in ordered if not _is_fit(s["step_total"])]


# ----- errors ------------------------------------------------------------------------------------


def errors(points: list[Point], predict: Callable[[Point], float]) -> HoldoutError:
    """Median and worst |predicted / measured - 1| over ``points``."""
    rel = [abs(predict(p) / p.seconds - 1.0) for p in points]
    worst = int(np.argmax(rel))
    return HoldoutError(points=len(points), median_abs_error=round(float(np.median(rel)), 4),
                        worst_abs_error=round(float(rel[worst]), 4), worst_point=points[worst].label())


def mixed_errors(steps: list[dict[str, Point]], eff: Efficiency, flash: Efficiency, peak: Peak) -> HoldoutError:
    totals = [s["step_total"] for s in steps]
    by_total = {id(s["step_total"]): s for s in steps}
    return errors(totals, lambda p: predict_mixed(by_total[id(p)], eff, flash, peak))


# ----- least squares on log(predicted / measured) ----------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    start: float
    low: float
    high: float


def fit_params(points: list[Point], predict: Callable[[Point, Efficiency, Peak], float], params: list[Param], base: Efficiency, peak: Peak, *, iterations: int = 300) -> dict[str, float]:
    """Levenberg-Marquardt on r_i = log(predicted_i / measured_i), each parameter kept inside its
    bounds by a logistic map. Deterministic: one start, fixed step sizes."""
    lo = np.array([p.low for p in params])
    hi = np.array([p.high for p in params])
    measured = np.array([pt.seconds for pt in points])

    def values(z: np.ndarray) -> np.ndarray:
        return lo + (hi - lo) / (1.0 + np.exp(-z))

    def residuals(z: np.ndarray) -> np.ndarray:
        eff = base.model_copy(update=dict(zip([p.name for p in params], values(z).tolist())))
        return np.log(np.array([predict(pt, eff, peak) for pt in points]) / measured)

    start = np.array([(p.start - p.low) / (p.high - p.low) for p in params])
    z = np.log(start / (1.0 - start))
    r = residuals(z)
    cost, damping = float(r @ r), 1e-3
    for _ in range(iterations):
        jac = np.empty((len(points), len(params)))
        for j in range(len(params)):
            step = 1e-6 * (1.0 + abs(z[j]))
            dz = z.copy()
            dz[j] += step
            jac[:, j] = (residuals(dz) - r) / step
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        while damping < 1e10:
            delta = np.linalg.solve(jtj + damping * np.diag(np.diag(jtj) + 1e-12), -jtr)
            trial = z + delta
            rt = residuals(trial)
            trial_cost = float(rt @ rt)
            if trial_cost < cost:
                gain = cost - trial_cost
                z, r, cost, damping, improved = trial, rt, trial_cost, max(damping / 3.0, 1e-9), True
                break
            damping *= 4.0
        if not improved or gain < 1e-12 * max(cost, 1e-30):
            break
    return {p.name: float(v) for p, v in zip(params, values(z))}


# ----- the components ----------------------------------------------------------------------------

GEMM_PARAMS = [
    Param("eff_mem", 0.8, 0.2, 0.98),
    Param("eff_gemm", 0.8, 0.2, 0.98),
    Param("gemm_large_m_ratio", 0.9, 0.5, 1.2),
    Param("gemm_fill_outputs", 2e5, 1.0, 1e7),
    Param("gemm_sharpness", 4.0, 1.0, 50.0),
    Param("gemm_latency_us", 7.0, 0.0, 50.0),
]
GEMM_FIXED = {"gemm_knee_tokens": 1024.0, "gemm_large_tokens": 16384.0}
MOE_PARAMS = [
    Param("moe_eff_mem", 0.8, 0.2, 0.98),
    Param("moe_eff_gemm", 0.8, 0.2, 0.98),
    Param("moe_tile_us", 0.03, 0.0, 1.0),
    Param("moe_sharpness", 4.0, 1.0, 50.0),
    Param("moe_latency_us", 10.0, 0.0, 100.0),
]
DECODE_PARAMS = [
    Param("eff_attn_decode", 0.8, 0.2, 0.98),
    Param("attn_decode_half_streams", 1.0, 0.0, 100.0),
    Param("attn_decode_latency_us", 10.0, 0.0, 100.0),
]
PREFILL_PARAMS = [
    Param("eff_attn_prefill", 0.5, 0.1, 0.98),
    Param("attn_prefill_tail_rows", 5000.0, 0.0, 1e5),
    Param("attn_prefill_latency_us", 10.0, 0.0, 200.0),
]

PREDICT = {"gemm": predict_gemm, "moe": predict_moe, "attn_decode": predict_decode, "attn_prefill": predict_prefill,
           "flash_prefill": predict_prefill, "flash_decode": predict_decode}
PARAMS = {"gemm": GEMM_PARAMS, "moe": MOE_PARAMS, "attn_decode": DECODE_PARAMS, "attn_prefill": PREFILL_PARAMS,
          "flash_prefill": PREFILL_PARAMS, "flash_decode": DECODE_PARAMS}
FORMS = {
    "gemm": "latency + smoothmax(bytes / (bw x eff_mem), 2MKN / (peak x eff_c(M)) x (1 + fill / (M x N))); eff_c = eff_gemm to M=1024, linear in log2 M to eff_gemm x ratio at 16384",
    "moe": "latency + smoothmax(experts x ceil(N/128) x tile_us, bytes / (bw x moe_eff_mem), flops / (peak x moe_eff_gemm))",
    "attn_decode": "latency + kv_bytes / (bw x eff x s / (s + s_half)), s = requests x KV heads",
    "attn_prefill": "latency + (flops + tail_rows x C x 2 (qk_dim + v_dim)) / (peak x eff)",
    "step": "sustained_factor x (sum of the layer's GEMMs + decode attention + prefill attention)",
}
KERNELS = {
    "gemm": "cuBLAS nvjet_sm90 through F.linear (what vLLM's unquantized linear layers call)",
    "moe": "torch._grouped_mm (CUTLASS sm90 grouped GEMM); vLLM runs its fused Triton MoE kernel instead",
    "attn_decode": "SDPA q_len 1 with GQA, CUDA graph replay; faster of torch flash (FA2) and cuDNN per point (cuDNN at every point)",
    "attn_prefill": "cuDNN sm90 wgmma flash fprop (FA3-class), causal chunk at depth 0",
    "step": "one layer of a mixed step (4 GEMMs + decode + prefill attention, torch flash) in one eager sequence",
    "flash_prefill": "torch flash (FlashAttention-2) with lower-right causal mask, chunk C at depth D",
    "flash_decode": "torch flash (FlashAttention-2, split-KV for small batches), CUDA graph replay",
}
SPLITS = {
    "gemm": "fit: Qwen2.5-32B + Llama-3.1-8B GEMMs (TP 1-8); hold-out: Qwen2.5-72B, Llama-3.1-70B, Qwen3-30B-A3B dense GEMMs",
    "moe": "fit: Qwen3-30B-A3B experts at TP 1 and 8; hold-out: TP 2 and 4",
    "attn_decode": "fit: head configurations of Qwen2.5-32B / Llama-3.1-8B; hold-out: 64/8, 32/4, 16/2, 8/1",
    "attn_prefill": "fit: head configurations of Qwen2.5-32B / Llama-3.1-8B; hold-out: 64/8, 32/4, 16/2, 8/1",
    "step": "fit: Qwen2.5-32B TP2 steps (sustained_factor only); hold-out: Llama-3.1-70B TP4 steps",
}


def fit_all(points: list[Point], peak: Peak) -> tuple[Efficiency, dict[str, ComponentFit], dict[str, ComponentFit]]:
    """Fit every component; returns the vLLM-facing parameters and the component records."""
    base = Efficiency.model_construct(**_neutral_defaults())
    comps = component_points(points)
    fitted: dict[str, dict[str, float]] = {}
    records: dict[str, ComponentFit] = {}
    for name in ("gemm", "moe", "attn_decode", "attn_prefill", "flash_prefill", "flash_decode"):
        fit, hold = comps[name]
        values = _rounded(fit_params(fit, PREDICT[name], PARAMS[name], base, peak))  # errors are those of the stored values
        if name == "gemm":
            values.update(GEMM_FIXED)
        fitted[name] = values
        eff = base.model_copy(update=values)
        pred = lambda p, eff=eff, f=PREDICT[name]: f(p, eff, peak)  # noqa: E731
        same_as = name.replace("flash_", "attn_")  # a reference kernel shares the vLLM component's form and split
        records[name] = ComponentFit(kernel=KERNELS[name], form=FORMS[same_as], fit_points=len(fit), split=SPLITS[same_as],
                                     values=values, fit=errors(fit, pred), holdout=errors(hold, pred))
    eff = base.model_copy(update={k: v for n in ("gemm", "moe", "attn_decode", "attn_prefill") for k, v in fitted[n].items()})
    flash = eff.model_copy(update=fitted["flash_prefill"] | fitted["flash_decode"])
    fit_steps, hold_steps = mixed_steps(points)
    ratios = [s["step_total"].seconds / sum(p.seconds for op, p in s.items() if op != "step_total") for s in fit_steps]
    eff = eff.model_copy(update={"sustained_factor": round(float(np.median(ratios)), 4)})
    flash = flash.model_copy(update={"sustained_factor": eff.sustained_factor})
    records["step"] = ComponentFit(kernel=KERNELS["step"], form=FORMS["step"], fit_points=len(fit_steps), split=SPLITS["step"],
                                   values={"sustained_factor": eff.sustained_factor}, fit=mixed_errors(fit_steps, eff, flash, peak),
                                   holdout=mixed_errors(hold_steps, eff, flash, peak),
                                   notes="sustained_factor = median over the fit steps of (whole layer) / (sum of its parts timed alone)")
    vllm = {n: records[n] for n in ("gemm", "moe", "attn_decode", "attn_prefill", "step")}
    reference = {n: records[n] for n in ("flash_prefill", "flash_decode")}
    return eff, vllm, reference


def _rounded(values: dict[str, float]) -> dict[str, float]:
    """Five significant digits: what the YAML stores."""
    return {k: float(f"{v:.5g}") for k, v in values.items()}


def _neutral_defaults() -> dict[str, float]:
    """Starting values for every measured field (each component's fit overwrites its own)."""
    start = {p.name: p.start for group in (GEMM_PARAMS, MOE_PARAMS, DECODE_PARAMS, PREFILL_PARAMS) for p in group}
    return {**start, **GEMM_FIXED, "sustained_factor": 1.0, **{f: Efficiency.model_fields[f].default for f in
            ("eff_comm", "allreduce_latency_us", "step_overhead_ms", "per_seq_overhead_us", "eager_launch_us_per_layer")}}


def evaluate(calibration: KernelCalibration, points: list[Point], peak: Peak) -> dict[str, HoldoutError]:
    """Hold-out errors of a stored calibration, recomputed from the measured points."""
    eff = Efficiency(**calibration.values())
    flash = eff.model_copy(update=calibration.reference["flash_prefill"].values | calibration.reference["flash_decode"].values)
    comps = component_points(points)
    out = {name: errors(comps[name][1], lambda p, f=PREDICT[name]: f(p, eff, peak)) for name in ("gemm", "moe", "attn_decode", "attn_prefill")}
    out["flash_prefill"] = errors(comps["flash_prefill"][1], lambda p: predict_prefill(p, flash, peak))
    out["flash_decode"] = errors(comps["flash_decode"][1], lambda p: predict_decode(p, flash, peak))
    out["step"] = mixed_errors(mixed_steps(points)[1], eff, flash, peak)
    return out


# ----- alternatives (why the forms have the terms they have) -------------------------------------


def alternatives(points: list[Point], peak: Peak) -> list[tuple[str, str, HoldoutError, HoldoutError]]:
    """Hold-out errors of simpler forms and of the pre-calibration constants, for the README."""
    comps = component_points(points)
    base = Efficiency.model_construct(**_neutral_defaults())
    rows = []

    def run(component: str, label: str, params: list[Param], fixed: dict[str, float], hold: list[Point] | None = None, fit: list[Point] | None = None) -> None:
        f, h = comps[component]
        f, h = fit or f, hold or h
        b = base.model_copy(update={**GEMM_FIXED, **fixed})
        values = fit_params(f, PREDICT[component], params, b, peak) if params else {}
        eff = b.model_copy(update=values)
        pred = lambda p: PREDICT[component](p, eff, peak)  # noqa: E731
        rows.append((component, label, errors(f, pred), errors(h, pred)))

    old = {"eff_mem": 0.8, "eff_gemm": 0.7, "gemm_large_m_ratio": 1.0, "gemm_fill_outputs": 0.0, "gemm_sharpness": 50.0, "gemm_latency_us": 0.0}
    run("gemm", "before: max(bytes/(bw x 0.8), flops/(peak x 0.7)), no latency", [], old)
    keep = lambda names: [p for p in GEMM_PARAMS if p.name in names]  # noqa: E731
    run("gemm", "roofline max, fitted efficiencies", keep({"eff_mem", "eff_gemm"}), old)
    run("gemm", "+ kernel latency", keep({"eff_mem", "eff_gemm", "gemm_latency_us"}), old)
    run("gemm", "+ smooth crossover", keep({"eff_mem", "eff_gemm", "gemm_latency_us", "gemm_sharpness"}), old)
    run("gemm", "+ efficiency falling with M", keep({"eff_mem", "eff_gemm", "gemm_latency_us", "gemm_sharpness", "gemm_large_m_ratio"}), old)
    run("gemm", "+ few-output-tiles term (chosen)", GEMM_PARAMS, old)
    run("gemm", "chosen without the fall with M", [p for p in GEMM_PARAMS if p.name != "gemm_large_m_ratio"], old)
    run("attn_decode", "before: kv_bytes/(bw x 0.6)", [], {"eff_attn_decode": 0.6, "attn_decode_half_streams": 0.0, "attn_decode_latency_us": 0.0})
    run("attn_decode", "bandwidth + latency", [p for p in DECODE_PARAMS if p.name != "attn_decode_half_streams"], {"attn_decode_half_streams": 0.0})
    run("attn_decode", "+ parallel streams (chosen)", DECODE_PARAMS, {})
    run("attn_prefill", "before: flops/(peak x 0.5)", [], {"eff_attn_prefill": 0.5, "attn_prefill_tail_rows": 0.0, "attn_prefill_latency_us": 0.0})
    run("attn_prefill", "flops + latency", [p for p in PREFILL_PARAMS if p.name != "attn_prefill_tail_rows"], {"attn_prefill_tail_rows": 0.0})
    run("attn_prefill", "+ causal tail (chosen)", PREFILL_PARAMS, {})
    run("flash_prefill", "flash: flops + latency", [p for p in PREFILL_PARAMS if p.name != "attn_prefill_tail_rows"], {"attn_prefill_tail_rows": 0.0})
    run("flash_prefill", "flash: + causal tail (chosen)", PREFILL_PARAMS, {})
    moe = [p for p in points if p.part == "moe"]
    run("moe", "split TP 1+8 / 2+4 (chosen)", MOE_PARAMS, {})
    run("moe", "split TP 1+4 / 2+8 (extrapolates to TP 8)", MOE_PARAMS, {}, fit=[p for p in moe if p.tp in (1, 4)], hold=[p for p in moe if p.tp in (2, 8)])
    run("moe", "split every other M", MOE_PARAMS, {}, fit=[p for p in moe if int(math.log2(p.m)) % 2 == 0], hold=[p for p in moe if int(math.log2(p.m)) % 2 == 1])
    return rows


# ----- output --------------------------------------------------------------------------------------


def software() -> dict[str, str]:
    meta = json.loads((DATA / "nvidia-h200.meta.json").read_text(encoding="utf-8"))
    cudnn = meta.get("cudnn")
    return {
        "torch": str(meta.get("torch")),
        "cuda": str(meta.get("torch_cuda")),
        "cudnn": f"{cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}" if isinstance(cudnn, int) else str(cudnn),
        "driver": str(meta.get("nvidia_smi_before", {}).get("driver_version")),
        "gpu_reported": str(meta.get("gpu")),
    }


def build_calibration(points: list[Point], peak: Peak) -> KernelCalibration:
    _, vllm, reference = fit_all(points, peak)
    meta = [json.loads((DATA / name.replace(".csv", ".meta.json")).read_text(encoding="utf-8")) for name in SWEEPS]
    return KernelCalibration(
        gpu=get_gpu(GPU).name,
        measured_utc=meta[0]["date_utc"],
        fitted=dt.date.today().isoformat(),
        sources=[f"benchmarks/gpu/data/{name}" for name in SWEEPS],
        script="benchmarks/gpu/fit_efficiency.py",
        software=software(),
        bars=BARS,
        components=vllm,
        reference=reference,
        notes=[
            "Times are the mean over the two sweeps of each sweep's median; errors are |predicted / measured - 1|.",
            "These are torch's kernels, not vLLM's: vLLM's scheduling, sampling, all-reduce and input preparation are separate, sourced terms of the step model.",
            "Prefill attention: the parameters are cuDNN's sm90 kernel at depth 0; at depth the step model applies the same formula (FLOPs at depth plus a causal tail that does not grow with depth), which the flash reference fit checks over depths 0-126K. At depth 0 cuDNN runs chunks ~1.9x faster than flash.",
            "Latencies (µs) and the tile/stream constants are the H200's; on other GPUs they are kept as they are, only efficiencies are applied to that GPU's datasheet peak and bandwidth.",
        ],
    )


def table(cal: KernelCalibration) -> str:
    lines = ["| component | kernel | fit points | hold-out points | hold-out median abs error | hold-out worst abs error | worst hold-out point | fit median / worst |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, comp in list(cal.components.items()) + [(f"{n} (reference)", c) for n, c in cal.reference.items()]:
        h, f = comp.holdout, comp.fit
        lines.append(f"| {name} | {comp.kernel.split(';')[0].split(' (')[0]} | {comp.fit_points} | {h.points} | {100 * h.median_abs_error:.1f}% | "
                     f"{100 * h.worst_abs_error:.1f}% | {h.worst_point} | {100 * f.median_abs_error:.1f}% / {100 * f.worst_abs_error:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the fit as {OUTPUT.relative_to(REPO)}")
    parser.add_argument("--report-alternatives", action="store_true", help="also fit simpler forms and other splits (README table)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    points = load_points()
    peak = h200_peak()
    cal = build_calibration(points, peak)
    seconds = time.perf_counter() - t0
    print(table(cal))
    for name, comp in cal.components.items():
        print(f"{name}: {comp.values}")
    for name, comp in cal.reference.items():
        print(f"{name} (reference): {comp.values}")
    if args.report_alternatives:
        print("\n| component | form | fit median / worst | hold-out median / worst |\n| --- | --- | --- | --- |")
        for comp, label, f, h in alternatives(points, peak):
            print(f"| {comp} | {label} | {100 * f.median_abs_error:.1f}% / {100 * f.worst_abs_error:.1f}% | "
                  f"{100 * h.median_abs_error:.1f}% / {100 * h.worst_abs_error:.1f}% |")
    if args.write:
        OUTPUT.write_text(render_yaml(cal), encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(REPO)}")
    summary = {name: {"median": c.holdout.median_abs_error, "worst": c.holdout.worst_abs_error} for name, c in {**cal.components, **cal.reference}.items()}
    print(json.dumps({"bench": "fit_efficiency", "points": len(points), "seconds": round(seconds, 2), "holdout": summary}))


def render_yaml(cal: KernelCalibration) -> str:
    header = (
        "# Kernel calibration of the step-time model, measured on one H200 (issue 8).\n"
        "# Written by benchmarks/gpu/fit_efficiency.py --write from the sweeps it names; do not edit by hand.\n"
        "# Loaded by vllm_advisor.perf.efficiency as the defaults of every measured Efficiency field.\n"
    )
    return header + yaml.safe_dump(cal.model_dump(), sort_keys=False, allow_unicode=True, width=160)


if __name__ == "__main__":
    main()

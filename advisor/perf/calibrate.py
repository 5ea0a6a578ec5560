"""Calibration to the user: fit the step-time efficiencies to what the user measured.

The efficiency factors are sourced guesses until measured. When the user's own load points exist,
two factors are fitted, each a multiplier on a pair of efficiencies, every efficiency clipped to
physical bounds on its own (no kernel beats the datasheet; none runs below a fifth of it on a
healthy server):

- ``decode_scale`` multiplies ``eff_mem`` and ``eff_attn_decode``: how close weight and KV reads
  come to peak memory bandwidth. It decides TPOT and single-stream speed.
- ``prefill_scale`` multiplies ``eff_gemm`` and ``eff_attn_prefill``: how close prefill comes to
  peak FLOP/s. It decides TTFT of long prompts and the cost of steps that carry prefill chunks.

The objective is the mean squared log-ratio of predicted to measured over every figure both sides
have (TTFT, TPOT, ITL, per-request speeds, throughput), at every load point. The fit reports its
error before and after, and every figure's residual: a figure the model cannot reach within the
bounds is evidence about that figure (a different definition, a warm prefix cache, a client gate),
not a reason to leave physics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..schema import BenchmarkRun
from .predict import EngineModel, LoadPoint, load_point_of, predict_load_point
from .retime import Retimer, can_retime
from .step_time import Efficiency

#: Bounds of every fitted efficiency (fraction of datasheet peak).
EFFICIENCY_BOUNDS = (0.2, 0.95)

#: A measured figure further than this factor from the best fit is set aside as unreachable.
UNREACHABLE_RATIO = 2.5

#: Figures compared, with how to read them from a BenchmarkRun.
FIGURES: dict[str, Callable[[BenchmarkRun], float | None]] = {
    "ttft_ms.mean": lambda r: r.ttft_ms.mean if r.ttft_ms else None,
    "ttft_ms.p50": lambda r: r.ttft_ms.pct(50) if r.ttft_ms else None,
    "tpot_ms.mean": lambda r: r.tpot_ms.mean if r.tpot_ms else None,
    "tpot_ms.p50": lambda r: r.tpot_ms.pct(50) if r.tpot_ms else None,
    "itl_ms.mean": lambda r: r.itl_ms.mean if r.itl_ms else None,
    "e2e_ms.mean": lambda r: r.e2e_ms.mean if r.e2e_ms else None,
    "request_decode_tok_s.mean": lambda r: r.request_decode_tok_s.mean if r.request_decode_tok_s else None,
    "request_output_tok_s.mean": lambda r: r.request_output_tok_s.mean if r.request_output_tok_s else None,
    "output_throughput_tok_s": lambda r: r.output_throughput_tok_s,
}


@dataclass
class Residual:
    load: str
    figure: str
    measured: float
    predicted: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured


@dataclass
class CalibrationResult:
    calibrated: bool
    decode_scale: float = 1.0
    prefill_scale: float = 1.0
    efficiency: Efficiency = field(default_factory=Efficiency)
    rms_log_error_before: float | None = None
    rms_log_error_after: float | None = None
    residuals: list[Residual] = field(default_factory=list)
    unreachable: list[Residual] = field(default_factory=list)
    at_bound: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "calibrated": self.calibrated,
            "decode_scale": self.decode_scale,
            "prefill_scale": self.prefill_scale,
            "efficiency": self.efficiency.model_dump(),
            "rms_log_error_before": self.rms_log_error_before,
            "rms_log_error_after": self.rms_log_error_after,
            "at_bound": self.at_bound,
            "unreachable": [
                {"load": r.load, "figure": r.figure, "measured": r.measured, "predicted": r.predicted, "ratio": r.ratio}
                for r in self.unreachable
            ],
            "residuals": [
                {"load": r.load, "figure": r.figure, "measured": r.measured, "predicted": r.predicted, "ratio": r.ratio}
                for r in self.residuals
            ],
            "notes": self.notes,
        }


def _point_of(run: BenchmarkRun) -> LoadPoint | None:
    point = load_point_of(run)
    return None if point is None else LoadPoint(concurrency=point.concurrency, request_rate=point.request_rate)


def scaled_efficiency(base: Efficiency, decode_scale: float, prefill_scale: float) -> Efficiency:
    lo, hi = EFFICIENCY_BOUNDS
    clip = lambda x: min(hi, max(lo, x))  # noqa: E731
    return base.model_copy(
        update={
            "eff_mem": clip(base.eff_mem * decode_scale),
            "eff_attn_decode": clip(base.eff_attn_decode * decode_scale),
            "eff_gemm": clip(base.eff_gemm * prefill_scale),
            "eff_attn_prefill": clip(base.eff_attn_prefill * prefill_scale),
        }
    )


def _scale_bounds(base: Efficiency, names: tuple[str, str]) -> tuple[float, float]:
    """The range of a scale over which at least one of its pair can still move. Each efficiency is
    clipped to the physical bounds on its own (``scaled_efficiency``): the measured decode-attention
    efficiency sits at ~0.9 of peak bandwidth, and it must not stop the GEMM weight read (~0.7) from
    being fitted."""
    lo, hi = EFFICIENCY_BOUNDS
    values = [getattr(base, n) for n in names]
    return min(lo / v for v in values), max(hi / v for v in values)


def calibrate(
    engine: EngineModel,
    measured: list[BenchmarkRun],
    *,
    input_len: int,
    output_len: int,
    num_prompts: int | None = None,
    rounds: int = 2,
    evaluations_per_search: int = 10,
) -> CalibrationResult:
    """Fit ``decode_scale`` and ``prefill_scale`` to the measured load points (see module doc)."""
    pairs = [(run, _point_of(run)) for run in measured]
    pairs = [(run, p) for run, p in pairs if p is not None and any(get(run) for get in FIGURES.values())]
    base = engine.step.eff
    if not pairs:
        return CalibrationResult(calibrated=False, efficiency=base, notes=["no measured load point with a concurrency or rate and a comparable figure: uncalibrated"])

    def simulate_point(p: LoadPoint):
        return predict_load_point(engine, p, input_len=input_len, output_len=output_len, num_prompts=num_prompts or min(3 * (p.concurrency or 8), 60))

    # A closed loop's schedule does not depend on step times: simulate it once and re-time it under
    # each efficiency tried (perf.retime). Open loops are simulated again at every evaluation.
    retimers: dict[LoadPoint, Retimer] = {}
    for _, p in pairs:
        if p.concurrency and p not in retimers:
            _, result = simulate_point(p)
            if can_retime(result, engine.step):
                retimers[p] = Retimer(result, engine.step, replicas=engine.replicas)

    def predict_all(eff: Efficiency) -> list[tuple[BenchmarkRun, dict[str, float | None]]]:
        engine.step.eff = eff
        try:
            out = []
            for run, p in pairs:
                if p in retimers:
                    out.append((run, retimers[p].figures()))
                else:
                    pred = simulate_point(p)[0]
                    out.append((run, {name: get(pred) for name, get in FIGURES.items()}))
            return out
        finally:
            engine.step.eff = base

    excluded: set[tuple[str, str]] = set()

    def residuals(eff: Efficiency, include_excluded: bool = False) -> list[Residual]:
        out = []
        for run, pred in predict_all(eff):
            for name, get in FIGURES.items():
                m, q = get(run), pred.get(name)
                key = (_point_of(run).label, name)
                if m and q and m > 0 and q > 0 and (include_excluded or key not in excluded):
                    out.append(Residual(key[0], name, m, q))
        return out

    def loss(res: list[Residual]) -> float:
        return math.sqrt(sum(math.log(r.ratio) ** 2 for r in res) / len(res)) if res else math.inf

    cache: dict[tuple[float, float], float] = {}

    def objective(d: float, p: float) -> float:
        key = (round(d, 4), round(p, 4))
        if key not in cache:
            cache[key] = loss(residuals(scaled_efficiency(base, d, p)))
        return cache[key]

    before = residuals(base)
    loss_before = loss(before)
    if not before:
        return CalibrationResult(calibrated=False, efficiency=base, notes=["the measured and predicted load points share no figure: uncalibrated"])
    d_lo, d_hi = _scale_bounds(base, ("eff_mem", "eff_attn_decode"))
    p_lo, p_hi = _scale_bounds(base, ("eff_gemm", "eff_attn_prefill"))
    def search() -> tuple[float, float]:
        d, p = 1.0, 1.0
        for _ in range(rounds):
            d = _golden(lambda x: objective(x, p), d_lo, d_hi, evaluations_per_search)
            p = _golden(lambda x: objective(d, x), p_lo, p_hi, evaluations_per_search)
        # A coarse search can land beside the start: never return a fit worse than no fit.
        return (d, p) if objective(d, p) <= objective(1.0, 1.0) else (1.0, 1.0)

    d, p = search()
    # Figures still off by more than UNREACHABLE_RATIO at the best fit cannot be produced by this
    # hardware as modelled: set them aside (they are evidence, reported below) and fit the rest.
    far = [r for r in residuals(scaled_efficiency(base, d, p)) if abs(math.log(r.ratio)) > math.log(UNREACHABLE_RATIO)]
    if far and len(far) < len(before):
        excluded.update((r.load, r.figure) for r in far)
        cache.clear()
        d, p = search()
    eff = scaled_efficiency(base, d, p)
    everything = residuals(eff, include_excluded=True)
    after = [r for r in everything if (r.load, r.figure) not in excluded]
    result = CalibrationResult(
        calibrated=True,
        decode_scale=d,
        prefill_scale=p,
        efficiency=eff,
        rms_log_error_before=loss_before if not excluded else loss([r for r in before if (r.load, r.figure) not in excluded]),
        rms_log_error_after=loss(after),
        residuals=after,
        unreachable=[r for r in everything if (r.load, r.figure) in excluded],
    )
    for name, value, lo, hi in (("decode_scale", d, d_lo, d_hi), ("prefill_scale", p, p_lo, p_hi)):
        if value <= lo * 1.02 or value >= hi * 0.98:
            result.at_bound.append(name)
    if result.at_bound:
        result.notes.append(
            f"{', '.join(result.at_bound)} hit the physical bounds: some measured figures are beyond what this hardware can do "
            "as modelled; read the residuals"
        )
    if result.unreachable:
        listed = ", ".join(f"{r.load} {r.figure} (measured {r.measured:g}, model {r.predicted:.3g})" for r in result.unreachable)
        result.notes.append(
            f"{len(result.unreachable)} measured figure(s) stayed more than {UNREACHABLE_RATIO:g}x from the best fit within "
            f"physical bounds and were left out of it (evidence about those figures, not the hardware): {listed}"
        )
    result.notes.append(
        f"fitted on {len(after)} figure(s) at {len(pairs)} load point(s): RMS log error {result.rms_log_error_before:.2f} -> {result.rms_log_error_after:.2f}"
    )
    return result


def _golden(f: Callable[[float], float], lo: float, hi: float, evaluations: int) -> float:
    """Minimise a unimodal-ish f on [lo, hi] in log space (scales are ratios)."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(max(0, evaluations - 2)):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp(c if fc <= fd else d)

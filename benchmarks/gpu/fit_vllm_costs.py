#!/usr/bin/env python3
"""Fit vLLM's own step costs (what torch's kernels cannot show) to end-to-end runs of a real server.

Eight parameters of :class:`advisor.perf.efficiency.Efficiency`, everything else (kernel parameters
measured with torch on an H200, the scheduler simulation, the memory model) left as shipped:

- ``decode_graph_factor``: decode-only steps run as CUDA graphs of torch.compile'd kernels;
- ``mixed_step_factor``: steps that carry prefill tokens (piecewise graphs, FA3 varlen attention);
- ``step_overhead_ms``: host time per step not hidden behind the GPU;
- ``per_seq_overhead_us``: host time per scheduled request per step;
- ``prefill_request_overhead_ms``: host time per request whose prefill starts in a step (intake,
  KV allocation, first-token output), charged as step time;
- ``intake_delay_ms``: time from a request's send to the moment the scheduler sees it (HTTP, the API
  server, the engine-core queue), spent off the GPU while other requests' steps run. Added in session
  19: without it a closed loop's replacements were admitted in the very next step, which staggers
  the waves of a real server (RESULTS.md, "intake delay").
- ``moe_compute_factor`` / ``moe_memory_factor``: vLLM's fused MoE kernel against the grouped GEMM
  torch's kernel was measured at (its compute term; its per-tile and byte terms). Session 25,
  ``--stages moe``: fitted on the engine steps of the MoE servers ``split.json`` names ``moe_fit``.

Objective: squared log-ratios predicted / measured summed over the fit runs' load points, in two
stages: (A) the decode parameters (graph factor, host time per step and per request) on TPOT p50
and ITL p50; (B) the prefill parameters (mixed factor, host time per starting prefill, intake delay) on TTFT p50/p90,
E2E p50 and output throughput with A fixed; A and B repeated once. (A first single-stage fit of all
five on all figures traded the decode factor against the step overhead, 0.46 x and 2.4 ms, and
was dropped for this staged one before any hold-out figure was used to choose.) Which runs are
fitted and which are held out is read from ``split.json`` in the run folder (written before this
script ran). Nelder-Mead on log-factors and non-negative overheads.

    python benchmarks/gpu/fit_vllm_costs.py benchmarks/gpu/runs [--stages decode] [--write]

``runs``: a folder of run folders with its ``split.json`` (fit / other plan names; every other run is
held out). Session 23 refitted stage A only (``--stages decode``) on the split of
``benchmarks/gpu/runs/split.json``: the decode terms were off at large running batches on H100, and the
two-stage refit on the same runs moved the prefill terms so that the held-out TTFT got worse
(median 8.7% -> 16.1%) while stage A alone improved TPOT, ITL, E2E and throughput (RESULTS.md).

Session 24 refitted the mixed-step factor and the host time per starting prefill on engine steps instead
(``--stages mixed``): every fit server's steps read back from its clients' token times (``step_trace.py``),
windows of consecutive steps compared modelled against measured, so these two terms no longer trade
against the scheduler's waves and the front end in end-to-end figures (RESULTS.md, "Steps that carry a
new prompt").

``--write`` stores the values, the split and the fit / hold-out median errors per figure in
``advisor/perf/catalog/vllm-h200.yaml`` (loaded as the Efficiency defaults).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import minimize

from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.validation import card_name, find_result_files, read_results, read_split, validate_file, validate_runs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_predictions import BEFORE_SESSION_23, BEFORE_SESSION_24  # noqa: E402 - the terms shipped before sessions 23 and 24
from step_trace import WINDOW  # noqa: E402

FIGS = ("ttft_p50", "tpot_p50", "itl_p50", "e2e_p50", "output_throughput")
DECODE_FIGS = ("tpot_p50", "itl_p50")
PREFILL_FIGS = ("ttft_p50", "ttft_p90", "e2e_p50", "output_throughput")
ENGINE = (
    "decode_graph_factor",
    "mixed_step_factor",
    "step_overhead_ms",
    "per_seq_overhead_us",
    "prefill_request_overhead_ms",
    "intake_delay_ms",
    "moe_compute_factor",
    "moe_memory_factor",
)
#: Stage A's values of the first fit (one H200 server, 2026-12-03; check_predictions' terms before
#: session 23): the start of ``--stages decode``.
FIRST_FIT = {k: BEFORE_SESSION_23[k] for k in ("decode_graph_factor", "step_overhead_ms", "per_seq_overhead_us")}
CATALOG = Path(__file__).resolve().parents[2] / "advisor" / "perf" / "catalog" / "vllm-h200.yaml"


def params_to_eff(x: np.ndarray) -> Efficiency:
    return Efficiency().model_copy(
        update={
            "decode_graph_factor": float(math.exp(x[0])),
            "mixed_step_factor": float(math.exp(x[1])),
            "step_overhead_ms": float(abs(x[2])),
            "per_seq_overhead_us": float(abs(x[3])),
            "prefill_request_overhead_ms": float(abs(x[4])),
            "intake_delay_ms": float(abs(x[5])),
            "moe_compute_factor": float(math.exp(x[6])),
            "moe_memory_factor": float(math.exp(x[7])),
        }
    )


def eff_to_params(eff: Efficiency) -> np.ndarray:
    """The optimiser's vector for ``eff``'s engine terms (params_to_eff's inverse): factors as logs."""
    return np.array([math.log(eff.decode_graph_factor), math.log(eff.mixed_step_factor), eff.step_overhead_ms, eff.per_seq_overhead_us,
                     eff.prefill_request_overhead_ms, eff.intake_delay_ms, math.log(eff.moe_compute_factor), math.log(eff.moe_memory_factor)])


def card_of(result: dict) -> str:
    """The card a run's results name, without the vendor's prefix ("H100 80GB HBM3")."""
    return card_name(result).replace("NVIDIA ", "") or "?"


def fit_files(runs: Path, fit_runs) -> dict[Path, dict]:
    """The results of the servers ``split.json`` names for fitting, by file: each file read once here
    and kept (the loss re-validates them hundreds of times; the step windows and the catalog read them)."""
    results = {f: read_results(f) for f in find_result_files(runs)}
    return {f: r for f, r in results.items() if r["plan"]["name"] in fit_runs}


def step_windows(results: dict[Path, dict]) -> list[tuple]:
    """Per fit server (``fit_files``' results by file): (engine model, cost plan of its windows' steps,
    measured seconds per window), the windows read back from the clients' token times (step_trace.py)."""
    from step_trace import windows_of

    from vllm_advisor.perf.predict import build_engine_model
    from vllm_advisor.perf.validation import deployment_of

    out = []
    for f, result in results.items():
        dep, args = deployment_of(result, f)
        points = [p for p in result["points"] if p.get("requests") and not p.get("skipped")]
        engine = build_engine_model(dep, args, needed_model_len=max(p["spec"]["input_len"] + p["spec"]["output_len"] for p in points))
        windows = [w for p in points for w in windows_of(p, engine.config.max_num_batched_tokens)]
        if windows:
            out.append((engine, engine.step.cost_plan([b for w in windows for b in w.batches]), np.array([w.seconds for w in windows])))
    return out


def window_seconds(engine, plan, windows: int, eff: Efficiency) -> np.ndarray:
    """Modelled seconds of each window of a cost plan under ``eff`` (the engine keeps its own terms)."""
    own = engine.step.eff
    engine.step.eff = eff
    try:
        return plan().reshape(windows, -1).sum(axis=1)
    finally:
        engine.step.eff = own


def window_loss(windows: list[tuple], update: dict[str, float]) -> float:
    """Mean over the servers of the mean squared log-ratio modelled / measured window time, with the
    engine terms in ``update`` (every other term as shipped): each server weighted alike."""
    per_server = []
    for engine, plan, measured in windows:
        eff = engine.step.eff.model_copy(update=update)
        per_server.append(float(np.mean(np.log(window_seconds(engine, plan, len(measured), eff) / measured) ** 2)))
    return float(np.mean(per_server))


def moe_loss(y: np.ndarray, windows: list[tuple]) -> float:
    """The window loss with vLLM's MoE kernel factors exp(y[0]) (compute) and exp(y[1]) (per-tile and bytes)."""
    return window_loss(windows, {"moe_compute_factor": float(math.exp(y[0])), "moe_memory_factor": float(math.exp(y[1]))})


def mixed_loss(y: np.ndarray, windows: list[tuple]) -> float:
    """The window loss with the mixed-step factor exp(y[0]) and |y[1]| ms per starting prefill."""
    return window_loss(windows, {"mixed_step_factor": float(math.exp(y[0])), "prefill_request_overhead_ms": float(abs(y[1]))})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument(
        "--stages", choices=("both", "decode", "mixed", "moe"), default="both",
        help="decode: fit stage A only, the prefill terms kept as shipped; mixed: the mixed-step factor and the host time per starting prefill on the engine steps read back from the clients' token times (step_trace.py), every other term as shipped; "
        "moe: vLLM's MoE kernel factors on the engine steps of split.json's moe_fit servers, every other term as shipped",
    )
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    split = read_split(args.runs)
    fit_runs, rule = split.fit, split.rule
    if not fit_runs:
        raise SystemExit(f"{args.runs}: no split.json with fit runs")
    results = fit_files(args.runs, fit_runs)
    files = list(results)

    def loss(x: np.ndarray, figs: tuple[str, ...]) -> float:
        eff = params_to_eff(x)
        total = 0.0
        for f in files:
            pts, _, _ = validate_file(f, lambda _n: "fit", eff, result=results[f])
            for p in pts:
                for fig in p.figures:
                    if fig.figure in figs and fig.measured and fig.predicted:
                        total += math.log(fig.predicted / fig.measured) ** 2
        return total

    # Two stages, each on the figures its parameters decide (fixed before fitting):
    #  A. the decode step (graph factor, host time per step and per request) on TPOT p50 and ITL p50;
    #  B. steps with prefill (mixed factor, host time per starting prefill) on TTFT p50/p90, E2E p50 and
    #     output throughput, with A's values fixed. Then A once more with B's values fixed.
    shipped = Efficiency()
    x = np.array([math.log(0.7), math.log(1.15), 0.9, 20.0, 3.0, 20.0, math.log(shipped.moe_compute_factor), math.log(shipped.moe_memory_factor)])
    if args.stages == "decode":  # stage A from the first fit's values (so a rerun gives the same fit); B's terms stay as shipped
        x = eff_to_params(shipped.model_copy(update=FIRST_FIT))
    t = time.time()
    print(f"shipped-before loss (all figures) {loss(np.array([0.0, 0.0, 2.0, 10.0, 0.0, 0.0, 0.0, 0.0]), FIGS):.4f}")
    nfev = 0
    if args.stages in ("mixed", "moe"):
        x = eff_to_params(shipped)
    if args.stages == "moe":
        if not split.moe_fit:
            raise SystemExit(f"{args.runs}: split.json names no moe_fit servers")
        windows = step_windows(fit_files(args.runs, split.moe_fit))
        print(f"  {sum(len(m) for _, _, m in windows)} windows of {WINDOW} steps from {len(windows)} MoE fit servers; step loss as shipped {moe_loss(x[[6, 7]], windows):.5f}")
        m = minimize(lambda y: moe_loss(y, windows), np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-7, "maxiter": 400})
        x[[6, 7]] = m.x
        nfev += m.nfev
        print(f"  step loss {m.fun:.5f}: {params_to_eff(x).model_dump(include=set(ENGINE))}")
    if args.stages == "mixed":
        windows = step_windows(results)
        print(f"  {sum(len(m) for _, _, m in windows)} windows of {WINDOW} steps from {len(windows)} fit servers; step loss as shipped {mixed_loss(x[[1, 4]], windows):.5f}")
        m = minimize(lambda y: mixed_loss(y, windows), x[[1, 4]], method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-7, "maxiter": 400})
        x[[1, 4]] = m.x
        nfev += m.nfev
        print(f"  step loss {m.fun:.5f}: {params_to_eff(x).model_dump(include=set(ENGINE))}")
    for _ in range(0 if args.stages in ("mixed", "moe") else 1 if args.stages == "decode" else 2):
        a = minimize(lambda y: loss(np.array([y[0], x[1], y[1], y[2], x[4], x[5], x[6], x[7]]), DECODE_FIGS), x[[0, 2, 3]], method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-4, "maxiter": 200})
        x[[0, 2, 3]] = a.x
        if args.stages == "decode":
            nfev += a.nfev
            print(f"  stage A loss {a.fun:.4f}: {params_to_eff(x).model_dump(include=set(ENGINE))}")
            break
        b = minimize(lambda y: loss(np.array([x[0], y[0], x[2], x[3], y[1], y[2], x[6], x[7]]), PREFILL_FIGS), x[[1, 4, 5]], method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-4, "maxiter": 300})
        x[[1, 4, 5]] = b.x
        nfev += a.nfev + b.nfev
        print(f"  stage A loss {a.fun:.4f}, stage B loss {b.fun:.4f}: {params_to_eff(x).model_dump(include=set(ENGINE))}")

    class _R:
        pass

    res = _R()
    res.x, res.nfev, res.fun = x, nfev, loss(x, FIGS)
    eff = params_to_eff(res.x)
    values = {k: float(f"{getattr(eff, k):.6g}") for k in ENGINE}
    print(f"fit in {time.time() - t:.0f}s, {res.nfev} evaluations, loss {res.fun:.4f}: {values}")
    report = validate_runs(args.runs, efficiency=eff)
    errs: dict[str, dict[str, float]] = {"fit": {}, "holdout": {}}
    for s in report.summary:
        if s.split in errs:
            errs[s.split][s.figure] = round(s.median_abs_error, 4)
    for part, d in errs.items():
        print(part, {k: f"{v * 100:.1f}%" for k, v in d.items()})
    if args.write:
        holdout = sorted({p.run for p in report.points if p.split == "holdout"})
        first = results[files[0]]
        doc = {
            "engine": f"vLLM {first['env'].get('vllm', '?')} (V1 scheduler, FA3, CUDA graphs, torch.compile; dummy weights)",
            "gpu": ", ".join(sorted({card_of(r) for r in results.values()}, reverse=True)),
            "measured_utc": first["env"].get("utc", "?"),
            "fitted": dt.date.today().isoformat(),
            "runs": str(args.runs),
            "fit_runs": sorted(fit_runs),
            **({"moe_fit_runs": sorted(split.moe_fit)} if split.moe_fit else {}),
            "holdout_runs": holdout,
            "split_rule": rule,
            "script": "benchmarks/gpu/fit_vllm_costs.py",
            "objective": "log(predicted/measured)^2 over the fit points; stage A (decode factor, step and per-request host time) on TPOT p50 + ITL p50, stage B (mixed factor, per-starting-prefill host time, intake delay) on TTFT p50/p90 + E2E p50 + output throughput; "
            + {
                "decode": "stage A only, from the first fit's values (B's terms kept as shipped)",
                "both": "A then B twice",
                "mixed": "stage A as refitted in session 23 and the intake delay of stage B kept; the mixed factor and the per-starting-prefill host time refitted "
                f"(session 24) on engine steps read back from the fit servers' client token times (step_trace.py): squared log-ratio of modelled / measured time of windows of {WINDOW} steps, each server weighted alike",
                "moe": "stage A as refitted in session 23, the mixed-step terms as refitted in session 24 and the intake delay kept; vLLM's MoE kernel factors fitted (session 25) on engine steps "
                f"of the moe_fit servers (step_trace.py): squared log-ratio of modelled / measured time of windows of {WINDOW} steps, each server weighted alike",
            }[args.stages]
            + "; Nelder-Mead",
            "values": values,
            "fit_error": errs["fit"],
            "holdout_error": errs["holdout"],
            "notes": [
                "Before this fit the overhead terms were sourced (2.0 ms per step, 10 us per request) and the graph factors were 1.",
                "The intake delay (send to scheduler) joined the fit in session 19; the previous fit (no delay) had 17.3 ms per starting prefill as step time.",
                *([f"Stage A refitted in session 23 on the split of {args.runs}/split.json; before it: decode_graph_factor {FIRST_FIT['decode_graph_factor']:.6g}, step_overhead_ms {FIRST_FIT['step_overhead_ms']:.6g}, per_seq_overhead_us {FIRST_FIT['per_seq_overhead_us']:.6g} (fitted on the H200 server alone)."] if args.stages in ("decode", "mixed", "moe") else []),
                *([f"Mixed-step terms refitted in session 24 on engine steps (step_trace.py); before: mixed_step_factor {BEFORE_SESSION_24['mixed_step_factor']:.6g}, prefill_request_overhead_ms {BEFORE_SESSION_24['prefill_request_overhead_ms']:.6g} (stage B on closed-loop TTFT, E2E and throughput: a step carrying one new 1K prompt came out about 30% slow)."] if args.stages in ("mixed", "moe") else []),
                *([f"MoE kernel factors fitted in session 25 on the engine steps of {', '.join(sorted(split.moe_fit))}; before: 1 (the grouped GEMM as torch's kernel measured it: MoE decode steps 9-18% slow, prefill-heavy steps 20-25% fast)."] if args.stages == "moe" else []),
                "Error = median |predicted / measured - 1| per figure over the points of each split; vllm-advisor validate RUNS prints every point.",
            ],
        }
        header = (
            "# vLLM's own step costs fitted to end-to-end runs of real vLLM servers (issue 18; refitted in session 23).\n"
            "# Written by benchmarks/gpu/fit_vllm_costs.py --write; do not edit by hand.\n"
            "# Loaded by vllm_advisor.perf.efficiency as the defaults of the ENGINE_FIELDS of Efficiency.\n"
        )
        CATALOG.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
        print(f"wrote {CATALOG}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What the model predicts for a plan's load points before it runs, with the shipped engine terms and
with those of an earlier fit, on the cards a lease may bring: written next to the plan
(``plans/NAME.predictions.json``) and committed before the run, so a check cannot be fitted after.

    python benchmarks/gpu/check_predictions.py benchmarks/gpu/plans/check-8b-intake.json [...]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
from vllm_advisor.perf.validation import deployment_of, predicted_figures

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_e2e  # noqa: E402 - the harness: its model shapes and the serve command it runs

#: vLLM's MoE kernel factors before session 25 fitted them: the grouped GEMM as torch's kernel measured it.
TORCH_MOE = {"moe_compute_factor": 1.0, "moe_memory_factor": 1.0}
#: The engine terms shipped before session 19 (no intake delay; 17.3 ms per starting prefill as step time).
BEFORE_SESSION_19 = {"decode_graph_factor": 0.84424, "mixed_step_factor": 1.19647, "step_overhead_ms": 2.33405e-06, "per_seq_overhead_us": 14.6387,
                     "prefill_request_overhead_ms": 17.3344, "intake_delay_ms": 0.0, **TORCH_MOE}
#: The engine terms shipped before session 23 (stage A fitted on the first H200 server alone).
BEFORE_SESSION_23 = {"decode_graph_factor": 0.862542, "mixed_step_factor": 1.18656, "step_overhead_ms": 1.25493e-08, "per_seq_overhead_us": 21.7213,
                     "prefill_request_overhead_ms": 3.98116, "intake_delay_ms": 20.205, **TORCH_MOE}
#: The engine terms shipped before session 24 (mixed-step factor and host time per starting prefill
#: from stage B on closed-loop figures; refitted in session 24 on engine steps, step_trace.py).
BEFORE_SESSION_24 = {"decode_graph_factor": 0.854838, "mixed_step_factor": 1.18656, "step_overhead_ms": 1.33978e-08, "per_seq_overhead_us": 10.2514,
                     "prefill_request_overhead_ms": 3.98116, "intake_delay_ms": 20.205, **TORCH_MOE}
#: The engine terms shipped before session 25 (the grouped MoE GEMM as torch's kernel measured it; vLLM's
#: MoE kernel factors fitted in session 25 on engine steps of two MoE servers).
BEFORE_SESSION_25 = {"decode_graph_factor": 0.854838, "mixed_step_factor": 1.13254, "step_overhead_ms": 1.33978e-08, "per_seq_overhead_us": 10.2514,
                     "prefill_request_overhead_ms": 0.401063, "intake_delay_ms": 20.205, **TORCH_MOE}
FIGS = ("ttft_p50", "ttft_p90", "tpot_p50", "e2e_p50", "output_throughput")


def predict(plan: dict, gpu: str, eff: Efficiency) -> dict:
    # a results file as the harness would write it: its catalog model and the command it would run
    command = vllm_e2e.serve_command({**plan, "served_name": f"{plan['shape']}-dummy"}, "MODEL_DIR", 0)
    fake = {"plan": plan, "catalog_model": vllm_e2e.SHAPES[plan["shape"]]["catalog"], "gpu": gpu, "env": {"vllm": "0.26.0"}, "server": {"command": command}}
    dep, args = deployment_of(fake, Path(plan["name"]))
    longest = max(p["input_len"] + p["output_len"] for p in plan["points"])
    engine = build_engine_model(dep, args, efficiency=eff, needed_model_len=longest)
    out = {}
    for p in plan["points"]:
        rate = None if p.get("concurrency") else (math.inf if p.get("rate", "inf") == "inf" else float(p["rate"]))
        run, _ = predict_load_point(engine, LoadPoint(concurrency=p.get("concurrency"), request_rate=rate), input_len=p["input_len"], output_len=p["output_len"],
                                    num_prompts=p["num_prompts"], shared_prefix_len=p.get("prefix_len", 0))
        figs = predicted_figures(run)
        out[p["id"]] = {f: round(figs[f], 4) for f in FIGS}
    return out


def main() -> None:
    for path in map(Path, sys.argv[1:]):
        plan = json.loads(path.read_text())
        doc = {"plan": plan["name"], "figures": list(FIGS), "units": "s for TTFT and E2E, ms for TPOT, tok/s for throughput", "predictions": {}}
        for gpu in ("H100", "H200"):
            for label, eff in (("shipped", Efficiency()), ("before_session_25", Efficiency().model_copy(update=BEFORE_SESSION_25)),
                               ("before_session_24", Efficiency().model_copy(update=BEFORE_SESSION_24)),
                               ("before_session_23", Efficiency().model_copy(update=BEFORE_SESSION_23)),
                               ("before_session_19", Efficiency().model_copy(update=BEFORE_SESSION_19))):
                doc["predictions"][f"{gpu}/{label}"] = predict(plan, gpu, eff)
        out = path.with_name(path.stem + ".predictions.json")
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(out)
        for key, pts in doc["predictions"].items():
            for pid, f in pts.items():
                print(f"  {key:24s} {pid:16s} " + "  ".join(f"{k} {v:g}" for k, v in f.items()))


if __name__ == "__main__":
    main()

"""Benchmark: the scheduler simulation and the commands that run it (issue 17).

Simulation, in process, median of N (wall and CPU seconds; the machine is shared, so CPU time is the
steadier figure):
- ``long_prompt_c100``: the motivating long-prompt case (Qwen2.5-32B, TP2 on H800, 63K in / 1K out,
  100 clients, 1,000 requests: ~205,000 engine steps, ~3,400 events; target < 0.1 s), summary
  (``sim_to_run``) included, as ``predict_load_point`` runs it;
- the same load point step by step (``mode="steps"``, the reference), once: what the events save;
- ``short_prompt_c256``: Llama-3.1-8B on one H100, 1K in / 200 out, 256 clients, 1,024 requests
  (few steps, hundreds of requests per step);
- ``calibrate_seed``: fitting the seed case's three measured load points (target: the whole
  ``estimate`` under 1 s).

Whole commands in a fresh process (Python start-up and imports included), median of N:
- ``estimate --profile examples/seed-qwen32b-h800-long-input.yaml --concurrency 1,40,100`` (with
  calibration; target < 1 s);
- the same with ``--concurrency 1..256`` (9 load points up to 768 requests of 63K each; target < 2 s).

Prints one JSON line, with the load average before and after.

Usage: .venv/bin/python benchmarks/bench_simulator.py [--repeats 5] [--no-commands]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
from vllm_advisor.schema import Deployment, EngineArgs

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"

CASES = {
    "long_prompt_c100": (
        Deployment(model="Qwen/Qwen2.5-32B-Instruct", gpu="H800", num_gpus=2, vllm_version="0.8.5"),
        EngineArgs(tensor_parallel_size=2),
        dict(input_len=63000, output_len=1000, num_prompts=1000),
        LoadPoint(concurrency=100),
    ),
    "short_prompt_c256": (
        Deployment(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", num_gpus=1, vllm_version="0.10.1"),
        EngineArgs(),
        dict(input_len=1000, output_len=200, num_prompts=1024),
        LoadPoint(concurrency=256),
    ),
}

COMMANDS = {
    "estimate_seed_1_40_100": ["estimate", "--profile", str(PROFILE), "--concurrency", "1,40,100", "--json"],
    "estimate_seed_1_to_256": ["estimate", "--profile", str(PROFILE), "--concurrency", "1..256", "--json"],
}


def timed(fn, repeats: int) -> tuple[float, float, object]:
    walls, cpus, value = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        value = fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return statistics.median(walls), statistics.median(cpus), value


def simulations(out: dict, repeats: int) -> None:
    for name, (dep, eargs, work, point) in CASES.items():
        engine = build_engine_model(dep, eargs, needed_model_len=work["input_len"] + work["output_len"])
        predict_load_point(engine, point, **work)  # warm: catalogs, GEMM cache
        wall, cpu, (_, result) = timed(lambda: predict_load_point(engine, point, **work), repeats)
        steps = sum(s.count for s in result.steps)
        out[f"{name}_median_s"] = round(wall, 4)
        out[f"{name}_cpu_s"] = round(cpu, 4)
        out[f"{name}_steps"] = steps
        out[f"{name}_events"] = len(result.steps)
        if name == "long_prompt_c100":
            from vllm_advisor.perf.simulator import Workload, simulate

            w = Workload(work["input_len"], work["output_len"], work["num_prompts"], point.concurrency)
            wall, cpu, _ = timed(lambda: simulate(engine.limits, engine.step, w, mode="steps"), 1)
            out[f"{name}_steps_mode_s"] = round(wall, 3)
            out[f"{name}_steps_mode_cpu_s"] = round(cpu, 3)


def calibration(out: dict, repeats: int) -> None:
    from vllm_advisor.perf.calibrate import calibrate
    from vllm_advisor.probe.bench import observations_to_runs
    from vllm_advisor.probe.casefile import load_case
    from vllm_advisor.probe.serve_cmd import engine_args_for

    case = load_case(PROFILE)
    engine = build_engine_model(case.deployment, engine_args_for(case.deployment), needed_model_len=64000)
    measured = observations_to_runs(case.observations, "profile")
    wall, cpu, result = timed(lambda: calibrate(engine, measured, input_len=63000, output_len=1000), repeats)
    out["calibrate_seed_median_s"] = round(wall, 4)
    out["calibrate_seed_cpu_s"] = round(cpu, 4)
    out["calibrate_seed_scales"] = [round(result.decode_scale, 4), round(result.prefill_scale, 4)]


def commands(out: dict, repeats: int) -> None:
    exe = Path(sys.executable).with_name("vllm-advisor")
    env = {**os.environ, "VLLM_ADVISOR_HOME": os.environ.get("VLLM_ADVISOR_HOME", "/tmp/vllm-advisor-bench-home")}
    for name, args in COMMANDS.items():
        subprocess.run([str(exe), *args], capture_output=True, env=env, check=True)  # warm the disk cache
        walls, cpus = [], []
        for _ in range(repeats):
            before = os.times()
            start = time.perf_counter()
            subprocess.run([str(exe), *args], capture_output=True, env=env, check=True)
            walls.append(time.perf_counter() - start)
            after = os.times()
            cpus.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
        out[f"{name}_median_s"] = round(statistics.median(walls), 3)
        out[f"{name}_cpu_s"] = round(statistics.median(cpus), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-commands", action="store_true", help="only the in-process figures")
    args = parser.parse_args()
    out: dict[str, object] = {"bench": "simulator", "loadavg_before": os.getloadavg()[0]}
    simulations(out, args.repeats)
    calibration(out, args.repeats)
    if not args.no_commands:
        commands(out, args.repeats)
    out["loadavg_after"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()

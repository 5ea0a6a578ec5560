"""Benchmark: the scheduler simulation, the performance model's hot path.

Two load points that stress it differently: the motivating long-prompt case (Qwen2.5-32B, TP2 on
H800, 63K in / 1K out, 100 clients, 1,000 requests: ~200,000 engine steps with few running
requests; the issue's target is under 2 s)
and a short-prompt high-concurrency case (Llama-3.1-8B on one H100, 1K in / 200 out, 256 clients,
1,024 requests: fewer steps, hundreds of requests per step). Prints one JSON line with the median
seconds of each over N repeats and the simulated engine steps per second.

Usage: .venv/bin/python benchmarks/bench_simulator.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
from vllm_advisor.schema import Deployment, EngineArgs

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out: dict[str, float | int | str] = {"bench": "simulator"}
    for name, (dep, eargs, work, point) in CASES.items():
        engine = build_engine_model(dep, eargs, needed_model_len=work["input_len"] + work["output_len"])
        times, steps = [], 0
        for _ in range(args.repeats):
            start = time.perf_counter()
            _, result = predict_load_point(engine, point, **work)
            times.append(time.perf_counter() - start)
            steps = sum(s.count for s in result.steps)
        median = statistics.median(times)
        out[f"{name}_median_s"] = round(median, 4)
        out[f"{name}_steps"] = steps
        out[f"{name}_steps_per_s"] = round(steps / median)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

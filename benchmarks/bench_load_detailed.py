"""Time ``load_runs`` on a large detailed ``vllm bench serve`` result (the loader's hot path).

Generates, in a temporary directory, a synthetic ``--save-result --save-detailed`` file in the
vLLM 0.3x key set: 50,000 requests, 1,024 prompt tokens and 256 output tokens each, with the
per-request arrays as vLLM writes them (``ttfts``, ``itls`` with 255 gaps per request,
``latencies``, ``start_times``, ``queue_times``, ``input_lens``, ``output_lens``, ``errors``,
``generated_texts``, ~1 KB of text each) and the summary keys computed from those arrays. Full
float precision as ``json.dump`` writes it, so the file is about 0.38 GB: over the default input
limit, which this script raises with VLLM_ADVISOR_MAX_INPUT_MB for itself.

Prints one JSON line: median seconds of 5 ``load_runs`` calls, file size, request and gap counts.
Usage: ``.venv/bin/python benchmarks/bench_load_detailed.py [--requests N] [--repeats R]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def synthetic_result(num_requests: int, output_len: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    ttfts = rng.gamma(2.0, 0.15, num_requests)
    itls = rng.gamma(4.0, 0.006, (num_requests, output_len - 1))
    itls[rng.random(itls.shape) < 0.01] += 0.25  # occasional stalls behind a prefill
    latencies = ttfts + itls.sum(axis=1)
    starts = np.cumsum(rng.exponential(0.02, num_requests)) + 1000.0
    queue = rng.exponential(0.5, num_requests)
    duration = float((starts + queue + latencies).max() - starts.min())
    ttft_ms, itl_ms, e2e_ms = ttfts * 1000, itls.ravel() * 1000, latencies * 1000
    tpot_ms = (latencies - ttfts) / (output_len - 1) * 1000
    result = {
        "date": "20260101-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
        "model_id": "synthetic/model", "tokenizer_id": "synthetic/model", "num_prompts": num_requests,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 256,
        "duration": duration, "completed": num_requests, "failed": 0,
        "total_input_tokens": 1024 * num_requests, "total_output_tokens": output_len * num_requests,
        "request_throughput": num_requests / duration, "request_goodput": None,
        "output_throughput": output_len * num_requests / duration,
        "total_token_throughput": (1024 + output_len) * num_requests / duration,
        "input_lens": [1024] * num_requests, "output_lens": [output_len] * num_requests,
        "ttfts": ttfts.tolist(), "itls": itls.tolist(), "latencies": latencies.tolist(),
        "start_times": starts.tolist(), "queue_times": queue.tolist(),
        "generated_texts": ["lorem ipsum " * 85] * num_requests, "errors": [""] * num_requests,
        "max_output_tokens_per_s": 9000.0, "max_concurrent_requests": 300, "rtfx": 0.0,
    }
    for name, values in (("ttft", ttft_ms), ("tpot", tpot_ms), ("itl", itl_ms), ("e2el", e2e_ms)):
        result[f"mean_{name}_ms"] = float(values.mean())
        result[f"median_{name}_ms"] = float(np.median(values))
        result[f"std_{name}_ms"] = float(values.std())
        for p in (50, 90, 99):
            result[f"p{p}_{name}_ms"] = float(np.percentile(values, p))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ["VLLM_ADVISOR_MAX_INPUT_MB"] = "2048"

    from vllm_advisor.probe.bench import load_runs

    with tempfile.TemporaryDirectory(prefix="bench_load_detailed_") as tmp:
        path = Path(tmp) / "detailed.json"
        with open(path, "w") as fh:
            json.dump(synthetic_result(args.requests, args.output_len), fh)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            runs = load_runs(path)
            times.append(time.perf_counter() - start)
        run = runs[0]
        failed = [c.field for c in run.failed_checks()]
        print(json.dumps({
            "benchmark": "load_detailed_vllm_bench",
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "repeats": args.repeats,
            "file_mb": round(path.stat().st_size / 1e6, 1),
            "requests": args.requests,
            "itl_gaps": run.itl_ms.count if run.itl_ms else None,
            "checks": len(run.checks),
            "failed_checks": failed,
        }))


if __name__ == "__main__":
    main()

"""Benchmark: parse a large vLLM /metrics dump and diff two of them.

Generates a synthetic dump in the shape vLLM 0.3x exports (the same families, bucket layouts and
labels as vllm/v1/metrics/loggers.py and buckets.py; counters with ``_created`` gauges) for many
(model_name, engine) pairs, until it holds at least ``--series`` series (family + labels without
``le``, i.e. what ``compute_window`` treats as one series; every bucket line counts towards
``sample_lines``). Times ``parse_metrics_text`` and ``compute_window`` (median of ``--repeats``).

Prints one JSON line. Run: ``.venv/bin/python benchmarks/bench_parse_metrics.py``
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

from vllm_advisor.probe.metrics import compute_window, parse_metrics_text

# bucket families of vllm/v1/metrics/buckets.py (vLLM 0.34.0)
REQUEST_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
ITERATION_TOKENS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
REQUEST_TOKENS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
PARAMS_N = [1, 2, 5, 10, 20]
NUM_PREEMPTIONS = [1, 2, 3, 4, 5, 10, 20]

GAUGES = {
    "vllm:num_requests_running": [{}],
    "vllm:num_requests_waiting": [{}],
    "vllm:kv_cache_usage_perc": [{}],
    "vllm:num_requests_waiting_by_reason": [{"reason": "capacity"}, {"reason": "deferred"}],
    "vllm:engine_sleep_state": [{"sleep_state": s} for s in ("awake", "weights_offloaded", "discard_all")],
}
COUNTERS = {
    "vllm:prefix_cache_queries": [{}],
    "vllm:prefix_cache_hits": [{}],
    "vllm:num_preemptions": [{}],
    "vllm:prompt_tokens": [{}],
    "vllm:generation_tokens": [{}],
    "vllm:request_success": [{"finished_reason": r} for r in ("stop", "length", "abort", "error", "repetition")],
    "vllm:prompt_tokens_by_source": [{"source": s} for s in ("local_compute", "local_cache_hit", "external_kv_transfer")],
}
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": TTFT,
    "vllm:inter_token_latency_seconds": ITL,
    "vllm:request_time_per_output_token_seconds": ITL,
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY,
    "vllm:request_queue_time_seconds": REQUEST_LATENCY,
    "vllm:request_inference_time_seconds": REQUEST_LATENCY,
    "vllm:request_prefill_time_seconds": REQUEST_LATENCY,
    "vllm:request_decode_time_seconds": REQUEST_LATENCY,
    "vllm:request_prompt_tokens": REQUEST_TOKENS,
    "vllm:request_generation_tokens": REQUEST_TOKENS,
    "vllm:request_max_num_generation_tokens": REQUEST_TOKENS,
    "vllm:iteration_tokens_total": ITERATION_TOKENS,
    "vllm:request_params_n": PARAMS_N,
    "vllm:request_num_preemptions": NUM_PREEMPTIONS,
}


def series_per_engine() -> int:
    gauges = sum(len(v) for v in GAUGES.values())
    counters = 2 * sum(len(v) for v in COUNTERS.values())  # X_total and X_created
    return gauges + counters + 2 * len(HISTOGRAMS)  # histogram and its X_created


def make_dump(engines: list[tuple[str, str]], scale: float) -> str:
    """Prometheus text for these (model, engine) pairs; ``scale`` grows every counter (a later scrape)."""

    def lbl(model: str, engine: str, extra: dict[str, str]) -> str:
        labels = {"engine": engine, "model_name": model, **extra}
        return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))

    out: list[str] = []
    for name, variants in GAUGES.items():
        out += [f"# HELP {name} gauge", f"# TYPE {name} gauge"]
        for i, (m, e) in enumerate(engines):
            out += [f"{name}{{{lbl(m, e, v)}}} {(i % 9) * 0.1 * scale:.3f}" for v in variants]
    for name, variants in COUNTERS.items():
        out += [f"# HELP {name}_total counter", f"# TYPE {name}_total counter"]
        for i, (m, e) in enumerate(engines):
            out += [f"{name}_total{{{lbl(m, e, v)}}} {float(int((i + 1) * 1000 * scale))}" for v in variants]
        out += [f"# HELP {name}_created counter", f"# TYPE {name}_created gauge"]
        for m, e in engines:
            out += [f"{name}_created{{{lbl(m, e, v)}}} 1.7962170838457053e+09" for v in variants]
    for name, bounds in HISTOGRAMS.items():
        out += [f"# HELP {name} histogram", f"# TYPE {name} histogram"]
        for i, (m, e) in enumerate(engines):
            total = float(int((i + 10) * 100 * scale))
            base = lbl(m, e, {})
            for j, le in enumerate(bounds):
                share = 1 - math.exp(-(j + 1) / 4)
                out.append(f'{name}_bucket{{{lbl(m, e, {"le": str(float(le))})}}} {float(int(total * share))}')
            out.append(f'{name}_bucket{{{lbl(m, e, {"le": "+Inf"})}}} {total}')
            out.append(f"{name}_count{{{base}}} {total}")
            out.append(f"{name}_sum{{{base}}} {total * 0.37}")
        out += [f"# HELP {name}_created histogram", f"# TYPE {name}_created gauge"]
        out += [f"{name}_created{{{lbl(m, e, {})}}} 1.796217083846245e+09" for m, e in engines]
    return "\n".join(out) + "\n"


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    n_engines = math.ceil(args.series / series_per_engine())
    models = math.ceil(math.sqrt(n_engines))
    engines = [(f"org/model-{i // models}", str(i % models)) for i in range(n_engines)]

    with tempfile.TemporaryDirectory() as tmp:
        before_path, after_path = Path(tmp) / "before.txt", Path(tmp) / "after.txt"
        before_path.write_text(make_dump(engines, 1.0))
        after_path.write_text(make_dump(engines, 1.5))
        before_text, after_text = before_path.read_text(), after_path.read_text()

    parse_s = median_time(lambda: parse_metrics_text(after_text, "bench"), args.repeats)
    first = parse_metrics_text(before_text, "bench", timestamp=0.0)
    last = parse_metrics_text(after_text, "bench", timestamp=60.0)
    window_s = median_time(lambda: compute_window([first, last]), args.repeats)
    window = compute_window([first, last])

    # series as compute_window identifies them (family + labels without le), _created gauges included
    series = sum(
        len({tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")) for s in f.samples})
        for f in last.families.values()
    )
    samples = sum(len(f.samples) for f in last.families.values())
    assert last.skipped_lines == 0 and series >= args.series, (series, last.notes)
    print(
        json.dumps(
            {
                "benchmark": "parse_metrics_text",
                "median_s": round(parse_s, 4),
                "series": series,
                "sample_lines": samples,
                "bytes": len(after_text.encode()),
                "engines": n_engines,
                "repeats": args.repeats,
                "compute_window_median_s": round(window_s, 4),
                "window_series": len(window.series),
            }
        )
    )


if __name__ == "__main__":
    main()

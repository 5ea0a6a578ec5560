#!/usr/bin/env python3
"""Turn a real-vLLM run (``vllm_e2e.py``'s results) into what a user would hand the advisor.

Why: the diagnosis is fitted on written reports, which almost never attach measurements (0 of the
library's 871). A real GPU run with a known, deliberately set cause (a planted cause: too small a
KV cache, ``--enforce-eager``, a tiny ``--max-num-seqs``...) is the one input whose cause is certain
and whose evidence is all measured. This script writes, per load point, the folder a user of
``vllm bench serve`` would have:

    RUN_POINT/case.yaml      the deployment (model, GPU, serve command as typed), the workload and a
                             neutral question (it never names the cause)
    RUN_POINT/bench.json     the point in ``vllm bench serve --save-result --save-detailed`` keys
                             (vLLM 0.34.0's set, shared/corpus/vllm-facts/bench-serve-result-keys.md)
    RUN_POINT/metrics.prom   the server's /metrics text right after the point
    RUN_POINT/server.log     the server's own log (args, KV cache size, the 10 s stats lines)

Usage: python benchmarks/gpu/planted_artifacts.py RUN_DIR OUT_DIR [--question TEXT]
RUN_DIR holds ``results.json(.gz)``, ``snapshots.prom(.gz)`` and ``server.log(.gz)`` of one server.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shlex
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import yaml

QUESTION = "Throughput and latency at this load are worse than I expected from this GPU. Why, and what should I change?"
#: Flags the harness adds for its own reasons (dummy weights, a local port): not what a user types.
HARNESS_FLAGS = {"--load-format": 1, "--host": 1, "--port": 1, "--served-model-name": 1, "--dtype": 1}


def _open(path: Path):
    gz = path.with_name(path.name + ".gz")
    if gz.is_file():
        return gzip.open(gz, "rt", errors="replace")
    return open(path, errors="replace")


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def _stats(name: str, xs_s: list[float]) -> dict:
    if not xs_s:
        return {}
    ms = [x * 1e3 for x in xs_s]
    return {
        f"mean_{name}_ms": statistics.fmean(ms),
        f"median_{name}_ms": statistics.median(ms),
        f"std_{name}_ms": statistics.pstdev(ms),
        f"p90_{name}_ms": _pct(ms, 90),
        f"p99_{name}_ms": _pct(ms, 99),
    }


def bench_json(point: dict, model: str, started: datetime) -> dict:
    """The point as ``vllm bench serve --save-result --save-detailed`` writes it; ``started`` is the
    point's start in the server's clock (the client ran on the same machine)."""
    spec = point["spec"]
    ok = [r for r in point["requests"] if r.get("ok")]
    duration = point["duration_s"]
    out_tok = sum(r["output_tokens"] for r in ok)
    in_tok = sum(r["prompt_tokens"] for r in ok)
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] > 1]
    rate = spec.get("rate")
    doc = {
        "date": started.strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": spec["num_prompts"],
        "request_rate": "inf" if rate in (None, "inf") else float(rate),
        "burstiness": 1.0,
        "max_concurrency": spec.get("concurrency"),
        "duration": duration,
        "completed": len(ok),
        "failed": len(point["requests"]) - len(ok),
        "total_input_tokens": in_tok,
        "total_output_tokens": out_tok,
        "request_throughput": len(ok) / duration,
        "request_goodput": None,
        "output_throughput": out_tok / duration,
        "total_token_throughput": (in_tok + out_tok) / duration,
    }
    doc.update(_stats("ttft", [r["ttft"] for r in ok]))
    doc.update(_stats("tpot", tpot))
    doc.update(_stats("itl", [x for r in ok for x in r["itl"]]))
    doc.update(_stats("e2el", [r["e2e"] for r in ok]))
    doc.update(
        input_lens=[r["prompt_tokens"] for r in ok],
        output_lens=[r["output_tokens"] for r in ok],
        ttfts=[r["ttft"] for r in ok],
        itls=[r["itl"] for r in ok],
        latencies=[r["e2e"] for r in ok],
        errors=["" for _ in ok],
    )
    return doc


def snapshots(run_dir: Path) -> dict[str, str]:
    """``# ===== after POINT t=...`` sections of snapshots.prom, by point id."""
    out, current, lines = {}, None, []
    with _open(run_dir / "snapshots.prom") as fh:
        for line in fh:
            if line.startswith("# ===== "):
                if current:
                    out[current] = "".join(lines)
                parts = line.split()
                current = parts[3] if parts[2] == "after" else None
                lines = []
            elif current:
                lines.append(line)
    if current:
        out[current] = "".join(lines)
    return out


def typed_command(server: dict, model: str) -> str:
    """The serve command as a user would type it: the catalog model's name, no harness-only flags,
    each argument shell-quoted where it needs it (a JSON value such as --speculative-config's)."""
    cmd = server["command"]
    args = cmd[cmd.index("serve") + 2:]
    kept, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
            continue
        if a in HARNESS_FLAGS:
            skip = HARNESS_FLAGS[a]
            continue
        kept.append(a)
    return shlex.join(["vllm", "serve", model, *kept])


def gpu_name(results: dict) -> str:
    """The catalog name of the GPU the run had (nvidia-smi's, e.g. "NVIDIA H100 80GB HBM3" -> H100);
    the harness's own field says H200 whatever ran."""
    smi = results.get("env", {}).get("nvidia-smi", "")
    m = re.search(r"\b(H100|H200|H800|H20|A100|L40S)\b", smi)
    return m.group(1) if m else results["gpu"]


def write_point(results: dict, point: dict, metrics: str | None, log: str, out: Path, question: str) -> Path:
    model = results["catalog_model"]
    spec = point["spec"]
    folder = out / f"{results['plan']['name']}--{point['id']}"
    folder.mkdir(parents=True, exist_ok=True)
    harness_start = datetime.strptime(results["env"]["utc"], "%Y-%m-%dT%H:%M:%SZ")
    started = harness_start + timedelta(seconds=point.get("t_start_s") or 0.0)
    (folder / "bench.json").write_text(json.dumps(bench_json(point, model, started)))
    attachments = ["bench.json", "server.log"]
    (folder / "server.log").write_text(log)
    if metrics:
        (folder / "metrics.prom").write_text(metrics)
        attachments.append("metrics.prom")
    workload = {"input_len": spec["input_len"], "output_len": spec["output_len"], "dataset": "random"}
    if spec.get("concurrency"):
        workload["concurrency"] = spec["concurrency"]
    elif spec.get("rate") not in (None, "inf"):
        workload["request_rate"] = float(spec["rate"])
    if spec.get("prefix_len"):
        workload["shared_prefix_len"] = spec["prefix_len"]
    case = {
        "question": question,
        "deployment": {
            "engine": "vllm",
            "vllm_version": results.get("env", {}).get("vllm", "0.26.0"),
            "model": model,
            "gpu": gpu_name(results),
            "num_gpus": int(results["plan"]["server"].get("tensor_parallel_size") or 1),
            "serve_command": typed_command(results["server"], model),
        },
        "workload": workload,
        "attachments": attachments,
    }
    (folder / "case.yaml").write_text(yaml.safe_dump(case, sort_keys=False, allow_unicode=True))
    return folder


def load_run(run_dir: Path) -> tuple[dict, str, dict[str, str]]:
    """(results, the server log's text, the /metrics text after each point by point id) of one
    ``vllm_e2e.py`` run folder, its files plain or gzipped."""
    with _open(run_dir / "results.json") as fh:
        results = json.load(fh)
    with _open(run_dir / "server.log") as fh:
        log = fh.read()
    return results, log, snapshots(run_dir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--question", default=QUESTION)
    args = ap.parse_args()
    results, log, snaps = load_run(args.run_dir)
    for point in results["points"]:
        if point.get("requests"):
            print(write_point(results, point, snaps.get(point["id"]), log, args.out_dir, args.question))


if __name__ == "__main__":
    main()

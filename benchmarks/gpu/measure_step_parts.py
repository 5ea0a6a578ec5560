"""Time the parts of one vLLM engine step on one GPU, in bf16, with PyTorch's own kernels.

Why: ``vllm_advisor.perf.step_time`` predicts a step as a sum of rooflines (GEMMs, decode
attention, prefill-chunk attention, ...) scaled by efficiency factors. Those factors need
measured points on real hardware; this script produces them as CSV rows (issue 8).

Parts (``--parts``, comma separated; default all):

- ``ceiling``: the card's copy bandwidth (one large device-to-device copy, bytes read + written)
  and matmul rate (8192^3 bf16 on random data).
- ``gemm``: every layer GEMM of each catalog model at TP 1, 2, 4, 8 (per-GPU shapes from
  ``shapes.json``, made by ``make_shapes.py``) as ``F.linear(x[M, K], W[N, K])`` (+ bias where
  the model has one), for M = 1 ... 16384 tokens.
- ``moe``: Qwen3-30B-A3B's MoE layer as one grouped GEMM over all experts
  (``torch._grouped_mm``, M tokens x top-k spread evenly over the experts). The single-expert
  GEMMs ``expert_gate_up`` / ``expert_down`` are in ``gemm``.
- ``decode``: decode attention, q length 1 over a K/V of length L per request, batch B,
  ``F.scaled_dot_product_attention(..., enable_gqa=True)`` captured in a CUDA graph and replayed.
- ``prefill``: one prefill chunk of C tokens at depth D: the chunk's queries sit at positions
  D ... D+C-1 and attend causally to D+C keys. The mask is
  ``torch.nn.attention.bias.causal_lower_right(C, D+C)``: query i sees keys 0 ... D+i (the
  diagonal aligned to the bottom-right corner), which the flash and memory-efficient kernels
  apply without materialising a mask. Plain ``is_causal=True`` would align it top-left (query i
  sees keys 0 ... i) when C < D+C, so it is used only at D = 0 where both agree.
- ``mixed``: one layer of a mixed step: decode attention for B requests at context L, one
  prefill chunk C at depth D, and the layer GEMMs at M = B + C, timed as one eager sequence and
  part by part.

Timing: CUDA events around each call; warm-up first; a spin kernel (``torch.cuda._sleep``)
ahead of the timed calls so the CPU enqueues them all before the GPU reaches them (a call shorter
than its launch cost is then timed on the GPU, not at the CPU's pace); before every timed call a
write of a buffer several times the L2 size (so weights and KV come from HBM, as in a real step whose
working set dwarfs L2); the number of timed calls adapts to the call's length
(``--target-s``, between ``--n-min`` and ``--n-max``); the median and the 10th/90th
percentiles are reported. The kernels that ran are read with ``torch.profiler`` (one
untimed call of each shape) and written beside every row, so the SDPA backend is named by what
actually ran, not by what was asked for.

Output: ``<out>/<stem>.csv`` (one row per measurement, written as it goes, so a run cut short
keeps what it measured) and ``<out>/<stem>.meta.json`` (GPU, driver, CUDA, torch, clocks before
and after, date, command line). Needs torch only; ``--list`` counts the grid without a GPU.

Usage:
    python3 benchmarks/gpu/measure_step_parts.py --out /tmp/out --quick
    python3 benchmarks/gpu/measure_step_parts.py --out $OUT --parts ceiling,gemm,moe
    python3 benchmarks/gpu/measure_step_parts.py --out $OUT --parts decode,prefill,mixed
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

K = 1024
ALL_PARTS = ("ceiling", "gemm", "moe", "decode", "prefill", "mixed")
M_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
KV_GRID = (1 * K, 4 * K, 16 * K, 32 * K, 64 * K, 128 * K)
BATCH_GRID = (1, 4, 16, 64)
CHUNK_GRID = (2 * K, 4 * K, 8 * K, 16 * K)
DEPTHS = (0, 16 * K, 32 * K, 64 * K)  # plus 128K - chunk, added per chunk
MAX_CONTEXT = 128 * K
MOE_MODEL = "Qwen3-30B-A3B"
#: (model, tp) pairs for the mixed step: a 70B at TP4 and a 32B at TP2, common deployments.
MIXED_DEPLOYMENTS = (("Llama-3.1-70B-Instruct", 4), ("Qwen2.5-32B-Instruct", 2))
MIXED_GRID = [(b, l, c, d) for b in (8, 32) for l in (4 * K, 16 * K) for c in (2 * K, 8 * K) for d in (0, 32 * K)]

CSV_COLUMNS = [
    "run_id", "date_utc", "gpu", "kind", "torch", "part", "op", "model", "tp", "dtype",
    "m", "k", "n", "batch", "kv_len", "chunk", "depth", "q_heads", "kv_heads", "head_dim",
    "backend", "kernel", "cuda_graph", "median_ms", "p10_ms", "p90_ms", "mean_ms", "n_timed",
    "flops", "bytes", "achieved_tflops", "achieved_gbs", "measurement_id", "note",
]


# ----- grids (no torch needed) ---------------------------------------------------------------


def load_shapes(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def prefill_grid(quick: bool) -> list[tuple[int, int]]:
    """(chunk, depth) pairs; depth 128K - chunk puts the chunk at the end of a 128K prompt."""
    if quick:
        return [(2 * K, 0), (2 * K, 16 * K)]
    pairs = []
    for c in CHUNK_GRID:
        for d in (*DEPTHS, MAX_CONTEXT - c):
            if d + c <= MAX_CONTEXT and (c, d) not in pairs:
                pairs.append((c, d))
    return pairs


def attention_configs(shapes: dict, models: list[str], tps: list[int]) -> list[dict]:
    """Distinct per-GPU (q_heads, kv_heads, head_dim) over the chosen models and TPs, each with
    the (model, tp) pairs that share it: attention cost depends on the heads alone."""
    by_key: dict[tuple[int, int, int], dict] = {}
    for model in models:
        for tp in tps:
            s = shapes["models"][model]["per_gpu"][str(tp)]
            key = (s["q_heads"], s["kv_heads"], s["head_dim"])
            by_key.setdefault(key, {"q_heads": key[0], "kv_heads": key[1], "head_dim": key[2], "users": []})
            by_key[key]["users"].append((model, tp))
    return list(by_key.values())


def plan(args: argparse.Namespace, shapes: dict) -> dict:
    """What each part will measure, as lists of plain tuples (for --list and for the run)."""
    models = args.models or list(shapes["models"])
    tps = args.tps or shapes["tps"]
    m_grid = (1, 64, 4096) if args.quick else M_GRID
    kv_grid = (1 * K, 16 * K) if args.quick else KV_GRID
    batch_grid = (1, 16) if args.quick else BATCH_GRID
    gemm = [(model, tp, op, m) for model in models for tp in tps
            for op in shapes["models"][model]["per_gpu"][str(tp)]["gemms"] for m in m_grid]
    moe = [(MOE_MODEL, tp, m) for tp in tps for m in m_grid] if MOE_MODEL in models else []
    attn = attention_configs(shapes, models, tps)
    if args.quick:
        attn = attn[:1]
    decode = [(cfg, b, l) for cfg in attn for l in kv_grid for b in batch_grid]
    prefill = [(cfg, c, d) for cfg in attn for c, d in prefill_grid(args.quick)]
    mixed_grid = MIXED_GRID[:1] if args.quick else MIXED_GRID
    mixed = [(model, tp, *combo) for model, tp in MIXED_DEPLOYMENTS
             if model in shapes["models"] and tp in shapes["tps"] for combo in mixed_grid]
    if args.quick:
        mixed = mixed[:1]
    return {"gemm": gemm, "moe": moe, "decode": decode, "prefill": prefill, "mixed": mixed,
            "m_grid": m_grid, "kv_grid": kv_grid, "batch_grid": batch_grid}


# ----- environment ---------------------------------------------------------------------------


def nvidia_smi() -> dict:
    """Name, driver, clocks, power and temperature as nvidia-smi reports them (read only)."""
    fields = ["name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "power.draw", "power.limit", "temperature.gpu", "pstate", "memory.total"]
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip().splitlines()[0]
        return dict(zip(fields, (v.strip() for v in out.split(","))))
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return {"error": f"nvidia-smi: {exc}"}


def environment(torch, args: argparse.Namespace) -> dict:
    props = torch.cuda.get_device_properties(0)
    cuda_drv = None
    try:
        cuda_drv = torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None
    except Exception:  # noqa: BLE001 - informational only
        pass
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cuda_driver_api": cuda_drv,
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "total_memory_bytes": props.total_memory,
        "compute_capability": f"{props.major}.{props.minor}",
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "argv": sys.argv,
        "nvidia_smi_before": nvidia_smi(),
        "kind": args.kind,
    }


# ----- timing --------------------------------------------------------------------------------


class Timer:
    """CUDA-event timing with an L2 flush before each timed call."""

    def __init__(self, torch, args: argparse.Namespace) -> None:
        self.torch = torch
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
        self.flush_bytes = max(4 * l2, 256 * 2**20)
        self.flush_buf = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device="cuda")
        self.args = args
        # Cycles per millisecond for the queue-filling spin (torch.cuda._sleep counts SM cycles).
        self.cycles_per_ms = (getattr(props, "clock_rate", 0) or 1_980_000)  # kHz = cycles per ms
        self.can_sleep = hasattr(torch.cuda, "_sleep")

    def fill_queue(self, calls: int) -> None:
        """Hold the GPU in a spin kernel while the CPU enqueues ``calls`` timed calls, so that a
        call shorter than its own launch cost is timed on the GPU, not at the CPU's pace.

        Why: without it, kernels of a few microseconds measured 3x slower in one run than in the
        next (the GPU had drained its queue and waited for the next launch between the events)."""
        if self.can_sleep:
            self.torch.cuda._sleep(int(self.cycles_per_ms * min(100.0, 1.0 + 0.1 * calls)))

    def flush(self) -> None:
        self.flush_buf.zero_()

    def measure(self, fn: Callable[[], object], *, n_max: int | None = None) -> dict:
        torch, a = self.torch, self.args
        for _ in range(a.warmup):
            self.flush()
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.fill_queue(1)
        self.flush()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        est_ms = s.elapsed_time(e) + 0.08  # + the flush itself
        n = int(min(n_max or a.n_max, max(a.n_min, a.target_s * 1e3 / est_ms)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        self.fill_queue(n)
        for i in range(n):
            self.flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        times = sorted(st.elapsed_time(en) for st, en in zip(starts, ends))
        return {
            "median_ms": statistics.median(times),
            "p10_ms": percentile(times, 10),
            "p90_ms": percentile(times, 90),
            "mean_ms": statistics.fmean(times),
            "n_timed": n,
        }


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of an ascending list."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# ----- kernel names --------------------------------------------------------------------------


def short_kernel(name: str, limit: int = 120) -> str:
    name = " ".join(name.split())
    return name if len(name) <= limit else name[: limit - 3] + "..."


def kernel_names(torch, labelled: list[tuple[str, Callable[[], object]]]) -> dict[str, str]:
    """Run each function once under one profiler session and return the kernels each launched
    (unique, in order, joined by ' | '), keyed by label. Failures give an empty name, never abort."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize()
    result = {label: "" for label, _ in labelled}
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for label, fn in labelled:
                with record_function(label):
                    fn()
                torch.cuda.synchronize()
        events = prof.events()
    except Exception as exc:  # noqa: BLE001 - names are informative, the timings stand without them
        print(f"  (profiler failed: {exc})", flush=True)
        return result

    def collect(evt, out: list[str]) -> None:
        for k in getattr(evt, "kernels", []) or []:
            if k.name not in out and k.name not in result:
                out.append(k.name)
        for child in getattr(evt, "cpu_children", []) or []:
            collect(child, out)

    for evt in events:
        if evt.name in result and not result[evt.name] and getattr(evt, "cpu_children", None) is not None:
            names: list[str] = []
            collect(evt, names)
            names = [n for n in names if "memset" not in n.lower() and "memcpy" not in n.lower()]
            if names:
                result[evt.name] = " | ".join(short_kernel(n) for n in names)
    return result


def backend_of(kernel: str) -> str:
    """The SDPA backend a kernel name belongs to."""
    low = kernel.lower()
    if not low:
        return "unknown"
    if "cudnn" in low:  # before "flash": cuDNN's kernels are named ..._sdpa_sm90_flash_fprop_...
        return "cudnn"
    if "flash" in low:
        return "flash"
    if "fmha_cutlass" in low or "efficient" in low or "cutlassf" in low:
        return "efficient"
    return "math?"


# ----- output --------------------------------------------------------------------------------


class Sink:
    """Appends rows to the CSV as they come (flushed each row, so a run cut short keeps them)."""

    def __init__(self, path: Path, common: dict) -> None:
        self.path = path
        self.common = common
        self.fh = path.open("w", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.fh, fieldnames=CSV_COLUMNS)
        self.writer.writeheader()
        self.rows = 0
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def write(self, row: dict) -> None:
        full = {c: "" for c in CSV_COLUMNS}
        full.update(self.common)
        full.update(row)
        t = full["median_ms"]
        if t and full["flops"]:
            full["achieved_tflops"] = round(full["flops"] / (t * 1e-3) / 1e12, 3)
        if t and full["bytes"]:
            full["achieved_gbs"] = round(full["bytes"] / (t * 1e-3) / 1e9, 2)
        for key in ("median_ms", "p10_ms", "p90_ms", "mean_ms"):
            if isinstance(full[key], float):
                full[key] = round(full[key], 5)
        self.writer.writerow(full)
        self.fh.flush()
        self.rows += 1

    def close(self) -> None:
        self.fh.close()


# ----- parts ---------------------------------------------------------------------------------


def run_ceiling(torch, timer: Timer, sink: Sink, args: argparse.Namespace) -> list[str]:
    summary = []
    n_elem = (4 * 2**30) // 2  # 4 GiB of bf16
    src = torch.randn(n_elem, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    stats = timer.measure(lambda: dst.copy_(src))
    names = kernel_names(torch, [("copy", lambda: dst.copy_(src))])
    sink.write({"part": "ceiling", "op": "copy_d2d", "bytes": 2 * src.numel() * 2, "kernel": names["copy"],
                "measurement_id": sink.new_id(), "note": "4 GiB bf16 tensor copy_; bytes = read + written", **stats})
    summary.append(f"copy 4 GiB: {2 * src.numel() * 2 / (stats['median_ms'] * 1e-3) / 1e9:.0f} GB/s")
    stats = timer.measure(lambda: src.sum(dtype=torch.float32))
    sink.write({"part": "ceiling", "op": "read_sum", "bytes": src.numel() * 2, "measurement_id": sink.new_id(),
                "note": "4 GiB bf16 sum to fp32; bytes = read", **stats})
    summary.append(f"read (sum) 4 GiB: {src.numel() * 2 / (stats['median_ms'] * 1e-3) / 1e9:.0f} GB/s")
    del src, dst
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    for op, fn in (("matmul_8192", lambda: torch.matmul(a, b)), ("linear_8192", lambda: torch.nn.functional.linear(a, b))):
        stats = timer.measure(fn)
        names = kernel_names(torch, [(op, fn)])
        flops = 2 * n**3
        sink.write({"part": "ceiling", "op": op, "m": n, "k": n, "n": n, "flops": flops, "bytes": 3 * n * n * 2,
                    "kernel": names[op], "measurement_id": sink.new_id(), "note": "random bf16 operands", **stats})
        summary.append(f"{op}: {flops / (stats['median_ms'] * 1e-3) / 1e12:.0f} TFLOP/s")
    del a, b
    torch.cuda.empty_cache()
    return summary


def gemm_row(op: str, model: str, tp: int, m: int, k: int, n: int, bias: bool) -> dict:
    return {"part": "gemm", "op": op, "model": model, "tp": tp, "m": m, "k": k, "n": n,
            "flops": 2 * m * n * k, "bytes": 2 * (m * k + n * k + m * n + (n if bias else 0)),
            "note": "F.linear with bias" if bias else "F.linear"}


def run_gemm(torch, timer: Timer, sink: Sink, args: argparse.Namespace, shapes: dict, grid: list) -> list[str]:
    F = torch.nn.functional
    summary = []
    groups: dict[tuple[str, int], list] = {}
    for model, tp, op, m in grid:
        groups.setdefault((model, tp), []).append((op, m))
    m_max = max(m for _, _, _, m in grid)
    for (model, tp), items in groups.items():
        t0 = time.time()
        info = shapes["models"][model]
        gemms = info["per_gpu"][str(tp)]["gemms"]
        xs: dict[int, object] = {}
        weights: dict[str, tuple] = {}
        labelled = []
        pending = []
        for op, m in items:
            k, n = gemms[op]
            if k not in xs:
                xs[k] = torch.randn(m_max, k, dtype=torch.bfloat16, device="cuda")
            if op not in weights:
                bias = info["qkv_bias"] and op == "qkv_proj"
                w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
                bvec = torch.randn(n, dtype=torch.bfloat16, device="cuda") if bias else None
                weights[op] = (w, bvec)
            w, bvec = weights[op]
            x = xs[k][:m]
            fn = (lambda x=x, w=w, bvec=bvec: F.linear(x, w, bvec))
            stats = timer.measure(fn)
            label = f"gemm:{op}:{m}"
            labelled.append((label, fn))
            pending.append((label, {**gemm_row(op, model, tp, m, k, n, bvec is not None), **stats,
                                    "measurement_id": sink.new_id()}))
        names = kernel_names(torch, labelled)
        for label, row in pending:
            sink.write({**row, "kernel": names[label]})
            if (model, tp, row["op"], row["m"]) in (("Qwen2.5-32B-Instruct", 2, "gate_up", 1), ("Qwen2.5-32B-Instruct", 2, "gate_up", 8192)):
                summary.append(f"{model} TP{tp} gate_up M={row['m']}: {row['median_ms']:.4f} ms")
        print(f"  gemm {model} tp{tp}: {len(items)} shapes in {time.time() - t0:.1f} s", flush=True)
        del xs, weights, labelled
        torch.cuda.empty_cache()
    return summary


def run_moe(torch, timer: Timer, sink: Sink, args: argparse.Namespace, shapes: dict, grid: list) -> list[str]:
    """All experts of one MoE layer's two expert GEMMs as one grouped GEMM (even routing)."""
    summary = []
    if not hasattr(torch, "_grouped_mm"):
        return ["moe: torch._grouped_mm not in this torch; skipped"]
    info = shapes["models"][MOE_MODEL]
    e, topk = info["moe"]["num_experts"], info["moe"]["experts_per_token"]
    for tp in sorted({tp for _, tp, _ in grid}):
        g = info["per_gpu"][str(tp)]["gemms"]
        ms = [m for _, t, m in grid if t == tp]
        labelled, pending = [], []
        for op, (k, n) in (("moe_grouped_gate_up", g["expert_gate_up"]), ("moe_grouped_down", g["expert_down"])):
            w = torch.randn(e, n, k, dtype=torch.bfloat16, device="cuda") * 0.02
            w_t = w.transpose(-2, -1)  # [E, K, N] view of row-major [E, N, K] weights, as F.linear reads them
            for m in ms:
                rows = m * topk
                counts = [rows // e + (1 if i < rows % e else 0) for i in range(e)]
                offs = torch.tensor(list(_cumsum(counts)), dtype=torch.int32, device="cuda")
                x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
                fn = (lambda x=x, w_t=w_t, offs=offs: torch._grouped_mm(x, w_t, offs=offs))
                try:
                    stats = timer.measure(fn)
                except Exception as exc:  # noqa: BLE001 - reported in the CSV and the summary
                    sink.write({"part": "moe", "op": op, "model": MOE_MODEL, "tp": tp, "m": m, "k": k, "n": n,
                                "note": f"FAILED: {str(exc).splitlines()[0][:200]}", "measurement_id": sink.new_id()})
                    summary.append(f"moe {op} tp{tp} M={m}: failed ({str(exc).splitlines()[0][:100]})")
                    break
                touched = sum(1 for c in counts if c)
                label = f"moe:{op}:{m}"
                labelled.append((label, fn))
                pending.append((label, {"part": "moe", "op": op, "model": MOE_MODEL, "tp": tp, "m": m, "k": k, "n": n,
                                        "batch": rows, "flops": 2 * rows * n * k,
                                        "bytes": 2 * (rows * k + touched * n * k + rows * n),
                                        "measurement_id": sink.new_id(),
                                        "note": f"torch._grouped_mm over {e} experts; m = tokens, batch = tokens x top-{topk} "
                                                f"rows spread evenly; {touched} experts touched", **stats}))
            del w, w_t
        names = kernel_names(torch, labelled)
        for label, row in pending:
            sink.write({**row, "kernel": names[label]})
        print(f"  moe tp{tp}: {len(pending)} shapes", flush=True)
        torch.cuda.empty_cache()
    return summary


def _cumsum(values: Iterable[int]) -> Iterable[int]:
    total = 0
    for v in values:
        total += v
        yield total


#: SDPA backend sets: "auto" lets flash (FlashAttention-2 in PyTorch) run, then memory-efficient,
#: then cuDNN, in that priority; "cudnn" allows cuDNN alone (closer to the FA3-class kernels vLLM runs
#: on Hopper). Which kernel actually ran is read from the profiler, not assumed.
ATTN_SETS = {"auto": ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"), "cudnn": ("CUDNN_ATTENTION",)}


def sdpa_ctx(torch, attn_set: str = "auto"):
    """The sdpa_kernel context for a backend set, with that priority order where torch allows it.
    The math backend is never allowed: at these sizes it would materialise score matrices of
    many GB and measure nothing vLLM runs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [getattr(SDPBackend, name) for name in ATTN_SETS[attn_set]]
    try:
        return sdpa_kernel(backends, set_priority=True)
    except TypeError:
        return sdpa_kernel(backends)


def decode_fn(torch, q, k, v):
    F = torch.nn.functional
    return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def prefill_fn(torch, q, k, v):
    """Causal chunk-at-depth attention; depth 0 uses is_causal (both alignments agree there)."""
    from torch.nn.attention.bias import causal_lower_right

    F = torch.nn.functional
    c, total = q.shape[-2], k.shape[-2]
    if c == total:
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    mask = causal_lower_right(c, total)
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def check_attention(torch) -> list[str]:
    """Small random cases against a float64 reference with explicit masks: decode (GQA) and a
    chunk at depth (lower-right causal). Returns one line per check; raises if one is off."""
    lines = []
    gen = torch.Generator(device="cuda").manual_seed(int(time.time()))
    hq, hkv, d = 8, 2, 128
    for name, c, total in (("decode", 1, 3000), ("prefill_at_depth", 256, 1280), ("prefill_depth0", 512, 512)):
        b = 3 if name == "decode" else 1
        q = torch.randn(b, hq, c, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k = torch.randn(b, hkv, total, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        v = torch.randn(b, hkv, total, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        with sdpa_ctx(torch, "auto"):
            out = (decode_fn(torch, q, k, v) if name == "decode" else prefill_fn(torch, q, k, v))()
        qr, kr, vr = (t.double().cpu() for t in (q, k, v))
        kr = kr.repeat_interleave(hq // hkv, dim=1)
        vr = vr.repeat_interleave(hq // hkv, dim=1)
        scores = qr @ kr.transpose(-2, -1) / math.sqrt(d)
        qpos = torch.arange(total - c, total).unsqueeze(1)
        kpos = torch.arange(total).unsqueeze(0)
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        ref = torch.softmax(scores, dim=-1) @ vr
        err = ((out.double().cpu() - ref).norm() / ref.norm()).item()
        lines.append(f"check {name}: rel err {err:.2e}")
        if not err < 2e-2:
            raise RuntimeError(f"attention check {name} failed: relative error {err:.3e}")
    return lines


def attn_bytes_flops(b: int, hq: int, hkv: int, d: int, c: int, ctx: int, keys_seen: float) -> tuple[float, float]:
    """(flops, bytes) of attention: QK^T and PV at 2 FLOPs per multiply-add each over the keys
    each query sees; bytes = q + out + K + V, bf16, each once."""
    flops = 4.0 * b * hq * d * keys_seen
    nbytes = 2.0 * (2 * b * hq * c * d + 2 * b * hkv * ctx * d)
    return flops, nbytes


def run_decode(torch, timer: Timer, sink: Sink, args: argparse.Namespace, grid: list) -> list[str]:
    summary = check_attention(torch)
    configs: dict[tuple, list] = {}
    for cfg, b, l in grid:
        configs.setdefault((cfg["q_heads"], cfg["kv_heads"], cfg["head_dim"]), [cfg, []])[1].append((b, l))
    for (hq, hkv, d), (cfg, items) in configs.items():
        t0 = time.time()
        by_len: dict[int, list[int]] = {}
        for b, l in items:
            if 2 * b * hkv * l * d * 2 <= args.max_kv_gb * 1e9:
                by_len.setdefault(l, []).append(b)
        skipped = [(b, l) for b, l in items if b not in by_len.get(l, [])]
        if skipped:
            summary.append(f"decode hq={hq} hkv={hkv}: skipped over {args.max_kv_gb} GB of K+V: {skipped}")
        for l, batches in sorted(by_len.items()):
            bl = max(batches)
            k = torch.randn(bl, hkv, l, d, dtype=torch.bfloat16, device="cuda")
            v = torch.randn(bl, hkv, l, d, dtype=torch.bfloat16, device="cuda")
            q_all = torch.randn(bl, hq, 1, d, dtype=torch.bfloat16, device="cuda")
            for attn_set in args.attn_sets:
                labelled, pending = [], []
                for b in sorted(batches):
                    q, kb, vb = q_all[:b], k[:b], v[:b]  # leading-dim slices: each stays contiguous
                    eager = decode_fn(torch, q, kb, vb)
                    flops, nbytes = attn_bytes_flops(b, hq, hkv, d, 1, l, l)
                    row = {"part": "decode", "op": "attn_decode", "batch": b, "kv_len": l, "q_heads": hq,
                           "kv_heads": hkv, "head_dim": d, "flops": flops, "bytes": nbytes}
                    graph_note = "CUDA graph replay"
                    graph = None
                    try:
                        with sdpa_ctx(torch, attn_set):
                            try:
                                fn, graph = capture(torch, eager)
                            except Exception as exc:  # noqa: BLE001 - fall back to eager, and say so
                                if attn_set != "auto":
                                    raise
                                fn = eager
                                graph_note = f"eager (graph capture failed: {str(exc).splitlines()[0][:120]})"
                            stats = timer.measure(fn)
                    except Exception as exc:  # noqa: BLE001 - a backend that refuses a shape is a result too
                        write_for_users(sink, cfg, {**row, "backend": f"{attn_set}: none",
                                                    "note": f"FAILED with set {attn_set}: {str(exc).splitlines()[0][:200]}"})
                        continue
                    label = f"decode:{attn_set}:{b}:{l}"
                    labelled.append((label, eager))
                    pending.append((label, {**row, "cuda_graph": int(graph is not None),
                                            "note": f"SDPA q_len 1, enable_gqa, set {attn_set}; {graph_note}", **stats}))
                    del graph
                with sdpa_ctx(torch, attn_set):
                    names = kernel_names(torch, labelled)
                for label, row in pending:
                    write_for_users(sink, cfg, {**row, "kernel": names[label], "backend": backend_of(names[label])})
                    if row["batch"] == 1 and row["kv_len"] == 64 * K and hkv == 8:
                        summary.append(f"decode {attn_set} B=1 L=64K hq={hq} hkv={hkv}: {row['median_ms']:.4f} ms "
                                       f"({row['bytes'] / (row['median_ms'] * 1e-3) / 1e9:.0f} GB/s, {backend_of(names[label])}, "
                                       f"graph {row['cuda_graph']})")
            del k, v, q_all
            torch.cuda.empty_cache()
        print(f"  decode hq={hq} hkv={hkv} d={d}: {len(items)} points x {len(args.attn_sets)} sets "
              f"in {time.time() - t0:.1f} s", flush=True)
    return summary


def capture(torch, fn):
    """Capture ``fn`` in a CUDA graph (warm-up on a side stream first, as PyTorch requires)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay, graph


def write_for_users(sink: Sink, cfg: dict, row: dict) -> None:
    """One measured attention shape, written once per (model, tp) that has it (same measurement_id)."""
    mid = sink.new_id()
    for model, tp in cfg["users"]:
        sink.write({**row, "model": model, "tp": tp, "measurement_id": mid})


def run_prefill(torch, timer: Timer, sink: Sink, args: argparse.Namespace, grid: list) -> list[str]:
    summary = [] if "decode" in args.parts_list else check_attention(torch)
    configs: dict[tuple, list] = {}
    for cfg, c, dep in grid:
        configs.setdefault((cfg["q_heads"], cfg["kv_heads"], cfg["head_dim"]), [cfg, []])[1].append((c, dep))
    for (hq, hkv, d), (cfg, items) in configs.items():
        t0 = time.time()
        c_max = max(c for c, _ in items)
        total_max = max(c + dep for c, dep in items)
        # One buffer per config, sliced along the sequence: each head's rows stay contiguous.
        q_all = torch.randn(1, hq, c_max, d, dtype=torch.bfloat16, device="cuda")
        k_all = torch.randn(1, hkv, total_max, d, dtype=torch.bfloat16, device="cuda")
        v_all = torch.randn(1, hkv, total_max, d, dtype=torch.bfloat16, device="cuda")
        for attn_set in args.attn_sets:
            labelled, pending = [], []
            for c, dep in items:
                if attn_set == "cudnn" and dep:
                    continue  # lower-right causal reaches cuDNN only as a materialised mask: not measured
                total = c + dep
                fn = prefill_fn(torch, q_all[:, :, :c], k_all[:, :, :total], v_all[:, :, :total])
                keys_seen = c * dep + c * (c + 1) / 2
                flops, nbytes = attn_bytes_flops(1, hq, hkv, d, c, total, keys_seen)
                row = {"part": "prefill", "op": "attn_prefill_chunk", "chunk": c, "depth": dep, "kv_len": total,
                       "batch": 1, "q_heads": hq, "kv_heads": hkv, "head_dim": d, "cuda_graph": 0,
                       "flops": flops, "bytes": nbytes}
                try:
                    with sdpa_ctx(torch, attn_set):
                        stats = timer.measure(fn, n_max=args.n_max_attn)
                except Exception as exc:  # noqa: BLE001 - a backend that refuses a shape is a result too
                    write_for_users(sink, cfg, {**row, "backend": f"{attn_set}: none",
                                                "note": f"FAILED with set {attn_set}: {str(exc).splitlines()[0][:200]}"})
                    continue
                label = f"prefill:{attn_set}:{c}:{dep}"
                labelled.append((label, fn))
                pending.append((label, {**row, **stats, "note": f"SDPA causal_lower_right(C, D+C), enable_gqa, "
                                                                  f"set {attn_set}; depth 0: is_causal"}))
            with sdpa_ctx(torch, attn_set):
                names = kernel_names(torch, labelled)
            for label, row in pending:
                write_for_users(sink, cfg, {**row, "kernel": names[label], "backend": backend_of(names[label])})
                if row["chunk"] == 8 * K and row["depth"] in (0, 32 * K) and hkv == 8:
                    summary.append(f"prefill {attn_set} C=8K D={row['depth'] // K}K hq={hq} hkv={hkv}: "
                                   f"{row['median_ms']:.3f} ms ({row['flops'] / (row['median_ms'] * 1e-3) / 1e12:.0f} "
                                   f"TFLOP/s, {backend_of(names[label])})")
        del q_all, k_all, v_all
        torch.cuda.empty_cache()
        print(f"  prefill hq={hq} hkv={hkv} d={d}: {len(items)} points x {len(args.attn_sets)} sets "
              f"in {time.time() - t0:.1f} s", flush=True)
    return summary


def run_mixed(torch, timer: Timer, sink: Sink, args: argparse.Namespace, shapes: dict, grid: list) -> list[str]:
    F = torch.nn.functional
    summary = []
    for model, tp, b, l, c, dep in grid:
        info = shapes["models"][model]
        s = info["per_gpu"][str(tp)]
        hq, hkv, d = s["q_heads"], s["kv_heads"], s["head_dim"]
        m = b + c
        ops = {}
        for op, (k_in, n_out) in s["gemms"].items():
            w = torch.randn(n_out, k_in, dtype=torch.bfloat16, device="cuda") * 0.02
            x = torch.randn(m, k_in, dtype=torch.bfloat16, device="cuda")
            bias = torch.randn(n_out, dtype=torch.bfloat16, device="cuda") if (info["qkv_bias"] and op == "qkv_proj") else None
            ops[op] = (lambda x=x, w=w, bias=bias: F.linear(x, w, bias), 2 * m * n_out * k_in,
                       2 * (m * k_in + n_out * k_in + m * n_out), {"m": m, "k": k_in, "n": n_out})
        qd = torch.randn(b, hq, 1, d, dtype=torch.bfloat16, device="cuda")
        kd = torch.randn(b, hkv, l, d, dtype=torch.bfloat16, device="cuda")
        vd = torch.randn(b, hkv, l, d, dtype=torch.bfloat16, device="cuda")
        qp = torch.randn(1, hq, c, d, dtype=torch.bfloat16, device="cuda")
        kp = torch.randn(1, hkv, dep + c, d, dtype=torch.bfloat16, device="cuda")
        vp = torch.randn(1, hkv, dep + c, d, dtype=torch.bfloat16, device="cuda")
        fd, bd = attn_bytes_flops(b, hq, hkv, d, 1, l, l)
        fp, bp = attn_bytes_flops(1, hq, hkv, d, c, dep + c, c * dep + c * (c + 1) / 2)
        ops["attn_decode"] = (decode_fn(torch, qd, kd, vd), fd, bd, {"batch": b, "kv_len": l})
        ops["attn_prefill_chunk"] = (prefill_fn(torch, qp, kp, vp), fp, bp, {"chunk": c, "depth": dep})
        order = [name for name in ("qkv_proj", "attn_decode", "attn_prefill_chunk", "o_proj", "gate_up", "down",
                                   "router", "expert_gate_up", "expert_down") if name in ops]

        def step(order=order, ops=ops):
            for name in order:
                ops[name][0]()

        common = {"part": "mixed", "model": model, "tp": tp, "batch": b, "kv_len": l, "chunk": c, "depth": dep,
                  "q_heads": hq, "kv_heads": hkv, "head_dim": d, "m": m, "cuda_graph": 0}
        mid = sink.new_id()
        total_parts = 0.0
        with sdpa_ctx(torch):
            names = kernel_names(torch, [(name, ops[name][0]) for name in order])
            for name in order:
                fn, flops, nbytes, extra = ops[name]
                stats = timer.measure(fn, n_max=args.n_max_attn)
                total_parts += stats["median_ms"]
                sink.write({**common, **extra, "op": name, "flops": flops, "bytes": nbytes, "kernel": names[name],
                            "backend": backend_of(names[name]) if name.startswith("attn") else "",
                            "measurement_id": mid, "note": "part of the mixed step, timed alone (L2 flushed)", **stats})
            stats = timer.measure(step, n_max=args.n_max_attn)
        sink.write({**common, "op": "step_total", "flops": sum(o[1] for o in ops.values()),
                    "bytes": sum(o[2] for o in ops.values()), "measurement_id": mid,
                    "note": f"{' > '.join(order)} in one eager sequence, L2 flushed once before; "
                            f"sum of parts timed alone {total_parts:.4f} ms", **stats})
        summary.append(f"mixed {model} tp{tp} B={b} L={l // K}K C={c // K}K D={dep // K}K: "
                       f"{stats['median_ms']:.3f} ms (parts {total_parts:.3f})")
        del ops, qd, kd, vd, qp, kp, vp
        torch.cuda.empty_cache()
    return summary


# ----- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=Path, default=Path(__file__).with_name("shapes.json"))
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    p.add_argument("--kind", default="nvidia-h200", help="label of the machine, used in the file name and rows")
    p.add_argument("--parts", default=",".join(ALL_PARTS), help=f"comma list of {', '.join(ALL_PARTS)}")
    p.add_argument("--models", nargs="*", help="catalog names (default: all in shapes.json)")
    p.add_argument("--tps", nargs="*", type=int)
    p.add_argument("--quick", action="store_true", help="a tiny grid, to check the script and time it")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--n-min", type=int, default=5)
    p.add_argument("--n-max", type=int, default=50)
    p.add_argument("--n-max-attn", type=int, default=20, help="cap on timed calls for prefill and mixed")
    p.add_argument("--target-s", type=float, default=0.15, help="seconds of timed calls aimed at per point")
    p.add_argument("--max-kv-gb", type=float, default=60.0, help="skip decode points whose K+V exceed this")
    p.add_argument("--attn-sets", default="auto,cudnn", help=f"SDPA backend sets for decode/prefill: {', '.join(ATTN_SETS)}")
    p.add_argument("--stem", help="output file stem (default <kind>_<parts>[_quick])")
    p.add_argument("--list", action="store_true", help="print the grid sizes and exit (no GPU needed)")
    args = p.parse_args(argv)
    args.parts_list = [x.strip() for x in args.parts.split(",") if x.strip()]
    args.attn_sets = [x.strip() for x in args.attn_sets.split(",") if x.strip()]
    if any(x not in ATTN_SETS for x in args.attn_sets):
        p.error(f"--attn-sets: choose from {list(ATTN_SETS)}")
    bad = [x for x in args.parts_list if x not in ALL_PARTS]
    if bad:
        p.error(f"unknown part(s) {bad}; choose from {ALL_PARTS}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shapes = load_shapes(args.shapes)
    grid = plan(args, shapes)
    counts = {part: (2 if part == "ceiling" else len(grid[part])) for part in args.parts_list}
    print(f"grid: {counts}", flush=True)
    if args.list:
        return 0

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or f"{args.kind}_{'-'.join(args.parts_list)}{'_quick' if args.quick else ''}"
    env = environment(torch, args)
    run_id = f"{stem}@{env['date_utc']}"
    common = {"run_id": run_id, "date_utc": env["date_utc"], "gpu": env["gpu"], "kind": args.kind,
              "torch": torch.__version__, "dtype": "bf16"}
    sink = Sink(args.out / f"{stem}.csv", common)
    timer = Timer(torch, args)
    env["flush_bytes"] = timer.flush_bytes
    env["queue_fill_spin"] = timer.can_sleep
    env["timing"] = {"warmup": args.warmup, "n_min": args.n_min, "n_max": args.n_max, "n_max_attn": args.n_max_attn,
                     "target_s": args.target_s, "quick": args.quick}
    torch.manual_seed(0)
    summary: list[str] = []
    part_seconds: dict[str, float] = {}
    t_start = time.time()
    failures: list[str] = []
    for part in args.parts_list:
        t0 = time.time()
        print(f"== {part} ({counts[part]} points)", flush=True)
        try:
            if part == "ceiling":
                summary += run_ceiling(torch, timer, sink, args)
            elif part == "gemm":
                summary += run_gemm(torch, timer, sink, args, shapes, grid["gemm"])
            elif part == "moe":
                summary += run_moe(torch, timer, sink, args, shapes, grid["moe"])
            elif part == "decode":
                summary += run_decode(torch, timer, sink, args, grid["decode"])
            elif part == "prefill":
                summary += run_prefill(torch, timer, sink, args, grid["prefill"])
            elif part == "mixed":
                summary += run_mixed(torch, timer, sink, args, shapes, grid["mixed"])
        except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others' rows
            import traceback

            traceback.print_exc()
            failures.append(f"{part}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            torch.cuda.empty_cache()
        part_seconds[part] = round(time.time() - t0, 1)
        print(f"== {part} done in {part_seconds[part]} s", flush=True)
    sink.close()
    env["nvidia_smi_after"] = nvidia_smi()
    env["part_seconds"] = part_seconds
    env["total_seconds"] = round(time.time() - t_start, 1)
    env["rows"] = sink.rows
    env["failures"] = failures
    env["summary"] = summary
    (args.out / f"{stem}.meta.json").write_text(json.dumps(env, indent=1, default=str) + "\n", encoding="utf-8")
    print("\n".join(["---- summary", *summary, *(f"FAILED {f}" for f in failures),
                     f"rows {sink.rows}, parts {part_seconds}, total {env['total_seconds']} s"]), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

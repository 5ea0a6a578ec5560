"""Measure the tensor-parallel all-reduce on one host's GPUs with torch.distributed and NCCL (issue 9).

Why: the step-time model (``vllm_advisor.perf.step_time``) charges tensor parallelism two
all-reduces of the hidden state per layer, ``latency + tokens x hidden x 2 bytes x 2 (tp-1)/tp /
(link bandwidth x eff_comm)`` each, with sourced constants (15 µs, 0.70). This script measures
what that term stands for, so ``fit_comm.py`` can fit it.

Launch one process per GPU:

    torchrun --nproc_per_node N benchmarks/gpu/measure_allreduce.py --out $OUT

(``python3 benchmarks/gpu/measure_allreduce.py`` alone runs as world size 1.) What it measures:

- ``allreduce``: ``dist.all_reduce`` (SUM, in place) of a bf16 tensor, for log-spaced message
  sizes from 8 KiB to 16384 x 8192 x 2 bytes (256 MiB) plus the exact sizes of the catalog's
  models (``shapes.json``): decode steps (batch 1 ... 256 tokens x hidden x 2 bytes) and prefill
  chunks (512 ... 16384 tokens). The message is the same at every TP: the all-reduced hidden state
  is not sharded. Two modes:

  - ``eager``: K calls back to back, as launched from Python (the CPU's launch pace counts, as
    in nccl-tests' default mode and in vLLM's eager prefill);
  - ``graph``: the same K calls captured in one CUDA graph and replayed (GPU time only, as in
    vLLM's CUDA-graph decode steps).

  Per sample: refill with random data, agree on a start (one untimed all-reduce), CUDA events
  around the K calls, time / K. The median over samples on each rank, then the slowest rank's
  (a TP step waits for it). ``algbw = bytes / time``; ``busbw = algbw x 2 (n-1) / n``, as
  nccl-tests defines it, which is the rate at which each link carries the ring's traffic: the
  model's ``link bandwidth x eff_comm``.

- ``layer``: one tensor-parallel transformer layer of Qwen2.5-32B and Llama-3.1-70B at TP = the
  world size: the sharded ``qkv_proj``, ``o_proj`` + all-reduce, ``gate_up``, ``down`` +
  all-reduce (per-GPU shapes from ``shapes.json``; attention, norms and activation are not
  included), timed end to end (``step_total``) and part by part, each part alone, so the
  whole can be compared with the sum of its parts. An L2 flush before each timed call and a spin
  kernel ahead of the timed calls (the CPU enqueues them all before the GPU reaches them), as in
  ``measure_step_parts.py``.

NVLink multicast (NVLS) stays off: the script sets ``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1`` before torch is imported and
refuses to run if any of them is set to another value, or if ``NCCL_ALGO`` names NVLS. On the lent
machines a program that uses multicast can put the host's shared GPUs out of service.

World size 1 is a smoke test: the all-reduce has nothing to exchange, so its rows are marked
``purpose = smoke`` and ``fit_comm.py`` ignores them. ``--device cpu`` runs the same sequence on
gloo with host timers, to check the multi-process logic on a machine without GPUs; its rows are
``purpose = cpu-check`` and are not data either.

Output (rank 0, under ``--out``): ``<stem>.csv`` (one row per measurement, written as it goes),
``<stem>.meta.json`` (GPUs, driver, NCCL and torch versions, world size, ``nvidia-smi topo -m``,
NVLink status, the environment's NCCL/torch/NVSHMEM variables, the correctness check, timings),
and ``<stem>.nccl-rank0.log`` (NCCL's own INIT/ENV/GRAPH/TUNING log of rank 0: rings, trees,
protocol table, NVLS state). ``--list`` prints the message sizes without torch.
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
from typing import Callable

#: NVLink multicast off, as the device README requires. Set before torch/NCCL are loaded.
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ELEMENT_BYTES = 2  # bf16
MIN_LOG_BYTES = 8 * 1024
MAX_LOG_BYTES = 16384 * 8192 * ELEMENT_BYTES  # a 16K-token prefill chunk of a hidden-8192 model: 256 MiB
DECODE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_TOKENS = (512, 1024, 2048, 4096, 8192, 16384)
LAYER_MODELS = ("Qwen2.5-32B-Instruct", "Llama-3.1-70B-Instruct")
LAYER_TOKENS = (1, 8, 32, 128, 512, 2048, 8192)
LAYER_GEMMS = ("qkv_proj", "o_proj", "gate_up", "down")

CSV_COLUMNS = [
    "run_id", "date_utc", "gpu", "kind", "device", "torch", "nccl", "world_size", "purpose", "part", "mode", "op",
    "model", "tp", "tokens", "hidden", "m", "k", "n", "bytes", "size_source", "size_users",
    "calls_per_sample", "n_samples", "median_us", "p10_us", "p90_us", "mean_us", "min_rank_median_us",
    "algbw_gbs", "busbw_gbs", "achieved_tflops", "measurement_id", "note",
]


# ----- safety and sizes (no torch needed) -----------------------------------------------------


def enforce_no_multicast(environ: dict[str, str] | os._Environ) -> None:
    """Set the three no-multicast variables, or stop if something asks for multicast.

    Why refuse rather than overwrite: a variable set to enable multicast was set on purpose by
    whoever launched the run; silently changing it would hide that, and running with it could take
    the shared host's GPUs out of service."""
    bad = [f"{k}={environ[k]!r} (must be {v!r})" for k, v in NO_MULTICAST_ENV.items() if k in environ and environ[k] != v]
    if "nvls" in environ.get("NCCL_ALGO", "").lower():
        bad.append(f"NCCL_ALGO={environ['NCCL_ALGO']!r} names NVLS")
    if bad:
        raise SystemExit("measure_allreduce: refusing to run with NVLink multicast allowed: " + "; ".join(bad))
    for k, v in NO_MULTICAST_ENV.items():
        environ[k] = v


def log_sizes(min_bytes: int = MIN_LOG_BYTES, max_bytes: int = MAX_LOG_BYTES, per_octave: int = 2) -> list[int]:
    """Message sizes in bytes, ``per_octave`` per doubling, rounded to whole bf16 elements."""
    octaves = math.log2(max_bytes / min_bytes)
    steps = round(octaves * per_octave)
    sizes = {int(round(min_bytes * 2 ** (i / per_octave) / ELEMENT_BYTES)) * ELEMENT_BYTES for i in range(steps + 1)}
    return sorted(sizes)


def message_sizes(shapes: dict, *, per_octave: int = 2, max_bytes: int = MAX_LOG_BYTES) -> dict[int, dict]:
    """Every message size to measure -> where it comes from (``log`` grid and/or ``model``) and which
    (model, tokens) pairs send it. The all-reduced tensor is tokens x hidden at every TP."""
    out: dict[int, dict] = {}
    for size in log_sizes(per_octave=per_octave, max_bytes=max_bytes):
        out.setdefault(size, {"sources": set(), "users": []})["sources"].add("log")
    for model, info in shapes["models"].items():
        hidden = info["hidden_size"]
        for phase, tokens_list in (("decode", DECODE_TOKENS), ("prefill", PREFILL_TOKENS)):
            for tokens in tokens_list:
                size = tokens * hidden * ELEMENT_BYTES
                if size > max_bytes:
                    continue
                entry = out.setdefault(size, {"sources": set(), "users": []})
                entry["sources"].add(f"model-{phase}")
                entry["users"].append(f"{model} T={tokens}")
    return dict(sorted(out.items()))


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2 (n-1) / n: each rank sends and receives that
    fraction of the message over its links in a ring (0 for one rank: nothing moves)."""
    return 2.0 * (world_size - 1) / world_size


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of an ascending list."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def local_stats(times_us: list[float]) -> dict[str, float]:
    s = sorted(times_us)
    return {"median_us": statistics.median(s), "p10_us": percentile(s, 10), "p90_us": percentile(s, 90),
            "mean_us": statistics.fmean(s)}


# ----- the distributed context ----------------------------------------------------------------


class Dist:
    """Rank, device, process group and the timing primitives, for CUDA/NCCL or CPU/gloo.

    Every method that issues a collective must be called by all ranks in the same order with the
    same arguments; values that steer the sequence (call counts) are agreed with :meth:`agree_max`."""

    def __init__(self, torch, args: argparse.Namespace) -> None:
        import torch.distributed as dist

        self.torch, self.dist, self.args = torch, dist, args
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.cuda = args.device == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            dist.init_process_group("nccl", device_id=self.device)
            props = torch.cuda.get_device_properties(self.device)
            l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
            self.flush_buf = torch.empty(max(4 * l2, 256 * 2**20) // 4, dtype=torch.int32, device=self.device)
            self.cycles_per_ms = getattr(props, "clock_rate", 0) or 1_980_000  # kHz = cycles per ms
        else:
            self.device = torch.device("cpu")
            dist.init_process_group("gloo")
            self.flush_buf = torch.empty(2**20, dtype=torch.int32)
            self.cycles_per_ms = 0

    # -- agreement across ranks
    def agree_max(self, value: float) -> float:
        t = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def agree_min(self, value: float) -> float:
        t = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN)
        return float(t.item())

    def across_ranks(self, stats: dict[str, float]) -> dict[str, float]:
        """The slowest rank's statistics (a TP step waits for it) and the fastest rank's median."""
        keys = ("median_us", "p10_us", "p90_us", "mean_us")
        t = self.torch.tensor([stats[k] for k in keys], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        out = dict(zip(keys, (float(v) for v in t.tolist())))
        out["min_rank_median_us"] = self.agree_min(stats["median_us"])
        return out

    # -- timing primitives
    def synchronize(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        self.flush_buf.zero_()

    def fill_queue(self, ms: float) -> None:
        """Hold the GPU in a spin kernel while the CPU enqueues the timed calls, so that calls shorter
        than their launch cost are timed on the GPU, not at the CPU's pace."""
        if self.cuda and hasattr(self.torch.cuda, "_sleep"):
            self.torch.cuda._sleep(int(self.cycles_per_ms * min(100.0, ms)))

    def stamp(self):
        """A point in time: a recorded CUDA event, or the host clock after the (synchronous) CPU work."""
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def elapsed_us(self, start, end) -> float:
        if self.cuda:
            return start.elapsed_time(end) * 1e3
        return (end - start) * 1e6

    def align(self, buf) -> None:
        """One untimed all-reduce: ranks leave it together, so the next timed call starts without skew."""
        self.dist.all_reduce(buf)


# ----- all-reduce sweep -----------------------------------------------------------------------


def check_allreduce(d: Dist, buf) -> dict:
    """All-reduce a known pattern at a small and the largest size and compare exactly:
    element i of rank r holds (i mod 7) + r, so the sum is n (i mod 7) + n (n-1) / 2
    (small integers, exact in bf16)."""
    torch = d.torch
    results = {}
    for count in (4096, buf.numel()):
        x = buf[:count]
        pattern = torch.arange(count, device=d.device) % 7
        x.copy_(pattern + d.rank)
        d.dist.all_reduce(x)
        expected = (pattern * d.world + d.world * (d.world - 1) // 2).to(torch.bfloat16)
        wrong = int((x != expected).sum().item())
        results[f"{count * ELEMENT_BYTES} bytes"] = "exact" if wrong == 0 else f"{wrong} wrong elements"
    worst = d.agree_max(sum(0 if v == "exact" else 1 for v in results.values()))
    results["all ranks exact"] = worst == 0
    return results


def time_allreduce(d: Dist, x, mode: str, calls: int, samples: int) -> tuple[list[float], str]:
    """Per-call times (µs) of ``samples`` samples of ``calls`` back-to-back all-reduces of ``x``."""
    torch, dist = d.torch, d.dist
    replay: Callable[[], object]
    note = ""
    graph = None
    if mode == "graph":
        ok = 1.0
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                dist.all_reduce(x)
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for _ in range(calls):
                    dist.all_reduce(x)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported as a row, never a hang: all ranks agree below
            ok = 0.0
            note = f"graph capture failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        if d.agree_min(ok) < 1.0:
            return [], note or "graph capture failed on another rank"
        replay = graph.replay

    else:
        def replay() -> None:
            for _ in range(calls):
                dist.all_reduce(x)

    times = []
    for _ in range(samples):
        x.normal_()
        d.synchronize()
        d.align(x)
        start = d.stamp()
        replay()
        end = d.stamp()
        d.synchronize()
        times.append(d.elapsed_us(start, end) / calls)
    del graph
    return times, note


def run_allreduce(d: Dist, sink: "Sink | None", args: argparse.Namespace, sizes: dict[int, dict], summary: list[str]) -> dict:
    torch = d.torch
    largest = max(sizes)
    buf = torch.empty(largest // ELEMENT_BYTES, dtype=torch.bfloat16, device=d.device)
    check = check_allreduce(d, buf)
    buf.normal_()
    modes = [m for m in args.modes if m != "graph" or d.cuda]
    factor = bus_factor(d.world)
    for size, info in sizes.items():
        x = buf[: size // ELEMENT_BYTES]
        for _ in range(args.warmup):
            d.dist.all_reduce(x)
        d.synchronize()
        # Calls per sample: enough for ~target_sample_us of work, agreed across ranks (the same K everywhere).
        d.align(x)
        start = d.stamp()
        for _ in range(3):
            d.dist.all_reduce(x)
        end = d.stamp()
        d.synchronize()
        est_us = d.agree_max(d.elapsed_us(start, end) / 3)
        calls = int(min(args.max_calls, max(1, args.target_sample_us / max(est_us, 1e-3))))
        for mode in modes:
            times, note = time_allreduce(d, x, mode, calls, args.samples)
            if not times:
                if sink:
                    sink.write({"part": "allreduce", "mode": mode, "op": "all_reduce_sum", "bytes": size,
                                "note": f"FAILED: {note}"})
                continue
            stats = d.across_ranks(local_stats(times))
            if sink:
                t = stats["median_us"] * 1e-6
                algbw = size / t / 1e9 if t > 0 else 0.0
                sink.write({"part": "allreduce", "mode": mode, "op": "all_reduce_sum", "bytes": size,
                            "size_source": "+".join(sorted(info["sources"])), "size_users": "; ".join(info["users"]),
                            "calls_per_sample": calls, "n_samples": len(times), **stats,
                            "algbw_gbs": round(algbw, 3), "busbw_gbs": round(algbw * factor, 3),
                            "measurement_id": sink.new_id(),
                            "note": note or f"in-place SUM bf16, {calls} calls per sample ({mode}), "
                                            f"median per rank then the slowest rank"})
                if size in (10240, 2 * 1024 * 1024, 16 * 2**20, largest) or (mode == modes[0] and size == min(sizes)):
                    summary.append(f"allreduce {mode:5s} {size / 1024:>9.1f} KiB: {stats['median_us']:9.2f} us, "
                                   f"busbw {algbw * factor:7.1f} GB/s")
    del buf
    if d.cuda:
        torch.cuda.empty_cache()
    return check


# ----- layer step -----------------------------------------------------------------------------


def time_calls(d: Dist, fn: Callable[[], object], args: argparse.Namespace) -> dict[str, float]:
    """Per-call times with an L2 flush before each call and the queue filled: the slowest rank's
    statistics. The number of calls is agreed across ranks (``fn`` may hold collectives)."""
    for _ in range(args.warmup):
        d.flush()
        fn()
    d.synchronize()
    d.flush()
    start = d.stamp()
    fn()
    end = d.stamp()
    d.synchronize()
    est_us = d.agree_max(d.elapsed_us(start, end))
    n = int(min(args.samples, max(5, args.target_layer_s * 1e6 / max(est_us, 1.0))))
    stamps = []
    d.fill_queue(1.0 + 0.2 * n)
    for _ in range(n):
        d.flush()
        s = d.stamp()
        fn()
        e = d.stamp()
        stamps.append((s, e))
    d.synchronize()
    times = [d.elapsed_us(s, e) for s, e in stamps]
    stats = d.across_ranks(local_stats(times))
    stats["n_samples"] = n
    return stats


def run_layer(d: Dist, sink: "Sink | None", args: argparse.Namespace, shapes: dict, summary: list[str]) -> None:
    torch = d.torch
    F = torch.nn.functional
    tp = d.world
    dtype = torch.bfloat16
    for model in args.layer_models:
        info = shapes["models"][model]
        hidden = info["hidden_size"]
        gemms = info["per_gpu"][str(tp)]["gemms"]
        weights = {}
        for op in LAYER_GEMMS:
            k, n = gemms[op]
            w = torch.randn(n, k, dtype=dtype, device=d.device) * 0.02
            bias = torch.randn(n, dtype=dtype, device=d.device) if (info["qkv_bias"] and op == "qkv_proj") else None
            weights[op] = (w, bias)
        for tokens in args.layer_tokens:
            xs = {op: torch.randn(tokens, gemms[op][0], dtype=dtype, device=d.device) for op in LAYER_GEMMS}
            ar_buf = torch.randn(tokens, hidden, dtype=dtype, device=d.device)

            def gemm(op: str, xs=xs):
                w, bias = weights[op]
                return F.linear(xs[op], w, bias)

            def step() -> None:
                gemm("qkv_proj")  # attention would consume it: not timed here
                h = gemm("o_proj")
                d.dist.all_reduce(h)
                gemm("gate_up")  # activation not timed
                y = gemm("down")
                d.dist.all_reduce(y)

            parts = {op: (lambda op=op: gemm(op)) for op in LAYER_GEMMS}
            parts["allreduce"] = lambda: d.dist.all_reduce(ar_buf)
            mid = sink.new_id() if sink else 0
            common = {"part": "layer", "mode": "eager-queued", "model": model, "tp": tp, "tokens": tokens,
                      "hidden": hidden, "measurement_id": mid}
            total_parts = 0.0
            for op, fn in parts.items():
                stats = time_calls(d, fn, args)
                count = 2 if op == "allreduce" else 1
                total_parts += count * stats["median_us"]
                if sink:
                    extra = {"bytes": tokens * hidden * ELEMENT_BYTES} if op == "allreduce" else {
                        "m": tokens, "k": gemms[op][0], "n": gemms[op][1],
                        "achieved_tflops": round(2 * tokens * gemms[op][0] * gemms[op][1] / (stats["median_us"] * 1e-6) / 1e12, 3)}
                    sink.write({**common, **extra, "op": op, **stats,
                                "note": f"timed alone, L2 flushed before each call; counted {count}x in the layer"})
            stats = time_calls(d, step, args)
            if sink:
                sink.write({**common, "op": "step_total", "bytes": tokens * hidden * ELEMENT_BYTES, **stats,
                            "note": f"qkv_proj > o_proj > all_reduce > gate_up > down > all_reduce, one eager sequence, "
                                    f"L2 flushed once before; sum of parts timed alone {total_parts:.2f} us"})
            summary.append(f"layer {model} tp{tp} T={tokens}: {stats['median_us']:.1f} us whole, "
                           f"{total_parts:.1f} us parts (x{stats['median_us'] / total_parts:.3f})")
            del xs, ar_buf
        del weights
        if d.cuda:
            torch.cuda.empty_cache()


# ----- output and environment -----------------------------------------------------------------


class Sink:
    """Rank 0's CSV, one row per measurement, flushed each row (a run cut short keeps its rows)."""

    def __init__(self, path: Path, common: dict) -> None:
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
        for key in ("median_us", "p10_us", "p90_us", "mean_us", "min_rank_median_us"):
            if isinstance(full[key], float):
                full[key] = round(full[key], 3)
        self.writer.writerow(full)
        self.fh.flush()
        self.rows += 1

    def close(self) -> None:
        self.fh.close()


def command_output(argv: list[str]) -> str:
    """A read-only query's output, or why it could not run."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (done.stdout + done.stderr).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{' '.join(argv)}: {exc}"


def gpu_info(torch, d: Dist) -> dict:
    """This rank's GPU, gathered on every rank (all ranks call it)."""
    info = {"rank": d.rank, "local_rank": d.local_rank, "host": socket.gethostname()}
    if d.cuda:
        props = torch.cuda.get_device_properties(d.device)
        info.update({"gpu": props.name, "sm_count": props.multi_processor_count,
                     "total_memory_bytes": props.total_memory, "compute_capability": f"{props.major}.{props.minor}",
                     "pci_bus_id": getattr(props, "pci_bus_id", None), "uuid": str(getattr(props, "uuid", ""))})
    gathered: list[dict | None] = [None] * d.world
    d.dist.all_gather_object(gathered, info)
    return {"ranks": gathered}


def environment(torch, d: Dist, args: argparse.Namespace) -> dict:
    """What rank 0 writes beside the CSV: versions, GPUs, links, variables."""
    nccl = None
    if d.cuda:
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception as exc:  # noqa: BLE001 - informational
            nccl = f"unknown ({exc})"
    env_keys = sorted(k for k in os.environ if k.startswith(("NCCL_", "TORCH_NCCL", "TORCH_SYMM", "NVSHMEM_", "CUDA_",
                                                            "TORCHELASTIC_")) or k in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    meta = {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nccl": nccl,
        "device": args.device,
        "world_size": d.world,
        "kind": args.kind,
        "argv": sys.argv,
        "env": {k: os.environ[k] for k in env_keys},
        "no_multicast_env": NO_MULTICAST_ENV,
    }
    if d.cuda:
        meta["gpu"] = torch.cuda.get_device_name(d.device)
        n_local = torch.cuda.device_count()
        meta["local_device_count"] = n_local
        meta["peer_access"] = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n_local)] for i in range(n_local)]
        meta["nvidia_smi"] = command_output(["nvidia-smi", "--query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,"
                                             "clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,pstate",
                                             "--format=csv"])
        meta["topology"] = command_output(["nvidia-smi", "topo", "-m"])
        meta["nvlink_status"] = command_output(["nvidia-smi", "nvlink", "--status"])
    else:
        meta["gpu"] = "cpu"
    return meta


def purpose_of(device: str, world: int) -> str:
    """Which rows ``fit_comm.py`` may use: only multi-GPU CUDA rows are data."""
    if device != "cuda":
        return "cpu-check"
    return "smoke" if world == 1 else "data"


# ----- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    p.add_argument("--shapes", type=Path, default=Path(__file__).with_name("shapes.json"))
    p.add_argument("--stem", help="file stem (default allreduce-smoke-1gpu at world size 1, else allreduce-<kind>)")
    p.add_argument("--kind", help="label of the machine (default nvidia-h200, or nvidia-h200-x<N>)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, host timers, a logic check only")
    p.add_argument("--parts", default="allreduce,layer", help="comma list of allreduce, layer")
    p.add_argument("--modes", default="eager,graph", help="all-reduce modes: eager, graph")
    p.add_argument("--per-octave", type=int, default=2, help="log-grid sizes per doubling")
    p.add_argument("--max-bytes", type=int, default=MAX_LOG_BYTES, help="largest message")
    p.add_argument("--layer-models", nargs="*", default=list(LAYER_MODELS))
    p.add_argument("--layer-tokens", nargs="*", type=int, default=list(LAYER_TOKENS))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--samples", type=int, default=25, help="samples per size and mode (also the cap on layer calls)")
    p.add_argument("--max-calls", type=int, default=100, help="cap on back-to-back all-reduces per sample")
    p.add_argument("--target-sample-us", type=float, default=2000.0, help="aimed-at time of one sample")
    p.add_argument("--target-layer-s", type=float, default=0.1, help="aimed-at timed seconds per layer part")
    p.add_argument("--no-nccl-log", action="store_true", help="do not write rank 0's NCCL INFO log")
    p.add_argument("--list", action="store_true", help="print the message sizes and exit (no torch)")
    args = p.parse_args(argv)
    args.parts_list = [x.strip() for x in args.parts.split(",") if x.strip()]
    args.modes = [x.strip() for x in args.modes.split(",") if x.strip()]
    if set(args.parts_list) - {"allreduce", "layer"} or set(args.modes) - {"eager", "graph"} or not args.modes:
        p.error("--parts: allreduce, layer; --modes: eager, graph")
    return args


def default_single_process_env() -> None:
    """``python3 measure_allreduce.py`` without torchrun: one rank on a local rendezvous."""
    if "RANK" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})


def main(argv: list[str] | None = None) -> int:
    enforce_no_multicast(os.environ)
    args = parse_args(argv)
    shapes = json.loads(args.shapes.read_text(encoding="utf-8"))
    sizes = message_sizes(shapes, per_octave=args.per_octave, max_bytes=args.max_bytes)
    if args.list:
        for size, info in sizes.items():
            print(f"{size:>11d} B  {'+'.join(sorted(info['sources'])):<28s} {'; '.join(info['users'])[:100]}")
        print(f"{len(sizes)} message sizes; layer: {args.layer_models} x tokens {args.layer_tokens}")
        return 0

    default_single_process_env()
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    if not args.kind:
        args.kind = "cpu" if args.device == "cpu" else "nvidia-h200" if world == 1 else f"nvidia-h200-x{world}"
    stem = args.stem or ("allreduce-smoke-1gpu" if world == 1 and args.device == "cuda" else
                         f"allreduce-{args.kind}" if args.device == "cuda" else f"allreduce-cpu-check-{world}proc")
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        if args.device == "cuda" and not args.no_nccl_log and "NCCL_DEBUG" not in os.environ:
            os.environ.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH,TUNING",
                               "NCCL_DEBUG_FILE": str(args.out / f"{stem}.nccl-rank0.log")})
    for name in args.layer_models:
        if name not in shapes["models"] or str(world) not in shapes["models"][name]["per_gpu"]:
            raise SystemExit(f"measure_allreduce: no per-GPU shapes for {name} at TP {world} in {args.shapes}")

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("measure_allreduce: no CUDA device (use --device cpu for a logic check)")
    t_start = time.time()
    d = Dist(torch, args)
    torch.manual_seed(1234 + d.rank)
    meta = environment(torch, d, args) if d.rank == 0 else {}
    ranks = gpu_info(torch, d)
    purpose = purpose_of(args.device, d.world)
    sink = None
    if d.rank == 0:
        meta.update(ranks)
        common = {"run_id": f"{stem}@{meta['date_utc']}", "date_utc": meta["date_utc"], "gpu": meta["gpu"],
                  "kind": args.kind, "device": args.device, "torch": torch.__version__, "nccl": meta["nccl"] or "",
                  "world_size": d.world, "purpose": purpose}
        sink = Sink(args.out / f"{stem}.csv", common)
        print(f"world size {d.world}, {meta['gpu']}, torch {torch.__version__}, NCCL {meta['nccl']}, purpose {purpose}; "
              f"{len(sizes)} sizes x {args.modes}", flush=True)
    summary: list[str] = []
    part_seconds: dict[str, float] = {}
    check: dict = {}
    for part in args.parts_list:
        t0 = time.time()
        if part == "allreduce":
            check = run_allreduce(d, sink, args, sizes, summary)
        else:
            run_layer(d, sink, args, shapes, summary)
        part_seconds[part] = round(time.time() - t0, 1)
        if d.rank == 0:
            print(f"== {part} done in {part_seconds[part]} s", flush=True)
    d.synchronize()
    d.dist.barrier()
    if d.rank == 0 and sink:
        sink.close()
        if d.cuda:
            meta["nvidia_smi_after"] = command_output(["nvidia-smi", "--query-gpu=index,clocks.sm,power.draw,temperature.gpu",
                                                       "--format=csv"])
        meta.update({"purpose": purpose, "check": check, "part_seconds": part_seconds,
                     "total_seconds": round(time.time() - t_start, 1), "rows": sink.rows, "summary": summary,
                     "timing": {k: getattr(args, k) for k in ("warmup", "samples", "max_calls", "target_sample_us",
                                                              "target_layer_s", "modes", "per_octave", "max_bytes")}})
        (args.out / f"{stem}.meta.json").write_text(json.dumps(meta, indent=1, default=str) + "\n", encoding="utf-8")
        print("\n".join(["---- summary", f"check: {check}", *summary,
                         f"rows {sink.rows}, parts {part_seconds}, total {meta['total_seconds']} s"]), flush=True)
    d.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

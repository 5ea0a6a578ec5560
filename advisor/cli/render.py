"""Rich renderings of the probe's typed data for people. JSON output never passes through here."""

from __future__ import annotations

import math
from typing import Any, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..schema import BenchmarkRun, Distribution, ServerLogInfo


def fmt(value: float | int | None, digits: int = 1) -> str:
    """A number for a table cell; '—' when the source does not have it."""
    if value is None:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int) or float(value).is_integer() or abs(value) >= 100:
        return f"{round(value):,}"
    if abs(value) < 1:  # a fraction keeps two significant digits: gpu_memory_utilization 0.35 is not "0.3"
        return f"{value:.{max(digits, 2)}g}"
    return f"{value:,.{digits}f}"


def fmt_ms(value: float | None) -> str:
    """Milliseconds for a narrow cell: '812', '4,245', or '467s' once past ten seconds."""
    if value is None:
        return "—"
    if value >= 10_000:
        return f"{value / 1000:,.0f}s"
    return fmt(value)


def _pair(d: Distribution | None, ms: bool = True) -> str:
    if d is None:
        return "—"
    f = fmt_ms if ms else fmt
    return f"{f(d.pct(50))}/{f(d.pct(99))}"


def bench_table(runs: list[BenchmarkRun], title: str = "Benchmark load points") -> Table:
    """One row per load point, the figures people compare first (``--detail`` shows the rest)."""
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("load", no_wrap=True)
    table.add_column("ok/fail", justify="right")
    table.add_column("out tok/s", justify="right")
    table.add_column("TTFT ms\np50/p99", justify="right", no_wrap=True)
    table.add_column("TPOT ms\np50/p99", justify="right", no_wrap=True)
    table.add_column("tok/s/req\ndec / e2e", justify="right")
    table.add_column("in\nflight", justify="right")
    for i, r in enumerate(runs):
        dec = r.request_decode_tok_s.mean if r.request_decode_tok_s else None
        out = r.request_output_tok_s.mean if r.request_output_tok_s else None
        table.add_row(
            str(i),
            r.load_label,
            f"{fmt(r.completed)}/{fmt(r.failed)}",
            fmt(r.output_throughput_tok_s),
            _pair(r.ttft_ms),
            _pair(r.tpot_ms),
            f"{fmt(dec)} / {fmt(out)}",
            fmt(r.achieved_concurrency),
        )
    return table


def run_detail(run: BenchmarkRun) -> Table:
    """Every distribution of one load point, with the file's own summary checks."""
    title = f"{run.source} [{run.format}] #{run.index} — {run.load_label}"
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("unit", style="dim")
    for col in ("n", "mean", "p50", "p90", "p99", "max"):
        table.add_column(col, justify="right")
    rows: list[tuple[str, Distribution | None]] = [
        ("TTFT", run.ttft_ms),
        ("TPOT (excl. 1st token)", run.tpot_ms),
        ("ITL (pooled gaps)", run.itl_ms),
        ("end-to-end latency", run.e2e_ms),
        ("decode speed per request", run.request_decode_tok_s),
        ("output speed per request", run.request_output_tok_s),
        ("client queue time", run.client_queue_ms),
        ("input length", run.input_len),
        ("output length", run.output_len),
    ]
    for name, d in rows:
        if d is None:
            continue
        table.add_row(
            name, d.unit, fmt(d.count), fmt(d.mean), fmt(d.pct(50)), fmt(d.pct(90)), fmt(d.pct(99)), fmt(d.max)
        )
    return table


def bench_notes(runs: list[BenchmarkRun]) -> Iterable[Any]:
    """Check results and loader notes; a note shared by several runs is printed once with their numbers."""
    by_text: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(runs):
        bad = r.failed_checks()
        if r.checks:
            ok = len(r.checks) - len(bad)
            text = f"{ok}/{len(r.checks)} of the file's summary figures reproduced from per-request data"
            by_text.setdefault((text, "green" if not bad else "yellow"), []).append(i)
        for c in bad:
            text = f"{c.field}: file says {c.stated:.4g}, per-request data gives {c.computed:.4g} ({c.rel_diff:.1%} apart)"
            by_text.setdefault((text, "yellow"), []).append(i)
        for note in r.notes:
            by_text.setdefault((note, "dim"), []).append(i)
    for (text, style), idx in by_text.items():
        which = "all runs" if len(idx) == len(runs) and len(runs) > 1 else ", ".join(f"#{i}" for i in idx)
        yield Text(f"{which}: {text}", style=style)


def render_runs(runs: list[BenchmarkRun], detail: bool = False) -> Group:
    parts: list[Any] = [bench_table(runs)]
    if detail:
        parts.extend(run_detail(r) for r in runs)
    parts.extend(bench_notes(runs))
    return Group(*parts)


def kv_table(title: str, items: Iterable[tuple[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in items:
        if value is None or value == {} or value == []:
            continue
        table.add_row(key, fmt(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value))
    return table


def render_server_log(info: ServerLogInfo) -> Group:
    facts = kv_table(
        f"Server log: {info.source}",
        [
            ("vLLM version", info.vllm_version),
            ("model", info.model),
            ("device", info.device),
            ("tensor / pipeline / data parallel", " / ".join(fmt(x) for x in (info.tensor_parallel_size, info.pipeline_parallel_size, info.data_parallel_size))),
            ("max_model_len", info.max_model_len),
            ("dtype / quantization / KV dtype", f"{info.dtype} / {info.quantization} / {info.kv_cache_dtype}"),
            ("block size", info.block_size),
            ("KV cache size (tokens)", info.kv_cache_tokens),
            ("KV cache memory (GiB)", info.kv_cache_memory_gib),
            (
                "maximum concurrency",
                f"{info.max_concurrency:.2f}x for {info.max_concurrency_tokens_per_request:,} tokens per request"
                if info.max_concurrency is not None and info.max_concurrency_tokens_per_request
                else None,
            ),
            ("attention backend", info.attention_backend),
            ("enforce eager", info.enforce_eager),
            ("CUDA graph sizes", _short_list(info.cudagraph_capture_sizes)),
            ("chunked prefill", info.chunked_prefill),
            ("prefix caching", info.prefix_caching),
            ("max_num_batched_tokens", info.max_num_batched_tokens),
            ("max_num_seqs", info.max_num_seqs),
            ("preemption warnings", info.preemption_warnings),
            ("periodic stats lines", len(info.stats)),
        ],
    )
    parts: list[Any] = [facts]
    if info.non_default_args:
        parts.append(kv_table("non-default args", sorted(info.non_default_args.items())))
    if info.stats:
        parts.append(_stats_summary(info))
    parts.extend(Text(n, style="dim") for n in info.notes)
    return Group(*parts)


def _short_list(values: list[int] | None, n: int = 8) -> str | None:
    if not values:
        return None
    shown = ", ".join(str(v) for v in values[:n])
    return shown + (f", … ({len(values)} sizes)" if len(values) > n else "")


def _stats_summary(info: ServerLogInfo) -> Table:
    """Min / mean / max of the periodic stats lines (server's own view of the load)."""
    table = Table(title="Periodic engine stats in the log", title_justify="left")
    for col in ("figure", "min", "mean", "max"):
        table.add_column(col, justify="right" if col != "figure" else "left")
    fields = [
        ("prompt tok/s", "prompt_tok_s"),
        ("generation tok/s", "generation_tok_s"),
        ("running reqs", "running"),
        ("waiting reqs", "waiting"),
        ("KV cache usage %", "kv_cache_usage_pct"),
        ("prefix cache hit %", "prefix_cache_hit_rate_pct"),
    ]
    for label, attr in fields:
        vals = [getattr(s, attr) for s in info.stats if getattr(s, attr) is not None]
        if vals:
            table.add_row(label, fmt(float(min(vals))), fmt(sum(vals) / len(vals)), fmt(float(max(vals))))
    return table


def render_deployment(deployment: Any, args: Any) -> Group:
    """A parsed serve command: the deployment facts and every engine argument that was set."""
    facts = kv_table(
        "Deployment",
        [
            ("engine", deployment.engine),
            ("model", deployment.model),
            ("GPUs", deployment.num_gpus),
            ("quantization", deployment.quantization),
        ],
    )
    set_args = {k: v for k, v in args.model_dump(exclude={"extra", "env"}).items() if v is not None}
    parts: list[Any] = [facts, kv_table("Engine arguments set on the command line", sorted(set_args.items()))]
    if args.extra:
        parts.append(kv_table("Other flags (passed through, not interpreted)", sorted(args.extra.items())))
    if args.env:
        parts.append(kv_table("Environment", sorted(args.env.items())))
    return Group(*parts)


def _q(d: dict | None, key: str, scale: float = 1.0) -> str:
    if not d or d.get(key) is None:
        return "—"
    return fmt(d[key] * scale)


def render_metrics_summary(summary: dict) -> Group:
    """The server's view over a window (or since start for one snapshot), one table per engine."""
    parts: list[Any] = []
    dur = summary.get("duration_s")
    head = f"/metrics: {summary.get('source')} — {summary.get('num_snapshots')} snapshot(s)"
    head += f" over {dur:.1f} s" if dur else " (no window: totals since server start, no rates)"
    parts.append(Text(head, style="bold"))
    for eng in summary.get("engines", []):
        table = Table(title=f"model {eng.get('model_name')} · engine {eng.get('engine')}", title_justify="left")
        table.add_column("figure")
        table.add_column("min", justify="right")
        table.add_column("mean", justify="right")
        table.add_column("max", justify="right")
        for label, key in (("requests running", "requests_running"), ("requests waiting", "requests_waiting"), ("KV cache usage %", "kv_cache_usage_pct")):
            g = eng.get(key)
            if g:
                table.add_row(label, _q(g, "min"), _q(g, "mean"), _q(g, "max"))
        totals = Table(title="counters over the window", title_justify="left")
        totals.add_column("figure")
        totals.add_column("total", justify="right")
        totals.add_column("per second", justify="right")
        for label, key in (
            ("prompt tokens", "prompt_tokens"),
            ("generation tokens", "generation_tokens"),
            ("preemptions", "preemptions"),
            ("finished requests", "requests_finished_total"),
        ):
            rate_key = {"requests_finished_total": "requests_per_s"}.get(key, f"{key}_per_s")
            if eng.get(key) is not None:
                totals.add_row(label, fmt(eng.get(key)), fmt(eng.get(rate_key), 2) if eng.get(rate_key) is not None else "—")
        if eng.get("prefix_cache_hit_rate_pct") is not None:
            totals.add_row("prefix-cache hit rate %", fmt(eng["prefix_cache_hit_rate_pct"]), "")
        lat = Table(title="latency histograms (bucket-interpolated; * = p50 and p99 in one bucket)", title_justify="left")
        lat.add_column("figure")
        for col in ("n", "avg", "p50", "p90", "p99"):
            lat.add_column(col, justify="right")
        for label, key, scale in (
            ("TTFT ms", "ttft_s", 1e3),
            ("ITL ms", "itl_s", 1e3),
            ("TPOT per request ms", "tpot_per_request_s", 1e3),
            ("e2e latency ms", "e2e_latency_s", 1e3),
            ("queue time ms", "queue_time_s", 1e3),
            ("prefill time ms", "prefill_time_s", 1e3),
            ("decode time ms", "decode_time_s", 1e3),
            ("prompt length tokens", "prompt_len_tokens", 1.0),
            ("output length tokens", "output_len_tokens", 1.0),
        ):
            h = eng.get(key)
            if h and h.get("count"):
                lat.add_row(label + (" *" if h.get("coarse") else ""), fmt(h["count"]), _q(h, "avg", scale), _q(h, "p50", scale), _q(h, "p90", scale), _q(h, "p99", scale))
        for t in (table, totals, lat):
            if t.row_count:
                parts.append(t)
        parts.extend(Text(n, style="dim") for n in eng.get("notes", []))
    parts.extend(Text(n, style="dim") for n in summary.get("notes", []))
    return Group(*parts)


def server_view_table(runs: list[BenchmarkRun]) -> Table:
    """The server's /metrics beside each load point of a probe bench run (measured, per window)."""
    from ..probe.metrics import summarize_window

    table = Table(title="Server view during each load point (/metrics, measured)", title_justify="left")
    for col in ("load", "samples", "running max", "waiting max", "waiting (capacity) max", "KV usage max %",
                "preemptions", "prefix hit %", "queue p50 ms", "queue p99 ms"):
        table.add_column(col, justify="left" if col == "load" else "right")
    for run in runs:
        if run.server_metrics is None:
            table.add_row(run.load_label, "0", *["—"] * 8)
            continue
        engines = summarize_window(run.server_metrics).get("engines") or [{}]
        eng = engines[0]
        queue = eng.get("queue_time_s") or {}
        missed = bool(eng.get("gauges_missed_load"))
        if missed:
            table.caption = "† no /metrics sample landed while requests ran (a short load point, or a server too busy to answer): its gauges are unknown; counters and histograms still count"
        table.add_row(
            run.load_label,
            f"{run.server_metrics.num_snapshots}{' †' if missed else ''}",
            _q(eng.get("requests_running"), "max"),
            _q(eng.get("requests_waiting"), "max"),
            _q(eng.get("requests_waiting_for_capacity"), "max"),
            _q(eng.get("kv_cache_usage_pct"), "max"),
            fmt(eng.get("preemptions")),
            fmt(eng.get("prefix_cache_hit_rate_pct")),
            _q(queue, "p50", 1e3),
            _q(queue, "p99", 1e3),
        )
    return table


def live_line(snapshot: Any) -> str:
    """One line for the watch progress display: running, waiting and KV usage right now."""
    from ..probe.loadgen.sampler import timeline_point

    now = timeline_point(snapshot, 0.0)
    parts = []
    if now["running"] is not None:
        parts.append(f"running {now['running']:g}")
    if now["waiting"] is not None:
        parts.append(f"waiting {now['waiting']:g}")
    if now["kv_cache_usage"] is not None:
        parts.append(f"KV {now['kv_cache_usage'] * 100:.1f}%")
    return " · ".join(parts)

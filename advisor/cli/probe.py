"""``vllm-advisor probe ...``: read what the user measured and show it as typed figures."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from ..errors import UsageError
from .output import console, emit, emit_json, json_option
from . import render


@click.group()
def probe() -> None:
    """Read benchmark files, /metrics, server logs and serve commands."""


@probe.command("load")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--detail", is_flag=True, help="Also show every distribution of every load point.")
@json_option
def load_cmd(files: tuple[Path, ...], detail: bool, as_json: bool) -> None:
    """Load benchmark result files (format auto-detected) into load points.

    Accepts `vllm bench serve` / benchmark_serving.py JSON and JSON-lines, GuideLLM JSON/YAML,
    genai-perf and AIPerf exports, LLMPerf summaries, case files (their `observations`) and CSVs
    with the case-file column names. `vllm-advisor probe formats` lists them.
    """
    from ..probe.bench import load_runs

    runs = [run for f in files for run in load_runs(f)]
    emit(runs, as_json, lambda rs: render.render_runs(rs, detail=detail))


@probe.command("formats")
@json_option
def formats_cmd(as_json: bool) -> None:
    """List the benchmark file formats `probe load` understands."""
    from ..probe.bench import FORMATS

    rows = [{"id": f.id, "description": f.description} for f in FORMATS]
    if as_json:
        emit_json(rows)
        return
    console().print(render.kv_table("Benchmark formats", [(r["id"], r["description"]) for r in rows]))


def _scrape_options(f):
    f = click.option("--timeout", default=10.0, show_default=True, help="Seconds per HTTP request.")(f)
    f = click.option("--retries", default=2, show_default=True, help="Retries on timeouts, refused connections and 5xx.")(f)
    f = click.option(
        "--token-env",
        default="VLLM_ADVISOR_METRICS_TOKEN",
        show_default=True,
        help="Environment variable holding a bearer token (the token itself is never printed).",
    )(f)
    f = click.option("--insecure", is_flag=True, help="Do not verify TLS certificates.")(f)
    f = click.option("--ca-bundle", type=click.Path(exists=True, dir_okay=False), help="CA bundle for TLS.")(f)
    return f


def _scrape_kwargs(timeout: float, retries: int, token_env: str, insecure: bool, ca_bundle: str | None) -> dict:
    if insecure and ca_bundle:
        raise UsageError("--insecure and --ca-bundle contradict each other; give one")
    return {
        "timeout": timeout,
        "retries": retries,
        "bearer_token": os.environ.get(token_env) or None,
        "verify": False if insecure else (ca_bundle or True),
    }


@probe.command("metrics")
@click.argument("sources", nargs=-1, required=True)
@_scrape_options
@json_option
def metrics_cmd(
    sources: tuple[str, ...], timeout: float, retries: int, token_env: str, insecure: bool, ca_bundle: str | None, as_json: bool
) -> None:
    """Read /metrics from URLs or saved dumps and summarise them.

    One snapshot shows the server's current state; two or more (several files, a URL given twice,
    or a JSONL file written by `probe watch`) give a window: counter rates, histogram quantiles over
    the window, and gauge min/mean/max.
    """
    from ..probe.metrics import compute_window, load_metrics_source, summarize_window

    kwargs = _scrape_kwargs(timeout, retries, token_env, insecure, ca_bundle)
    snapshots = [snap for src in sources for snap in load_metrics_source(src, **kwargs)]
    # One snapshot is read as "since the server started" (totals, no rates).
    window = compute_window(snapshots)
    summary = summarize_window(window)
    emit({"window": window, "summary": summary} if as_json else summary, as_json, render.render_metrics_summary)


@probe.command("watch")
@click.argument("url")
@click.option("--duration", default=60.0, show_default=True, help="Seconds to sample for.")
@click.option("--interval", default=2.0, show_default=True, help="Seconds between scrapes.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Snapshot file (JSONL) to write as samples arrive."
)
@_scrape_options
@json_option
def watch_cmd(
    url: str,
    duration: float,
    interval: float,
    output: Path | None,
    timeout: float,
    retries: int,
    token_env: str,
    insecure: bool,
    ca_bundle: str | None,
    as_json: bool,
) -> None:
    """Sample a live /metrics endpoint and save the snapshots; Ctrl-C keeps what was sampled.

    The saved JSONL file can be given to `probe metrics`, `ask --metrics` and the chat later.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from rich.markup import escape

    from ..probe.metrics import compute_window, summarize_window, watch
    from ..probe.metrics.scrape import display_url

    if interval <= 0 or duration <= 0:
        raise UsageError("--duration and --interval must be positive")
    if output is None:
        output = Path(f"metrics-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    if output.exists():
        raise UsageError(f"{output} exists; choose another --output (snapshots are never written over a file)")
    kwargs = _scrape_kwargs(timeout, retries, token_env, insecure, ca_bundle)
    total = max(1, int(duration // interval) + 1)
    progress = Progress(
        TextColumn("[bold]watching[/] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} scrapes"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[live]}"),
        console=console() if not as_json else None,
        disable=as_json,
        transient=False,
    )
    with progress:
        # the URL as messages show it: user:password and the query string (a token) left out
        task = progress.add_task(escape(display_url(url)), total=total, live="")

        def on_sample(snapshot, i: int) -> None:
            progress.update(task, completed=i + 1, live=render.live_line(snapshot))

        snapshots = watch(url, duration=duration, interval=interval, out_path=output, on_sample=on_sample, **kwargs)
    if not as_json:
        console().print(f"saved {len(snapshots)} snapshots to {output}")
    if len(snapshots) >= 2:
        window = compute_window(snapshots)
        summary = summarize_window(window)
        emit({"output": str(output), "window": window, "summary": summary} if as_json else summary, as_json, render.render_metrics_summary)
    elif as_json:
        emit_json({"output": str(output), "snapshots": len(snapshots)})


@probe.command("log")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
def log_cmd(file: Path, as_json: bool) -> None:
    """Read a vLLM server log: version, args, KV cache size, maximum concurrency, backend, stats."""
    from ..probe.serverlog import parse_server_log

    emit(parse_server_log(file), as_json, render.render_server_log)


@probe.command("serve-cmd")
@click.argument("command")
@json_option
def serve_cmd_cmd(command: str, as_json: bool) -> None:
    """Parse a `vllm serve ...` command line into a deployment and its engine arguments."""
    from ..probe.serve_cmd import engine_args_for, parse_serve_command

    deployment = parse_serve_command(command)
    args = engine_args_for(deployment)
    emit({"deployment": deployment, "engine_args": args}, as_json, lambda _: render.render_deployment(deployment, args))


from .probe_bench import bench_cmd  # noqa: E402  (registered last: it lives in its own module)

probe.add_command(bench_cmd)


from .probe_prom import prom  # noqa: E402 (a sibling module; registered here so `probe prom` exists)

probe.add_command(prom)

"""``vllm-advisor probe bench``: load a live server and keep the client's and the server's view."""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from pathlib import Path

import click

from ..errors import EndpointError, AdvisorError, UsageError
from .ask import elapsed_ms, record_run
from .output import console, emit_json, json_option


def _int_list(value: str) -> list[int]:
    try:
        items = [int(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        raise UsageError(f"--concurrency expects integers separated by commas, got {value!r}") from None
    if not items or any(i <= 0 for i in items):
        raise UsageError(f"--concurrency expects positive integers, got {value!r}")
    return items


def _rates(value: str) -> list[float]:
    try:
        rates = [float(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        raise UsageError(f"--request-rate expects requests per second or 'inf', comma-separated, got {value!r}") from None
    if not rates or any(not rate > 0 for rate in rates):  # also refuses nan
        raise UsageError("--request-rate must be positive (or inf)")
    return rates


def _log_summary(output: Path, runs, interrupted: bool) -> str:
    """What the log keeps of a run: where the results are and one line per load point."""
    lines = [f"results: {output}" + (" (interrupted)" if interrupted else "")]
    for run in runs:
        ttft = run.ttft_ms.median if run.ttft_ms else None
        tpot = run.tpot_ms.median if run.tpot_ms else None
        lines.append(f"{run.load_label}: {run.completed}/{(run.completed or 0) + (run.failed or 0)} ok, "
                     f"TTFT p50 {ttft:.0f} ms, TPOT p50 {tpot:.1f} ms, {run.output_throughput_tok_s or 0:.0f} output tok/s"
                     if ttft is not None and tpot is not None else f"{run.load_label}: {run.completed} ok")
    return "\n".join(lines)


class _ProgressReporter:
    """The runner's events on a rich progress bar: one task per load point, the server's state live."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.task = None
        self.live = ""
        self.failed = 0

    def preparing(self, concurrency: int, num_prompts: int, request_rate: float = math.inf) -> None:
        self.failed = 0
        label = f"c={concurrency}" + ("" if math.isinf(request_rate) else f" rate={request_rate:g}/s")
        self.task = self.progress.add_task(label, total=num_prompts, stage="preparing prompts", live="")

    def started(self, concurrency: int, num_prompts: int) -> None:
        self.progress.update(self.task, stage="running")

    def request_done(self, record) -> None:
        if record.error:
            self.failed += 1
        self.progress.update(self.task, advance=1, stage=f"running ({self.failed} failed)" if self.failed else "running")

    def sampled(self, snapshot) -> None:
        from .render import live_line

        if self.task is not None:
            self.progress.update(self.task, live=live_line(snapshot))


@click.command("bench")
@click.argument("url")
@click.option("--input-len", type=click.IntRange(min=1), required=True, help="Prompt length in tokens (exact when the server has /tokenize).")
@click.option("--output-len", type=click.IntRange(min=1), required=True, help="Tokens generated per request.")
@click.option("--concurrency", "concurrency", default="1", show_default=True, help="Concurrency levels, comma-separated: one load point each, e.g. 1,4,16.")
@click.option("--request-rate", default="inf", show_default=True, help="Requests per second (Poisson arrivals) under the concurrency cap; inf = no pacing. Several (2,4,8): one load point each, per concurrency.")
@click.option("--num-prompts", type=click.IntRange(min=1), help="Requests per load point. [default: 4 x concurrency, at least 8]")
@click.option("--shared-prefix-len", type=click.IntRange(min=0), default=0, show_default=True, help="Leading tokens all prompts of a load point share (exercises the prefix cache).")
@click.option("--seed", type=int, help="Seed for prompts and arrivals. [default: fresh per run, so a warm prefix cache cannot flatter the figures]")
@click.option("--endpoint", type=click.Choice(["completions", "chat"]), default="completions", show_default=True, help="/v1/completions or /v1/chat/completions.")
@click.option("--model", help="Served model name. [default: the first of /v1/models]")
@click.option("--ignore-eos/--no-ignore-eos", default=True, show_default=True, help="Ask vLLM for exactly --output-len tokens (a vLLM extension).")
@click.option("--metrics-url", metavar="URL", help="Where to sample /metrics. [default: URL's /metrics]")
@click.option("--no-metrics", is_flag=True, help="Do not sample /metrics.")
@click.option("--metrics-interval", type=click.FloatRange(min=0.1), default=1.0, show_default=True, help="Seconds between /metrics samples.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Seconds one request may take.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True, metavar="NAME", help="Environment variable holding the server's API key (never printed or saved).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Result file (JSON Lines, one load point per line). [default: bench-DATE-TIME.jsonl]")
@click.option("--no-log", is_flag=True, help="Do not record this run in the local log (see `vllm-advisor logs`).")
@json_option
def bench_cmd(url, input_len, output_len, concurrency, request_rate, num_prompts, shared_prefix_len, seed, endpoint,
              model, ignore_eos, metrics_url, no_metrics, metrics_interval, timeout, api_key_env, output, no_log, as_json) -> None:
    """Load a running server with streaming requests and record both sides.

    \b
    Every load point keeps per-request TTFT, inter-token gaps, end-to-end latency and token counts
    (computed exactly as `vllm bench serve` does) and, sampled from /metrics during the run, the
    server's view: requests running and waiting, KV-cache usage, preemptions, prefix-cache hits,
    queue time. The result file is accepted by `ask --attach`, `memo` and the chat's /attach.

    \b
    Example:
      vllm-advisor probe bench http://127.0.0.1:8000 --input-len 6000 --output-len 64 --concurrency 1,8
      vllm-advisor ask --attach bench-*.jsonl "why does TTFT grow with concurrency?"
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..probe.loadgen import BenchSpec, append_result, load_point_record, run_sweep
    from ..probe.loadgen.runner import server_root
    from ..probe.loadgen.result import runs_from_records
    from ..probe.metrics.scrape import metrics_url as to_metrics_url
    from . import render

    if no_metrics and metrics_url:
        raise UsageError("--metrics-url and --no-metrics contradict each other; give one")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"URL must start with http:// or https://, got {url!r}")
    spec_args = dict(
        base_url=url, endpoint=endpoint, model=model, input_len=input_len, output_len=output_len,
        concurrencies=_int_list(concurrency), request_rates=_rates(request_rate), num_prompts=num_prompts,
        shared_prefix_len=shared_prefix_len, ignore_eos=ignore_eos, request_timeout_s=timeout,
        metrics_url=None if no_metrics else to_metrics_url(metrics_url or server_root(url)),
        metrics_interval_s=metrics_interval, api_key=os.environ.get(api_key_env) or None,
    )
    if seed is not None:
        spec_args["seed"] = seed
    spec = BenchSpec(**spec_args)
    spec.check()
    output = output or Path(f"bench-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    if output.exists():
        raise UsageError(f"{output} exists; choose another --output (results are never overwritten)")
    output.parent.mkdir(parents=True, exist_ok=True)

    records: list[dict] = []

    def save(point, model_name, prompt_notes) -> None:
        record = load_point_record(spec, point, model_name, prompt_notes)
        append_result(output, record)
        records.append(record)

    progress = Progress(
        TextColumn("[bold]{task.description}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[stage]}"),
        TextColumn("[dim]{task.fields[live]}[/]"),
        console=None if as_json else console(),
        disable=as_json,
        transient=False,
    )
    if not as_json:
        console().print(f"seed {spec.seed} · {spec.input_len} in / {spec.output_len} out tokens · "
                        f"{endpoint} · results -> {output}")
    started = time.perf_counter()
    log_inputs = {**spec.model_dump(mode="json", exclude={"api_key"}), "api_key_env": api_key_env, "output": str(output)}
    try:
        with progress:
            points, model_name, _ = asyncio.run(run_sweep(spec, reporter=_ProgressReporter(progress), on_point=save))
    except AdvisorError as exc:
        record_run("bench", enabled=not no_log, inputs=log_inputs, duration_ms=elapsed_ms(started), error=exc.one_line())
        raise
    runs = runs_from_records(records, str(output))
    interrupted = any(p.interrupted for p in points) or len(points) < len(spec.load_points())
    sent = [r for p in points for r in p.records]
    if sent and not any(r.ok for r in sent) and not interrupted:
        error = EndpointError(f"none of the {len(sent)} requests succeeded; first: {sent[0].error} (kept in {output})", source=server_root(url))
        record_run("bench", enabled=not no_log, inputs=log_inputs, duration_ms=elapsed_ms(started), error=error.one_line())
        raise error
    record_run("bench", enabled=not no_log, inputs=log_inputs, output=_log_summary(output, runs, interrupted),
               duration_ms=elapsed_ms(started))
    if as_json:
        emit_json({"output": str(output), "seed": spec.seed, "model": model_name, "interrupted": interrupted, "runs": runs})
    else:
        console().print(render.render_runs(runs))
        console().print(render.server_view_table(runs))
        console().print(f"saved {len(runs)} load point(s) to {output}; next: vllm-advisor ask --attach {output} \"...\"")
    if interrupted:
        click.echo(f"interrupted: kept {sum(r.completed or 0 for r in runs)} finished request(s) in {output}", err=True)
        sys.exit(130)

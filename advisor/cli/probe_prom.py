"""``vllm-advisor probe prom URL --since 1h``: a fleet's vLLM metrics from the Prometheus scraping it."""

from __future__ import annotations

import os
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..errors import UsageError
from . import render
from .output import emit, json_option


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    from ..probe.metrics.prometheus import parse_duration

    return parse_duration(value)


@click.command("prom")
@click.argument("url")
@click.option("--since", default="1h", show_default=True, callback=_duration, help="How far back: 90s, 30m, 1h, 2d, 1h30m.")
@click.option("--selector", help="Label matchers for the vLLM targets, e.g. '{job=\"vllm\"}' or 'namespace=\"prod\"'.")
@click.option("--step", callback=_duration, help="Seconds between points (default: --since / 120, at least 1 s).")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per HTTP request.")
@click.option(
    "--token-env",
    default="VLLM_ADVISOR_PROMETHEUS_TOKEN",
    show_default=True,
    help="Environment variable holding a bearer token for Prometheus (never printed).",
)
@click.option("--insecure", is_flag=True, help="Do not verify TLS certificates.")
@click.option("--ca-bundle", type=click.Path(exists=True, dir_okay=False), help="CA bundle for TLS.")
@click.option("--fleet-only", is_flag=True, help="Show the fleet and the per-instance comparison, not each instance's tables.")
@json_option
def prom(
    url: str,
    since: float,
    selector: str | None,
    step: float | None,
    timeout: float,
    token_env: str,
    insecure: bool,
    ca_bundle: str | None,
    fleet_only: bool,
    as_json: bool,
) -> None:
    """Read every vLLM instance's metrics over a time range from Prometheus (URL: the server, e.g.
    http://prometheus:9090) and summarise each instance and the fleet summed.

    Counters and histograms are added up across instances (restarts handled); request counts
    (running, waiting) are summed; KV-cache usage and other fractions are the max over instances.
    """
    from ..probe.metrics.prometheus import fetch_prometheus

    if insecure and ca_bundle:
        raise UsageError("--insecure and --ca-bundle contradict each other; give one")
    fleet = fetch_prometheus(
        url,
        since_s=since,
        selector=selector,
        step_s=step,
        timeout=timeout,
        bearer_token=os.environ.get(token_env) or None,
        verify=False if insecure else (ca_bundle or True),
    )
    emit(fleet, as_json, lambda f: render_fleet(f, per_instance=not fleet_only))


def render_fleet(fleet: Any, per_instance: bool = True) -> Group:
    """Query line, one comparison row per instance plus the fleet, then the fleet's (and each
    instance's) tables as ``probe metrics`` shows them."""
    from ..probe.metrics import summarize_window

    q = fleet.query
    parts: list[Any] = [
        Text(f"Prometheus {q.url}: {q.query}", style="bold"),
        Text(
            f"{len(fleet.instances)} instance(s), {q.num_series:,} series, {q.since_s:g} s in steps of {q.step_s:g} s "
            f"({q.points_per_series} points per series); types from {q.types_from}",
            style="dim",
        ),
    ]
    fleet_summary = summarize_window(fleet.fleet)
    summaries = [(i, summarize_window(i.window)) for i in fleet.instances]
    parts.append(_comparison_table(fleet_summary, summaries))
    parts.extend(Text(n, style="dim") for n in fleet.notes)
    parts.append(render.render_metrics_summary(fleet_summary))
    if per_instance:
        for _, summary in summaries:
            parts.append(render.render_metrics_summary(summary))
    return Group(*parts)


def _comparison_table(fleet_summary: dict, summaries: list[tuple[Any, dict]]) -> Table:
    table = Table(title="per instance (max over the window; fleet: summed, KV usage = max)", title_justify="left")
    for col, justify in (
        ("instance", "left"),
        ("model", "left"),
        ("running", "right"),
        ("waiting", "right"),
        ("KV %", "right"),
        ("preempt", "right"),
        ("req/s", "right"),
        ("gen tok/s", "right"),
        ("TTFT ms p50/p99", "right"),
    ):
        table.add_column(col, justify=justify, no_wrap=True)
    for label, summary in [("fleet (summed)", fleet_summary), *((f"{i.instance} ({i.job})", s) for i, s in summaries)]:
        for eng in summary.get("engines", []) or [{}]:
            name = label if eng.get("engine") in (None, "0") else f"{label} engine {eng.get('engine')}"
            ttft = eng.get("ttft_s") or {}
            table.add_row(
                name,
                str(eng.get("model_name") or "—"),
                render._q(eng.get("requests_running"), "max"),
                render._q(eng.get("requests_waiting"), "max"),
                render._q(eng.get("kv_cache_usage_pct"), "max"),
                render.fmt(eng.get("preemptions")),
                render.fmt(eng.get("requests_per_s"), 2),
                render.fmt(eng.get("generation_tokens_per_s")),
                f"{render._q(ttft, 'p50', 1e3)}/{render._q(ttft, 'p99', 1e3)}",
            )
    return table

"""Prometheus ``/metrics`` data: one scrape (snapshot) and what happened between scrapes (window).

Family names are stored under vLLM V1's current names (``vllm:kv_cache_usage_perc``,
``vllm:inter_token_latency_seconds``, ...) whatever the server exported; ``original_name`` keeps
what was actually scraped so evidence can quote it. The name map lives in
:mod:`vllm_advisor.probe.metrics.names`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MetricType = Literal["counter", "gauge", "histogram", "summary", "info", "stateset", "gaugehistogram", "unknown"]


class MetricSample(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    name: str = Field(description="sample name as exported, e.g. vllm:e2e_request_latency_seconds_bucket")
    labels: dict[str, str] = Field(default_factory=dict)
    value: float


class MetricFamily(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="canonical (current V1) family name")
    original_name: str = Field(description="family name as the server exported it")
    type: MetricType = "unknown"
    help: str = ""
    samples: list[MetricSample] = Field(default_factory=list)


class MetricsSnapshot(BaseModel):
    """One scrape of one endpoint (or one saved dump)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    timestamp: float | None = Field(None, description="unix seconds when scraped; None for a dump of unknown time")
    families: dict[str, MetricFamily] = Field(default_factory=dict)
    skipped_lines: int = Field(0, description="lines of the dump that were not Prometheus text and were skipped")
    notes: list[str] = Field(default_factory=list, description="what the parser or scraper had to work around")

    def family(self, name: str) -> MetricFamily | None:
        return self.families.get(name)

    def engines(self) -> list[dict[str, str]]:
        """Distinct (model_name, engine) label sets seen on ``vllm:`` series."""
        seen: dict[tuple, dict[str, str]] = {}
        for fam in self.families.values():
            if not fam.name.startswith("vllm:"):
                continue
            for s in fam.samples:
                key = {k: s.labels[k] for k in ("model_name", "engine") if k in s.labels}
                seen.setdefault(tuple(sorted(key.items())), key)
        return list(seen.values())


class SeriesWindow(BaseModel):
    """One series (family + labels, ``le`` removed) summarised over a window."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    family: str
    type: MetricType
    labels: dict[str, str] = Field(default_factory=dict)
    # counters
    delta: float | None = None
    rate_per_s: float | None = None
    # gauges (over every snapshot in the window)
    min: float | None = None
    mean: float | None = None
    max: float | None = None
    last: float | None = None
    # histograms (from bucket deltas)
    count: float | None = None
    sum: float | None = None
    avg: float | None = None
    quantiles: dict[str, float] = Field(default_factory=dict, description="p50/p90/p99 by linear interpolation in buckets")
    quantile_bounds: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="(lower, upper) bound of the bucket each quantile was interpolated in: the value is only "
        "known to lie in this range (upper is inf when the quantile fell in the +Inf bucket)",
    )


class MetricsWindow(BaseModel):
    """What changed between the first and the last of several snapshots of the same source."""

    model_config = ConfigDict(extra="forbid")

    source: str
    start: float | None = None
    end: float | None = None
    duration_s: float | None = None
    num_snapshots: int = 2
    instances: int = Field(1, description="server instances summed into this window (a Prometheus fleet window: more than 1)")
    series: list[SeriesWindow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def find(self, family: str, **labels: str) -> list[SeriesWindow]:
        return [
            s for s in self.series if s.family == family and all(s.labels.get(k) == v for k, v in labels.items())
        ]

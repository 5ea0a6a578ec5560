"""vLLM's Prometheus ``/metrics``: scrape or load, canonicalise names, diff snapshots, summarise.

Flow: :func:`scrape` / :func:`load_metrics_file` / :func:`watch` -> ``MetricsSnapshot`` ->
:func:`compute_window` -> ``MetricsWindow`` -> :func:`summarize_window` -> the figures the advisor reads.
"""

from .load import load_metrics_file, load_metrics_source
from .names import canonical_name
from .parse import parse_metrics_text
from .scrape import TOKEN_ENV, metrics_url, scrape
from .summary import summarize_window
from .watch import watch
from .window import compute_window, histogram_quantile

__all__ = [
    "TOKEN_ENV",
    "canonical_name",
    "compute_window",
    "histogram_quantile",
    "load_metrics_file",
    "load_metrics_source",
    "metrics_url",
    "parse_metrics_text",
    "scrape",
    "summarize_window",
    "watch",
]

"""The deployment's own figures, each with where it came from.

Findings carry the figures that argue for a cause; a reader also wants the frame around them: how
big the KV cache is, how many requests of this length fit in it, which engine settings the model
used (and which of them were guessed), and each load point as measured beside the model's
prediction. Those come from :class:`DiagnosisInputs` (the MemoryEstimate, the resolved engine
configuration, the measured and predicted :class:`BenchmarkRun` s), never from the writer: a figure
missing there is missing here. Both writers use these rows, so an LLM is given the same numbers a
reader of the embedded answer sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..schema import BenchmarkRun

#: Engine settings worth showing, in reading order, with their units.
CONFIG_KEYS: tuple[tuple[str, str | None], ...] = (
    ("tensor_parallel_size", None),
    ("max_model_len", "tokens"),
    ("max_num_seqs", None),
    ("max_num_batched_tokens", "tokens"),
    ("gpu_memory_utilization", None),
    ("enable_chunked_prefill", None),
    ("enable_prefix_caching", None),
    ("kv_cache_dtype", None),
    ("block_size", "tokens"),
)


@dataclass
class Figure:
    """One labelled number. ``label`` is a phrase key (see i18n) or a literal setting name."""

    label: str
    value: float | int | str | bool
    unit: str | None
    kind: str  # measured | reported | model | config provenance (user, default, assumed, derived)
    detail: str | None = None  # a phrase key for 'exact' / 'estimate', or None
    label_values: dict[str, str] = field(default_factory=dict)  # fills {placeholders} in the label phrase
    literal: bool = False  # label is a setting name, shown as code, not a phrase key


@dataclass
class LoadRow:
    """One load point: a measured (or user-reported) run or the model's prediction of it."""

    load: str
    kind: str  # measured | reported | model
    #: the run's number in its file when no load was given (its label is then the writer's, in the
    #: answer's language: "run 0" stood in Chinese answers)
    run_index: int | None = None
    per_request_tok_s: float | None = None
    decode_tok_s: float | None = None
    ttft_s: float | None = None
    output_tok_s: float | None = None
    running: float | None = None
    waiting: float | None = None
    preemptions: float | None = None
    calibrated: bool = False


@dataclass
class Figures:
    workload: list[Figure] = field(default_factory=list)
    memory: list[Figure] = field(default_factory=list)
    config: list[Figure] = field(default_factory=list)
    loads: list[LoadRow] = field(default_factory=list)
    version: str | None = None
    version_assumed: bool = False

    def is_empty(self) -> bool:
        return not (self.workload or self.memory or self.config or self.loads)


def run_kind(run: BenchmarkRun) -> str:
    """'model' for predictions, 'reported' for the user's own figures (case-file observations),
    'measured' for a file or endpoint the advisor read."""
    if run.source == "model" or run.format == "model":
        return "model"
    return "reported" if run.format == "observations" else "measured"


def _mean(dist) -> float | None:
    if dist is None:
        return None
    return dist.mean if dist.mean is not None else dist.median


def load_row(run: BenchmarkRun) -> LoadRow:
    ttft = _mean(run.ttft_ms)
    sv = run.server_view
    running = sv.running_mean if sv else None
    no_load = run.offered_concurrency is None and run.offered_request_rate is None
    return LoadRow(
        load=run.load_label,
        run_index=run.index if no_load else None,
        kind=run_kind(run),
        per_request_tok_s=_mean(run.request_output_tok_s),
        decode_tok_s=_mean(run.request_decode_tok_s),
        ttft_s=ttft / 1000.0 if ttft is not None else None,
        output_tok_s=run.output_throughput_tok_s,
        # the server's running count only: a benchmark's requests in flight (sum of e2e / duration)
        # count those waiting in the server's queue too (a reviewer's find: "37.6 running" beside
        # max_num_seqs=6)
        running=running,
        waiting=sv.waiting_mean if sv else None,
        # a measured run's server figures stay in the probe's metadata (server_preemptions of an observation)
        preemptions=sv.preemptions if sv else (run.metadata or {}).get("server_preemptions"),
        calibrated=bool(run.calibrated),
    )


def _load_sort_key(row: LoadRow, order: dict[str, int]) -> tuple[int, int]:
    return (order.get(row.load, len(order)), {"reported": 0, "measured": 1, "model": 2}.get(row.kind, 3))


def collect_figures(inputs) -> Figures:
    """Everything :class:`DiagnosisInputs` knows as numbers, tagged with its provenance."""
    figs = Figures()
    reported_workload = bool(inputs.case and inputs.case.workload)
    for key, value in (("input_len", inputs.input_len), ("output_len", inputs.output_len)):
        if value:
            from_case = reported_workload and getattr(inputs.case.workload, key, None)
            # the user's words (a case file's workload, or lengths a question states) vs a benchmark file's
            from_words = from_case or getattr(inputs.stated, key, None) == value
            figs.workload.append(Figure(key, int(value), "tokens", "reported" if from_words else "measured"))

    engine = getattr(inputs, "engine", None)
    memory = getattr(engine, "memory", None) if engine is not None else None
    if memory is not None and not memory.fits and getattr(inputs, "served", False):
        # it ran, so the memory model's weights are wrong for it (offloaded experts, a quantised file
        # read as BF16): its "0 KV tokens" would be printed only to be retracted by the note that says so
        memory = None
    if memory is not None:
        basis = memory.basis or {}

        def how(name: str) -> str | None:
            text = basis.get(name, "")
            return "exact" if text.startswith("exact") else ("estimate" if text else None)

        figs.memory.append(Figure("weights_gib", memory.weights_gib, "GiB", "model", how("weights_gib")))
        # the pool a server log measured (diagnosis.logged_memory) is shown as measured, not estimated
        pool_kind, pool_how = ("measured", None) if memory.pool_measured else ("model", "estimate")
        figs.memory.append(Figure("kv_cache_gib", memory.kv_cache_gib, "GiB", pool_kind, pool_how))
        if memory.has_sliding_layers:  # two parts, the window caps one
            figs.memory.append(Figure("kv_bytes_per_token_full", memory.kv_bytes_per_token_full / 1024.0, "KiB", "model", how("kv_bytes_per_token")))
            figs.memory.append(Figure("kv_bytes_per_token_sliding", memory.kv_bytes_per_token_sliding / 1024.0, "KiB", "model", how("kv_bytes_per_token"), label_values={"window": f"{memory.sliding_window:,}"}))
        else:
            figs.memory.append(Figure("kv_bytes_per_token", memory.kv_bytes_per_token / 1024.0, "KiB", "model", how("kv_bytes_per_token")))
        figs.memory.append(Figure("kv_cache_tokens", memory.kv_cache_tokens, "tokens", pool_kind, pool_how))
        per_request = (inputs.input_len or 0) + (inputs.output_len or 0)
        if per_request and inputs.input_len:
            fit = memory.requests_that_fit(per_request)
            figs.memory.append(
                Figure("requests_fit", fit, "requests", "model", "estimate", label_values={"tokens": f"{per_request:,}"})
            )
        figs.memory.append(Figure("max_concurrency", memory.max_concurrency, "requests", "model", "estimate"))

    config = getattr(engine, "config", None) if engine is not None else None
    if config is not None:
        figs.version = config.vllm_version
        figs.version_assumed = bool(config.version_assumed)
        for key, unit in CONFIG_KEYS:
            value = getattr(config, key, None)
            if value is None:
                continue
            figs.config.append(Figure(key, value, unit, config.source_of(key), literal=True))

    labels: dict[str, int] = {}
    for run in [*inputs.measured, *inputs.predicted]:
        labels.setdefault(run.load_label, len(labels))
    rows = [load_row(r) for r in [*inputs.measured, *inputs.predicted]]
    figs.loads = sorted(rows, key=lambda r: _load_sort_key(r, labels))
    return figs

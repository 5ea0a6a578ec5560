"""What happened between scrapes: counter increases, gauge ranges, histogram quantiles.

WHY: a single ``/metrics`` scrape holds totals since the server started, which mixes today's load
with last week's. The advisor needs figures for one stretch of time (a benchmark run, a minute of
production traffic), so it diffs snapshots the way PromQL's ``increase()`` and
``histogram_quantile()`` do, and says in ``notes`` whenever it had to guess (counter resets, missing
timestamps, missing ``+Inf`` buckets).

Series identity is the canonical family name plus its labels without ``le`` / ``quantile``, so
several engines (``engine``) and models (``model_name``) stay separate series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import InputFileError
from ...schema.metrics import MetricFamily, MetricsSnapshot, MetricsWindow, SeriesWindow

#: quantiles reported for every histogram, keyed the way ``SeriesWindow.quantiles`` names them
QUANTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p99": 0.99}

_GAUGE_LIKE = {"gauge", "unknown", "info", "stateset", "gaugehistogram"}
_SERIES_LABELS_DROPPED = ("le", "quantile")

LabelsKey = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, LabelsKey]


def compute_window(snapshots: Sequence[MetricsSnapshot]) -> MetricsWindow:
    """Summarise every series between the first and the last snapshot.

    Counters: increase (resets handled as PromQL does: a drop means the counter restarted from 0)
    and rate per second. Gauges: min/mean/max/last over all snapshots. Histograms: bucket increases
    -> count, sum, average and p50/p90/p99 (PromQL ``histogram_quantile`` interpolation).
    A single snapshot is accepted and read as "since the server started" (every counter from 0).
    """
    if not snapshots:
        raise InputFileError("no metrics snapshots to compare (need at least one, ideally two or more)")
    notes: list[str] = []
    snaps = list(snapshots)
    order = _ordered(snaps, [_extract(s) for s in snaps], notes)  # each snapshot read once, its values ordered with it
    return window_from_steps(
        [e for _, e in order], [s.source for s, _ in order], [s.timestamp for s, _ in order], notes
    )


def window_from_steps(
    extracted: Sequence[StepValues],
    sources: Sequence[str],
    timestamps: Sequence[float | None],
    notes: list[str] | None = None,
) -> MetricsWindow:
    """:func:`compute_window` once each snapshot has been read into :class:`StepValues` (in time order;
    ``sources``/``timestamps`` one per step; ``notes`` to continue, e.g. the ordering note).

    WHY: a caller holding series rather than scrapes (a Prometheus range query: one value per series per
    step) fills ``StepValues`` straight from them instead of building one pydantic sample per series per
    step only for :func:`compute_window` to read them back; the window math stays this one function.
    """
    if not extracted:
        raise InputFileError("no metrics snapshots to compare (need at least one, ideally two or more)")
    notes = [] if notes is None else notes
    first_t, last_t = timestamps[0], timestamps[-1]

    distinct = list(dict.fromkeys(sources))
    source = distinct[0] if len(distinct) == 1 else f"{distinct[0]} .. {distinct[-1]}"
    if len(distinct) > 1:
        notes.append(f"snapshots come from {len(distinct)} sources; read as one server over time")
    if len(extracted) == 1:
        notes.append("single snapshot: counters and histograms are totals since the server started; no rates")

    duration = None
    if len(extracted) > 1:
        if first_t is None or last_t is None:
            notes.append("snapshots have no timestamps: increases computed, rates per second not")
        elif last_t - first_t <= 0:
            notes.append("first and last snapshot have the same timestamp: no rates")
        else:
            duration = last_t - first_t

    extracted = list(extracted)
    series: list[SeriesWindow] = []
    counters = _CounterStats()
    series += _counter_windows(extracted, duration, counters)
    series += _gauge_windows(extracted)
    series += _histogram_windows(extracted, counters, notes)
    series += _summary_windows(extracted, counters)
    counters.add_notes(notes)

    return MetricsWindow(
        source=source,
        start=first_t,
        end=last_t,
        duration_s=duration,
        num_snapshots=len(extracted),
        series=series,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------
# one snapshot -> plain values per series


@dataclass
class StepDistribution:
    """One histogram (buckets by upper bound) or summary (quantiles) series at one step, with _sum/_count."""

    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None
    quantiles: dict[float, float] = field(default_factory=dict)  # summaries only


@dataclass
class StepValues:
    """One snapshot's values keyed by series ``(canonical family, labels without le/quantile)``: what the
    window math reads. ``types``: family -> type; ``created``: the ``X_created`` time of counter or
    histogram series ``X`` (reset detection)."""

    types: dict[str, str] = field(default_factory=dict)
    counters: dict[SeriesKey, float] = field(default_factory=dict)
    gauges: dict[SeriesKey, float] = field(default_factory=dict)
    hists: dict[SeriesKey, StepDistribution] = field(default_factory=dict)
    summaries: dict[SeriesKey, StepDistribution] = field(default_factory=dict)
    created: dict[SeriesKey, float] = field(default_factory=dict)


def _labels_key(labels: dict[str, str]) -> LabelsKey:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in _SERIES_LABELS_DROPPED))


def _extract(snap: MetricsSnapshot) -> StepValues:
    out = StepValues()
    for name, fam in snap.families.items():
        if fam.type == "gauge" and name.endswith("_created") and name[: -len("_created")] in snap.families:
            base = name[: -len("_created")]
            for s in fam.samples:
                out.created[(base, _labels_key(s.labels))] = s.value
            continue
        out.types[name] = fam.type
        if fam.type == "counter":
            for s in fam.samples:
                if not s.name.endswith("_created"):
                    out.counters[(name, _labels_key(s.labels))] = s.value
        elif fam.type == "histogram":
            _extract_distribution(fam, out.hists)
        elif fam.type == "summary":
            _extract_distribution(fam, out.summaries)
        else:
            for s in fam.samples:
                out.gauges[(name, _labels_key(s.labels))] = s.value
    return out


def _extract_distribution(fam: MetricFamily, into: dict[SeriesKey, StepDistribution]) -> None:
    """Histogram buckets or summary quantiles, with their _sum and _count, per series."""
    prefix = fam.original_name
    for s in fam.samples:
        suffix = s.name[len(prefix) :] if s.name.startswith(prefix) else ""
        key = (fam.name, _labels_key(s.labels))
        h = into.get(key)
        if h is None:
            h = into[key] = StepDistribution()
        try:
            if suffix == "_bucket":
                h.buckets[float(s.labels.get("le", "nan"))] = s.value
            elif suffix == "" and "quantile" in s.labels:
                h.quantiles[float(s.labels["quantile"])] = s.value
        except ValueError:
            continue
        if suffix == "_sum":
            h.sum = s.value
        elif suffix == "_count":
            h.count = s.value


# --------------------------------------------------------------------------------------------
# increases with resets


class _CounterStats:
    """Counts the guesses made while diffing counters so the window can say so once."""

    def __init__(self) -> None:
        self.resets: set[SeriesKey] = set()
        self.appeared: set[SeriesKey] = set()

    def add_notes(self, notes: list[str]) -> None:
        if self.resets:
            names = sorted({k[0] for k in self.resets})
            notes.append(
                f"{len(self.resets)} series reset during the window (server restart?): "
                f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}; "
                "the value after the reset was counted as the increase"
            )
        vllm_new = {k for k in self.appeared if k[0].startswith("vllm:")}
        if vllm_new:
            notes.append(
                f"{len(vllm_new)} vllm: series appeared after the first snapshot; counted from 0"
            )


def _increase(values: list[float | None], resets_at: set[int]) -> float:
    """PromQL-style increase over a list of cumulative values (None = series absent then)."""
    total = 0.0
    prev: float | None = None
    for i, v in enumerate(values):
        if v is None:
            continue
        if prev is None:
            prev = v if i == 0 else 0.0  # appeared later: it started from 0 after the first scrape
            if i == 0:
                continue
        total += v if (v < prev or i in resets_at) else v - prev
        prev = v
    return total


def _reset_points(key: SeriesKey, ex: list[StepValues], cumulative: list[float | None]) -> set[int]:
    """Snapshot indices where the series restarted: value dropped, or its ``_created`` time changed."""
    out: set[int] = set()
    prev_v: float | None = None
    prev_c: float | None = None
    for i, e in enumerate(ex):
        v = cumulative[i]
        c = e.created.get(key)
        if v is None:
            continue
        if prev_v is not None and (v < prev_v or (c is not None and prev_c is not None and c != prev_c)):
            out.add(i)
        prev_v, prev_c = v, c
    return out


def _counter_windows(ex: list[StepValues], duration: float | None, stats: _CounterStats) -> list[SeriesWindow]:
    out = []
    for key in _keys_in_order(e.counters for e in ex):
        values = [e.counters.get(key) for e in ex]
        resets = _reset_points(key, ex, values)
        if resets:
            stats.resets.add(key)
        if values[0] is None and len(ex) > 1:
            stats.appeared.add(key)
        delta = values[0] if len(ex) == 1 else _increase(values, resets)
        out.append(
            SeriesWindow(
                family=key[0],
                type="counter",
                labels=dict(key[1]),
                delta=delta,
                rate_per_s=delta / duration if duration else None,
                last=_last_present(values),
            )
        )
    return out


def _gauge_windows(ex: list[StepValues]) -> list[SeriesWindow]:
    out = []
    for key in _keys_in_order(e.gauges for e in ex):
        present = np.array([e.gauges[key] for e in ex if key in e.gauges], dtype=float)
        finite = present[np.isfinite(present)]
        if not finite.size:  # "+Inf" or "NaN" requests running says nothing a reading can use
            continue
        stats = finite
        out.append(
            SeriesWindow(
                family=key[0],
                type=_type_of(key[0], ex),  # type: ignore[arg-type]
                labels=dict(key[1]),
                min=float(stats.min()),
                mean=float(stats.mean()),
                max=float(stats.max()),
                last=float(present[-1]),
            )
        )
    return out


def _histogram_windows(ex: list[StepValues], stats: _CounterStats, notes: list[str]) -> list[SeriesWindow]:
    out = []
    synthesized_inf: set[str] = set()
    for key in _keys_in_order(e.hists for e in ex):
        hists = [e.hists.get(key) for e in ex]
        last = next(h for h in reversed(hists) if h is not None)
        counts = [h.count if h is not None and h.count is not None else _inf_bucket(h) for h in hists]
        resets = _reset_points(key, ex, counts)
        if resets:
            stats.resets.add(key)
        if hists[0] is None and len(ex) > 1:
            stats.appeared.add(key)

        def inc(getter, hists=hists, resets=resets):
            vals = [getter(h) if h is not None else None for h in hists]
            if len(hists) == 1:
                return vals[0]
            return _increase(vals, resets) if any(v is not None for v in vals) else None

        les = sorted(le for le in last.buckets if not math.isnan(le))  # a bucket "le=NaN" has no place on the axis
        bucket_inc = {le: inc(lambda h, le=le: h.buckets.get(le)) for le in les}
        count = inc(lambda h: h.count)
        total = inc(lambda h: h.sum)
        if count is None and math.inf in bucket_inc:
            count = bucket_inc[math.inf]
        if les and math.inf not in bucket_inc and count is not None:
            bucket_inc[math.inf] = count  # the +Inf bucket always equals _count
            synthesized_inf.add(key[0])
        quantiles: dict[str, float] = {}
        bounds: dict[str, tuple[float, float]] = {}
        if bucket_inc and count:
            uppers = np.array(sorted(bucket_inc), dtype=float)
            cum = np.array([bucket_inc[u] or 0.0 for u in uppers], dtype=float)
            for label, q in QUANTILES.items():
                v, lo, hi = quantile_with_bounds(q, uppers, cum)
                if not math.isnan(v):
                    quantiles[label] = v
                    bounds[label] = (lo, hi)
        out.append(
            SeriesWindow(
                family=key[0],
                type="histogram",
                labels=dict(key[1]),
                count=count,
                sum=total,
                avg=(total / count) if (count and total is not None) else None,
                quantiles=quantiles,
                quantile_bounds=bounds,
            )
        )
    if synthesized_inf:
        notes.append(
            f"histogram(s) without a +Inf bucket (excerpt?): {', '.join(sorted(synthesized_inf))}; "
            "used _count as the +Inf bucket"
        )
    return out


def _summary_windows(ex: list[StepValues], stats: _CounterStats) -> list[SeriesWindow]:
    out = []
    for key in _keys_in_order(e.summaries for e in ex):
        hists = [e.summaries.get(key) for e in ex]
        counts = [h.count if h is not None else None for h in hists]
        resets = _reset_points(key, ex, counts)
        if resets:
            stats.resets.add(key)
        sums = [h.sum if h is not None else None for h in hists]
        if len(ex) == 1:
            count, total = counts[0], sums[0]
        else:
            count = _increase(counts, resets) if any(c is not None for c in counts) else None
            total = _increase(sums, resets) if any(s is not None for s in sums) else None
        last = next(h for h in reversed(hists) if h is not None)
        out.append(
            SeriesWindow(
                family=key[0],
                type="summary",
                labels=dict(key[1]),
                count=count,
                sum=total,
                avg=(total / count) if (count and total is not None) else None,
                # a summary's quantiles are computed by the server over its own sliding window;
                # they cannot be diffed, so the last scrape's values are reported
                quantiles={f"p{q * 100:g}": v for q, v in sorted(last.quantiles.items())},
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# PromQL histogram_quantile


def histogram_quantile(q: float, upper_bounds: np.ndarray, cumulative: np.ndarray) -> float:
    """The q-quantile of a cumulative histogram, interpolated linearly inside its bucket.

    Follows Prometheus' ``bucketQuantile`` (promql/quantile.go): buckets sorted by upper bound and
    made monotonic; the last must be ``+Inf``; a rank that falls in the ``+Inf`` bucket returns the
    highest finite upper bound; the first bucket's lower bound is 0 (unless its upper bound is <= 0).
    Returns NaN when there is no ``+Inf`` bucket, fewer than two buckets, or no observations.
    """
    return quantile_with_bounds(q, upper_bounds, cumulative)[0]


def quantile_with_bounds(
    q: float, upper_bounds: np.ndarray, cumulative: np.ndarray
) -> tuple[float, float, float]:
    """``(value, lower, upper)``: :func:`histogram_quantile` plus the bucket the value was read from.

    WHY the bounds: an interpolated quantile is only as precise as its bucket (vLLM's latency
    buckets start at 0.3 s, so a 14 us queue time reads as "p50 0.15 s"); the bounds let the
    advisor say "between 0 and 0.3 s" instead of quoting a made-up figure.
    """
    nan = math.nan
    if math.isnan(q):
        return nan, nan, nan
    if q < 0:
        return -math.inf, -math.inf, -math.inf
    if q > 1:
        return math.inf, math.inf, math.inf
    order = np.argsort(upper_bounds, kind="stable")
    uppers = np.asarray(upper_bounds, dtype=float)[order]
    cum = np.maximum.accumulate(np.asarray(cumulative, dtype=float)[order])
    n = len(uppers)
    if n < 2 or not (math.isinf(uppers[-1]) and uppers[-1] > 0):
        return nan, nan, nan
    total = cum[-1]
    if not total > 0:
        return nan, nan, nan
    rank = q * total
    # first bucket (among the finite ones) whose cumulative count reaches the rank
    b = int(np.searchsorted(cum[:-1], rank, side="left"))
    if b == n - 1:
        return float(uppers[n - 2]), float(uppers[n - 2]), math.inf
    if b == 0 and uppers[0] <= 0:
        return float(uppers[0]), -math.inf, float(uppers[0])
    start = 0.0 if b == 0 else float(uppers[b - 1])
    end = float(uppers[b])
    below = 0.0 if b == 0 else float(cum[b - 1])
    in_bucket = float(cum[b]) - below
    if in_bucket <= 0:
        return end, start, end
    return start + (end - start) * ((rank - below) / in_bucket), start, end


# --------------------------------------------------------------------------------------------
# helpers


def _ordered(snaps: list[MetricsSnapshot], extracted: list[StepValues], notes: list[str]) -> list[tuple[MetricsSnapshot, StepValues]]:
    """The snapshots (each with its values) in time order: by their timestamps, else, where they carry
    none, by their counters (``_ordered_by_counters``); as given otherwise."""
    pairs = list(zip(snaps, extracted))
    stamps = [s.timestamp for s in snaps]
    if all(t is not None for t in stamps) and stamps != sorted(stamps):  # type: ignore[type-var]
        notes.append("snapshots were not in time order; sorted by timestamp")
        return sorted(pairs, key=lambda p: p[0].timestamp)  # type: ignore[arg-type,return-value]
    if any(t is None for t in stamps) and len(snaps) > 1:
        order = _ordered_by_counters([e.counters for e in extracted])
        if order is not None and order != sorted(order):
            notes.append("snapshots carry no timestamps and were not in the order their counters grew; ordered by their counters")
            return [pairs[i] for i in order]
    return pairs


def _ordered_by_counters(counters: list[dict[SeriesKey, float]]) -> list[int] | None:
    """The order (indexes) in which dumps without timestamps grew, where every counter they share agrees
    on it ("metrics_after.txt" sorts before "metrics_before.txt"; a real H100 run read that way counted
    a restart and no work); None where the counters disagree (a restart between them keeps the given order)."""
    order = sorted(range(len(counters)), key=lambda i: sum(counters[i].values()))
    for a, b in zip(order, order[1:]):
        shared = counters[a].keys() & counters[b].keys()
        if not shared or any(counters[a][k] > counters[b][k] for k in shared):
            return None
    return order


def _keys_in_order(dicts) -> list[SeriesKey]:
    seen: dict[SeriesKey, None] = {}
    for d in dicts:
        for k in d:
            seen.setdefault(k, None)
    return list(seen)


def _last_present(values: list[float | None]) -> float | None:
    for v in reversed(values):
        if v is not None:
            return v
    return None


def _inf_bucket(h: StepDistribution | None) -> float | None:
    return None if h is None else h.buckets.get(math.inf)


def _type_of(family: str, ex: list[StepValues]) -> str:
    for e in reversed(ex):
        t = e.types.get(family)
        if t is not None:
            return t if t in _GAUGE_LIKE else "gauge"
    return "gauge"

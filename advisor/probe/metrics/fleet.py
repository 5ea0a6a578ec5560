"""A Prometheus range-query matrix -> snapshots per instance, and snapshots of the whole fleet summed.

WHY snapshots: everything downstream (:func:`~.window.compute_window`, :func:`~.summary.summarize_window`,
the diagnosis) already reads ``MetricsSnapshot`` lists. A ``query_range`` answer is the same data laid
out per series instead of per scrape, so it is turned back into one snapshot per step timestamp and the
window math is reused unchanged. :func:`build_snapshots` does that; :func:`step_values` gives what
``compute_window`` reads from those snapshots without building them (one pydantic sample per series per
step was most of the time for a large fleet) and is what :mod:`.prometheus` uses; the two are tested equal.

The fleet view is one more snapshot list, built by adding the instances up at each step:

* counters, histogram buckets/``_sum``/``_count`` and summary ``_sum``/``_count`` are summed as each
  instance's increase since its first step in the range: its series is made monotonic first (a counter
  reset adds the value before the reset to an offset, the way PromQL's ``increase()`` treats a drop) and
  carried forward over steps where the instance has no sample. Without that a restart of one instance
  would read as a fleet-wide drop, an instance missing from one scrape as a fleet-wide restart, and an
  instance first scraped after the range began would add its lifetime totals. So the fleet's increase
  is exactly the sum of the per-instance windows' increases;
* gauges that count things (``vllm:num_requests_running``/``_waiting``/..., every ``vllm:num_*``, V0's
  ``*_toks_per_s`` throughputs) are summed over the instances present at that step;
* every other gauge is the MAX over instances: these are fractions (``vllm:kv_cache_usage_perc``, hit
  rates), states and info gauges, where a sum means nothing (two half-full caches are not one full cache).
  Max rather than mean because the diagnosis reads KV usage as "is an engine out of KV cache": that
  engine preempts and queues however idle the others are, and a mean would hide it behind them.
  The per-instance windows keep every instance's own value;
* summary quantiles cannot be added and are left out; ``*_created`` companions are left out (the summed
  series are already reset-adjusted).

Labels that name the scrape target (``instance``, ``job``, ``pod``, ...) are dropped in the fleet view, so
series of the same family, model and engine index from different instances add up.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...schema.metrics import MetricFamily, MetricSample, MetricsSnapshot, MetricType
from .names import canonical_name
from .window import SeriesKey, StepDistribution, StepValues

#: labels that identify where a series was scraped, not what it measures (dropped in the fleet view)
TARGET_LABELS: tuple[str, ...] = (
    "instance",
    "job",
    "pod",
    "pod_name",
    "kubernetes_pod_name",
    "container",
    "container_name",
    "namespace",
    "kubernetes_namespace",
    "node",
    "endpoint",
    "service",
    "host",
    "hostname",
)
#: labels that tell instances apart: one window per (job, instance)
INSTANCE_LABELS: tuple[str, ...] = ("job", "instance")

_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
_DISTRIBUTION_TYPES = {"histogram", "summary", "gaugehistogram"}
_SCHEMA_TYPES = {"counter", "gauge", "histogram", "summary", "info", "stateset", "gaugehistogram"}

LabelsKey = tuple[tuple[str, str], ...]
InstanceKey = tuple[str, str]  # (job, instance)


@dataclass
class RangeSeries:
    """One series of the matrix: its name, labels (no ``__name__``) and values by step index."""

    name: str
    labels: dict[str, str]
    values: dict[int, float]


@dataclass(frozen=True)
class SeriesKind:
    """What a series is: the family it belongs to (name as exported), the family's type, and the part."""

    family: str
    type: MetricType
    part: str  # "value", "bucket", "sum", "count", "quantile"


@dataclass
class TypeResolver:
    """Family and type of each series name: from Prometheus' metadata when it has the name, else from
    the name's suffix and labels (``_bucket`` with ``le`` -> histogram, ``_total`` -> counter, ...)."""

    metadata: dict[str, str]
    names: set[str]
    bucket_bases: set[str] = field(default_factory=set)
    quantile_names: set[str] = field(default_factory=set)
    from_metadata: set[str] = field(default_factory=set)
    inferred: set[str] = field(default_factory=set)
    _cache: dict[str, SeriesKind] = field(default_factory=dict)
    _cumulative_families: set[str] | None = None

    @classmethod
    def for_series(cls, series: Iterable[RangeSeries], metadata: dict[str, str]) -> TypeResolver:
        series = list(series)
        resolver = cls(metadata=metadata, names={s.name for s in series})
        for s in series:
            if s.name.endswith("_bucket") and "le" in s.labels:
                resolver.bucket_bases.add(s.name[: -len("_bucket")])
            if "quantile" in s.labels:
                resolver.quantile_names.add(s.name)
        return resolver

    def kind(self, name: str) -> SeriesKind:
        found = self._cache.get(name)
        if found is None:
            found = self._cache[name] = self._resolve(name)
            family = found.family
            (self.from_metadata if self._typed_by_metadata(name, family) else self.inferred).add(family)
        return found

    def _typed_by_metadata(self, name: str, family: str) -> bool:
        return any(self._meta(n) is not None for n in (name, family, family + "_total"))

    def _meta(self, name: str) -> str | None:
        t = self.metadata.get(name)
        return t if t in _SCHEMA_TYPES else None

    def _resolve(self, name: str) -> SeriesKind:
        for suffix in _HISTOGRAM_PARTS:
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                t = self._meta(base)
                if t in _DISTRIBUTION_TYPES:
                    return SeriesKind(base, t, suffix[1:])  # type: ignore[arg-type]
        t = self._meta(name)
        if t == "counter":
            return SeriesKind(_strip_total(name), "counter", "value")
        if t in _DISTRIBUTION_TYPES:  # a summary's quantile series carries the bare family name
            return SeriesKind(name, t, "quantile")  # type: ignore[arg-type]
        if t is not None:
            return SeriesKind(name, t, "value")  # type: ignore[arg-type]
        if name.endswith("_total") and self._meta(name[: -len("_total")]) == "counter":
            return SeriesKind(name[: -len("_total")], "counter", "value")
        return self._infer(name)

    def _infer(self, name: str) -> SeriesKind:
        """No metadata for this name: the same rules the text parser uses for dumps without ``# TYPE``."""
        for suffix in _HISTOGRAM_PARTS:
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                if base in self.bucket_bases:
                    return SeriesKind(base, "histogram", suffix[1:])
                if suffix != "_bucket" and base in self.quantile_names:
                    return SeriesKind(base, "summary", suffix[1:])
        if name in self.quantile_names:
            return SeriesKind(name, "summary", "quantile")
        if name.endswith("_total"):
            return SeriesKind(name[: -len("_total")], "counter", "value")
        if name.endswith("_created"):
            return SeriesKind(name, "gauge", "value")
        return SeriesKind(name, "unknown", "value")

    def is_created_companion(self, name: str) -> bool:
        """``X_created`` next to counter/histogram ``X``: the time the series started (reset detection)."""
        if not name.endswith("_created"):
            return False
        if self._cumulative_families is None:
            self._cumulative_families = {
                k.family for k in (self.kind(n) for n in self.names if not n.endswith("_created"))
                if k.type == "counter" or k.type in _DISTRIBUTION_TYPES
            }
        return name[: -len("_created")] in self._cumulative_families


def _strip_total(name: str) -> str:
    return name[: -len("_total")] if name.endswith("_total") else name


def labels_key(labels: dict[str, str], drop: Iterable[str] = ()) -> LabelsKey:
    dropped = set(drop)
    return tuple(sorted((k, v) for k, v in labels.items() if k not in dropped))


def instance_of(labels: dict[str, str]) -> InstanceKey:
    return (labels.get("job", ""), labels.get("instance", ""))


# --------------------------------------------------------------------------------------------
# series -> snapshots


def _kept_series(series: list[RangeSeries], resolver: TypeResolver, drop_labels: Iterable[str], notes: list[str]):
    """(series, its kind, its canonical family, its labels without ``drop_labels``) for every series
    whose family is kept (a legacy name read under the current one, duplicates skipped, in ``notes``)."""
    drop = tuple(drop_labels)
    chosen = _canonical_families({resolver.kind(s.name).family for s in series}, notes)
    for s in series:
        kind = resolver.kind(s.name)
        canon = chosen.get(kind.family)
        if canon is not None:
            yield s, kind, canon, {k: v for k, v in s.labels.items() if k not in drop}


def build_snapshots(
    series: list[RangeSeries],
    resolver: TypeResolver,
    timestamps: list[float],
    source: str,
    drop_labels: Iterable[str],
) -> tuple[list[MetricsSnapshot], list[str]]:
    """One snapshot per step index that has at least one sample; family names canonicalised.

    Returns the snapshots and notes (legacy names read under current ones, duplicates ignored).
    """
    notes: list[str] = []
    prepared = [(s, canon, kind.family, kind.type, labels) for s, kind, canon, labels in _kept_series(series, resolver, drop_labels, notes)]

    snapshots: list[MetricsSnapshot] = []
    # a series whose value did not change since the previous step reuses that step's sample object
    # (nothing downstream mutates samples); most series of an idle or steady server are constant
    previous: list[MetricSample | None] = [None] * len(prepared)
    for index, ts in enumerate(timestamps):
        families: dict[str, MetricFamily] = {}
        for n, (s, canon, original, type_, labels) in enumerate(prepared):
            value = s.values.get(index)
            if value is None:
                continue
            fam = families.get(canon)
            if fam is None:
                fam = families[canon] = MetricFamily.model_construct(
                    name=canon, original_name=original, type=type_, help="", samples=[]
                )
            sample = previous[n]
            if sample is None or not (sample.value == value or (value != value and sample.value != sample.value)):
                sample = previous[n] = MetricSample.model_construct(name=s.name, labels=labels, value=value)
            fam.samples.append(sample)
        if families:
            snapshots.append(
                MetricsSnapshot.model_construct(
                    source=source, timestamp=ts, families=families, skipped_lines=0, notes=[]
                )
            )
    return snapshots, notes


@dataclass
class _Prepared:
    """One series as every step reads it, worked out once instead of at each step."""

    values: dict[int, float]
    name: str
    canon: str
    type: MetricType
    key: SeriesKey  # (canonical family, labels without the dropped ones, le and quantile)
    created_key: SeriesKey  # the same for the base family of an ``X_created`` series
    suffix: str  # what follows the family name in the series name (histograms and summaries)
    le: float | None  # the bucket's upper bound; None when ``le`` is not a number (skipped, as the window does)
    quantile: float | None  # the same for a summary's ``quantile``


def step_values(
    series: list[RangeSeries],
    resolver: TypeResolver,
    timestamps: list[float],
    drop_labels: Iterable[str],
) -> tuple[list[StepValues], list[float], list[str]]:
    """What :func:`build_snapshots` then :func:`~.window.compute_window`'s per-snapshot reading give, without
    the snapshots: one :class:`~.window.StepValues` per step that has a sample, those steps' timestamps,
    and the same notes. Feed them to :func:`~.window.window_from_steps`.

    WHY: a fleet's range query is series x steps values (20 instances x 316 series x 121 steps = 765,000);
    building a pydantic sample for each, only to read it back, was most of ``fetch_prometheus``'s time.
    Steps, families and samples are visited in the order the snapshots would hold them, so the windows
    (series order included) are identical; tests compare the two paths on real dumps.
    """
    notes: list[str] = []
    prepared: list[_Prepared] = []
    for s, kind, canon, labels in _kept_series(series, resolver, drop_labels, notes):
        key = labels_key(labels, _WINDOW_DROPPED)
        suffix = s.name[len(kind.family) :] if s.name.startswith(kind.family) else ""
        prepared.append(
            _Prepared(
                values=s.values,
                name=s.name,
                canon=canon,
                type=kind.type,
                key=(canon, key),
                created_key=(canon[: -len("_created")], key),
                suffix=suffix,
                le=_number(labels.get("le", "nan")) if suffix == "_bucket" else None,
                quantile=_number(labels["quantile"]) if suffix == "" and "quantile" in labels else None,
            )
        )

    steps: list[StepValues] = []
    stamps: list[float] = []
    for index, ts in enumerate(timestamps):
        # families in the order a snapshot's dict would hold them: by their first sample present at this step
        families: dict[str, list[tuple[_Prepared, float]]] = {}
        for p in prepared:
            value = p.values.get(index)
            if value is None:
                continue
            members = families.get(p.canon)
            if members is None:
                families[p.canon] = [(p, value)]
            else:
                members.append((p, value))
        if families:
            steps.append(_read_step(families))
            stamps.append(ts)
    return steps, stamps, notes


_WINDOW_DROPPED = ("le", "quantile")  # the window's series are a family and its labels without these


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _read_step(families: dict[str, list[tuple[_Prepared, float]]]) -> StepValues:
    """One step's values, read exactly as :func:`~.window.compute_window` reads a snapshot: the family's type
    is that of its first sample, an ``X_created`` gauge next to family ``X`` gives ``X``'s start time,
    counters skip their ``_created`` samples, histograms and summaries are gathered per series with their
    ``_sum`` and ``_count``."""
    out = StepValues()
    for canon, members in families.items():
        first = members[0][0]
        type_ = first.type
        if type_ == "gauge" and canon.endswith("_created") and canon[: -len("_created")] in families:
            for p, value in members:
                out.created[p.created_key] = value
            continue
        out.types[canon] = type_
        if type_ == "counter":
            for p, value in members:
                if not p.name.endswith("_created"):
                    out.counters[p.key] = value
        elif type_ == "histogram" or type_ == "summary":
            # every member of a family has the family's exported name (one exported family per canonical
            # name), so the part worked out once per series is the one a snapshot would give
            into = out.hists if type_ == "histogram" else out.summaries
            for p, value in members:
                h = into.get(p.key)
                if h is None:
                    h = into[p.key] = StepDistribution()
                suffix = p.suffix
                if suffix == "_bucket":
                    if p.le is not None:
                        h.buckets[p.le] = value
                elif suffix == "":
                    if p.quantile is not None:
                        h.quantiles[p.quantile] = value
                elif suffix == "_sum":
                    h.sum = value
                elif suffix == "_count":
                    h.count = value
        else:
            for p, value in members:
                out.gauges[p.key] = value
    return out


def _canonical_families(families: set[str], notes: list[str]) -> dict[str, str]:
    """Exported family name -> canonical name; when an old and a new name are both exported, the old one
    is left out (maps to nothing) so the quantity is counted once, as the text parser does."""
    by_canonical: dict[str, list[str]] = defaultdict(list)
    for fam in sorted(families):
        by_canonical[canonical_name(fam)].append(fam)
    out: dict[str, str] = {}
    renamed: list[str] = []
    for canon, names in by_canonical.items():
        keep = canon if canon in names else names[0]
        out[keep] = canon
        dropped = [n for n in names if n != keep]
        if dropped:
            notes.append(f"ignored deprecated {', '.join(dropped)}: {canon} is also exported (counted once)")
        if keep != canon:
            renamed.append(f"{keep} -> {canon}")
    if renamed:
        notes.append(f"read {len(renamed)} legacy metric name(s) under current names: {', '.join(renamed)}")
    return out


# --------------------------------------------------------------------------------------------
# the fleet: instances added up per step


def is_additive_gauge(family: str) -> bool:
    """Gauges that count something per instance (requests, V0 throughputs), so a fleet total is their sum."""
    name = canonical_name(family)
    return name.startswith("vllm:num_") or name.endswith("_toks_per_s")


@dataclass
class FleetSum:
    """The summed series plus what the summing had to say."""

    series: list[RangeSeries]
    summed_gauges: list[str]
    max_gauges: list[str]
    notes: list[str]


def sum_fleet(series: list[RangeSeries], resolver: TypeResolver, num_steps: int) -> FleetSum:
    """Add the instances up at each step (see the module docstring for how each kind is combined)."""
    created: dict[tuple[InstanceKey, str, LabelsKey], RangeSeries] = {}
    members: dict[tuple[str, LabelsKey], list[RangeSeries]] = defaultdict(list)
    skipped_quantiles: set[str] = set()
    for s in series:
        if resolver.is_created_companion(s.name):
            base = s.name[: -len("_created")]
            created[(instance_of(s.labels), base, labels_key(s.labels))] = s
            continue
        kind = resolver.kind(s.name)
        if kind.part == "quantile":
            skipped_quantiles.add(kind.family)
            continue
        members[(s.name, labels_key(s.labels, TARGET_LABELS))].append(s)

    resets = _reset_points(series, resolver, created)
    starts: dict[InstanceKey, int] = {}
    for s in series:
        if s.values:
            key = instance_of(s.labels)
            starts[key] = min(starts.get(key, num_steps), min(s.values))
    out: list[RangeSeries] = []
    summed_gauges: set[str] = set()
    max_gauges: set[str] = set()
    carried_instances: set[InstanceKey] = set()
    for (name, key), group in members.items():
        kind = resolver.kind(name)
        values: dict[int, float] = {}
        if _is_cumulative(kind):
            for s in group:
                if not s.values:
                    continue
                reset_at = resets.get(_reset_group(s, kind), set())
                adjusted, n_carried = _monotonic(s.values, reset_at, num_steps)
                if n_carried:
                    carried_instances.add(instance_of(s.labels))
                # the increase since the instance's first step, as its own window counts it: a series there
                # from the start counts from its first value, one that appears later counts from 0
                first = min(s.values)
                base = s.values[first] if first == starts[instance_of(s.labels)] else 0.0
                for i, v in adjusted.items():
                    values[i] = values.get(i, 0.0) + (v - base)
        else:
            additive = is_additive_gauge(kind.family)
            (summed_gauges if additive else max_gauges).add(canonical_name(kind.family))
            by_step: dict[int, list[float]] = defaultdict(list)
            for s in group:
                for i, v in s.values.items():
                    by_step[i].append(v)
            for i, vs in by_step.items():
                values[i] = math.fsum(vs) if additive else max(vs)
        out.append(RangeSeries(name=name, labels=dict(key), values=values))

    notes = _bucket_layout_notes(series, resolver)
    reset_groups = [group for group, at in resets.items() if at]
    if reset_groups:
        restarted = sorted({group[0] for group in reset_groups})
        notes.append(
            f"{len(reset_groups)} series reset on {len(restarted)} instance(s) ({_instances_text(restarted)}): "
            "the total before each reset was kept when adding the instances up"
        )
    if carried_instances:
        notes.append(
            f"{len(carried_instances)} instance(s) had steps without samples "
            f"({_instances_text(sorted(carried_instances))}): their counters were carried forward over the gaps"
        )
    if skipped_quantiles:
        notes.append(
            f"summary quantiles cannot be added across instances and were left out of the fleet view: "
            f"{', '.join(sorted(skipped_quantiles))}"
        )
    return FleetSum(series=out, summed_gauges=sorted(summed_gauges), max_gauges=sorted(max_gauges), notes=notes)


def instance_text(key: InstanceKey) -> str:
    job, instance = key
    return f"{instance or '(no instance label)'}" + (f" (job {job})" if job else "")


def _instances_text(keys: list[InstanceKey], limit: int = 3) -> str:
    shown = ", ".join(instance_text(k) for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _is_cumulative(kind: SeriesKind) -> bool:
    if kind.type == "counter":
        return True
    if kind.type in ("histogram", "summary"):
        return kind.part in ("bucket", "sum", "count")
    return False  # gauges, and gaugehistogram buckets (they go up and down)


def _reset_group(s: RangeSeries, kind: SeriesKind) -> tuple[InstanceKey, str, LabelsKey]:
    """The parts that reset together: one counter, or all buckets/_sum/_count of one histogram series."""
    return (instance_of(s.labels), kind.family, labels_key(s.labels, ("le", "quantile")))


def _reset_points(
    series: list[RangeSeries],
    resolver: TypeResolver,
    created: dict[tuple[InstanceKey, str, LabelsKey], RangeSeries],
) -> dict[tuple[InstanceKey, str, LabelsKey], set[int]]:
    """Step indices where an instance's counter (or histogram) restarted: a part's value dropped, or its
    ``_created`` time changed. All parts of a histogram share the reset points of the group."""
    out: dict[tuple[InstanceKey, str, LabelsKey], set[int]] = defaultdict(set)
    for s in series:
        kind = resolver.kind(s.name)
        if not _is_cumulative(kind) or resolver.is_created_companion(s.name):
            continue
        group = _reset_group(s, kind)
        prev: float | None = None
        for i in sorted(s.values):
            v = s.values[i]
            if prev is not None and v < prev:
                out[group].add(i)
            prev = v
        born = created.get(group)
        if born is not None:
            prev = None
            for i in sorted(born.values):
                v = born.values[i]
                if prev is not None and v != prev:
                    out[group].add(i)
                prev = v
    return out


def _monotonic(values: dict[int, float], reset_at: set[int], num_steps: int) -> tuple[dict[int, float], int]:
    """The series with resets undone (value + everything counted before each reset), carried forward over
    steps without a sample after it first appeared. Returns it and how many steps were carried."""
    out: dict[int, float] = {}
    offset = 0.0
    prev: float | None = None
    last: float | None = None
    carried = 0
    for i in range(num_steps):
        v = values.get(i)
        if v is None:
            if last is not None:
                out[i] = last
                carried += 1
            continue
        if prev is not None and (v < prev or i in reset_at):
            offset += prev
        prev = v
        last = out[i] = offset + v
    return out, carried


def _bucket_layout_notes(series: list[RangeSeries], resolver: TypeResolver) -> list[str]:
    """Say when instances export different bucket boundaries for one histogram (mixed vLLM versions):
    buckets summed across different layouts make the fleet quantiles approximate."""
    layouts: dict[str, dict[InstanceKey, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in series:
        kind = resolver.kind(s.name)
        if kind.part == "bucket" and "le" in s.labels:
            layouts[kind.family][instance_of(s.labels)].add(s.labels["le"])
    differing = sorted(f for f, per in layouts.items() if len({frozenset(v) for v in per.values()}) > 1)
    if not differing:
        return []
    return [
        f"instances export different histogram buckets for {', '.join(differing[:5])}"
        f"{' ...' if len(differing) > 5 else ''}; fleet quantiles of those are approximate"
    ]

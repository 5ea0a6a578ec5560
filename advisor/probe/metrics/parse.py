"""Prometheus text (a ``/metrics`` body or a saved dump) -> :class:`MetricsSnapshot`.

WHY a pre-filter in front of prometheus_client's parser: that parser stops at the first line it
cannot read (it raises ``ValueError`` from inside a generator), but the dumps people paste or save
are rarely clean: the vLLM docs' example has literal ``...`` lines, excerpts end in a cut-off line,
Markdown fences slip in. We keep every line that is a comment or a well-formed sample, count the
others, and tell the caller how many were dropped (``MetricsSnapshot.skipped_lines`` and ``notes``).

After parsing, family names are put under vLLM V1's current names (see :mod:`.names`); families that
came without a ``# TYPE`` line (excerpts) get their type back from the sample names
(``X_bucket{le=..}`` -> histogram ``X``, ``X_total`` -> counter ``X``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from ...schema.metrics import MetricFamily, MetricSample, MetricsSnapshot
from .names import canonical_name

#: a metric (or label) name in the classic exposition format
_NAME = r"[A-Za-z_:][A-Za-z0-9_:]*"
#: ``name{label="value",...} value [timestamp]``; label values may hold escaped quotes and braces
_SAMPLE_LINE = re.compile(
    rf'^{_NAME}(?:\{{(?:[^"{{}}]|"(?:[^"\\]|\\.)*")*\}})?[ \t]+(?P<value>[^ \t]+)(?:[ \t]+-?[0-9]+)?[ \t]*$'
)
_NAME_ONLY = re.compile(rf"^{_NAME}$")
#: A vLLM sample line as ``curl .../metrics | grep vllm`` prints it: what marks an excerpt with no
#: ``# TYPE`` lines (an attached file, or lines pasted into a question).
VLLM_SAMPLE_LINE = re.compile(r'^[ \t]*vllm:[A-Za-z0-9_:]+(?:\{(?:[^"{}\n]|"(?:[^"\\\n]|\\.)*")*\})?[ \t]+[-+0-9.eEinfNa]+(?:[ \t]+-?[0-9]+)?[ \t]*$', re.MULTILINE)
_METRIC_TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "info", "stateset", "gaugehistogram", "unknown"}
_SCHEMA_TYPES = {"counter", "gauge", "histogram", "summary", "info", "stateset", "gaugehistogram"}
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
#: how many skipped lines are quoted in the note (the count is always complete)
_QUOTED_SKIPS = 3


def parse_metrics_text(text: str, source: str, timestamp: float | None = None) -> MetricsSnapshot:
    """Parse Prometheus text exposition into a snapshot; unparsable lines are skipped and counted."""
    from ..files import max_line_chars

    lines = text.splitlines()
    if len(text) > (limit := max_line_chars()):  # a 10 MB label would cost the parser gigabytes: skipped as unreadable
        lines = [line if len(line) <= limit else f"<a line of {len(line):,} characters>" for line in lines]
    kept, skipped = _prefilter(lines)
    families, late_skips = _parse_kept(lines, kept)
    skipped.extend(late_skips)
    skipped.sort()

    notes: list[str] = []
    if skipped:
        quoted = "; ".join(f"line {n + 1}: {_shorten(lines[n])!r}" for n in skipped[:_QUOTED_SKIPS])
        more = f" and {len(skipped) - _QUOTED_SKIPS} more" if len(skipped) > _QUOTED_SKIPS else ""
        notes.append(f"skipped {len(skipped)} line(s) that are not Prometheus text ({quoted}{more})")

    grouped = _group_families(families, notes)
    canonical = _canonicalise(grouped, notes)
    return MetricsSnapshot(
        source=source, timestamp=timestamp, families=canonical, skipped_lines=len(skipped), notes=notes
    )


def _prefilter(lines: list[str]) -> tuple[list[int], list[int]]:
    """Indices of lines the prometheus_client parser can read, and of the lines it could not."""
    kept: list[int] = []
    skipped: list[int] = []
    sample_match = _SAMPLE_LINE.match
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            ok = _comment_ok(line)
        else:
            m = sample_match(line)
            ok = m is not None and _value_ok(m.group("value"))
        (kept if ok else skipped).append(i)
    return kept, skipped


def _comment_ok(line: str) -> bool:
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
        return True  # a plain comment: the parser ignores it
    if not _NAME_ONLY.match(parts[2]):
        return False
    if parts[1] == "TYPE":
        return len(parts) == 4 and parts[3] in _METRIC_TYPES
    return True


def _value_ok(value: str) -> bool:
    if "_" in value:
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _parse_kept(lines: list[str], kept: list[int]) -> tuple[list, list[int]]:
    """Parse the kept lines; if the parser still refuses something, find the lines it refuses and drop them."""
    try:
        return list(text_string_to_metric_families("\n".join(lines[i] for i in kept) + "\n")), []
    except ValueError:
        pass
    # Rare: a line that passes the pre-filter but not the parser (e.g. a duplicate label name).
    # Check each line alone, which is slow but only happens for broken input.
    bad = [i for i in kept if not _parses_alone(lines[i])]
    bad_set = set(bad)
    good = [i for i in kept if i not in bad_set]
    return list(text_string_to_metric_families("\n".join(lines[i] for i in good) + "\n")), bad


def _parses_alone(line: str) -> bool:
    try:
        list(text_string_to_metric_families(line + "\n"))
    except ValueError:
        return False
    return True


class _Family:
    """A family being assembled (mutable; converted to the pydantic model at the end)."""

    __slots__ = ("name", "type", "help", "samples")

    def __init__(self, name: str, type_: str, help_: str) -> None:
        self.name = name
        self.type = type_
        self.help = help_
        self.samples: dict[tuple, MetricSample] = {}


def _group_families(parsed: Iterable, notes: list[str]) -> dict[str, _Family]:
    """Merge the parser's families by exported name; give untyped families their type back."""
    parsed = list(parsed)
    bucket_bases = {
        s.name[: -len("_bucket")]
        for m in parsed
        if m.type in ("untyped", "unknown")
        for s in m.samples
        if s.name.endswith("_bucket") and "le" in s.labels
    }
    out: dict[str, _Family] = {}
    duplicates = unreadable = 0
    for m in parsed:
        if m.type in ("untyped", "unknown"):
            name, type_ = _infer_untyped(m.name, bucket_bases)
        else:
            name, type_ = m.name, m.type
        fam = out.get(name)
        if fam is None:
            fam = out[name] = _Family(name, type_, m.documentation or "")
        else:
            if fam.type == "unknown" and type_ != "unknown":
                fam.type = type_
            if not fam.help and m.documentation:
                fam.help = m.documentation
        samples = fam.samples
        for s in m.samples:
            try:
                value = float(s.value)
            except (OverflowError, TypeError, ValueError):  # an integer past 1.8e308
                unreadable += 1
                continue
            labels = s.labels
            key = (s.name, tuple(labels.items()))  # one exporter writes labels in one order
            if key in samples:
                duplicates += 1
            samples[key] = MetricSample.model_construct(name=s.name, labels=labels, value=value)
    if unreadable:
        notes.append(f"{unreadable} sample value(s) out of a number's range were skipped")
    if duplicates:
        notes.append(f"{duplicates} sample(s) appeared more than once; the last value of each was kept")
    return out


def _infer_untyped(name: str, bucket_bases: set[str]) -> tuple[str, str]:
    """Family name and type for a family that came without ``# TYPE`` (excerpts, hand-made dumps)."""
    for part in _HISTOGRAM_PARTS:
        if name.endswith(part) and name[: -len(part)] in bucket_bases:
            return name[: -len(part)], "histogram"
    if name in bucket_bases:
        return name, "histogram"
    if name.endswith("_total"):
        return name[: -len("_total")], "counter"
    if name.endswith("_created"):
        return name, "gauge"
    return name, "unknown"


def _canonicalise(grouped: dict[str, _Family], notes: list[str]) -> dict[str, MetricFamily]:
    """Store families under current V1 names; when old and new are both exported, keep the new one only."""
    by_canonical: dict[str, list[_Family]] = {}
    for fam in grouped.values():
        by_canonical.setdefault(canonical_name(fam.name), []).append(fam)
    out: dict[str, MetricFamily] = {}
    renamed: list[str] = []
    for canon, fams in by_canonical.items():
        current = [f for f in fams if f.name == canon]
        chosen = current[0] if current else fams[0]
        dropped = [f.name for f in fams if f is not chosen]
        if dropped:
            notes.append(
                f"ignored deprecated {', '.join(dropped)}: {canon} is also exported (counted once, under the new name)"
            )
        if chosen.name != canon:
            renamed.append(f"{chosen.name} -> {canon}")
        out[canon] = MetricFamily.model_construct(
            name=canon,
            original_name=chosen.name,
            type=chosen.type if chosen.type in _SCHEMA_TYPES else "unknown",
            help=chosen.help,
            samples=list(chosen.samples.values()),
        )
    if renamed:
        notes.append(f"read {len(renamed)} legacy metric name(s) under current names: {', '.join(renamed)}")
    return out


def _shorten(line: str, limit: int = 60) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."

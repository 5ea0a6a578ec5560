"""Measured, predicted and ceiling runs lined up by load point, so each row compares like with like.

A load point is a closed-loop client count or an open-loop request rate; a predicted run and the
measured runs it reproduces share it. Several measured runs at one point (two files, two repeats)
each get their own rows against the same prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..schema import BenchmarkRun

LoadKey = tuple[str, float]


def load_key(run: BenchmarkRun) -> LoadKey | None:
    """('c', clients) for a closed loop, ('rate', req/s) for an open one, None when neither is known."""
    if run.offered_concurrency:
        return ("c", float(run.offered_concurrency))
    if run.offered_request_rate is not None:
        return ("rate", float(run.offered_request_rate))
    return None


@dataclass
class LoadPointRow:
    key: LoadKey | None
    label: str
    measured: list[BenchmarkRun] = field(default_factory=list)
    predicted: BenchmarkRun | None = None
    ceiling: BenchmarkRun | None = None

    @property
    def x(self) -> float | None:
        """Position on a plot's load axis (clients or req/s); None for an unknown or infinite point."""
        if self.key is None or math.isinf(self.key[1]):
            return None
        return self.key[1]


def line_up(measured: list[BenchmarkRun], predicted: list[BenchmarkRun], ceiling: list[BenchmarkRun]) -> list[LoadPointRow]:
    """Every load point in order of load (closed loops first), each with what is known about it."""
    rows: dict[object, LoadPointRow] = {}
    for run in measured:
        key = load_key(run)
        slot = key if key is not None else ("run", id(run))
        row = rows.setdefault(slot, LoadPointRow(key=key, label=run.load_label))
        row.measured.append(run)
    for run in predicted:
        key = load_key(run)
        if key is None:
            continue
        rows.setdefault(key, LoadPointRow(key=key, label=run.load_label)).predicted = run
    for run in ceiling:
        key = load_key(run)
        if key is not None and key in rows:
            rows[key].ceiling = run

    def order(row: LoadPointRow) -> tuple:
        if row.key is None:
            return (2, 0.0)
        return (0 if row.key[0] == "c" else 1, row.key[1])

    return sorted(rows.values(), key=order)


def figure_value(run: BenchmarkRun | None, attr: str) -> float | None:
    """A run's figure: the mean of a distribution (median when only that is known), or a scalar."""
    if run is None:
        return None
    value = getattr(run, attr, None)
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return value.mean if value.mean is not None else value.median

"""Typed reading of benchmark-result fields, with errors that name the file and the field.

Benchmark files are written by other tools and edited by people, so any value can have the wrong
type. Every loader reads values through :class:`FieldReader` so that ``"duration": "abc"`` becomes
one line (``file: field 'duration': expected a number, got the string 'abc'``) instead of a
traceback, and so that a missing figure stays ``None`` instead of becoming 0.

Big per-request arrays are converted with numpy in one call (no per-element Python or pydantic
work); only when that conversion fails do we walk the list to name the first bad element.
"""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timezone
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from ...errors import InputFileError
from ...schema import Distribution
from ...schema.bench import percentile_key


def describe(value: Any) -> str:
    """A short description of a wrong value for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"the string {shown!r}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return f"{type(value).__name__} {value!r}"


def as_number(value: Any, *, allow_inf: bool = False) -> float | None:
    """A JSON value as a float: numbers and numeric strings (LLMPerf writes ``"550"``).

    ``None``/NaN give ``None`` (a missing figure); anything else raises ``ValueError``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(describe(value))
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer past 1.8e308
            raise ValueError(describe(value)) from None
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except (ValueError, OverflowError):
            raise ValueError(describe(value)) from None
    else:
        raise ValueError(describe(value))
    if math.isnan(number):
        return None
    if math.isinf(number) and not allow_inf:
        raise ValueError(describe(value))
    return number


#: Where fields are read leniently (``ask``'s attachments): a field of the wrong type is left out and its
#: error kept here, so one bad value costs that figure, not the whole file; ``probe load`` stays strict.
_DROPPED: ContextVar[list[InputFileError] | None] = ContextVar("dropped_fields", default=None)


@contextmanager
def dropping_bad_fields() -> Iterator[list[InputFileError]]:
    """Read fields leniently inside the block; the errors of the fields left out are collected in the list given."""
    dropped: list[InputFileError] = []
    token = _DROPPED.set(dropped)
    try:
        yield dropped
    finally:
        _DROPPED.reset(token)


class FieldReader:
    """Reads typed values out of one JSON/YAML object; errors name ``source`` and the field path."""

    def __init__(self, obj: Mapping[str, Any], source: str, prefix: str = "") -> None:
        self.obj = obj
        self.source = source
        self.prefix = prefix
        if not isinstance(obj, Mapping):  # a report whose section is a string or a list
            raise InputFileError(f"expected an object, got {describe(obj)}", source=source, field=prefix or None)

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str, message: str) -> InputFileError:
        return InputFileError(message, source=self.source, field=self.path(key))

    def _fail(self, error: InputFileError):
        """Raise ``error``; where fields are read leniently (``dropping_bad_fields``), keep it and read the field as missing."""
        dropped = _DROPPED.get()
        if dropped is None:
            raise error
        dropped.append(error)
        return None

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.obj.get(key)

    def number(self, key: str, *, allow_inf: bool = False, allow_negative: bool = False) -> float | None:
        """A figure of a benchmark (a count, a rate, a time, a length): never below zero, so a
        negative one is refused here, naming the field, instead of reaching a plot or a division."""
        try:
            value = as_number(self.obj.get(key), allow_inf=allow_inf)
        except ValueError as exc:
            return self._fail(self.error(key, f"expected a number, got {exc}"))
        if value is not None and value < 0 and not allow_negative:
            return self._fail(self.error(key, f"expected a number of zero or more, got {value:g}"))
        return value

    def integer(self, key: str) -> int | None:
        value = self.number(key)
        if value is None:
            return None
        if not float(value).is_integer():
            return self._fail(self.error(key, f"expected a whole number, got {value:g}"))
        return int(value)

    def text(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        return self._fail(self.error(key, f"expected a string, got {describe(value)}"))

    def boolean(self, key: str) -> bool | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return self._fail(self.error(key, f"expected true or false, got {describe(value)}"))

    def mapping(self, key: str) -> dict[str, Any] | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            return self._fail(self.error(key, f"expected an object, got {describe(value)}"))
        return value

    def sub(self, key: str) -> "FieldReader | None":
        value = self.mapping(key)
        return None if value is None else FieldReader(value, self.source, self.path(key))

    def list(self, key: str) -> list[Any] | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            return self._fail(self.error(key, f"expected a list, got {describe(value)}"))
        return value

    def number_array(self, key: str, *, allow_null: bool = False) -> np.ndarray | None:
        """A list of numbers as a float64 array, converted by numpy in one call."""
        values = self.list(key)
        if values is None:
            return None
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return self._fail(self._bad_element(key, values))
        if arr.ndim != 1:
            return self._fail(self.error(key, "expected a flat list of numbers, got nested lists"))
        if not allow_null and arr.size and np.isnan(arr).any():
            index = int(np.flatnonzero(np.isnan(arr))[0])
            return self._fail(self.error(key, f"expected numbers, element {index} is {describe(values[index])}"))
        if arr.size and np.isinf(arr).any():  # 1e400 in a JSON file reads as infinity
            index = int(np.flatnonzero(np.isinf(arr))[0])
            return self._fail(self.error(key, f"expected finite numbers, element {index} is {describe(values[index])}"))
        return arr

    def string_list(self, key: str) -> list[str] | None:
        values = self.list(key)
        if values is None:
            return None
        for index, value in enumerate(values):
            if value is not None and not isinstance(value, str):
                return self._fail(self.error(key, f"expected strings, element {index} is {describe(value)}"))
        return values

    def ragged_number_arrays(self, key: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A list of lists of numbers (``itls``) as (all values flattened, length of each list).

        ``itertools.chain`` + ``np.fromiter`` flatten 12 million gaps in about half a second;
        per-element checks happen only when that fails.
        """
        values = self.list(key)
        if values is None:
            return None
        for index, inner in enumerate(values):
            if type(inner) is not list:
                return self._fail(self.error(key, f"expected a list of lists, element {index} is {describe(inner)}"))
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        total = int(counts.sum())
        try:
            flat = np.fromiter(itertools.chain.from_iterable(values), dtype=np.float64, count=total)
        except (TypeError, ValueError, OverflowError):
            for index, inner in enumerate(values):
                for position, value in enumerate(inner):
                    try:
                        if as_number(value) is None:
                            raise ValueError(describe(value))
                    except ValueError:
                        return self._fail(self.error(key, f"expected numbers, element [{index}][{position}] is {describe(value)}"))
            return self._fail(self.error(key, "expected lists of numbers"))
        return flat, counts

    def _bad_element(self, key: str, values: list[Any]) -> InputFileError:
        for index, value in enumerate(values):
            try:
                as_number(value)
            except ValueError:
                return self.error(key, f"expected numbers, element {index} is {describe(value)}")
        return self.error(key, "expected a flat list of numbers")


def percentile_from_key(key: str) -> float | None:
    """``'p99' -> 99``, ``'p99.9' -> 99.9``; GuideLLM's ``'p001' -> 0.1``, ``'p999' -> 99.9``."""
    if not key.startswith("p"):
        return None
    digits = key[1:]
    try:
        if "." in digits:
            return float(digits)
        if not digits.isdigit():
            return None
        if len(digits) == 3:  # GuideLLM: p001 = 0.1 %, p999 = 99.9 %
            return int(digits) / 10
        return float(int(digits))
    except ValueError:
        return None


def distribution(
    unit: str,
    *,
    count: int | None = None,
    mean: float | None = None,
    median: float | None = None,
    std: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    percentiles: Mapping[float, float | None] | None = None,
) -> Distribution | None:
    """A Distribution of stated figures, or ``None`` when the file states none of them."""
    pct = {percentile_key(p): float(v) for p, v in sorted((percentiles or {}).items()) if v is not None}
    if median is None and "p50" in pct:
        median = pct["p50"]
    if all(v is None for v in (mean, median, std, minimum, maximum)) and not pct:
        return None
    return Distribution(
        unit=unit, count=count, mean=mean, median=median, std=std, min=minimum, max=maximum, percentiles=pct
    )


def stat_block_distribution(
    reader: FieldReader,
    key: str,
    unit: str,
    *,
    scale: float = 1.0,
    names: Mapping[str, str] | None = None,
) -> Distribution | None:
    """A Distribution from a stat object such as genai-perf's ``{"unit", "avg", "p50", ...}`` or
    GuideLLM's ``{"mean", "median", "std_dev", "percentiles": {...}}``.

    ``names`` maps our statistic (mean, median, std, min, max, count) to the tool's key;
    percentiles are read from ``pNN`` keys at the top level and under ``percentiles``.
    ``scale`` converts units (GuideLLM's ``request_latency`` is in seconds).
    """
    block = reader.sub(key)
    if block is None:
        return None
    names = {"mean": "mean", "median": "median", "std": "std", "min": "min", "max": "max", "count": "count"} | dict(
        names or {}
    )

    def scaled(name: str) -> float | None:
        value = block.number(names[name])
        return None if value is None else value * scale

    percentiles: dict[float, float | None] = {}
    sources = [block]
    nested = block.sub("percentiles")
    if nested is not None:
        sources.append(nested)
    for source in sources:
        for pkey in source.obj:
            p = percentile_from_key(pkey)
            if p is None:
                continue
            value = source.number(pkey)
            percentiles[p] = None if value is None else value * scale
    count = block.number(names["count"])
    return distribution(
        unit,
        count=None if count is None else int(count),
        mean=scaled("mean"),
        median=scaled("median"),
        std=scaled("std"),
        minimum=scaled("min"),
        maximum=scaled("max"),
        percentiles=percentiles,
    )


def iso_from_epoch(seconds: float | None) -> str | None:
    """Epoch seconds as an ISO-8601 UTC string."""
    if seconds is None or not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return None


def iso_from_compact(stamp: str | None) -> str | None:
    """``'20250414-141621'`` (vllm bench serve, local time) as ``'2025-04-14T14:16:21'``;
    other strings are returned as written."""
    if stamp is None:
        return None
    try:
        return datetime.strptime(stamp, "%Y%m%d-%H%M%S").isoformat()
    except ValueError:
        return stamp


def first_present(mapping: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    """The first of ``keys`` present (not None) in ``mapping``."""
    for key in keys:
        if mapping.get(key) is not None:
            return key
    return None

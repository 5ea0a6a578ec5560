"""Numbers and Markdown tables for the memo: one spelling of every figure, units always shown."""

from __future__ import annotations

import math
from typing import Any, Iterable


def num(value: float | int | None, digits: int = 1) -> str:
    """A figure for a table cell or a sentence; '—' when it is not known (never invented)."""
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int) or abs(value) >= 100 or float(value).is_integer():
        return f"{round(value):,}"
    if abs(value) < 1:
        return f"{value:.{digits + 1}g}" if value else "0"
    return f"{value:,.{digits}f}"


def with_unit(value: float | int | None, unit: str, digits: int = 1) -> str:
    text = num(value, digits)
    return text if text == "—" else f"{text} {unit}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isinf(a) or math.isinf(b):
        return None
    return a / b


def cell(value: Any) -> str:
    """Table cells may not hold a pipe or a line break."""
    return " ".join(str(value).split()).replace("|", "\\|")


def md_table(headers: list[str], rows: Iterable[list[Any]], align: list[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``align`` holds 'l' or 'r' per column."""
    align = align or ["l"] * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def code_block(text: str, lang: str = "sh") -> str:
    return f"```{lang}\n{text}\n```"

"""Numbers and Markdown tables for the memo: one spelling of every figure, units always shown."""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..messages.numbers import fmt_cell


def num(value: float | int | None, digits: int = 1) -> str:
    """A figure for a table cell or a sentence; '—' when it is not known (never invented). The one
    number formatter's table form (``vllm_advisor.messages.fmt_cell``)."""
    return fmt_cell(value, digits)


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

"""The one number formatter: every figure any writer prints (answer, memo, chat, plots) is spelled here.

327120 -> '327,120'; 5.11125 -> '5.11'; 38.2037 -> '38.2'; 0.01234 -> '0.0123'; 2000.0 -> '2,000';
never scientific notation for the figures this tool prints.
"""

from __future__ import annotations

import math


def fmt_number(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    v = float(value)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    a = abs(v)
    if a >= 100 or (v.is_integer() and a >= 1):
        return f"{v:,.0f}"
    if a >= 10:
        text = f"{v:.1f}"
    elif a >= 1:
        text = f"{v:.2f}"
    elif a == 0:
        return "0"
    else:
        text = f"{v:.3g}"
        return text if "e" not in text else f"{v:.2e}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_cell(value: float | int | None, digits: int = 1) -> str:
    """A figure for a table cell: '—' when it is not known (never invented); fixed decimals so a
    column lines up."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    if isinstance(value, int) or abs(value) >= 100 or float(value).is_integer():
        return f"{round(value):,}"
    if abs(value) < 1:
        return f"{value:.{digits + 1}g}" if value else "0"
    return f"{value:,.{digits}f}"

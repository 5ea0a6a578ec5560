"""Text to a Python scalar, the one way the advisor reads untyped values (CSV cells, KEY=VALUE)."""

from __future__ import annotations

from typing import Any

TRUE_WORDS = ("true", "yes", "on")
FALSE_WORDS = ("false", "no", "off")
NULL_WORDS = ("", "null", "none", "na", "n/a", "-")


def parse_scalar(text: str, *, booleans: bool = False, nulls: bool = False) -> Any:
    """An int, else a float, else the stripped text; optionally true/false words and null words."""
    value = text.strip()
    low = value.lower()
    if nulls and low in NULL_WORDS:
        return None
    if booleans and low in TRUE_WORDS:
        return True
    if booleans and low in FALSE_WORDS:
        return False
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value

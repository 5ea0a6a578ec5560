"""What every benchmark-format module provides: a detector verdict and a format entry.

Kept apart from the registry so that format modules can import it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...schema import BenchmarkRun
from .document import InputDocument


@dataclass(frozen=True)
class Detection:
    """A detector's verdict: ``matched``, or not with a short ``reason``."""

    matched: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> "Detection":
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> "Detection":
        return cls(False, reason)


@dataclass(frozen=True)
class BenchFormat:
    id: str
    description: str
    detect: Callable[[InputDocument], Detection]
    load: Callable[[InputDocument], list[BenchmarkRun]]

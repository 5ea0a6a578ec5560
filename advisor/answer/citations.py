"""Checking an answer's ``[n]`` markers and figures against what it was given.

An LLM can cite a passage it was never shown ("[9]" with eight sources) or state a figure that is
in neither the findings nor the passages. The first is checked exactly and repaired or rejected;
the second is checked with the tolerance of ordinary rounding (``5.11`` may be written ``5.1`` or
``约 5``; ``63,000`` may be ``63K``) and reported as a caveat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: [3], [1, 2], [1][2], [2-4], [1，2]; full-width 【3】 as some Chinese models write it.
MARKER = re.compile(r"[\[【]\s*(\d{1,3}(?:\s*(?:[,，、;；]|[-–~])\s*\d{1,3})*)\s*[\]】](?!\()")
_SEP = re.compile(r"\s*(?:[,，、;；])\s*")
_RANGE = re.compile(r"(\d+)\s*[-–~]\s*(\d+)")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
#: A figure in prose: 63,000 / 5.11 / 63K / 40% ; not parts of identifiers (H800, Qwen2.5, TP2).
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:\s?([kKmM万])(?![A-Za-z]))?")
#: Any digits at all, identifiers included: what a given text makes available to cite.
ANY_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:\s?([kKmM万])(?![A-Za-z]))?")
_LIST_ORDINAL = re.compile(r"^\s*(?:#+\s*)?\d+[.)、]\s", re.M)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)


def strip_code(text: str) -> str:
    """Prose only: fenced blocks and inline code hold commands, not claims."""
    return _INLINE_CODE.sub(" ", _FENCE.sub(" ", text))


def strip_thinking(text: str) -> str:
    """Reasoning models (Qwen3, DeepSeek-R1 served by vLLM) may stream a <think> block first."""
    return _THINK.sub("", text).strip()


def _numbers_in_marker(body: str) -> list[int]:
    out: list[int] = []
    for part in _SEP.split(body.strip()):
        m = _RANGE.fullmatch(part.strip())
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            out.extend(range(lo, hi + 1) if 0 <= hi - lo <= 50 else (lo, hi))
        elif part.strip().isdigit():
            out.append(int(part))
    return out


@dataclass
class CitationCheck:
    cited: list[int] = field(default_factory=list)  # every number cited, in order of appearance
    valid: list[int] = field(default_factory=list)
    invalid: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.valid) and not self.invalid


def check_citations(text: str, n_sources: int) -> CitationCheck:
    """Which cited numbers resolve to a source 1..n_sources (code spans are not read)."""
    check = CitationCheck()
    for m in MARKER.finditer(strip_code(text)):
        for n in _numbers_in_marker(m.group(1)):
            check.cited.append(n)
            (check.valid if 1 <= n <= n_sources else check.invalid).append(n)
    return check


def strip_invalid_markers(text: str, n_sources: int) -> str:
    """Remove the numbers of each marker that resolve to nothing; a marker left empty disappears.

    Code blocks are left alone (``arr[9]`` in a snippet is not a citation)."""

    def fix(m: re.Match) -> str:
        keep = [n for n in _numbers_in_marker(m.group(1)) if 1 <= n <= n_sources]
        return "[" + ", ".join(str(n) for n in dict.fromkeys(keep)) + "]" if keep else ""

    def prose(segment: str) -> str:
        out = MARKER.sub(fix, segment)
        return re.sub(r"[ \t]+([.,;:!?。，；：！？])", r"\1", out)

    pieces: list[str] = []
    last = 0
    for m in re.finditer(r"```.*?(?:```|\Z)|`[^`\n]*`", text, re.S):
        pieces.append(prose(text[last : m.start()]))
        pieces.append(m.group(0))
        last = m.end()
    pieces.append(prose(text[last:]))
    return "".join(pieces)


def _value(number: str, suffix: str | None) -> list[float]:
    base = float(number.replace(",", ""))
    if not suffix:
        return [base]
    s = suffix.lower()
    if s == "k":
        return [base * 1000, base * 1024]
    if s == "m":
        return [base * 1e6, base * 1024 * 1024]
    return [base * 1e4]  # 万


def numbers_in(text: str, *, strict: bool = True) -> list[tuple[str, list[float]]]:
    """(as written, candidate values) for each figure in prose; citation markers and list ordinals
    skipped. ``strict`` leaves out digits inside identifiers (H800, TP2); a text that is *given*
    to the writer is read with ``strict=False``, so 'Qwen32B' there allows '32B' in the answer."""
    if strict:
        prose = _LIST_ORDINAL.sub(" ", MARKER.sub(" ", strip_code(text)))
        pattern = NUMBER
    else:
        prose, pattern = text, ANY_NUMBER
    return [(m.group(0).strip(), _value(m.group(1), m.group(2))) for m in pattern.finditer(prose)]


def _close(x: float, allowed: list[float], rel: float) -> bool:
    for a in allowed:
        if x == a:
            return True
        scale = max(abs(a), abs(x))
        if scale and abs(x - a) / scale <= rel:
            return True
        if abs(a) >= 1 and abs(x - round(a)) < 1e-9:  # 5.11 written as 5
            return True
    return False


def unsupported_numbers(answer: str, given: list[str], *, rel: float = 0.01, ignore_below: float = 10.0) -> list[str]:
    """Figures in ``answer`` found in none of the ``given`` texts (within ``rel`` or by rounding).

    Small integers (below ``ignore_below``: 'two GPUs', 'step 3') are not checked: they are counts
    and ordinals far more often than claims, and flagging them would bury the real misses."""
    allowed: list[float] = []
    for text in given:
        for _, values in numbers_in(text, strict=False):
            allowed.extend(values)
    # Percentages of a fraction: 0.9 gpu_memory_utilization may be written 90%.
    allowed += [a * 100 for a in allowed if 0 < abs(a) <= 1]
    missing: list[str] = []
    for written, values in numbers_in(answer):
        if all(abs(v) < ignore_below and float(v).is_integer() for v in values):
            continue
        if not any(_close(v, allowed, rel) for v in values):
            if written not in missing:
                missing.append(written)
    return missing

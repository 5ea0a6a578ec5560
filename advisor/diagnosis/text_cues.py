"""Cue phrases in the user's own words, as weak evidence (see cues.yaml)."""

from __future__ import annotations

import functools
import re
from importlib import resources

import yaml

from ..schema import Evidence
from ..schema.message import msg
from .board import Board
from .inputs import DiagnosisInputs


@functools.cache
def cue_table() -> dict[str, list[tuple[float, re.Pattern[str]]]]:
    text = resources.files(__package__).joinpath("cues.yaml").read_text(encoding="utf-8")
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - the safe loader, in C where libyaml is built (5-15x faster)
    return {cause: [(float(w), re.compile(p, re.IGNORECASE)) for w, p in entries] for cause, entries in raw.items()}


#: Words right after a cue that say the user already tried it without effect ("tuning X didn't help").
NEGATION = re.compile(
    r"(did ?n[o']?t|does ?n[o']?t|did not|does not|no|without) (help|change|effect|difference|improve)|had no effect|no effect|没用|没有(效果|帮助|改善)|无效"
    # the feature is named only to say it is off ("MTP not enabled", "spec decode disabled")
    r"|^\W{0,3}(is |was |are )?(not|never) (enabled|used|on|turned on|configured)|^\W{0,3}(is |was )?(disabled|turned off|off\b)|^\W{0,3}(未开启|没有开启|没开|未启用|关闭)"
    # ... or only to say it is not the problem ("memory isn't the problem")
    r"|^\W{0,3}(is|are|was|were) ?(n[o']?t|not) (the |a |our )?(problem|issue|bottleneck|cause)|^\W{0,3}(不是|并不是)(问题|瓶颈|原因)",
    re.IGNORECASE,
)
#: Words right before a cue that say there is none of it ("there are no preemptions", "zero
#: preemptions", "没有抢占"): the user reports its absence.
NEGATION_BEFORE = re.compile(r"(?:\b(?:no|zero|without|never any|not any)\s+(?:[\w-]+\s+)?|\b0\s+|(?:没有|无|零)\s*)$", re.IGNORECASE)


def detect_cues(inputs: DiagnosisInputs, board: Board) -> None:
    text = inputs.prose
    if not text:
        return
    for cause, patterns in cue_table().items():
        for weight, pattern in patterns:
            m = next((m for m in pattern.finditer(text) if not _negated(text, m.start(), m.end())), None)
            if m:
                quoted = _context(text, m.start(), m.end())
                board.add_text(cause, weight, Evidence(kind="text", origin="question", label=msg("ev.user_wrote"), value=quoted))


def causes_named(text: str, min_weight: float = 0.8, *, negation: bool = True) -> list[str]:
    """The causes ``text`` names by a cue of at least ``min_weight`` (not ruled out in the same
    sentence, unless ``negation`` is off), in the order the words name them: what a question such
    as "is --enforce-eager the reason?" asks about. The weakest cues ("benchmark") name no cause."""
    hits: list[tuple[int, str]] = []
    for cause, patterns in cue_table().items():
        starts = [m.start() for weight, pattern in patterns if weight >= min_weight for m in pattern.finditer(text or "") if not (negation and _negated(text, m.start(), m.end()))]
        if starts:
            hits.append((min(starts), cause))
    return [cause for _, cause in sorted(hits)]


def _negated(text: str, start: int, end: int, window: int = 80) -> bool:
    """A cue followed in the same sentence by "didn't help", or preceded by "no", is evidence the
    user ruled it out (detect_cues and causes_named share this one reading)."""
    tail = re.split(r"[.;!?。；\n]", text[end : end + window], maxsplit=1)[0]
    return bool(NEGATION.search(tail)) or bool(NEGATION_BEFORE.search(text[max(0, start - 24) : start]))


_CJK = re.compile(r"[\u3400-\u9fff]")
_CLAUSE_END = re.compile(r"[，。；！？、：,;!?\n]")
_BREAK = re.compile(r"[\s\u3000-\u303f\uff00-\uffef\u3400-\u9fff]")


def _context(text: str, start: int, end: int, pad: int = 30) -> str:
    """The cue with some words either side, cut only between words: at a space or punctuation, or
    beside a CJK character (Chinese has no spaces; any character boundary is a word boundary)."""
    lo, hi = max(0, start - pad), min(len(text), end + pad)
    if _CJK.search(text[lo:hi]):  # Chinese: a clause, not a cut through a word ("…志显示" was "日志显示")
        marks = [m.end() for m in _CLAUSE_END.finditer(text, max(0, lo - 24), start)]
        if marks:
            lo = min(marks, key=lambda i: abs(i - lo))
        elif lo <= 24:
            lo = 0  # the text's start begins the clause
        after = _CLAUSE_END.search(text, end, min(len(text), hi + 24))
        hi = after.end() if after else hi
    while lo > 0 and not (_BREAK.match(text[lo - 1]) or _BREAK.match(text[lo])):
        lo -= 1
    while hi < len(text) and not (_BREAK.match(text[hi - 1]) or _BREAK.match(text[hi])):
        hi += 1
    snippet = " ".join(text[lo:hi].split())
    return ("…" if lo else "") + snippet + ("…" if hi < len(text) else "")


NUMBER = r"(\d+(?:[.,]\d+)*)"


def find_number(text: str, pattern: str) -> float | None:
    """The first number captured by ``pattern`` (group 1) in ``text``, thousands separators removed."""
    m = re.search(pattern, text, re.IGNORECASE)
    if not m:
        return None
    try:
        return float(m.group(1).replace(",", ""))
    except ValueError:
        return None


def params_from_name(name: str | None) -> float | None:
    """'Qwen1.5-0.5B' -> 0.5e9; 'Llama 13B' -> 13e9; MoE names like '30B-A3B' give the total."""
    if not name:
        return None
    m = re.search(r"(\d+(?:\.\d+)?)\s?[bB](?![a-zA-Z])", name)
    return float(m.group(1)) * 1e9 if m else None

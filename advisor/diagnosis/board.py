"""The evidence board: each cause accumulates weighted evidence from independent detectors.

A detector never decides alone. It adds a weight and the evidence behind it to one or more causes;
the ranking is the sum. Weights follow a fixed scale so detectors stay comparable:

- 3.0  a deployment fact or measurement that by itself establishes the cause (a speculative config
       while the user reports a slowdown, measured preemptions, a figure beyond the hardware ceiling)
- 2.0  a model result that explains a reported figure, or a strong structural sign
- 1.0  supporting evidence (a consistent figure, a relevant setting)
- 0.5-1.5  the user's own words (cue phrases), capped per cause

Reasons are messages (ids of ``advisor/messages``) with their figures: the writer picks the language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..schema import Evidence, Msg, Recommendation

#: The most the user's wording alone can add to one cause.
TEXT_CAP = 2.5


@dataclass
class Hypothesis:
    cause: str
    score: float = 0.0
    text_score: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)
    reasons: list[Msg] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    #: The score split by the kind of its first evidence item (measured, model, config, text, ...):
    #: the learned ranker weighs a measurement and a phrase differently.
    by_kind: dict[str, float] = field(default_factory=dict)
    #: The fitted ranker's probability that this cause is established (None: no fitted weights).
    probability: float | None = None

    @property
    def confidence(self) -> float:
        """Saturating map of the score: 1.0 -> 0.39, 3.0 -> 0.78, 5.0 -> 0.92."""
        return round(1.0 - math.exp(-self.score / 2.0), 2)


class Board:
    def __init__(self) -> None:
        self.hypotheses: dict[str, Hypothesis] = {}
        #: causes the deployment's own facts rule out (tensor-parallel communication on one GPU):
        #: never ranked, whatever the words or similar reports suggest
        self.excluded: set[str] = set()

    def exclude(self, cause: str) -> None:
        self.excluded.add(cause)

    def get(self, cause: str) -> Hypothesis:
        return self.hypotheses.setdefault(cause, Hypothesis(cause))

    def add(
        self,
        cause: str,
        weight: float,
        *evidence: Evidence,
        reason: Msg | None = None,
        recommendation: Recommendation | None = None,
        lead: bool = False,
    ) -> None:
        """``lead``: the reason goes before those the cause has (a measurement that says more than the
        setting alone: the short answer quotes the first)."""
        h = self.get(cause)
        h.score += weight
        kind = evidence[0].kind if evidence else "other"
        h.by_kind[kind] = h.by_kind.get(kind, 0.0) + weight
        for e in evidence:
            if e not in h.evidence:
                h.evidence.append(e)
        if reason is not None and reason not in h.reasons:
            h.reasons.insert(0 if lead else len(h.reasons), reason)
        if recommendation is not None:
            h.recommendations.append(recommendation)

    def add_text(self, cause: str, weight: float, evidence: Evidence) -> None:
        """Cue phrases: capped so wording cannot outweigh measurements."""
        h = self.get(cause)
        room = max(0.0, TEXT_CAP - h.text_score)
        w = min(weight, room)
        if w <= 0:
            return
        h.text_score += w
        self.add(cause, w, evidence)

    def ranked(self) -> list[Hypothesis]:
        return sorted((h for h in self.hypotheses.values() if h.score > 0), key=lambda h: -h.score)

"""The learned ranking: detector evidence and semantic evidence combined by a fitted model.

The detectors (config facts, measurements, the performance model, cue phrases) still produce
evidence on the board; what they no longer do is decide the order by hand-set weights. For each
cause this module builds one feature row (the board's weight split by evidence kind, the cause's
closeness to the user's words, the vote of the nearest library reports, the word model's probability
(words.py), the cause's base rate) and a
logistic regression fitted on the fitting part of the case library turns it into a probability that
the cause is one the thread would establish. Findings are ordered by that probability and show it
as their confidence, so "0.8" means right about 80% of the time on reports it was not fitted on
(the reliability table in benchmarks/RESULTS.md).

Fitting lives in ``vllm_advisor.cases.fit``; this module only applies the stored weights.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ..schema import CAUSE_IDS
from .board import Board
from .semantic import SemanticSignals
from .words import WordModel

KINDS = ("measured", "reported", "model", "config", "text", "source")
FEATURES = (
    *(f"board_{k}" for k in KINDS),
    "board_total",
    "board_top1",
    "board_top3",
    "symptom",
    "symptom_rel",
    "symptom_top",
    "vote",
    "vote_first",
    "centroid",
    "centroid_rel",
    "prior",
    "words",
    "words_rel",
    # the word model and the neighbour vote again for a report in Chinese (0 for English): the word
    # model has about a quarter as many Chinese reports to learn from, so its weight differs by
    # language. Repeated CV on the fitting part (6 x 5 folds, paired): top-1 +0.009 +- 0.002
    # (Chinese 0.51 -> 0.54), recall@3 +0.002 +- 0.002 (RESULTS.md, session 8).
    "words_zh",
    "words_rel_zh",
    "vote_zh",
)
WEIGHTS_FILE = "ranker_weights.json"

#: Two leading causes closer than this in probability are not separated by the evidence.
UNDECIDED_MARGIN = 0.08


def feature_rows(board: Board, sem: SemanticSignals | None, prior: np.ndarray, words: np.ndarray | None = None, language: str = "en") -> np.ndarray:
    """One row per cause (CAUSE_IDS order), columns FEATURES. ``words``: the word model's
    probability per cause (words.py), None when there are no words; ``language``: of the user's
    words (inputs.detect_language), "zh" fills the Chinese columns."""
    n = len(CAUSE_IDS)
    x = np.zeros((n, len(FEATURES)), dtype=np.float64)
    totals = np.array([board.hypotheses[c].score if c in board.hypotheses else 0.0 for c in CAUSE_IDS])
    order = np.argsort(-totals, kind="stable")
    col = {name: i for i, name in enumerate(FEATURES)}
    for i, cause in enumerate(CAUSE_IDS):
        h = board.hypotheses.get(cause)
        if h is not None:
            for kind in KINDS:
                x[i, col[f"board_{kind}"]] = np.log1p(max(0.0, h.by_kind.get(kind, 0.0)))
        x[i, col["board_total"]] = np.log1p(max(0.0, totals[i]))
    if totals.max() > 0:
        x[order[0], col["board_top1"]] = 1.0
        for j in order[:3]:
            if totals[j] > 0:
                x[j, col["board_top3"]] = 1.0
    if sem is not None:
        x[:, col["symptom"]] = sem.symptom
        x[:, col["symptom_rel"]] = sem.symptom - sem.symptom.mean()
        x[int(np.argmax(sem.symptom)), col["symptom_top"]] = 1.0
        x[:, col["vote"]] = sem.vote
        x[:, col["vote_first"]] = sem.vote_first
        x[:, col["centroid"]] = sem.centroid
        x[:, col["centroid_rel"]] = sem.centroid - sem.centroid.mean()
    x[:, col["prior"]] = prior
    if words is not None:
        x[:, col["words"]] = words
        x[:, col["words_rel"]] = words - words.mean()
    if language == "zh":
        for name in ("words", "words_rel", "vote"):
            x[:, col[f"{name}_zh"]] = x[:, col[name]]
    return x


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class Stage:
    """Standardise, then a logistic regression shared by all causes (the prior carries each cause's base rate)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def logits(self, rows: np.ndarray) -> np.ndarray:
        return ((rows - self.mean) / self.scale) @ self.coef + self.intercept

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "scale": self.scale.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept}

    @classmethod
    def from_dict(cls, raw: dict) -> Stage:
        return cls(np.array(raw["mean"]), np.array(raw["scale"]), np.array(raw["coef"]), float(raw["intercept"]))


def companions(p1: np.ndarray, cooc: np.ndarray) -> np.ndarray:
    """Per cause, the strongest support from a likely companion: max_j p(j) * P(cause | j).
    Causes come in pairs in real threads (KV capacity with preemption, queueing with a misleading
    benchmark); a first-stage probability for one raises the other."""
    return np.max(p1[:, None] * cooc, axis=0)


def second_stage_rows(rows: np.ndarray, first: Stage, cooc: np.ndarray) -> np.ndarray:
    """The second stage's input: the evidence rows plus each cause's companion support, read from
    the first stage's probabilities (rows of whole cases, 20 per case)."""
    p1 = _sigmoid(first.logits(rows)).reshape(-1, len(CAUSE_IDS))
    comp = np.vstack([companions(p, cooc) for p in p1]).reshape(-1, 1)
    return np.hstack([rows, comp])


@dataclass(frozen=True)
class RankerModel:
    """Two logistic stages: the evidence, then the evidence plus each cause's likely companions."""

    first: Stage
    second: Stage
    cooc: np.ndarray  # (20, 20): P(column cause established | row cause established), fitting part
    prior: np.ndarray  # log base rate per cause, from the fitting part
    meta: dict
    #: Platt scaling of the second stage's logit, fitted on out-of-fold predictions of the fitting
    #: part: in-sample probabilities are overconfident, the shown confidence should not be.
    calibration: tuple[float, float] = (1.0, 0.0)
    #: the supervised model of the report's words (words.py), fitted on the same cases
    words: WordModel | None = None

    def word_probabilities(self, text: str) -> np.ndarray | None:
        return self.words.probabilities(text) if self.words is not None and (text or "").strip() else None

    def logits(self, rows: np.ndarray) -> np.ndarray:
        """The uncalibrated ranking score (same order as the probabilities)."""
        return self.second.logits(second_stage_rows(rows, self.first, self.cooc))

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """``rows``: one case (20 rows) or several stacked; probabilities in the same layout."""
        a, b = self.calibration
        return _sigmoid(a * self.logits(rows) + b)

    def with_calibration(self, a: float, b: float) -> RankerModel:
        return RankerModel(self.first, self.second, self.cooc, self.prior, self.meta, (float(a), float(b)), self.words)

    def to_json(self) -> str:
        return json.dumps(
            {
                "features": list(FEATURES),
                "causes": list(CAUSE_IDS),
                "first": self.first.to_dict(),
                "second": self.second.to_dict(),
                "cooc": self.cooc.tolist(),
                "prior": self.prior.tolist(),
                "calibration": list(self.calibration),
                "meta": self.meta,
                "words": self.words.to_dict() if self.words is not None else None,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> RankerModel:
        raw = json.loads(text)
        if raw["features"] != list(FEATURES) or raw["causes"] != list(CAUSE_IDS) or "second" not in raw:
            raise ValueError("ranker weights were fitted for other features or causes; refit them")
        words = WordModel.from_dict(raw["words"]) if raw.get("words") else None
        return cls(Stage.from_dict(raw["first"]), Stage.from_dict(raw["second"]), np.array(raw["cooc"]), np.array(raw["prior"]), raw.get("meta", {}), tuple(raw.get("calibration", (1.0, 0.0))), words)


@functools.cache
def packaged_model() -> RankerModel | None:
    """The fitted weights shipped with the package, or None (then the board's own order stands)."""
    path = resources.files(__package__).joinpath(WEIGHTS_FILE)
    if not path.is_file():
        return None
    try:
        return RankerModel.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, KeyError):
        return None


@dataclass(frozen=True)
class RankedCause:
    cause: str
    probability: float


#: Evidence kinds the case library cannot teach: its reports carry words and a few reported figures,
#: almost never a measurement or a modelled deployment with the user's workload.
STRUCTURED_KINDS = ("measured", "model")
#: The board's own scale (board.py): 3.0 is a fact or measurement that by itself establishes a cause.
ESTABLISHING = 3.0


def structured_weight(board: Board, cause: str) -> float:
    """What measurements and the performance model put on the board for ``cause``."""
    h = board.hypotheses.get(cause)
    return sum(h.by_kind.get(k, 0.0) for k in STRUCTURED_KINDS) if h is not None else 0.0


def established_by_structure(board: Board) -> np.ndarray:
    """Per cause (CAUSE_IDS order): structured evidence at the establishing level."""
    return np.array([structured_weight(board, cause) >= ESTABLISHING for cause in CAUSE_IDS], dtype=bool)


def order_causes(p: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Indices, first the causes that measurements or the model establish (by probability), then the
    rest by probability. The fitted weights know words well and measurements hardly at all (the
    library has next to none), so a measurement at the establishing level is not outranked by a
    phrase; the probability shown stays the fitted one."""
    return np.lexsort((-p, ~strong))


def shown_probabilities(p: np.ndarray, board: Board) -> tuple[np.ndarray, np.ndarray]:
    """A cause the measurements or the model establish shows at least the board's own confidence
    for its structured evidence (1 - exp(-w/2): 3.0 -> 0.78), not the words-only estimate."""
    p = p.copy()
    strong = established_by_structure(board)
    for i in np.flatnonzero(strong):
        p[i] = max(p[i], 1.0 - np.exp(-structured_weight(board, CAUSE_IDS[i]) / 2.0))
    for cause in board.excluded:  # ruled out by the deployment's facts
        i = CAUSE_IDS.index(cause)
        p[i], strong[i] = 0.0, False
    return p, strong


def rank(board: Board, sem: SemanticSignals | None, model: RankerModel, text: str = "") -> list[RankedCause]:
    """Every cause with its probability, in the order the findings take (``text``: the user's words,
    as embedded for ``sem``)."""
    from .inputs import detect_language

    rows = feature_rows(board, sem, model.prior, model.word_probabilities(text), detect_language(text))
    p, strong = shown_probabilities(model.probabilities(rows), board)
    order = order_causes(p, strong)
    return [RankedCause(CAUSE_IDS[i], float(p[i])) for i in order]


def undecided(ranked: list[RankedCause]) -> list[str]:
    """The leading causes the evidence cannot separate (empty when the first one stands out)."""
    if len(ranked) < 2 or ranked[1].probability > ranked[0].probability:
        return []
    lead = ranked[0].probability
    close = [r.cause for r in ranked[:3] if lead - r.probability < UNDECIDED_MARGIN]
    return close if len(close) > 1 else []

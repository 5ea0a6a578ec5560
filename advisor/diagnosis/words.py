"""A supervised model of the report's own words, one of the ranker's inputs.

The sentence embedding (semantic.py) says which reports and symptom sentences a question is close
to; it was never told which words matter for which cause. This model is: TF-IDF of character
2-4-grams within words (sklearn's ``char_wb``: it needs no tokenizer, so Chinese, flag names such as
``--enforce-eager`` and version strings are covered alike), and one logistic regression per cause
fitted on the fitting part of the case library. Its probability per cause is a column of the
ranker's rows (fitted on out-of-fold predictions, so the ranker learns what an honest prediction of
this model is worth).

Fitting uses scikit-learn (``vllm_advisor.cases.fit``); applying it here is plain Python and numpy,
so ``ask`` never imports scikit-learn. ``tests/test_ranker.py`` checks that the vectors are
sklearn's own.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass

import numpy as np

NGRAMS = (2, 4)
#: The most frequent n-grams kept. 5,000 was the whole vocabulary on 201 cases (session 3); with 385
#: fitting cases and the WORDS_AUGMENT documents the vocabulary is ~3x larger, and 10,000 scored
#: +0.007 top-1 / +0.009 recall@3 over 5,000 in repeated CV on the fitting part (6 x 5 folds, paired,
#: SE 0.002; 15,000 no better): RESULTS.md "Feature work on the fitting part (session 5)".
MAX_TERMS = 10_000
#: A longer text adds nothing a thousand n-grams of it do not say, and costs time.
MAX_CHARS = 20_000


def char_wb_ngrams(text: str, ngrams: tuple[int, int] = NGRAMS) -> list[str]:
    """sklearn's ``char_wb`` analyzer (lower-cased): n-grams inside each word padded with spaces."""
    lo, hi = ngrams
    out: list[str] = []
    for w in text.lower().split():
        w = f" {w} "
        w_len = len(w)
        for n in range(lo, hi + 1):
            offset = 0
            out.append(w[offset : offset + n])
            while offset + n < w_len:
                offset += 1
                out.append(w[offset : offset + n])
            if offset == 0:  # a short word is counted once
                break
    return out


@dataclass(frozen=True)
class WordModel:
    """Vocabulary, inverse document frequencies, and a (vocabulary x causes) coefficient matrix."""

    vocabulary: dict[str, int]
    idf: np.ndarray  # (V,)
    coef: np.ndarray  # (V, n_causes)
    intercept: np.ndarray  # (n_causes,)

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The text's TF-IDF vector as (indices, values): sublinear tf, L2-normalised (sklearn's)."""
        counts: dict[int, int] = {}
        vocab = self.vocabulary
        for g in char_wb_ngrams((text or "")[:MAX_CHARS]):
            j = vocab.get(g)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        idx = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        tf = np.fromiter((1.0 + math.log(c) for c in counts.values()), dtype=np.float64, count=len(counts))
        values = tf * self.idf[idx]
        return idx, values / (np.linalg.norm(values) or 1.0)

    def probabilities(self, text: str) -> np.ndarray:
        """Per cause, the probability that a thread with these words establishes it."""
        idx, values = self.vector(text)
        z = values @ self.coef[idx] + self.intercept if len(idx) else self.intercept.copy()
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict:
        terms = sorted(self.vocabulary, key=self.vocabulary.get)
        return {
            "ngrams": list(NGRAMS),
            "terms": "\n".join(terms),  # an n-gram never holds a line break (words are split on whitespace)
            "idf_float32_base64": base64.b64encode(self.idf.astype("<f4").tobytes()).decode("ascii"),
            "coef_float16_base64": base64.b64encode(self.coef.astype("<f2").tobytes()).decode("ascii"),
            "intercept": self.intercept.tolist(),
        }

    @classmethod
    def from_dict(cls, raw: dict) -> WordModel:
        if tuple(raw["ngrams"]) != NGRAMS:
            raise ValueError("word model fitted with other n-grams; refit it")
        terms = raw["terms"].split("\n")
        intercept = np.array(raw["intercept"], dtype=np.float64)
        coef = np.frombuffer(base64.b64decode(raw["coef_float16_base64"]), dtype="<f2").astype(np.float64).reshape(len(terms), len(intercept))
        idf = np.frombuffer(base64.b64decode(raw["idf_float32_base64"]), dtype="<f4").astype(np.float64)
        return cls({t: i for i, t in enumerate(terms)}, idf, coef, intercept)


def fit_word_model(texts: list[str], labels: np.ndarray, *, C: float = 4.0) -> WordModel:
    """Fit on texts and a (cases x causes) 0/1 label matrix. A cause with fewer than two positive
    cases gets its base rate (no coefficients). Classes are balanced: most causes are rare."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=NGRAMS, min_df=2, sublinear_tf=True, max_features=MAX_TERMS)
    x = vec.fit_transform([(t or "")[:MAX_CHARS] for t in texts])
    n_causes = labels.shape[1]
    coef = np.zeros((x.shape[1], n_causes))
    intercept = np.zeros(n_causes)
    for j in range(n_causes):
        pos = labels[:, j].sum()
        if pos < 2:
            rate = (pos + 0.5) / (len(labels) + 1.0)
            intercept[j] = math.log(rate / (1.0 - rate))
            continue
        lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000, solver="liblinear").fit(x, labels[:, j])
        coef[:, j] = lr.coef_[0]
        intercept[j] = lr.intercept_[0]
    # stored as float32 / float16 (to_dict): the fitted figures are rounded the same way, so the ranker
    # is fitted on exactly what the shipped model computes
    return WordModel(dict(vec.vocabulary_), vec.idf_.astype(np.float32).astype(np.float64), coef.astype(np.float16).astype(np.float64), intercept)

"""Fit the diagnosis ranker on the case library and measure it on reports it never saw.

``python -m vllm_advisor.cases.fit`` (``--write`` to store the weights and the case index):
1. every case of the library (and the developer cases) goes through the real diagnosis detectors as
   a new user's input would (the label is never shown to them), and its words are embedded;
2. the ranker is fitted on the **fitting part** only (the fixed split of knowledge/cases/README.md),
   neighbours drawn from the fitting part, each case excluded from its own neighbours;
3. the **validation part** is scored once with those weights: top-1 and recall@3, English and Chinese
   apart, beside the detectors' hand-set order and a constant guess; then 5-fold cross-validation on
   the whole library, and a reliability table of the confidences.
Nothing here looks at the validation part before step 3, and step 3 changes nothing.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..schema import CAUSE_IDS
from .library import LibraryCase, load_dev_cases, load_library

REPO = Path(__file__).resolve().parents[2]
SHARED_DEV = REPO.parent / "shared" / "cases" / "dev"
#: Bump when the detectors or the board change, so cached evidence is recomputed.
EVIDENCE_VERSION = 52
C_REGULARISATION = 0.5
#: The word model's regularisation (words.py): chosen by repeated CV on the fitting part
#: (benchmarks/ranker_cv.py, RESULTS.md "Feature work on the fitting part (session 3)").
WORDS_C = 4.0
#: Extra labelled documents the word model learns from, beside the reports' own words (fitting part
#: only, never read at run time): "root" is each fitting case's established root cause and fix, with its
#: causes; "symptoms" is each cause's description in cause_symptoms.yaml (English and Chinese). They
#: teach the vocabulary of a cause that few questions use yet. Repeated CV on the fitting part (4 x 5
#: folds, paired): +0.005 +- 0.005 top-1, +0.002 +- 0.004 recall@3 in fit.py's own pipeline, -0.001 /
#: +0.010 +- 0.005 in ranker_cv's: within noise, never below; kept for the vocabulary (RESULTS.md, session 4).
WORDS_AUGMENT: tuple[str, ...] = ("root", "symptoms")


@dataclass
class CaseEvidence:
    """What the detectors put on the board for one case, and the words that get embedded."""

    id: str
    text: str
    by_kind: dict[str, dict[str, float]]  # cause -> kind -> weight
    error: str | None = None
    excluded: list[str] = field(default_factory=list)  # causes the deployment's facts rule out
    vector: np.ndarray | None = field(default=None, repr=False)
    parts: np.ndarray | None = field(default=None, repr=False)


def case_inputs(item: LibraryCase):
    """(inputs, error): the case as `ask --profile` gathers it (label stripped); when an input
    cannot be read, the case stands on its words alone, as an answer would, and ``error`` says why."""
    from ..diagnosis.inputs import DiagnosisInputs, detect_language, gather
    from ..errors import AdvisorError

    try:
        return gather(profile=item.path), None
    except AdvisorError as exc:
        return DiagnosisInputs(question=item.case.question, case=item.case, language=detect_language(item.case.question)), exc.one_line()


def collect_evidence(item: LibraryCase) -> CaseEvidence:
    """Run the detectors over the case as `ask --profile` would (label stripped)."""
    from ..diagnosis.board import Board
    from ..diagnosis.engine import DETECTORS
    from ..diagnosis.inputs import DiagnosisInputs
    from ..errors import AdvisorError

    text = DiagnosisInputs(question=item.case.question, case=item.case).prose  # the words `ask` embeds
    inputs, error = case_inputs(item)
    board = Board()
    for detector in DETECTORS:
        try:
            detector(inputs, board)
        except AdvisorError as exc:
            error = exc.one_line()
    by_kind = {c: dict(h.by_kind) for c, h in board.hypotheses.items() if h.score > 0}
    return CaseEvidence(item.id, text, by_kind, error, sorted(board.excluded))


def _cache_key(item: LibraryCase) -> str:
    digest = hashlib.sha256(item.path.read_bytes()).hexdigest()[:16]
    return f"{item.id}-{digest}-v{EVIDENCE_VERSION}-{_code_digest()}"


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """A digest of the code and data the detectors run on (the package's .py and .yaml files, the
    shipped weights and the case files aside): evidence cached by one checkout is never read by
    another whose detectors differ, even when both forgot to bump EVIDENCE_VERSION."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix not in (".py", ".yaml", ".json") or "cases" in path.relative_to(package).parts[:1] or path.name == "ranker_weights.json":
            continue
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def evidence_for(cases: list[LibraryCase], cache_dir: Path | None, progress=None) -> list[CaseEvidence]:
    out = []
    for n, item in enumerate(cases, 1):
        cached = cache_dir / f"{_cache_key(item)}.json" if cache_dir else None
        if cached and cached.is_file():
            raw = json.loads(cached.read_text())
            ev = CaseEvidence(raw["id"], raw["text"], raw["by_kind"], raw.get("error"), raw.get("excluded", []))
        else:
            ev = collect_evidence(item)
            if cached:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps({"id": ev.id, "text": ev.text, "by_kind": ev.by_kind, "error": ev.error, "excluded": ev.excluded}))
        out.append(ev)
        if progress:
            progress(n, len(cases), item.id)
    return out


def board_of(ev: CaseEvidence):
    from ..diagnosis.board import Board

    board = Board()
    for cause, kinds in ev.by_kind.items():
        h = board.get(cause)
        h.by_kind = dict(kinds)
        h.score = sum(kinds.values())
    for cause in ev.excluded:
        board.exclude(cause)
    return board


# -- the index and the features -------------------------------------------------------------------
def build_index(cases: list[LibraryCase], vectors: np.ndarray, languages: list[str], centers: np.ndarray):
    """The index of ``cases`` from their raw vectors and languages, every vector (the symptoms' too)
    centred on its language's row of ``centers`` (semantic.language_centers)."""
    from ..diagnosis.inputs import detect_language
    from ..diagnosis.semantic import CaseIndex, embed, symptom_sentences

    sentences, owners = [], []
    for i, cause in enumerate(CAUSE_IDS):
        for s in symptom_sentences()[cause]:
            sentences.append(s)
            owners.append(i)
    index = CaseIndex([c.id for c in cases], [c.report.url for c in cases], [list(c.report.causes) for c in cases], [c.report.fix or "" for c in cases], vectors, embed(sentences), np.array(owners), centers)
    return replace(index, vectors=_projected(index, vectors, languages), symptom_vectors=_projected(index, index.symptom_vectors, [detect_language(s) for s in sentences]))


def _projected(index, vectors: np.ndarray, languages: list[str]) -> np.ndarray:
    """Each row centred on its own language (``index.project``), in the rows' order."""
    out = np.zeros_like(vectors, dtype=np.float32)
    for lang in set(languages):
        rows = [k for k, other in enumerate(languages) if other == lang]
        out[rows] = index.project(vectors[rows], lang)
    return out


def embed_cases(cases: list[LibraryCase], evs: list[CaseEvidence]):
    """Embed every case's words and build the index over all of them, centred by language on the
    means of the fitting part's reports; each case's own vectors (its query) are put in the same space."""
    from ..diagnosis.inputs import detect_language
    from ..diagnosis.semantic import embed_text, language_centers

    for ev, c in zip(evs, cases):
        ev.vector, ev.parts = embed_text(ev.text or c.case.question or "-")
    vectors = np.vstack([ev.vector for ev in evs])
    languages = [detect_language(ev.text) for ev in evs]
    fitting = [k for k, c in enumerate(cases) if c.part == "fit"]
    index = build_index(cases, vectors, languages, language_centers(vectors[fitting], [languages[k] for k in fitting]))
    for ev, vector, lang in zip(evs, index.vectors, languages):  # the index centred the reports' vectors already
        ev.vector = vector
        ev.parts = index.project(ev.parts, lang) if len(ev.parts) else ev.parts
    return index


def log_prior(labels: list[list[str]]) -> np.ndarray:
    counts = np.ones(len(CAUSE_IDS))  # add-one: a cause never seen in fitting still has a rate
    pos = {c: i for i, c in enumerate(CAUSE_IDS)}
    for causes in labels:
        for c in causes:
            counts[pos[c]] += 1
    return np.log(counts / (len(labels) + len(CAUSE_IDS)))


def rows_for(evs: list[CaseEvidence], index, prior: np.ndarray, *, exclude_self: bool, words: np.ndarray | None = None) -> np.ndarray:
    """``words``: (cases x causes) word-model probabilities, out of fold when fitting."""
    from ..diagnosis.inputs import detect_language
    from ..diagnosis.ranker import feature_rows
    from ..diagnosis.semantic import signals

    blocks = []
    for k, ev in enumerate(evs):
        sem = signals(ev.vector, index, parts=ev.parts, exclude=ev.id if exclude_self else None)
        blocks.append(feature_rows(board_of(ev), sem, prior, words[k] if words is not None and ev.text.strip() else None, detect_language(ev.text)))
    return np.vstack(blocks) if blocks else np.zeros((0, 0))


def labels_matrix(cases: list[LibraryCase]) -> np.ndarray:
    pos = {c: i for i, c in enumerate(CAUSE_IDS)}
    y = np.zeros((len(cases), len(CAUSE_IDS)))
    for k, case in enumerate(cases):
        for c in case.report.causes:
            y[k, pos[c]] = 1
    return y.reshape(-1)


def cooccurrence(labels: list[list[str]]) -> np.ndarray:
    """P(b established | a established) over the given cases (row a, column b; diagonal 0)."""
    pos = {c: i for i, c in enumerate(CAUSE_IDS)}
    counts = np.zeros((len(CAUSE_IDS), len(CAUSE_IDS)))
    seen = np.ones(len(CAUSE_IDS))
    for causes in labels:
        idx = [pos[c] for c in causes]
        for a in idx:
            seen[a] += 1
            for b in idx:
                if a != b:
                    counts[a, b] += 1
    return counts / seen[:, None]


def _fit_stage(x: np.ndarray, y: np.ndarray):
    from sklearn.linear_model import LogisticRegression

    from ..diagnosis.ranker import Stage

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    lr = LogisticRegression(C=C_REGULARISATION, max_iter=3000)
    lr.fit((x - mean) / scale, y)
    return Stage(mean, scale, lr.coef_[0], float(lr.intercept_[0]))


def fit_model(cases: list[LibraryCase], evs: list[CaseEvidence], index, *, calibrate: bool = True):
    """Fit on ``cases`` only (neighbours from the same cases, each without itself); then scale the
    confidences by out-of-fold predictions within the same cases (Platt scaling)."""
    model, sub = _fit_uncalibrated(cases, evs, index)
    if not calibrate or len(cases) < 25:
        return model, sub
    from sklearn.linear_model import LogisticRegression

    fold = [int(hashlib.sha256(c.id.encode()).hexdigest()[16:24], 16) % 5 for c in cases]
    logits, labels = [], []
    for f in range(5):
        train = [k for k in range(len(cases)) if fold[k] != f]
        test = [k for k in range(len(cases)) if fold[k] == f]
        if not test:
            continue
        m, idx = _fit_uncalibrated([cases[k] for k in train], [evs[k] for k in train], index)
        rows = rows_for([evs[k] for k in test], idx, m.prior, exclude_self=False, words=word_predictions(m.words, [evs[k] for k in test]))
        logits.append(m.logits(rows))
        labels.append(labels_matrix([cases[k] for k in test]))
    platt = LogisticRegression(C=1e6, max_iter=1000).fit(np.concatenate(logits).reshape(-1, 1), np.concatenate(labels))
    return model.with_calibration(platt.coef_[0][0], platt.intercept_[0]), sub


def word_predictions(model, evs: list[CaseEvidence]) -> np.ndarray:
    """(cases x causes) probabilities of the word model, as ``ask`` computes them."""
    return np.vstack([model.probabilities(ev.text) for ev in evs]) if evs else np.zeros((0, len(CAUSE_IDS)))


def word_training_set(cases: list[LibraryCase], evs: list[CaseEvidence], augment: tuple[str, ...] | None = None) -> tuple[list[str], np.ndarray]:
    """The word model's documents and (documents x causes) labels: the cases' words, then the
    WORDS_AUGMENT documents of the same cases (the label's prose, never a test case's)."""
    from ..diagnosis.semantic import symptom_sentences

    augment = WORDS_AUGMENT if augment is None else augment
    texts = [ev.text for ev in evs]
    y = labels_matrix(cases).reshape(len(cases), -1)
    rows = [y]
    if "root" in augment:
        texts += [f"{c.report.root_cause} {c.report.fix or ''}" for c in cases]
        rows.append(y)
    if "symptoms" in augment:
        for j, cause in enumerate(CAUSE_IDS):
            sentences = symptom_sentences()[cause]
            texts += sentences
            one = np.zeros((len(sentences), len(CAUSE_IDS)))
            one[:, j] = 1.0
            rows.append(one)
    return texts, np.vstack(rows)


def words_out_of_fold(cases: list[LibraryCase], evs: list[CaseEvidence], folds: int = 5, augment: tuple[str, ...] | None = None) -> np.ndarray:
    """Each case's word-model probabilities from a model fitted without it (inner folds by a hash of
    the id): the ranker learns what an honest word prediction is worth, not an in-sample one.
    ``augment``: WORDS_AUGMENT's choice, by default WORDS_AUGMENT."""
    from ..diagnosis.words import fit_word_model

    fold = [int(hashlib.sha256(f"words:{c.id}".encode()).hexdigest()[:8], 16) % folds for c in cases]
    out = np.zeros((len(cases), len(CAUSE_IDS)))
    for f in range(folds):
        train = [k for k in range(len(cases)) if fold[k] != f]
        test = [k for k in range(len(cases)) if fold[k] == f]
        if test:
            wm = fit_word_model(*word_training_set([cases[k] for k in train], [evs[k] for k in train], augment), C=WORDS_C)
            out[test] = word_predictions(wm, [evs[k] for k in test])
    return out


def _fit_uncalibrated(cases: list[LibraryCase], evs: list[CaseEvidence], index):
    from ..diagnosis.ranker import RankerModel, second_stage_rows
    from ..diagnosis.words import fit_word_model

    keep = [index.ids.index(c.id) for c in cases]
    sub = index.subset(keep)
    prior = log_prior([c.report.causes for c in cases])
    y = labels_matrix(cases)
    x = rows_for(evs, sub, prior, exclude_self=True, words=words_out_of_fold(cases, evs))
    first = _fit_stage(x, y)
    cooc = cooccurrence([c.report.causes for c in cases])
    second = _fit_stage(second_stage_rows(x, first, cooc), y)
    words = fit_word_model(*word_training_set(cases, evs), C=WORDS_C)
    model = RankerModel(first, second, cooc, prior, {"fitted_on": len(cases), "words_terms": len(words.vocabulary)}, words=words)
    return model, sub


# -- scoring ---------------------------------------------------------------------------------------
@dataclass
class Score:
    n: int
    top1: float
    recall3: float

    def row(self) -> str:
        return f"{self.n} cases: top-1 {self.top1:.2f}, recall@3 {self.recall3:.2f}"


def score(rankings: list[list[str]], truths: list[list[str]]) -> Score:
    if not rankings:
        return Score(0, float("nan"), float("nan"))
    top1 = sum(1 for r, t in zip(rankings, truths) if r and r[0] in t) / len(rankings)
    hits = sum(len(set(r[:3]) & set(t)) for r, t in zip(rankings, truths))
    total = sum(len(t) for t in truths)
    return Score(len(rankings), top1, hits / total)


def predict_rankings(model, evs, index) -> tuple[list[list[str]], np.ndarray]:
    rows = rows_for(evs, index, model.prior, exclude_self=False, words=word_predictions(model.words, evs) if model.words else None)
    from ..diagnosis.ranker import order_causes, shown_probabilities

    p = model.probabilities(rows).reshape(len(evs), len(CAUSE_IDS))
    rankings = []
    for k, ev in enumerate(evs):
        p[k], strong = shown_probabilities(p[k], board_of(ev))
        rankings.append([CAUSE_IDS[i] for i in order_causes(p[k], strong)])
    return rankings, p


def board_rankings(evs: list[CaseEvidence]) -> list[list[str]]:
    return [[h.cause for h in board_of(ev).ranked()] for ev in evs]


def constant_rankings(fit_cases: list[LibraryCase], n: int) -> list[list[str]]:
    prior = log_prior([c.report.causes for c in fit_cases])
    order = [CAUSE_IDS[i] for i in np.argsort(-prior, kind="stable")]
    return [order] * n


def reliability(p: np.ndarray, cases: list[LibraryCase], top: int = 3) -> list[tuple[str, int, float, float]]:
    """(bin, pairs, mean confidence, share right) over the first ``top`` findings of each case."""
    bins = [(0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)]
    pairs = []
    for k, case in enumerate(cases):
        for i in np.argsort(-p[k], kind="stable")[:top]:
            pairs.append((p[k, i], CAUSE_IDS[i] in case.report.causes))
    out = []
    for lo, hi in bins:
        sel = [(q, ok) for q, ok in pairs if lo <= q < hi]
        if sel:
            out.append((f"{lo:.1f}-{min(hi, 1.0):.1f}", len(sel), float(np.mean([q for q, _ in sel])), float(np.mean([ok for _, ok in sel]))))
    return out


@dataclass
class Report:
    validation: dict[str, Score]
    validation_board: dict[str, Score]
    validation_constant: dict[str, Score]
    cv: Score
    cv_board: Score
    cv_constant: Score
    reliability: list
    per_case: list[tuple[str, str, list[str], list[str], float]]  # id, lang, truth, top3, p1
    errors: dict[str, str]
    library_ids: set = field(default_factory=set)
    model: object = None
    index: object = None
    #: the validation part split by whether its scores were read before (LOOKED_AT): "fresh" cases
    #: were never scored before the figure reported for them
    validation_fresh: dict[str, Score] = field(default_factory=dict)
    validation_seen: dict[str, Score] = field(default_factory=dict)


#: Validation cases whose scores were read in earlier sessions (the file says when).
LOOKED_AT = REPO / "knowledge" / "cases" / "looked-at-before.txt"


def looked_at_before() -> set[str]:
    if not LOOKED_AT.is_file():
        return set()
    return {line.strip() for line in LOOKED_AT.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")}


def _subset(rankings, cases, keep) -> dict[str, Score]:
    sel = [k for k, c in enumerate(cases) if keep(c)]
    return _by_language([rankings[k] for k in sel], [cases[k] for k in sel])


def _by_language(rankings, cases) -> dict[str, Score]:
    out = {"all": score(rankings, [c.report.causes for c in cases])}
    for lang in ("en", "zh"):
        sel = [k for k, c in enumerate(cases) if c.language == lang]
        out[lang] = score([rankings[k] for k in sel], [cases[k].report.causes for k in sel])
    return out


def run(cache_dir: Path | None = None, progress=None, *, look_at_validation: bool = True) -> Report:
    """Fit, then score. ``look_at_validation=False`` is for developing features: the validation part
    is not scored and the cross-validation runs on the fitting part alone."""
    cases = [*load_library(), *load_dev_cases(SHARED_DEV)]
    evs = evidence_for(cases, cache_dir, progress)
    index = embed_cases(cases, evs)
    library_ids = {c.id for c in cases if c.origin == "library"}

    fit_idx = [k for k, c in enumerate(cases) if c.part == "fit"]
    val_idx = [k for k, c in enumerate(cases) if c.part == "validation"]
    fit_cases, val_cases = [cases[k] for k in fit_idx], [cases[k] for k in val_idx]
    model, fit_index = fit_model(fit_cases, [evs[k] for k in fit_idx], index)

    val_evs = [evs[k] for k in val_idx]
    if not look_at_validation:
        val_cases, val_evs = [], []
        cases, evs = fit_cases, [evs[k] for k in fit_idx]
    rankings, p = predict_rankings(model, val_evs, fit_index) if val_evs else ([], np.zeros((0, len(CAUSE_IDS))))
    validation = _by_language(rankings, val_cases)
    validation_board = _by_language(board_rankings(val_evs), val_cases)
    validation_constant = _by_language(constant_rankings(fit_cases, len(val_cases)), val_cases)
    per_case = [(c.id, c.language, list(c.report.causes), r[:3], float(np.max(p[k]))) for k, (c, r) in enumerate(zip(val_cases, rankings))]
    seen = looked_at_before()
    validation_fresh = _subset(rankings, val_cases, lambda c: c.id not in seen)
    validation_seen = _subset(rankings, val_cases, lambda c: c.id in seen)

    # 5-fold cross-validation over everything, folds by a hash of the id (fixed, like the split)
    fold = [int(hashlib.sha256(c.id.encode()).hexdigest()[8:16], 16) % 5 for c in cases]
    cv_rank, cv_board, cv_const, cv_truth, cv_ids = [], [], [], [], []
    for f in range(5):
        train = [k for k in range(len(cases)) if fold[k] != f]
        test = [k for k in range(len(cases)) if fold[k] == f]
        # without the Platt scaling: it is monotone and only moves a cause that measurements establish
        # against another such cause (none in the library), and it would fit everything 6 times over
        m, idx = fit_model([cases[k] for k in train], [evs[k] for k in train], index, calibrate=False)
        r, _ = predict_rankings(m, [evs[k] for k in test], idx)
        cv_rank += r
        cv_board += board_rankings([evs[k] for k in test])
        cv_const += constant_rankings([cases[k] for k in train], len(test))
        cv_truth += [cases[k].report.causes for k in test]
        cv_ids += [(cases[k].id, cases[k].language) for k in test]

    if not look_at_validation:  # feature work reads the cross-validated fitting part instead
        per_case = [(cid, lang, list(t), r[:3], 0.0) for (cid, lang), t, r in zip(cv_ids, cv_truth, cv_rank)]
    # the shipped model: fitted on the fitting part; neighbours at run time: the whole library
    return Report(
        validation,
        validation_board,
        validation_constant,
        score(cv_rank, cv_truth),
        score(cv_board, cv_truth),
        score(cv_const, cv_truth),
        reliability(p, val_cases),
        per_case,
        {ev.id: ev.error for ev in evs if ev.error},
        library_ids,
        model,
        index,
        validation_fresh,
        validation_seen,
    )


def write_artifacts(report: Report) -> list[Path]:
    from vllm_advisor_knowledge import __file__ as knowledge_init

    from ..diagnosis import __file__ as diagnosis_init
    from ..diagnosis.ranker import WEIGHTS_FILE
    from ..diagnosis.semantic import INDEX_FILE

    weights = Path(diagnosis_init).parent / WEIGHTS_FILE
    index = Path(knowledge_init).parent / INDEX_FILE
    val = report.validation["all"]
    if val.n:  # a --dev fit never scored the validation part: its weights carry no validation figure
        report.model.meta.update({"validation_top1": round(val.top1, 3), "validation_recall3": round(val.recall3, 3)})
    weights.write_text(report.model.to_json() + "\n")
    # shipped: the library's own reports only (the developer cases stay in shared/, their words too)
    library = [k for k, cid in enumerate(report.index.ids) if cid in report.library_ids]
    report.index.subset(library).save(index)
    return [weights, index]


def format_report(report: Report) -> str:
    lines = ["| part | ranking | cases | top-1 | recall@3 |", "| --- | --- | --- | --- | --- |"]
    for name, table in (("learned", report.validation), ("hand-set board", report.validation_board), ("constant guess", report.validation_constant)):
        for lang in ("all", "en", "zh"):
            s = table[lang]
            if not s.n:  # --dev: the validation part is not scored
                continue
            lines.append(f"| validation ({lang}) | {name} | {s.n} | {s.top1:.2f} | {s.recall3:.2f} |")
    for name, table in (("validation, never scored before", report.validation_fresh), ("validation, scored in earlier sessions", report.validation_seen)):
        for lang in ("all", "en", "zh"):
            s = table.get(lang)
            if s is not None and s.n:
                lines.append(f"| {name} ({lang}) | learned | {s.n} | {s.top1:.2f} | {s.recall3:.2f} |")
    for name, s in (("learned", report.cv), ("hand-set board", report.cv_board), ("constant guess", report.cv_constant)):
        lines.append(f"| 5-fold CV ({'fitting part' if not report.validation['all'].n else 'all'}) | {name} | {s.n} | {s.top1:.2f} | {s.recall3:.2f} |")
    lines += ["", "| confidence bin | findings | mean confidence | share right |", "| --- | --- | --- | --- |"]
    lines += [f"| {b} | {n} | {q:.2f} | {ok:.2f} |" for b, n, q, ok in report.reliability]
    lines += ["", "| validation case | lang | established | first three findings | top-1 |", "| --- | --- | --- | --- | --- |"]
    for cid, lang, truth, top3, _ in report.per_case:
        lines.append(f"| {cid} | {lang} | {', '.join(truth)} | {', '.join(top3)} | {'yes' if top3 and top3[0] in truth else 'no'} |")
    if report.errors:
        lines += ["", f"{len(report.errors)} cases answered from their words only (an input the advisor could not read):"]
        lines += [f"- {k}: {v}" for k, v in sorted(report.errors.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_advisor.cases.fit", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="store the fitted weights and the case index in the package (with --dev: the same weights, fitted on the fitting part, without scoring the validation part)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vllm-advisor-case-evidence"), help="evidence cache folder")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--dev", action="store_true", help="feature work: cross-validate on the fitting part only, leave the validation part unseen")
    args = parser.parse_args(argv)

    def progress(n, total, cid):
        print(f"\r[{n}/{total}] {cid[:60]:<60}", end="", file=sys.stderr, flush=True)

    report = run(None if args.no_cache else args.cache, progress, look_at_validation=not args.dev)
    print(file=sys.stderr)
    print(format_report(report))
    if args.write:
        for path in write_artifacts(report):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

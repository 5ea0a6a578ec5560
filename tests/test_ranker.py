"""The learned diagnosis ranking: shipped weights, semantic evidence, no label leak, the validation bar."""

from __future__ import annotations

import time

import numpy as np
import pytest

from vllm_advisor.cases import load_library
from vllm_advisor.diagnosis import ranker, semantic
from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.ranker import RankedCause, undecided
from vllm_advisor.schema import CAUSE_IDS


def test_shipped_weights_and_index_load_and_cover_the_library():
    ranker.packaged_model.cache_clear()
    semantic.packaged_index.cache_clear()
    start = time.perf_counter()
    model = ranker.packaged_model()
    index = semantic.packaged_index()
    elapsed = time.perf_counter() - start
    assert model is not None and index is not None
    assert elapsed < 1.0  # benchmarks/bench_ranker_load.py measures the real figure (< 0.2 s)
    assert model.first.coef.shape == (len(ranker.FEATURES),)
    assert model.second.coef.shape == (len(ranker.FEATURES) + 1,)
    # refitted whenever the library changes: every case of the library is a neighbour at run time
    assert sorted(index.ids) == sorted(c.id for c in load_library())
    assert index.vectors.shape == (len(index.ids), 512)


def test_chinese_symptoms_land_next_to_the_english_ones_of_the_same_cause():
    """The embedding is cross-lingual: for most causes, a Chinese symptom sentence is closest to an
    English sentence of the same cause (all-MiniLM, English-only, fails this)."""
    import yaml
    from importlib import resources

    raw = yaml.safe_load(resources.files("vllm_advisor_knowledge").joinpath("cause_symptoms.yaml").read_text())
    en = [(c, s) for c in CAUSE_IDS for s in raw[c]["en"]]
    zh = [(c, s) for c in CAUSE_IDS for s in raw[c]["zh"]]
    ven = semantic.embed([s for _, s in en])
    vzh = semantic.embed([s for _, s in zh])
    nearest = (vzh @ ven.T).argmax(axis=1)
    right = np.mean([en[j][0] == zh[i][0] for i, j in enumerate(nearest)])
    assert right >= 0.7, right


def test_the_label_never_reaches_the_diagnosis(tmp_path):
    """A library case diagnosed with and without its report: block gives the same findings."""
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather
    import yaml

    case = next(c for c in load_library() if c.case.observations)
    raw = yaml.safe_load(case.path.read_text())
    raw.pop("report")
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(raw, allow_unicode=True))
    labelled = tmp_path / "labelled.yaml"  # outside the library folder too: both see the same neighbours
    labelled.write_text(case.path.read_text())
    with_label = diagnose(gather(profile=labelled), with_effects=False)
    without = diagnose(gather(profile=bare), with_effects=False)
    assert [(f.cause, f.confidence) for f in with_label.findings] == [(f.cause, f.confidence) for f in without.findings]


def test_a_library_report_is_not_its_own_neighbour(tmp_path):
    """Asked about one of the library's own files, the answer neither votes with its labels nor shows
    it as a report like yours; the same words elsewhere find it at similarity 1."""
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    case = next(c for c in load_library() if c.case.observations)
    own = diagnose(gather(profile=case.path), with_effects=False)
    assert case.id not in [r.id for r in own.similar_reports]
    copy = tmp_path / "copy.yaml"
    copy.write_text(case.path.read_text())
    elsewhere = diagnose(gather(profile=copy), with_effects=False)
    assert elsewhere.similar_reports[0].id == case.id and elsewhere.similar_reports[0].similarity > 0.99


def test_findings_follow_the_fitted_probabilities_and_show_them(shared_dir):
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    d = diagnose(gather(profile=shared_dir / "cases/dev/vllm-6494-ngram-spec-slower.yaml"), with_effects=False)
    confidences = [f.confidence for f in d.findings]
    assert confidences == sorted(confidences, reverse=True)
    assert d.findings[0].cause == "spec_decode"
    assert 1 <= len(d.similar_reports) <= 3
    assert all(r.url.startswith("http") and r.causes for r in d.similar_reports)


def test_close_leaders_are_reported_as_undecided():
    assert undecided([RankedCause("queueing", 0.52), RankedCause("kv_capacity", 0.47), RankedCause("preemption", 0.1)]) == ["queueing", "kv_capacity"]
    assert undecided([RankedCause("queueing", 0.8), RankedCause("kv_capacity", 0.4)]) == []


def _library_texts_and_labels(n: int = 60):
    from vllm_advisor.cases.fit import labels_matrix
    from vllm_advisor.diagnosis.inputs import DiagnosisInputs

    cases = load_library()
    zh = [c for c in cases if c.language == "zh"][: n // 3]
    en = [c for c in cases if c.language == "en"][: n - len(zh)]
    picked = [*en, *zh]
    texts = [DiagnosisInputs(question=c.case.question, case=c.case).text for c in picked]
    return texts, labels_matrix(picked).reshape(len(picked), -1)


def test_word_model_computes_sklearns_tfidf_and_probabilities_without_sklearn():
    """``ask`` applies the word model in plain numpy (no scikit-learn import); its vectors must be
    TfidfVectorizer's char_wb vectors and its probabilities the per-cause regressions', on real
    English and Chinese reports."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from vllm_advisor.diagnosis.words import MAX_TERMS, NGRAMS, WordModel, fit_word_model

    texts, y = _library_texts_and_labels()
    assert any(ord(ch) > 0x4E00 for t in texts for ch in t)  # Chinese among them
    model = fit_word_model(texts[:45], y[:45])
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=NGRAMS, min_df=2, sublinear_tf=True, max_features=MAX_TERMS).fit(texts[:45])
    assert model.vocabulary == vec.vocabulary_
    reference = vec.transform(texts).toarray()
    for text, row in zip(texts, reference):
        idx, values = model.vector(text)
        mine = np.zeros(len(vec.vocabulary_))
        mine[idx] = values
        assert np.allclose(mine, row, atol=1e-6)
    j = int(np.argmax(y[:45].sum(axis=0)))  # the commonest cause: fitted, not a base rate
    lr = LogisticRegression(C=4.0, class_weight="balanced", max_iter=2000, solver="liblinear").fit(vec.transform(texts[:45]), y[:45, j])
    expected = lr.predict_proba(vec.transform(texts[45:]))[:, 1]
    got = np.array([model.probabilities(t)[j] for t in texts[45:]])
    assert np.allclose(got, expected, atol=0.01)  # coefficients are stored as float16
    again = WordModel.from_dict(model.to_dict())
    assert again.vocabulary == model.vocabulary
    assert all(np.allclose(again.probabilities(t), model.probabilities(t)) for t in texts[:5])


def test_shipped_ranker_carries_the_word_model_and_uses_it():
    model = ranker.packaged_model()
    assert model is not None and model.words is not None and len(model.words.vocabulary) > 1000
    assert model.meta.get("words_terms") == len(model.words.vocabulary)
    text = "为什么 --enforce-eager 之后解码速度只有一半？"
    p = model.word_probabilities(text)
    assert p is not None and p.shape == (len(CAUSE_IDS),) and np.all((p > 0) & (p < 1))
    assert model.word_probabilities("   ") is None
    col = ranker.FEATURES.index("words")
    rows = ranker.feature_rows(Board(), None, model.prior, p)
    assert np.allclose(rows[:, col], p)


@pytest.mark.slow
def test_validation_score_recomputed_from_the_library():
    """Refit on the fitting part from scratch (no cache) and score the validation part once.

    The shipped weights must be what the library fits (reproducible), and the learned order must beat
    the hand-set board and a constant guess on reports it was not fitted on. Issue 15 asks for top-1
    >= 0.70 and recall@3 >= 0.80; measured 2026-12-04 (session 8, Chinese columns and 15 new reports)
    on 184 validation reports: 0.712 / 0.739, so the top-1 bar was reached and recall@3 was not; on
    2026-12-05 (session 12, 65 new reports) on 201: 0.692 / 0.748, neither; session 13 (SGLang profile
    flags read, sliding-window KV) on the same 201: 0.701 / 0.759, top-1 at its bar; session 14 (22 new
    reports) on 206: 0.709 / 0.772; session 15 (56 new reports, 144 engine labels corrected) on 229:
    0.699 / 0.755 (the 206 scored before: 0.704 / 0.754); session 16 (64 new reports) on 243: 0.704 /
    0.743 (the 229 scored before: 0.712 / 0.752; the 14 new: 0.57 / 0.59); session 17 (43 new reports, real-run
    fixes, one GPU rules out TP communication) on 254: 0.681 / 0.757 (the 243 scored before: 0.687 /
    0.752; the 11 new: 6 of 11 / 13 of 15), top-1 at the floor; session 18 (10 new reports, the
    users' settings costed by the model) on 255: 0.682 / 0.755 (the 1 new: right); session 23 on 260: 0.688 / 0.763;
    session 24 (12 new reports, 4 in this part) on 264: 0.682 / 0.752 (the 4 new: 2 first, 2 of 5); session 25 (11 new
    reports, 3 in this part) on 267: 0.685 / 0.752 (the 3 new: 2 first, 2 of 4); session 27 (the sentence vectors
    centred on their language) on the same 267: 0.685 / 0.758; session 28 (TensorRT-LLM and LMDeploy flags read, the
    question's language by words) on the same 267: 0.685 / 0.752; session 31 (pasted log lines, result blocks and
    /metrics lines read as figures, the server's own KV readings) on the same 267: 0.682 / 0.758; session 32 (catalog
    names, replicated weights per rank, a system-memory cue, the MoE ceiling) on the same 267: 0.689 / 0.760. The floor here is the
    session-8 level less about one standard error (0.033 / 0.027), a guard against regressions, and
    benchmarks/RESULTS.md says where it stands."""
    from vllm_advisor.cases.fit import run

    report = run(cache_dir=None)
    shipped = ranker.packaged_model()
    assert np.allclose(report.model.second.coef, shipped.second.coef, atol=1e-6), "the shipped weights are not what the library fits: refit with --write"
    val = report.validation["all"]
    assert val.n >= 180
    assert val.top1 >= 0.68 and val.recall3 >= 0.71, report.validation
    assert val.top1 > report.validation_board["all"].top1
    assert val.top1 > report.validation_constant["all"].top1 + 0.3
    assert report.cv.top1 > report.cv_board.top1

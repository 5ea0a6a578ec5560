"""Repeated, fixed-fold cross-validation of ranker variants on the FITTING part of the case library.

Issue 15's feature work may not look at the validation part (it has been looked at twice): this
script loads the fitting part only (``LibraryCase.part == "fit"``), never the validation cases'
evidence, and compares variants of the ranker on the same folds: R repeats of 5 folds, each repeat's
folds a fixed hash of (repeat, case id), so two variants are scored on exactly the same splits and
their difference is paired. It prints per variant the mean top-1 and recall@3 over the R x 5 test
folds with the standard error of the mean over repeats (each repeat's score pools its 5 folds), and
the paired difference to the first variant with its standard error over repeats.

Usage: .venv/bin/python benchmarks/ranker_cv.py [--repeats 10] [--variants baseline,text,...]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Variant:
    name: str
    C: float = 0.5
    k_neighbours: int = 7
    text: bool = False  # the out-of-fold text model (TF-IDF + one-vs-rest LR) as stacked features
    text_C: float = 4.0
    text_cols: tuple[str, ...] = ("text_p", "text_rel")
    blocks: tuple[str, ...] = ("word", "char")  # what the text model reads: words, characters, facts
    extra: dict = field(default_factory=dict)


FACTS = False  # set by --facts (gathering every case's inputs again takes a while)


def folds_for(ids: list[str], repeat: int, k: int = 5) -> list[int]:
    if repeat == 0:  # the folds of fit.py's own cross-validation
        return [int(hashlib.sha256(i.encode()).hexdigest()[8:16], 16) % k for i in ids]
    return [int(hashlib.sha256(f"{repeat}:{i}".encode()).hexdigest()[:8], 16) % k for i in ids]


# -- structured facts (measured as a variant; not shipped: they did not help) -----------------------
#: Engine arguments whose presence says nothing about a cause (identity, networking, logging).
_NEUTRAL = {"model", "served_model_name", "host", "port", "disable_log_requests", "trust_remote_code", "extra", "env"}


def _bucket(value: float | None, edges: tuple[float, ...], names: tuple[str, ...]) -> str:
    if value is None:
        return "none"
    for edge, name in zip(edges, names):
        if value < edge:
            return name
    return names[-1]


def case_facts(inputs) -> list[str]:
    """Tokens for the facts given (sorted, no duplicates)."""
    out: set[str] = set()
    dep = inputs.deployment
    args = inputs.engine_args
    engine = (dep.engine or "").strip().lower()
    out.add(f"engine:{engine if engine in ('vllm', 'sglang', 'tgi') else ('other' if engine else 'none')}")
    for name, value in args:
        if name not in _NEUTRAL and value is not None:
            out.add(f"flag:{name}")
    for name in list(args.extra)[:32]:
        out.add(f"flag:{str(name).lstrip('-').replace('-', '_').lower()[:40]}")
    if args.env:
        out.add("flag:env")
    if args.enforce_eager:
        out.add("eager")
    if args.enable_prefix_caching is False:
        out.add("prefix_caching:off")
    if args.enable_chunked_prefill is False:
        out.add("chunked_prefill:off")
    tp = args.tensor_parallel_size or 1
    out.add(f"tp:{_bucket(tp, (2, 3, 5, 8), ('1', '2', '4', '8+', '8+'))}")
    if (args.pipeline_parallel_size or 1) > 1 or (args.data_parallel_size or 1) > 1:
        out.add("pp_or_dp")
    out.add(f"gpus:{_bucket(dep.num_gpus, (2, 3, 5, 9), ('1', '2', '3-4', '5-8', '9+'))}")
    if dep.quantization or args.quantization:
        out.add("quantized")
    if args.kv_cache_dtype and args.kv_cache_dtype != "auto":
        out.add("kv_quantized")
    if dep.vllm_version:
        out.add("version_given")
    if dep.interconnect:
        out.add(f"interconnect:{dep.interconnect.lower()}")
    if dep.serve_command:
        out.add("serve_command")
    out.add(f"prompt:{_bucket(inputs.input_len, (1024, 8192, 32768), ('short', 'medium', 'long', 'very_long'))}")
    out.add(f"output:{_bucket(inputs.output_len, (128, 1024), ('short', 'medium', 'long'))}")
    if inputs.shared_prefix_len:
        out.add("shared_prefix")
    obs = inputs.observations
    conc = [o.concurrency for o in obs if o.concurrency is not None]
    out.add(f"load_points:{_bucket(len(obs), (1, 2, 3), ('0', '1', '2', '3+'))}")
    out.add(f"concurrency:{_bucket(max(conc) if conc else None, (2, 9, 65), ('1', '2-8', '9-64', '65+'))}")
    for field in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tok_s_per_request", "output_tok_s_total", "gpu_util_pct", "kv_cache_usage_pct", "num_requests_waiting", "preemptions", "prefix_cache_hit_rate"):
        if any(getattr(o, field) is not None for o in obs):
            out.add(f"reported:{field}")
    if inputs.metrics_windows or inputs.metrics_summaries:
        out.add("metrics")
    if inputs.server_logs:
        out.add("server_log")
    if inputs.engine is not None:
        out.add("modelled")
    out.add(f"lang:{inputs.language}")
    return sorted(out)


def facts_of(item) -> list[str]:
    """The facts of one case from its typed inputs (as `ask --profile` would gather them)."""
    from vllm_advisor.cases.fit import case_inputs

    return case_facts(case_inputs(item)[0])


def load_fitting_part():
    from vllm_advisor.cases.fit import SHARED_DEV, embed_cases, evidence_for
    from vllm_advisor.cases.library import load_dev_cases, load_library
    from pathlib import Path

    cases = [c for c in [*load_library(), *load_dev_cases(SHARED_DEV)] if c.part == "fit"]
    evs = evidence_for(cases, Path("/tmp/vllm-advisor-case-evidence"))
    index = embed_cases(cases, evs)  # as fit.py embeds them: centred by language on these reports
    for ev, c in zip(evs, cases):
        ev.facts = facts_of(c) if FACTS else []
    for ev, c in zip(evs, cases):
        ENGINE_FAMILY[ev.id] = engine_family(c.case.deployment.engine, ev.text)
    return cases, evs, index


#: case id -> the group of the engine that served it (engine_family), for "engine_cols"
ENGINE_FAMILY: dict[str, str] = {}

#: Engines grouped by how they serve: a display name of report_facts.ENGINES_IN_TEXT, or an engine
#: field as case files give it, to its group (session 24's "engine_cols" variant; not shipped).
ENGINE_FAMILIES = {
    "SGLang": "sglang", "TGI": "tgi", "LMDeploy": "lmdeploy", "TensorRT-LLM": "tensorrt-llm",
    "llama.cpp": "llama.cpp", "Ollama": "llama.cpp", "text-generation-webui": "llama.cpp", "LocalAI": "llama.cpp", "koboldcpp": "llama.cpp",
    "KTransformers": "ktransformers", "MLX": "mlx", "omlx": "mlx",
    "Hugging Face transformers": "transformers", "FastChat": "transformers", "MindNLP": "transformers",
    "Aphrodite": "vllm", "vllm": "vllm",
}


def engine_family(engine: str | None, text: str) -> str:
    """The group of the engine that served the report: the deployment's engine field, else the engine
    its words name, else vLLM; "other" for an engine no group holds."""
    from vllm_advisor.diagnosis.report_facts import engine_display_name, engine_named_in_text

    if engine:
        if engine.strip().lower().startswith("vllm"):
            return "vllm"
        name = engine_display_name(engine)
    else:
        name = engine_named_in_text(text) or "vllm"
    return ENGINE_FAMILIES.get(name, ENGINE_FAMILIES.get(name.lower(), "other"))


#: Evidence kinds whose per-cause reliability "reliability_cols" learns (the detectors' structured ones).
RELIABILITY_KINDS = ("config", "model", "measured", "reported")


def reliability_columns(train_cases, train_evs, evs, pseudo: float, *, own: bool = False, kinds: tuple[str, ...] = RELIABILITY_KINDS) -> np.ndarray:
    """Per case and cause, per structured evidence kind present for the cause: how often the cause was
    established among the training reports where that kind of evidence named it (shrunk to the kind's
    overall rate by ``pseudo`` reports), as a log-odds; 0 where the kind is absent. ``own``: ``evs``
    are the training reports themselves, each left out of its own rate. ``kinds``: the evidence kinds
    (session 25 added the cue phrases', "text")."""
    from vllm_advisor.schema import CAUSE_IDS

    pos = {c: i for i, c in enumerate(CAUSE_IDS)}
    n = np.zeros((len(kinds), len(CAUSE_IDS)))
    hit = np.zeros_like(n)
    for c, ev in zip(train_cases, train_evs):
        for cause, present in ev.by_kind.items():
            for j, kind in enumerate(kinds):
                if present.get(kind, 0) > 0:
                    n[j, pos[cause]] += 1
                    hit[j, pos[cause]] += cause in c.report.causes
    base = (hit.sum(axis=1) + 1) / (n.sum(axis=1) + 2)
    out = np.zeros((len(evs) * len(CAUSE_IDS), len(kinds)))
    for k, ev in enumerate(evs):
        truth = set(train_cases[k].report.causes) if own else set()
        for cause, present in ev.by_kind.items():
            for j, kind in enumerate(kinds):
                if present.get(kind, 0) > 0:
                    nn, hh = n[j, pos[cause]], hit[j, pos[cause]]
                    if own:
                        nn, hh = nn - 1, hh - (cause in truth)
                    p = (hh + pseudo * base[j]) / (nn + pseudo)
                    out[k * len(CAUSE_IDS) + pos[cause], j] = np.log(p / (1 - p)) - np.log(base[j] / (1 - base[j]))
    return out


def engine_columns(train_cases, evs, pseudo: float, *, own=None) -> np.ndarray:
    """Per case and cause: how much likelier the cause is among the training reports of the case's
    engine group than among all of them (log ratio, the group's counts shrunk to the overall rate by
    ``pseudo`` reports)."""
    from vllm_advisor.schema import CAUSE_IDS

    pos = {c: i for i, c in enumerate(CAUSE_IDS)}
    overall = np.ones(len(CAUSE_IDS))
    by_family: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    for c in train_cases:
        fam = ENGINE_FAMILY[c.id]
        counts = by_family.setdefault(fam, np.zeros(len(CAUSE_IDS)))
        sizes[fam] = sizes.get(fam, 0) + 1
        for cause in c.report.causes:
            counts[pos[cause]] += 1
            overall[pos[cause]] += 1
    rate = overall / (len(train_cases) + len(CAUSE_IDS))
    rows = []
    for k, ev in enumerate(evs):
        fam = ENGINE_FAMILY[ev.id]
        counts, n = by_family.get(fam, np.zeros(len(CAUSE_IDS))).copy(), sizes.get(fam, 0)
        if own is not None:  # a training report's own label left out (as the word model is out of fold)
            for cause in own[k].report.causes:
                counts[pos[cause]] -= 1
            n -= 1
        rows.append(np.log((counts + pseudo * rate) / (n + pseudo)) - np.log(rate))
    return np.concatenate(rows).reshape(-1, 1)


@functools.cache
def shipped_settings() -> dict:
    """The shipped settings a variant may override (the word model's, the companion feature, the
    cause symptoms' reader), read once before any variant overrides them."""
    from vllm_advisor.cases import fit
    from vllm_advisor.diagnosis import ranker, words

    from vllm_advisor.diagnosis import semantic

    return {"max_terms": words.MAX_TERMS, "ngrams": words.NGRAMS, "words_C": fit.WORDS_C, "augment": fit.WORDS_AUGMENT, "companions": ranker.companions, "symptoms": semantic.symptom_sentences}


def _companions_sum(p1, cooc):
    return (p1[:, None] * cooc).sum(axis=0)


def _companions_top1(p1, cooc):
    return cooc[int(np.argmax(p1))] * float(np.max(p1))


COMPANIONS = {"sum": _companions_sum, "top1": _companions_top1}


def run_variant(v: Variant, cases, evs, index, repeats: int):
    """(repeats, 2): top-1 and recall@3 per repeat, each pooled over its 5 test folds; and per case
    (n_cases, 2): top-1 hits and causes found in the first three, averaged over the repeats."""
    from vllm_advisor.cases import fit
    from vllm_advisor.diagnosis import semantic
    from vllm_advisor.diagnosis import words as words_module

    shipped = shipped_settings()
    semantic.K_NEIGHBOURS = v.k_neighbours
    fit.C_REGULARISATION = v.C
    words_module.MAX_TERMS = v.extra.get("max_terms", shipped["max_terms"])
    ngrams = v.extra.get("ngrams", shipped["ngrams"])
    words_module.NGRAMS = ngrams
    words_module.char_wb_ngrams.__defaults__ = (ngrams,)  # the analyzer's default is bound at import
    fit.WORDS_C = v.extra.get("words_C", shipped["words_C"])
    fit.WORDS_AUGMENT = v.extra.get("augment", shipped["augment"])  # read by fit.py's own pipeline ("shipped")
    from vllm_advisor.diagnosis import ranker as ranker_module

    ranker_module.companions = COMPANIONS[v.extra["companions"]] if v.extra.get("companions") else shipped["companions"]
    if v.extra.get("gloss"):  # the word model reads Chinese text with its glossary English words added
        import dataclasses

        from vllm_advisor_knowledge.glossary import expand_query

        evs = [dataclasses.replace(ev, text=expand_query(ev.text).bm25_text) for ev in evs]
    from vllm_advisor.cases.fit import embed_cases

    semantic.symptom_sentences = _symptoms_reader(v.extra.get("symptoms"))
    if v.extra.get("symptoms"):  # the index again with these symptoms (the reports embedded anew)
        index = embed_cases(cases, evs)
    out = np.zeros((repeats, 2))
    per_case = np.zeros((len(cases), 2))
    ids = [c.id for c in cases]
    for r in range(repeats):
        fold = folds_for(ids, r)
        rank_all, truth_all = [], []
        for f in range(5):
            train = [k for k in range(len(cases)) if fold[k] != f]
            if v.extra.get("train_frac"):  # a learning curve: a fixed share of the training folds only
                train = [k for k in train if int(hashlib.sha256(f"frac:{r}:{ids[k]}".encode()).hexdigest()[:8], 16) / 16**8 < v.extra["train_frac"]]
            test = [k for k in range(len(cases)) if fold[k] == f]
            rankings = fit_and_rank(v, [cases[k] for k in train], [evs[k] for k in train], [evs[k] for k in test], index)
            rank_all += rankings
            truth_all += [cases[k].report.causes for k in test]
            for k, r_ in zip(test, rankings):
                per_case[k] += (r_[0] in cases[k].report.causes, len(set(r_[:3]) & set(cases[k].report.causes)))
        s = fit.score(rank_all, truth_all)
        out[r] = (s.top1, s.recall3)
    return out, per_case / repeats


_WORDS_CACHE: dict = {}


def _symptoms_reader(path: str | None):
    """The shipped semantic.symptom_sentences, or a reader of another cause_symptoms file (same shape;
    "FILE@REV" reads it from a git revision)."""
    if not path:
        return shipped_settings()["symptoms"]
    import yaml

    from vllm_advisor.schema import CAUSE_IDS

    if "@" in path:  # "FILE@REV": the file as it was at a git revision of this repository
        import subprocess
        from pathlib import Path

        file, rev = path.rsplit("@", 1)
        repo = Path(__file__).resolve().parents[1]
        raw = yaml.safe_load(subprocess.run(["git", "show", f"{rev}:{file}"], cwd=repo, check=True, capture_output=True, text=True).stdout)
    else:
        raw = yaml.safe_load(open(path, encoding="utf-8"))
    table = {cause: [*raw[cause].get("en", []), *raw[cause].get("zh", [])] for cause in CAUSE_IDS}
    return lambda: table


def words_settings() -> tuple:
    from vllm_advisor.diagnosis import words

    return (words.MAX_TERMS, words.NGRAMS)


def fit_and_rank(v: Variant, train_cases, train_evs, test_evs, index) -> list[list[str]]:
    """fit.py's two logistic stages (without the Platt scaling, which never changes the order of
    causes a measurement does not establish), with the variant's extra columns."""
    from vllm_advisor.cases import fit

    if v.extra.get("shipped"):  # fit.py's own pipeline, as `fit --write` fits the shipped model
        model, sub = fit.fit_model(train_cases, train_evs, index, calibrate=v.extra.get("calibrate", False))
        return fit.predict_rankings(model, test_evs, sub)[0]

    sub = index.subset([index.ids.index(c.id) for c in train_cases])
    prior = fit.log_prior([c.report.causes for c in train_cases])
    w_train = w_test = None
    if v.extra.get("words"):  # the shipped word model, out of fold for the training rows (fit.py's way)
        from vllm_advisor.diagnosis.words import fit_word_model

        augment = tuple(v.extra["aug"].split("+")) if v.extra.get("aug") else ()  # fit.WORDS_AUGMENT's documents
        key = (augment, v.extra.get("symptoms"), fit.WORDS_C, words_settings(), tuple(c.id for c in train_cases), tuple(e.id for e in test_evs))
        if key not in _WORDS_CACHE:  # variants that differ only after the word model share its fits
            wm = fit_word_model(*fit.word_training_set(train_cases, train_evs, augment), C=fit.WORDS_C)
            _WORDS_CACHE[key] = (fit.words_out_of_fold(train_cases, train_evs, augment=augment), fit.word_predictions(wm, test_evs))
        w_train, w_test = _WORDS_CACHE[key]
    x = fit.rows_for(train_evs, sub, prior, exclude_self=True, words=w_train)
    xt = fit.rows_for(test_evs, sub, prior, exclude_self=False, words=w_test)
    y = fit.labels_matrix(train_cases)
    stacked = [v] if v.text else []
    if v.extra.get("second"):  # a second stacked model (its own blocks and C), e.g. on the sentence embedding
        stacked.append(Variant(v.name + "/2", **v.extra["second"]))
    for sv in stacked:
        oof = text_oof(sv, train_cases, train_evs)
        full = TextModel(sv).fit(train_evs, y.reshape(len(train_cases), -1)).predict(test_evs)
        x = np.hstack([x, text_columns(sv, oof)])
        xt = np.hstack([xt, text_columns(sv, full)])
    if v.extra.get("lex_vote"):  # a neighbour vote over TF-IDF character n-grams instead of the embedding
        a, b = lexical_votes(train_cases, train_evs, test_evs, **v.extra["lex_vote"])
        x, xt = np.hstack([x, a]), np.hstack([xt, b])
    if v.extra.get("engine_cols"):  # the cause's rate among reports of the same engine group, against all
        x = np.hstack([x, engine_columns(train_cases, train_evs, v.extra["engine_cols"], own=train_cases)])
        xt = np.hstack([xt, engine_columns(train_cases, test_evs, v.extra["engine_cols"])])
    if v.extra.get("reliability_cols"):  # how often each structured kind of evidence for the cause was right in training
        kinds = v.extra.get("reliability_kinds", RELIABILITY_KINDS)
        x = np.hstack([x, reliability_columns(train_cases, train_evs, train_evs, v.extra["reliability_cols"], own=True, kinds=kinds)])
        xt = np.hstack([xt, reliability_columns(train_cases, train_evs, test_evs, v.extra["reliability_cols"], kinds=kinds)])
    if v.extra.get("cause_cols"):
        x = np.hstack([x, cause_columns(v.extra["cause_cols"], x, len(train_cases))])
        xt = np.hstack([xt, cause_columns(v.extra["cause_cols"], xt, len(test_evs))])
    if v.extra.get("drop_cols"):  # shipped columns zeroed (a constant column carries no weight): the model without them
        from vllm_advisor.diagnosis.ranker import FEATURES

        for name in v.extra["drop_cols"].split("+"):
            x[:, FEATURES.index(name)] = 0.0
            xt[:, FEATURES.index(name)] = 0.0
    if v.extra.get("lang_cols"):  # the named columns again, times "the report is in Chinese"
        x = np.hstack([x, language_columns(v.extra["lang_cols"], x, train_evs)])
        xt = np.hstack([xt, language_columns(v.extra["lang_cols"], xt, test_evs)])
    if v.extra.get("rank_cols"):  # per case, is the cause among the first k by a column (k = 1, 2, 3)
        x = np.hstack([x, rank_columns(v.extra["rank_cols"], x)])
        xt = np.hstack([xt, rank_columns(v.extra["rank_cols"], xt)])
    lr_stage = (lambda a, b: weighted_stage(a, b, v.C, v.extra["stage_cw"])) if v.extra.get("stage_cw") else fit._fit_stage
    if v.extra.get("conf_w"):  # rows weighted by the label's confidence (high / medium / low)
        cw = np.array([v.extra["conf_w"].get(c.report.confidence, 1.0) for c in train_cases])
        lr_stage = lambda a, b: case_weighted_stage(a, b, v.C, cw)  # noqa: E731
    stage = (lambda a, b: softmax_stage(a, b, v.extra.get("sm_C", v.C))) if v.extra.get("objective") == "softmax" else lr_stage
    if v.extra.get("objective") == "gbm":
        stage = lambda a, b: GbmStage(a, b, **v.extra.get("gbm", {}))  # noqa: E731
    cooc = fit.cooccurrence([c.report.causes for c in train_cases])
    model = _two_stages(lr_stage if v.extra.get("first") == "lr" else stage, stage, x, y, cooc, prior)
    probs = model.probabilities(xt)
    if v.extra.get("ensemble"):  # average with another objective's probabilities on the same rows
        other = _other_model(v.extra["ensemble"], x, y, cooc, prior)
        w = v.extra.get("ensemble_w", 0.5)
        probs = (1 - w) * probs + w * other.probabilities(xt)
    out = _rankings(probs, test_evs)
    if v.extra.get("hybrid"):  # the first finding from this model, the rest from a second objective
        out = [[r[0], *[c for c in r2 if c != r[0]]] for r, r2 in zip(out, _tail_rankings(v.extra["hybrid"], x, xt, y, cooc, prior, test_evs))]
    return out


def _two_stages(first_stage, second_stage, x, y, cooc, prior):
    """fit.py's two-stage model with the given stage fitters: the first on the evidence rows, the
    second on the rows plus each cause's companion support from the first."""
    from vllm_advisor.diagnosis.ranker import RankerModel, second_stage_rows

    first = first_stage(x, y)
    return RankerModel(first, second_stage(second_stage_rows(x, first, cooc), y), cooc, prior, {})


def _other_model(kind: str, x, y, cooc, prior):
    """Two stages of another kind on the same rows: "gbm" or "gbm-first" (trees, or trees after a
    logistic first stage)."""
    from vllm_advisor.cases import fit

    gbm = lambda a, b: GbmStage(a, b)  # noqa: E731
    return _two_stages(fit._fit_stage if kind == "gbm-first" else gbm, gbm, x, y, cooc, prior)


def _tail_rankings(kind: str, x, xt, y, cooc, prior, test_evs) -> list[list[str]]:
    """Rankings from another objective on the same rows (for the findings after the first)."""
    if kind.startswith("softmax"):
        c = float(kind.split(":")[1]) if ":" in kind else 0.5
        stage = lambda a, b: softmax_stage(a, b, c)  # noqa: E731
    elif kind.startswith("weighted"):
        w = float(kind.split(":")[1])
        stage = lambda a, b: weighted_stage(a, b, 0.5, w)  # noqa: E731
    else:
        raise ValueError(kind)
    return _rankings(_two_stages(stage, stage, x, y, cooc, prior).probabilities(xt), test_evs)


def _rankings(p: np.ndarray, test_evs) -> list[list[str]]:
    """Each test case's causes in the order the findings take (fit.predict_rankings' rule: causes a
    measurement establishes first, then by probability)."""
    from vllm_advisor.cases import fit
    from vllm_advisor.diagnosis.ranker import order_causes, shown_probabilities
    from vllm_advisor.schema import CAUSE_IDS

    out = []
    for k, row in enumerate(p.reshape(len(test_evs), len(CAUSE_IDS))):
        q, strong = shown_probabilities(row, fit.board_of(test_evs[k]))
        out.append([CAUSE_IDS[i] for i in order_causes(q, strong)])
    return out


def lexical_votes(train_cases, train_evs, test_evs, k: int = 7, power: float = 2.0):
    """(train rows, test rows) of one column: the similarity-weighted share of the k lexically nearest
    training reports naming the cause (each training report without itself)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from vllm_advisor.cases import fit
    from vllm_advisor.diagnosis import words
    from vllm_advisor.schema import CAUSE_IDS

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=words.NGRAMS, min_df=2, sublinear_tf=True, max_features=words.MAX_TERMS)
    a = vec.fit_transform([ev.text or "-" for ev in train_evs])
    b = vec.transform([ev.text or "-" for ev in test_evs])
    y = fit.labels_matrix(train_cases).reshape(len(train_cases), -1)

    def votes(sims, exclude_self: bool):
        out = np.zeros((sims.shape[0], len(CAUSE_IDS)))
        for r in range(sims.shape[0]):
            s = sims[r].copy()
            if exclude_self:
                s[r] = -1
            nn = np.argsort(-s)[:k]
            w = np.clip(s[nn], 0, None) ** power
            out[r] = (w[:, None] * y[nn]).sum(0) / (w.sum() or 1.0)
        return out.reshape(-1, 1)

    return votes((a @ a.T).toarray(), True), votes((b @ a.T).toarray(), False)


class GbmStage:
    """Gradient-boosted trees in place of a logistic stage (measured, not shipped)."""

    def __init__(self, x, y, **kw):
        from sklearn.ensemble import HistGradientBoostingClassifier

        params = {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 8, "min_samples_leaf": 40, "l2_regularization": 1.0}
        params.update(kw)
        self.m = HistGradientBoostingClassifier(**params, random_state=0).fit(x, y)

    def logits(self, rows):
        return self.m.decision_function(rows)


def cause_columns(kind: str, x: np.ndarray, n_cases: int) -> np.ndarray:
    """Per-cause columns: "onehot" (a bias per cause beyond its base rate), "words" (the word
    model's probability per cause, so each cause weighs its own word evidence), "board" (the
    board total per cause)."""
    from vllm_advisor.diagnosis.ranker import FEATURES

    n_c = 20
    onehot = np.tile(np.eye(n_c), (n_cases, 1))
    cols = []
    for part in kind.split("+"):
        if part == "onehot":
            cols.append(onehot)
        else:
            src = {"words": "words", "board": "board_total", "text": "board_text", "vote": "vote"}[part]
            cols.append(onehot * x[:, [FEATURES.index(src)]])
    return np.hstack(cols)


def language_columns(names: str, x: np.ndarray, evs) -> np.ndarray:
    """For each named feature column, the column times 1 when the case's words are Chinese (so the
    ranker may weigh the word model, the neighbour vote... differently per language); "bias" adds
    the indicator itself."""
    from vllm_advisor.diagnosis.inputs import detect_language
    from vllm_advisor.diagnosis.ranker import FEATURES

    n_c = 20
    zh = np.repeat(np.array([detect_language(ev.text) == "zh" for ev in evs], dtype=float), n_c)[:, None]
    cols = [zh if name == "bias" else zh * x[:, [FEATURES.index(name)]] for name in names.split("+")]
    return np.hstack(cols)


def rank_columns(names: str, x: np.ndarray) -> np.ndarray:
    """For each named feature column: three 0/1 columns, the cause ranks first, within the first two,
    within the first three of its case by that column."""
    from vllm_advisor.diagnosis.ranker import FEATURES

    n_c = 20
    cols = []
    for name in names.split("+"):
        v = x[:, FEATURES.index(name)].reshape(-1, n_c)
        rank = np.argsort(np.argsort(-v, axis=1, kind="stable"), axis=1, kind="stable")
        for k in (1, 2, 3):
            cols.append((rank < k).astype(float).reshape(-1, 1))
    return np.hstack(cols)


def _lr_stage(x: np.ndarray, y: np.ndarray, C: float, *, class_weight: dict | None = None, row_weight: np.ndarray | None = None):
    """fit._fit_stage with weights: per class (``class_weight``) or per row (``row_weight``)."""
    from sklearn.linear_model import LogisticRegression

    from vllm_advisor.diagnosis.ranker import Stage

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    lr = LogisticRegression(C=C, max_iter=3000, class_weight=class_weight)
    lr.fit((x - mean) / scale, y, sample_weight=row_weight)
    return Stage(mean, scale, lr.coef_[0], float(lr.intercept_[0]))


def weighted_stage(x: np.ndarray, y: np.ndarray, C: float, positive_weight: float):
    """The established causes weighted (about 1 row in 13 is positive)."""
    return _lr_stage(x, y, C, class_weight={0: 1.0, 1: positive_weight})


def case_weighted_stage(x: np.ndarray, y: np.ndarray, C: float, case_weights: np.ndarray):
    """Each case's rows weighted (e.g. by the label's stated confidence)."""
    from vllm_advisor.schema import CAUSE_IDS

    return _lr_stage(x, y, C, row_weight=np.repeat(case_weights, len(CAUSE_IDS)))


def softmax_stage(x: np.ndarray, y: np.ndarray, C: float):
    """A ranking objective: per case, a softmax over its 20 causes with the established causes as
    the target distribution (shared coefficients, L2 penalty 1/(2C) as sklearn's LR); the
    intercept then comes from one logistic fit of the score (it cancels in the softmax)."""
    from scipy.optimize import minimize
    from sklearn.linear_model import LogisticRegression

    from vllm_advisor.diagnosis.ranker import Stage

    n_c = 20
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = ((x - mean) / scale).reshape(-1, n_c, x.shape[1])
    t = y.reshape(-1, n_c)
    keep = t.sum(axis=1) > 0
    z, t = z[keep], t[keep] / t[keep].sum(axis=1, keepdims=True)

    def loss(w):
        s = z @ w
        s = s - s.max(axis=1, keepdims=True)
        logp = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
        p = np.exp(logp)
        val = -(t * logp).sum() + 0.5 / C * (w @ w)
        grad = -np.einsum("ncf,nc->f", z, t - p) + w / C
        return val, grad

    w = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B").x
    score = (((x - mean) / scale) @ w).reshape(-1, 1)
    lr = LogisticRegression(C=1e6, max_iter=1000).fit(score, y)
    return Stage(mean, scale, w * lr.coef_[0][0], float(lr.intercept_[0]))


class TextModel:
    """TF-IDF of word 1-2-grams and character 2-4-grams (covers Chinese, which has no spaces),
    one logistic regression per cause."""

    def __init__(self, v: Variant):
        self.v = v

    def _blocks(self, evs, fit: bool):
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

        if fit:
            self.vec = {}
            if "word" in self.v.blocks:
                self.vec["word"] = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True)
            if "char" in self.v.blocks:
                self.vec["char"] = TfidfVectorizer(analyzer="char_wb", ngram_range=self.v.extra.get("char_range", (2, 4)), min_df=2, sublinear_tf=True, max_features=self.v.extra.get("max_features"))
            if "facts" in self.v.blocks:
                self.vec["facts"] = CountVectorizer(analyzer=lambda toks: toks, min_df=2, binary=True)
        mats = []
        if "emb" in self.v.blocks:
            from scipy.sparse import csr_matrix

            mats.append(csr_matrix(np.vstack([e.vector for e in evs]) * self.v.extra.get("emb_scale", 1.0)))
        for name, vec in self.vec.items():
            docs = [e.facts for e in evs] if name == "facts" else [e.text for e in evs]
            m = vec.fit_transform(docs) if fit else vec.transform(docs)
            if name == "facts":
                m = m * self.v.extra.get("facts_scale", 0.3)
            mats.append(m)
        return hstack(mats).tocsr()

    def fit(self, evs, y: np.ndarray):
        from sklearn.linear_model import LogisticRegression

        x = self._blocks(evs, True)
        self.models = []
        self.rate = (y.sum(axis=0) + 0.5) / (len(y) + 1.0)
        for j in range(y.shape[1]):
            if y[:, j].sum() < 2:
                self.models.append(None)
                continue
            lr = LogisticRegression(C=self.v.text_C, class_weight=self.v.extra.get("text_cw"), max_iter=2000, solver="liblinear")
            lr.fit(x, y[:, j])
            self.models.append(lr)
        return self

    def predict(self, evs) -> np.ndarray:
        x = self._blocks(evs, False)
        out = np.zeros((len(evs), len(self.models)))
        for j, m in enumerate(self.models):
            out[:, j] = m.predict_proba(x)[:, 1] if m is not None else self.rate[j]
        return out


def text_oof(v: Variant, cases, evs, k: int = 5) -> np.ndarray:
    """Out-of-fold text-model probabilities of the training cases (inner folds), so the ranker
    learns how much an honest text prediction is worth."""
    from vllm_advisor.cases import fit

    fold = [int(hashlib.sha256(f"inner:{c.id}".encode()).hexdigest()[:8], 16) % k for c in cases]
    y = fit.labels_matrix(cases).reshape(len(cases), -1)
    out = np.zeros(y.shape)
    for f in range(k):
        tr = [i for i in range(len(cases)) if fold[i] != f]
        te = [i for i in range(len(cases)) if fold[i] == f]
        if te:
            out[te] = TextModel(v).fit([evs[i] for i in tr], y[tr]).predict([evs[i] for i in te])
    return out


def text_columns(v: Variant, p: np.ndarray) -> np.ndarray:
    """(n_cases, 20) probabilities -> (n_cases * 20, len(text_cols)) ranker columns."""
    q = np.clip(p, 1e-4, 1 - 1e-4)
    logit = np.log(q / (1 - q))
    cols = []
    for name in v.text_cols:
        if name == "text_p":
            cols.append(p)
        elif name == "text_logit":
            cols.append(logit)
        elif name == "text_rel":
            cols.append(p - p.mean(axis=1, keepdims=True))
        elif name == "text_top":
            cols.append((p == p.max(axis=1, keepdims=True)).astype(float))
        elif name == "text_rank":
            cols.append(np.argsort(np.argsort(-p, axis=1), axis=1) < 3)
    return np.stack(cols, axis=-1).reshape(-1, len(cols)).astype(float)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--variants", default="baseline")
    parser.add_argument("--facts", action="store_true", help="gather the structured facts (for the facts variants)")
    args = parser.parse_args()
    global FACTS
    FACTS = args.facts
    catalog = {v.name: v for v in VARIANTS}
    chosen = [catalog[n] for n in args.variants.split(",")]
    start = time.perf_counter()
    cases, evs, index = load_fitting_part()
    print(f"fitting part: {len(cases)} cases ({sum(c.language == 'zh' for c in cases)} in Chinese), {args.repeats} repeats x 5 folds; loaded in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    results, cases_res = {}, {}
    n_true = float(np.mean([len(c.report.causes) for c in cases]))
    print("| variant | top-1 (mean +- SE) | recall@3 (mean +- SE) | d top-1 vs first | d recall@3 vs first | d top-1 (case SE) | d recall@3 (case SE) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for v in chosen:
        t = time.perf_counter()
        res, pc = run_variant(v, cases, evs, index, args.repeats)
        results[v.name], cases_res[v.name] = res, pc
        dc = pc - cases_res[chosen[0].name]
        cse = dc.std(axis=0, ddof=1) / np.sqrt(len(dc))
        base = results[chosen[0].name]
        d = res - base
        se = res.std(axis=0, ddof=1) / np.sqrt(len(res)) if len(res) > 1 else np.zeros(2)
        dse = d.std(axis=0, ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.zeros(2)
        print(
            f"| {v.name} | {res[:, 0].mean():.3f} +- {se[0]:.3f} | {res[:, 1].mean():.3f} +- {se[1]:.3f} | "
            f"{d[:, 0].mean():+.3f} +- {dse[0]:.3f} | {d[:, 1].mean():+.3f} +- {dse[1]:.3f} | "
            f"+- {cse[0]:.3f} | +- {cse[1] / n_true:.3f} |",
            flush=True,
        )
        for lang in ("en", "zh"):  # per language, pooled over repeats (per-case means)
            rows = [k for k, c in enumerate(cases) if c.language == lang]
            n_causes = sum(len(cases[k].report.causes) for k in rows)
            print(f"  ({v.name}, {lang}, {len(rows)} reports: top-1 {pc[rows, 0].mean():.3f}, recall@3 {pc[rows, 1].sum() / n_causes:.3f})", file=sys.stderr)
        print(f"  ({v.name}: {time.perf_counter() - t:.1f} s)", file=sys.stderr)
    return 0


#: The shipped word model's columns (fit.WORDS_AUGMENT's documents) for variants that build their own
#: stages; a variant adds its change to these.
SHIPPED_WORDS = {"words": True, "aug": "root+symptoms"}

VARIANTS = [
    Variant("baseline"),
    Variant("aug-both", extra=SHIPPED_WORDS),
    Variant("conf-h1-m.8-l.5", extra={**SHIPPED_WORDS, "conf_w": {"high": 1.0, "medium": 0.8, "low": 0.5}}),
    Variant("conf-h1-m1-l.5", extra={**SHIPPED_WORDS, "conf_w": {"high": 1.0, "medium": 1.0, "low": 0.5}}),
    Variant("conf-h1.5-m1-l1", extra={**SHIPPED_WORDS, "conf_w": {"high": 1.5, "medium": 1.0, "low": 1.0}}),
    # session 7: the settings again after the audit changed the labels (fitting part only)
    Variant("aug-both-C0.25", C=0.25, extra=SHIPPED_WORDS),
    Variant("aug-both-C1", C=1.0, extra=SHIPPED_WORDS),
    Variant("aug-both-k5", k_neighbours=5, extra=SHIPPED_WORDS),
    Variant("aug-both-k10", k_neighbours=10, extra=SHIPPED_WORDS),
    Variant("aug-both-k15", k_neighbours=15, extra=SHIPPED_WORDS),
    Variant("aug-both-wC2", extra={**SHIPPED_WORDS, "words_C": 2.0}),
    Variant("aug-both-wC8", extra={**SHIPPED_WORDS, "words_C": 8.0}),
    Variant("ens-gbm", extra={**SHIPPED_WORDS, "ensemble": "gbm"}),
    Variant("ens-gbm-first", extra={**SHIPPED_WORDS, "ensemble": "gbm-first"}),
    # session 7: cause_symptoms.yaml grew from 2-3 to 6-8 sentences per cause and language; this is the old file
    Variant("sym-session6", extra={**SHIPPED_WORDS, "symptoms": "knowledge/cause_symptoms.yaml@6b71425"}),
    Variant("aug-both-rank-words", extra={**SHIPPED_WORDS, "rank_cols": "words"}),
    Variant("aug-both-rank-wv", extra={**SHIPPED_WORDS, "rank_cols": "words+vote"}),
    Variant("aug-both-rank-wvs", extra={**SHIPPED_WORDS, "rank_cols": "words+vote+symptom+board_total"}),
    Variant("aug-both-comp-sum", extra={**SHIPPED_WORDS, "companions": "sum"}),
    Variant("aug-both-comp-top1", extra={**SHIPPED_WORDS, "companions": "top1"}),
    Variant("aug-both-h-w2", extra={**SHIPPED_WORDS, "hybrid": "weighted:2"}),
    Variant("aug-both-h-w5", extra={**SHIPPED_WORDS, "hybrid": "weighted:5"}),
    Variant("aug-both-h-softmax", extra={**SHIPPED_WORDS, "hybrid": "softmax:0.5"}),
    Variant("aug-both-h-softmax0.1", extra={**SHIPPED_WORDS, "hybrid": "softmax:0.1"}),
    Variant("aug-both-h-w3", extra={**SHIPPED_WORDS, "hybrid": "weighted:3"}),
    Variant("shipped", extra={"shipped": True}),
    Variant("reliab-k5", extra={**SHIPPED_WORDS, "reliability_cols": 5.0}),
    Variant("reliab-k10", extra={**SHIPPED_WORDS, "reliability_cols": 10.0}),
    Variant("reliab-k20", extra={**SHIPPED_WORDS, "reliability_cols": 20.0}),
    # session 25: the cue phrases' reliability per cause too (the most common kind of evidence, and the noisiest)
    Variant("reliab-text-k5", extra={**SHIPPED_WORDS, "reliability_cols": 5.0, "reliability_kinds": ("text",)}),
    Variant("reliab-text-k20", extra={**SHIPPED_WORDS, "reliability_cols": 20.0, "reliability_kinds": ("text",)}),
    Variant("reliab-all-k5", extra={**SHIPPED_WORDS, "reliability_cols": 5.0, "reliability_kinds": ("text", *RELIABILITY_KINDS)}),
    Variant("engine-k10", extra={**SHIPPED_WORDS, "engine_cols": 10.0}),
    Variant("engine-k20", extra={**SHIPPED_WORDS, "engine_cols": 20.0}),
    Variant("engine-k50", extra={**SHIPPED_WORDS, "engine_cols": 50.0}),
    # session 8: Chinese reports score far lower on the fitting part (top-1 0.54 vs 0.76): per-language weights
    Variant("aug-both-no-lang", extra={**SHIPPED_WORDS, "drop_cols": "words_zh+words_rel_zh+vote_zh"}),  # before session 8's columns shipped
    Variant("lang-wv", extra={**SHIPPED_WORDS, "lang_cols": "words+words_rel+vote"}),
    Variant("lang-all", extra={**SHIPPED_WORDS, "lang_cols": "words+words_rel+vote+vote_first+symptom_rel+centroid_rel+board_total+prior"}),
    Variant("lang-w", extra={**SHIPPED_WORDS, "lang_cols": "words+words_rel"}),
    Variant("lang-wvb", extra={**SHIPPED_WORDS, "lang_cols": "bias+words+words_rel+vote"}),
    Variant("lang-sem", extra={**SHIPPED_WORDS, "lang_cols": "vote+symptom_rel+centroid_rel"}),
    # session 8: a learning curve (the same test folds, a fixed share of each training set)
    Variant("shipped-tf0.5", extra={"shipped": True, "train_frac": 0.5}),
    Variant("shipped-tf0.7", extra={"shipped": True, "train_frac": 0.7}),
    Variant("shipped-tf0.85", extra={"shipped": True, "train_frac": 0.85}),
    Variant("shipped-C0.25", C=0.25, extra={"shipped": True}),
    Variant("shipped-C1", C=1.0, extra={"shipped": True}),
    Variant("shipped-k10", k_neighbours=10, extra={"shipped": True}),
    Variant("shipped-no-augment", extra={"shipped": True, "augment": ()}),
    Variant("shipped-gloss", extra={"shipped": True, "gloss": True}),
    Variant("lex7", extra={**SHIPPED_WORDS, "lex_vote": {"k": 7}}),
    Variant("lex15", extra={**SHIPPED_WORDS, "lex_vote": {"k": 15}}),
    Variant("gbm", extra={**SHIPPED_WORDS, "objective": "gbm"}),
    Variant("gbm-slow", extra={**SHIPPED_WORDS, "objective": "gbm", "gbm": {"learning_rate": 0.03, "max_iter": 300, "max_leaf_nodes": 6}}),
    Variant("gbm-first", extra={**SHIPPED_WORDS, "objective": "gbm", "first": "lr"}),
    Variant("shipped-mt10k", extra={"shipped": True, "max_terms": 10000}),
    Variant("shipped-mt20k", extra={"shipped": True, "max_terms": 20000}),
    Variant("shipped-ng25", extra={"shipped": True, "ngrams": (2, 5)}),
    Variant("shipped-ng25-mt20k", extra={"shipped": True, "ngrams": (2, 5), "max_terms": 20000}),
    Variant("shipped-ng14", extra={"shipped": True, "ngrams": (1, 4)}),
    Variant("shipped-ng13", extra={"shipped": True, "ngrams": (1, 3)}),
    Variant("shipped-mt15k", extra={"shipped": True, "max_terms": 15000}),
    Variant("shipped-mt10k-wC2", extra={"shipped": True, "max_terms": 10000, "words_C": 2.0}),
    Variant("shipped-mt10k-wC8", extra={"shipped": True, "max_terms": 10000, "words_C": 8.0}),
    Variant("shipped-wC2", extra={"shipped": True, "words_C": 2.0}),
    Variant("shipped-wC8", extra={"shipped": True, "words_C": 8.0}),
    Variant("shipped-calibrated", extra={"shipped": True, "calibrate": True}),
    Variant("text", text=True),
    Variant("text-logit", text=True, text_cols=("text_logit", "text_rel")),
    Variant("text-p-only", text=True, text_cols=("text_p",)),
    Variant("text-C1", text=True, text_C=1.0),
    Variant("text-C16", text=True, text_C=16.0),
    Variant("softmax", extra={"objective": "softmax"}),
    Variant("softmax-C0.1", extra={"objective": "softmax", "sm_C": 0.1}),
    Variant("softmax-C2", extra={"objective": "softmax", "sm_C": 2.0}),
    Variant("softmax-2nd", extra={"objective": "softmax", "first": "lr"}),
    Variant("text-bal", text=True, extra={"text_cw": "balanced"}),
    Variant("facts-bal", text=True, blocks=("facts",), text_C=1.0, extra={"text_cw": "balanced", "facts_scale": 1.0}),
    Variant("facts-bal-C0.1", text=True, blocks=("facts",), text_C=0.1, extra={"text_cw": "balanced", "facts_scale": 1.0}),
    Variant("text+facts-bal", text=True, blocks=("word", "char", "facts"), extra={"text_cw": "balanced"}),
    Variant("text+facts-bal-s1", text=True, blocks=("word", "char", "facts"), extra={"text_cw": "balanced", "facts_scale": 1.0}),
    Variant("char-bal", text=True, blocks=("char",), extra={"text_cw": "balanced"}),
    Variant("char-bal-C1", text=True, blocks=("char",), text_C=1.0, extra={"text_cw": "balanced"}),
    Variant("char-bal-C16", text=True, blocks=("char",), text_C=16.0, extra={"text_cw": "balanced"}),
    Variant("char-bal-1-3", text=True, blocks=("char",), extra={"text_cw": "balanced", "char_range": (1, 3)}),
    Variant("char-bal-2-5", text=True, blocks=("char",), extra={"text_cw": "balanced", "char_range": (2, 5)}),
    Variant("char-bal-mf15k", text=True, blocks=("char",), extra={"text_cw": "balanced", "max_features": 15000}),
    Variant("char-bal-mf5k", text=True, blocks=("char",), extra={"text_cw": "balanced", "max_features": 5000}),
    Variant("char-bal-p", text=True, blocks=("char",), text_cols=("text_p",), extra={"text_cw": "balanced"}),
    Variant("char", text=True, blocks=("char",)),
    Variant("char-bal-rw3", text=True, blocks=("char",), extra={"text_cw": "balanced", "stage_cw": 3.0}),
    Variant("char-bal-rw10", text=True, blocks=("char",), extra={"text_cw": "balanced", "stage_cw": 10.0}),
    Variant("char-bal-rC0.25", text=True, blocks=("char",), C=0.25, extra={"text_cw": "balanced"}),
    Variant("char-bal-rC2", text=True, blocks=("char",), C=2.0, extra={"text_cw": "balanced"}),
    Variant("char-bal-k10", text=True, blocks=("char",), k_neighbours=10, extra={"text_cw": "balanced"}),
    Variant("emb-bal", text=True, blocks=("emb",), text_C=1.0, extra={"text_cw": "balanced"}),
    Variant("char+emb-bal", text=True, blocks=("char", "emb"), extra={"text_cw": "balanced"}),
    Variant("char-bal+emb-bal", text=True, blocks=("char",), extra={"text_cw": "balanced", "second": {"text": True, "blocks": ("emb",), "text_C": 1.0, "extra": {"text_cw": "balanced"}}}),
    Variant("char-bal+emb-bal-C4", text=True, blocks=("char",), extra={"text_cw": "balanced", "second": {"text": True, "blocks": ("emb",), "text_C": 4.0, "extra": {"text_cw": "balanced"}}}),
    Variant("words", extra={"words": True}),
    Variant("aug-root", extra={"words": True, "aug": "root"}),
    Variant("aug-symptoms", extra={"words": True, "aug": "symptoms"}),
    Variant("cc-onehot", extra={"words": True, "cause_cols": "onehot"}),
    Variant("cc-words", extra={"words": True, "cause_cols": "words"}),
    Variant("cc-onehot+words", extra={"words": True, "cause_cols": "onehot+words"}),
    Variant("cc-onehot+words+board", extra={"words": True, "cause_cols": "onehot+words+board"}),
    Variant("cc-onehot+text", extra={"words": True, "cause_cols": "onehot+text"}),
    Variant("C=0.1", C=0.1),
    Variant("C=0.25", C=0.25),
    Variant("C=1", C=1.0),
    Variant("C=2", C=2.0),
    Variant("k=5", k_neighbours=5),
    Variant("k=10", k_neighbours=10),
    Variant("k=15", k_neighbours=15),
]

if __name__ == "__main__":
    raise SystemExit(main())

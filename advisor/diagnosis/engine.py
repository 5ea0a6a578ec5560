"""``diagnose``: run every detector over the inputs, rank the causes, and shape the findings.

Detectors are independent and additive (see board.py for the weight scale); no detector knows any
particular report. Recommendations carry predicted effects from the what-if model when the
deployment is modelled, and a command that verifies them.
"""

from __future__ import annotations

import math

from ..errors import AdvisorError
from ..schema import Diagnosis, Finding, MissingMeasurement, Msg, Recommendation
from ..schema.finding import Fact
from ..schema.message import msg, q, q_time
from .board import Board, Hypothesis
from .causes import BENCH, GENERIC
from .config_facts import detect_config
from .inputs import DiagnosisInputs, diagnosis_prompts
from .measured import detect_measured
from .advice_fit import fitted_changes
from .report_facts import HF_TRANSFORMERS, engine_display_name, engine_named_in_text, highest_concurrency, platform_named, RANDOM_PROMPT_HITS_PCT, prefix_hit_pct, prompts_share_nothing, transformers_loop, words_say
from .physics import detect_physics
from .text_cues import detect_cues

DETECTORS = (detect_config, detect_measured, detect_physics, detect_cues)
MAX_FINDINGS = 6
#: Past MAX_FINDINGS a cause still enters the findings when measurements or the performance model put
#: at least this much on the board (a rule of measured.py or physics.py that fired): its numbers are
#: about this deployment, and the words-trained ranker must not push them out of the full answer.
MODELLED_EFFECT = 2.0


def diagnose(inputs: DiagnosisInputs, *, with_effects: bool = True) -> Diagnosis:
    from .agreement import expected_figures, measured_ttft, model_agreement, model_disagreement, stated_load_speed, stated_speed, stated_throughput, weights_exceed

    board = Board()
    for detector in DETECTORS:
        detector(inputs, board)
    ranked, similar, undecided = _learned_order(board, inputs)
    findings = [_finding(h, inputs) for h in ranked]
    if with_effects and inputs.engine is not None:
        _parallel_options(findings[:3], inputs)
        _predict_effects(findings[:3], inputs)
    missing = _missing(inputs, [h.cause for h in ranked])
    if undecided:  # the measurements that separate the leading causes go first
        from .deciding import deciding_measurements

        missing = deciding_measurements(undecided, missing) + sorted(missing, key=lambda m: -len(set(m.decides) & set(undecided)))
    missing = _runnable(missing, inputs)
    return Diagnosis(
        findings=findings,
        missing=missing,
        similar_reports=similar,
        undecided=undecided,
        facts=_facts(inputs),
        notes=diagnosis_notes(inputs),
        language=inputs.language,
        agreement=model_agreement(inputs),
        disagreement=model_disagreement(inputs),
        stated_speed=stated_speed(inputs),
        stated_throughput=stated_throughput(inputs),
        stated_load_speed=stated_load_speed(inputs),
        measured_ttft=measured_ttft(inputs),
        weights_exceed=weights_exceed(inputs),
        expected=expected_figures(inputs),
    )


#: A cause the board has no evidence for enters the findings only with at least this probability.
MIN_PROBABILITY_WITHOUT_EVIDENCE = 0.15
SIMILAR_SHOWN = 3


def library_case_id(inputs: DiagnosisInputs) -> str | None:
    """The id of the library's own report when the case file is one of the library's files: it is
    not its own neighbour (it would vote for its own labels and be shown as a "report like yours"
    at similarity 1.00, as two reviews of library reports found in every answer)."""
    from pathlib import Path

    from vllm_advisor_knowledge import __file__ as knowledge_init

    source = inputs.case.source if inputs.case is not None else None
    if not source:
        return None
    path = Path(source).resolve()
    return path.stem if path.parent == (Path(knowledge_init).parent / "cases").resolve() else None


def _learned_order(board: Board, inputs: DiagnosisInputs):
    """Order the causes by the fitted ranker (ranker.py); the board's own order when no weights ship."""
    from ..schema import Evidence, SimilarReport
    from .ranker import packaged_model, rank, structured_weight, undecided
    from .semantic import embed_query, packaged_index, sentences, signals

    model = packaged_model()
    index = packaged_index()
    if model is None or index is None:
        return [h for h in board.ranked() if h.cause not in board.excluded][:MAX_FINDINGS], [], []
    text = inputs.prose  # the user's words, without the lines a program printed (read as figures)
    parts, said = None, sentences(text)  # the sentences embed_text embeds, for the quotes below
    if text.strip():
        vector, parts = embed_query(text, index)
        sem = signals(vector, index, parts=parts, exclude=library_case_id(inputs))
    else:
        sem = None
    order = rank(board, sem, model, text)
    ranked: list[Hypothesis] = []
    for r in order:
        if r.cause in board.excluded:  # ruled out by the deployment's facts (config_facts.one_gpu)
            continue
        if len(ranked) >= MAX_FINDINGS and structured_weight(board, r.cause) < MODELLED_EFFECT:
            continue
        has_evidence = r.cause in board.hypotheses and board.hypotheses[r.cause].score > 0
        voters = [n for n in (sem.neighbours if sem else []) if r.cause in n.causes]
        # the first three are the ranker's, as scored on the validation part; past them a cause
        # needs evidence of its own or a fair probability
        if len(ranked) >= 3 and not has_evidence and r.probability < MIN_PROBABILITY_WITHOUT_EVIDENCE:
            continue
        h = board.get(r.cause)
        for n in voters[:2]:
            h.evidence.append(Evidence(kind="source", origin="library", label=msg("ev.similar_case", case=n.id), value=round(n.similarity, 2), detail=msg("detail.url", url=n.url)))
        if sem is not None and not h.evidence:
            h.evidence.append(_closest_words(r.cause, said, parts, index, sem))
        h.probability = r.probability
        ranked.append(h)
    similar = [SimilarReport(id=n.id, url=n.url, causes=n.causes, fix=n.fix, similarity=round(n.similarity, 2)) for n in (sem.neighbours if sem else [])[:SIMILAR_SHOWN]]
    return ranked, similar, undecided(order)


def _closest_words(cause: str, said: list[str], parts, index, sem) -> Evidence:
    """What a finding with no evidence of its own rests on: the user's sentence (``said``, whose vectors
    are ``parts``) closest to the cause's symptoms, quoted (a cosine figure meant nothing to the reviewers, "shown as if it were a quote"),
    or that closeness when the words are one sentence."""
    from ..schema import CAUSE_IDS, Evidence

    k = CAUSE_IDS.index(cause)
    if parts is not None and len(parts) > 1 and len(said) == len(parts):
        best = int((index.symptom_vectors[index.symptom_causes == k] @ parts.T).max(axis=0).argmax())
        return Evidence(kind="text", origin="question", label=msg("ev.closest_words"), value=" ".join(said[best].split())[:200])
    return Evidence(kind="text", origin="question", label=msg("ev.symptom_closeness"), value=round(float(sem.symptom[k]), 2))


#: Severity on the board's own scale (board.py: a weight w reads as confidence 1 - exp(-w/2)):
#: score 4 -> 0.86 is high, 2 -> 0.63 medium. A learned probability is read on the same scale, so a
#: finding shown at 0.9 is not called "low" because its evidence is words.
SEVERITY_HIGH = 1.0 - math.exp(-2.0)
SEVERITY_MEDIUM = 0.5  # the answer's own line between 'also contributing' and 'less likely' (embedded.LIKELY)


def _bench_at_load(inputs: DiagnosisInputs) -> str:
    """The benchmark that checks a change: the report's lengths at the most clients it ran or named
    (its observations, attached benchmarks, workload or words); one client when none is known. A
    reviewer's find: every real run at 16-64 clients was told to verify with one client."""
    conc = highest_concurrency(inputs) or 1
    return BENCH.format(inp=inputs.input_len, out=inputs.output_len, conc=conc, n=max(3 * conc, 10))


def _finding(h: Hypothesis, inputs: DiagnosisInputs) -> Finding:
    # a generic change that only names a flag with a placeholder is the change a rule already made with
    # this deployment's value ("--max-num-seqs N" beside "--max-num-seqs 448" from the server's own lines)
    made = {f"{r.flag.split()[0]} N" for r in h.recommendations if r.flag and r.flag.startswith("--")}
    recs = h.recommendations + [r.model_copy(deep=True) for r in GENERIC.get(h.cause, []) if r.flag not in made]
    for r in recs:
        if r.verify is None and inputs.input_len and inputs.output_len:
            r.verify = _bench_at_load(inputs)
    recs = fitted_changes(h.cause, recs, inputs)
    if h.probability is not None:
        severity = "high" if h.probability >= SEVERITY_HIGH else "medium" if h.probability >= SEVERITY_MEDIUM else "low"
    else:
        severity = "high" if h.score >= 4 else "medium" if h.score >= 2 else "low"
    return Finding(
        cause=h.cause,
        severity=severity,
        confidence=max(0.01, round(h.probability, 2)) if h.probability is not None else h.confidence,
        score=round(h.probability if h.probability is not None else h.score, 3),
        evidence=h.evidence,
        reasons=_workload_reasons(h, inputs) + list(h.reasons),
        recommendations=recs,
    )


def _workload_reasons(h: Hypothesis, inputs: DiagnosisInputs) -> list[Msg]:
    """What the benchmark's prompts say about a prefix-cache finding: random prompts share no prefix, so
    no hits is a working cache (a reviewer's find: "Is prefix caching broken?" with vllm bench serve's
    random dataset got "find where reuse breaks"), and hits mean the prompts were sent before or were
    recomputed. It words the finding; the ranking is the ranker's."""
    if h.cause != "prefix_cache" or not prompts_share_nothing(inputs):
        return []
    hit = prefix_hit_pct(inputs)
    if hit is not None and hit >= RANDOM_PROMPT_HITS_PCT:
        return [msg("reason.random_prompts_hits", hit=q(round(hit, 1), "%"))]
    return [msg("reason.random_prompts")]


def _parallel_options(findings: list[Finding], inputs: DiagnosisInputs) -> None:
    """"Will a second GPU help: TP2 or two replicas?" asked of a deployment on one GPU: beside the change
    that adds a replica (its own KV cache), the one that splits the model over the two GPUs, so both are
    modelled and the answer compares them (a reviewer's find: only the replica was modelled and advised,
    where tensor parallelism 2 holds nine times the KV cache)."""
    from .report_facts import PARALLEL_CHOICE

    cfg, engine = inputs.engine.config, inputs.engine
    if not words_say(PARALLEL_CHOICE, inputs) or cfg.tensor_parallel_size != 1 or (cfg.data_parallel_size or 1) != 1:
        return
    if (engine.num_gpus or 1) == 2 and engine.replicas == 2 and cfg.source_of("tensor_parallel_size") != "user":
        # "TP2 or two replicas?" on two GPUs the model fits one of: it is modelled as two replicas already, so
        # the replica change is no change; the other option, TP2, is what is modelled (a new user's find:
        # "no material change" was the whole answer)
        for f in findings:
            for i, r in enumerate(f.recommendations):
                if "tp=1" in r.whatif and any(w.startswith("dp=") for w in r.whatif):
                    f.recommendations[i] = Recommendation(change=msg("rec.tp_two_of_two"), flag="--tensor-parallel-size 2", whatif=["tp=2"])
                    return
        return
    if (engine.num_gpus or 1) != 1:
        return
    for f in findings:
        if any(r.whatif == ["dp=2"] for r in f.recommendations) and not any(r.whatif == ["tp=2"] for r in f.recommendations):
            f.recommendations.append(Recommendation(change=msg("rec.tp_two"), flag="--tensor-parallel-size 2", whatif=["tp=2"]))
            return


def _predict_effects(findings: list[Finding], inputs: DiagnosisInputs) -> None:
    """Run the what-if model for recommendations that name their changes, at the reported load points."""
    from ..perf.predict import LoadPoint, load_point_of
    from ..perf.whatif import what_if

    points = [LoadPoint(concurrency=p.concurrency, request_rate=p.request_rate) for r in inputs.predicted if r.offered_concurrency and (p := load_point_of(r))]
    if not points or not inputs.input_len or not inputs.output_len:
        return
    points = points[-1:]  # the heaviest load point tells the story; keeps `ask` fast
    # from the deployment as modelled (a derived TP or max_model_len, the efficiencies calibrated to the
    # user's measurements), the one the user's own prediction and the setting costs start from
    args = inputs.modelled_args or inputs.engine_args
    calibrated = inputs.calibration is not None and inputs.calibration.calibrated
    efficiency = inputs.calibration.efficiency if calibrated else None
    seen: dict[tuple[str, ...], tuple[Msg, bool, bool, float | None]] = {}
    baseline_runs: dict = {}  # every what-if below starts from the same deployment: one "before" simulation
    for f in findings:
        for rec in f.recommendations:
            if not rec.whatif:
                continue
            key = tuple(rec.whatif)
            if key not in seen:
                try:
                    result = what_if(
                        inputs.deployment, args, list(key), points, efficiency=efficiency,
                        input_len=inputs.input_len, output_len=inputs.output_len,
                        shared_prefix_len=inputs.shared_prefix_len or 0,
                        num_prompts=diagnosis_prompts(points[0]), baseline_runs=baseline_runs, memory_params=inputs.memory_params,
                    )
                    seen[key] = _effect(result), predicted_worse(result), predicted_better(result), _throughput_after(result)
                except AdvisorError:
                    seen[key] = msg("effect.not_modelled"), False, False, None
            rec.predicted_effect, rec.predicted_worse, rec.predicted_better, rec.predicted_throughput = seen[key]


#: What-if deltas worth a reader's attention: the what-if figure and its message id.
EFFECT_FIGURES = (
    ("requests running (mean)", "effect.running"),
    ("decode speed per request", "effect.decode"),
    ("output throughput", "effect.throughput"),
    ("TTFT p50", "effect.ttft"),
)


#: The figures a user feels, from the what-if's comparison (perf/whatif.COMPARED): a change that moves none
#: of them the right way and one the wrong way is predicted to make this load worse.
FELT_FIGURES = ("TTFT p50", "decode speed per request", "output throughput")
#: A move smaller than this share is no move (the model's own noise between two simulations).
FELT_MOVE = 0.02


def _throughput_after(result) -> float | None:
    """The output throughput after the change at the last load point modelled, tok/s."""
    for p in result.points[-1:]:
        for d in p.deltas:
            if d.figure == "output throughput":
                return d.after
    return None


def felt_moves(result) -> set[bool]:
    """Which way the felt figures moved by more than FELT_MOVE at the load points modelled: True for a
    figure that got better, False for one that got worse (empty: none moved)."""
    return {bool(d.better) for d in _felt_deltas(result)}


def _felt_deltas(result) -> list:
    """The felt figures' deltas that moved by more than FELT_MOVE at the load points modelled."""
    return [d for p in result.points for d in p.deltas if d.figure in FELT_FIGURES and d.ratio is not None and abs(d.ratio - 1.0) > FELT_MOVE]


#: A felt figure made worse by this many times (in log terms) the best gain of another is a net loss at
#: this load: a budget of 512 tokens predicted to take TTFT 997 ms -> 3,079 ms for 16.2 -> 17.7 tok/s was
#: advised first (a new user's find).
NET_LOSS = 3.0


def predicted_worse(result) -> bool:
    """Every felt figure no better and at least one worse (a reviewer's find: two replicas were
    advised with the model's own prediction of 2,280 -> 1,919 tok/s beside them), or a felt figure made
    NET_LOSS times worse than the best gain of another."""
    moves = [(bool(d.better), abs(math.log(d.ratio))) for d in _felt_deltas(result) if d.ratio]
    worst = max((m for better, m in moves if not better), default=0.0)
    best = max((m for better, m in moves if better), default=0.0)
    return worst > 0 and worst >= NET_LOSS * best


def predicted_better(result) -> bool:
    """Every felt figure no worse and at least one better."""
    return felt_moves(result) == {True}


def _effect(result) -> Msg:
    """A what-if result as a message: the KV cache before/after, then per load point the figures
    that moved by more than 2%."""
    parts: list[Msg] = []
    mb, ma = result.base.memory, result.changed.memory
    if mb.kv_cache_tokens and not math.isclose(ma.kv_cache_tokens, mb.kv_cache_tokens, rel_tol=0.02):
        parts.append(msg("effect.kv", before=q(mb.kv_cache_tokens, "tokens"), after=q(ma.kv_cache_tokens, "tokens")))
    for p in result.points:
        d = {x.figure: x for x in p.deltas}
        moved = []
        for fig, key in EFFECT_FIGURES:
            x = d.get(fig)
            if x and x.before and x.after and not math.isclose(x.before, x.after, rel_tol=0.02):
                moved.append((fig in FELT_FIGURES, abs(math.log(x.after / x.before)), msg(key, before=q_time(x.before, x.unit), after=q_time(x.after, x.unit))))
        # the figures a user feels first, the largest moves first: the short answer keeps two (a 1.4 s ->
        # 0.8 s TTFT, not a 2.6 -> 3.4 running count)
        bits = [m for _, _, m in sorted(moved, key=lambda t: (not t[0], -t[1]))]
        if bits:
            parts.append(msg("effect.point", load=p.point.label, changes=bits))
    return msg("effect.model", parts=parts) if parts else msg("effect.none")


def stated_facts(said) -> list[Msg]:
    """What was read from the user's words (schema.StatedFacts), one message per fact."""
    out = []
    if said.model:
        out.append(msg("stated.model", name=said.model))
    if said.gpu:
        out.append(msg("stated.gpu", name=said.gpu, count=said.num_gpus or 1) if said.num_gpus else msg("stated.gpu_only", name=said.gpu))
    elif said.num_gpus:
        out.append(msg("stated.gpus", count=said.num_gpus) if said.num_gpus > 1 else msg("stated.one_gpu"))
    if said.tensor_parallel_size:
        out.append(msg("stated.tp", tp=said.tensor_parallel_size))
    if said.vllm_version:
        out.append(msg("stated.version", version=said.vllm_version))
    if said.quantization:
        out.append(msg("stated.quantization", name=said.quantization))
    for kind, tokens, chars in (("input", said.input_len, said.input_chars), ("output", said.output_len, said.output_chars)):
        if tokens and chars:  # a length in Chinese characters, turned into tokens (diagnosis/char_lengths.py)
            out.append(msg(f"stated.{kind}_chars", chars=chars, tokens=q(tokens, "tokens"), ratio=said.tokens_per_char))
        elif tokens:
            out.append(msg(f"stated.{kind}", tokens=q(tokens, "tokens")))
    if said.shared_prefix_len:
        out.append(msg("stated.shared_prefix", tokens=q(said.shared_prefix_len, "tokens")))
    if said.concurrency:
        out.append(msg("stated.concurrency", clients=", ".join(str(c) for c in said.concurrency)))
    if said.chars_per_s:  # a speed in characters a second, and the tokens a second it was read as
        out.append(msg("stated.speed_chars", chars=f"{said.chars_per_s:g}", speed=q(said.single_tok_s or said.request_tok_s, "tok/s"), ratio=said.tokens_per_char))
    elif said.request_tok_s and said.request_tok_s != said.single_tok_s:
        out.append(msg("stated.speed", speed=q(said.request_tok_s, "tok/s")))
    if said.single_tok_s and not said.chars_per_s:
        out.append(msg("stated.single_speed", speed=q(said.single_tok_s, "tok/s")))
    if said.throughput_tok_s and said.concurrency:
        out.append(msg("stated.throughput_total" if said.throughput_counts_input else "stated.throughput", speed=q(said.throughput_tok_s, "tok/s"), load=f"c={said.concurrency[0]}"))
    if said.ttft_ms:
        ttft = q_time(said.ttft_ms, "ms")
        out.append(msg("stated.ttft_at", ttft=ttft, load=f"c={said.ttft_clients}") if said.ttft_clients else msg("stated.ttft", ttft=ttft))
    for name, value in said.flags.items():  # a flag and its value: names, worded in no language
        out.append(msg("stated.flag", flag="--" + name.replace("_", "-"), value=str(value)))
    return out


#: Set-aside notes whose "field" names a step of the advisor, not a field of the user's files: worded
#: in the answer's language (a file's field, such as ``workload.input_len``, is a name and stays as is).
STEP_FIELDS = ("calibration",)


def _where(note):
    """Which file and field a set-aside note is about: ``source [field]``, either part optional."""
    field = None
    if note.field:
        field = msg("input.bracketed", x=msg(f"input.step_field.{note.field}")) if note.field in STEP_FIELDS else f"[{note.field}]"
    if note.source and field:
        return msg("input.where_both", source=note.source, field=field)
    return note.source or field or ""


def diagnosis_notes(inputs: DiagnosisInputs) -> list[Msg]:
    """Caveats as messages. The model's assumptions are read from its typed state (the resolved
    configuration's provenance); notes that other modules still write as text are carried verbatim
    (``note.text``) after the ones the typed notes already say."""
    out: list[Msg] = []
    engine = inputs.engine
    covered: tuple[str, ...] = ("vLLM version", "max_model_len not given")
    # a deployment that ran although the memory model says it cannot fit: the model's estimate is wrong
    served_not_fit = engine is not None and not engine.memory.fits and inputs.served
    if not inputs.deployment.is_vllm:
        loop = transformers_loop(inputs)  # a transformers script or demo: serve it with batching first
        out.append(msg("note.engine_named_loop", engine=HF_TRANSFORMERS) if loop else msg("note.other_engine", engine=engine_display_name(inputs.deployment.engine)))
        covered += (f"engine {inputs.deployment.engine}: ",)
    elif (named := engine_named_in_text(inputs.text)) is not None:
        out.append(msg("note.engine_named_loop" if named == HF_TRANSFORMERS else "note.engine_named", engine=named))
    if (platform := platform_named(inputs)) is not None:
        out.append(msg("note.platform_named", platform=msg(f"platform.{platform}")))
    if not inputs.stated.empty():
        # a case file was given: it is where the facts are corrected, not the flags that name one
        out.append(msg("note.stated_case" if inputs.case is not None else "note.stated", facts=stated_facts(inputs.stated)))
    if engine is not None:
        cfg = engine.config
        if cfg.version_assumed:
            out.append(msg("note.version_assumed", version=cfg.vllm_version))
        if cfg.source_of("tensor_parallel_size") == "derived":
            out.append(msg("note.tp_assumed", tp=cfg.tensor_parallel_size, gpus=engine.num_gpus, gpu=engine.gpu.name))
        native = engine.model.max_position_embeddings or 0
        if cfg.source_of("max_model_len") == "user" and native and cfg.max_model_len > native and not inputs.served:
            # "I set max-model-len 131072" on Qwen2.5-7B (32,768 positions): vLLM refuses it without position scaling
            out.append(msg("note.max_model_len_beyond", flag=str(cfg.max_model_len), native=q(native, "tokens")))
        if cfg.source_of("max_model_len") == "derived":
            # raised to the workload's requests, or lowered to what the KV cache holds: the server ran with
            # such a length, or one being planned needs it (vLLM refuses to start on the model's default)
            default = engine.model.max_position_embeddings or 0
            if cfg.max_model_len >= default and inputs.served:
                # the requests ran, so the server took them: position scaling is configured, and saying in the
                # short answer that vLLM would refuse them is noise (the seed answer grew past a screen with it)
                out.append(msg("note.max_model_len_scaled", flag=str(cfg.max_model_len), native=q(default, "tokens")))  # a flag's value, as typed: no separators
            elif cfg.max_model_len >= default:
                out.append(msg("note.max_model_len_assumed", flag=str(cfg.max_model_len), native=q(default, "tokens")))  # a flag's value, as typed: no separators
            elif inputs.served:
                out.append(msg("note.max_model_len_served", flag=str(cfg.max_model_len)))  # a flag's value, as typed: no separators
            else:
                out.append(msg("note.max_model_len_needed", flag=str(cfg.max_model_len), default=q(default, "tokens")))
        if served_not_fit:
            out.append(msg("note.served_but_does_not_fit", kv=q(round(engine.memory.kv_cache_gib, 2), "GiB")))
        if inputs.served_near_fit:
            kv, length = inputs.served_near_fit
            out.append(msg("note.served_near_fit", kv=q(kv, "tokens"), length=q(length, "tokens")))
    elif inputs.engine_error and inputs.words_about_other_engine:  # named, but not a vLLM deployment
        out.append(msg("note.words_other_engine"))
    elif inputs.engine_error and (not inputs.deployment.model or not inputs.deployment.gpu):
        missing = "both" if not inputs.deployment.model and not inputs.deployment.gpu else "model" if not inputs.deployment.model else "gpu"
        out.append(msg("note.no_model", missing=msg(f"not_given.{missing}")))
    elif inputs.engine_error and inputs.engine_error_field in ("model", "gpu"):  # a name the catalog lacks
        out.append(msg(f"note.{inputs.engine_error_field}_not_in_catalog", name=getattr(inputs.deployment, inputs.engine_error_field)))
    elif inputs.engine_error_note is not None:  # vLLM would refuse this deployment: said in the asker's language
        out.append(inputs.engine_error_note)
    elif inputs.engine_error:
        out.append(msg("note.engine_error", reason=inputs.engine_error))
    for summary in inputs.metrics_summaries:
        engines = summary.get("engines", [])
        if summary.get("num_snapshots") == 1 and engines and all(_idle_reading(eng) for eng in engines):
            # one dump taken while nothing ran (a new user's find: used without a word, the answer guessed)
            out.append(msg("note.metrics_idle", source=(summary.get("source") or "/metrics").split("/")[-1]))
        if any(eng.get("gauges_missed_load") for eng in engines):
            out.append(msg("note.gauges_missed_load", source=summary.get("source") or "/metrics", snapshots=summary.get("num_snapshots") or 0))
    skipped = list(getattr(inputs, "skipped", []) or [])
    for note in skipped:  # typed by the gatherer: worded here, not copied from its English line
        where = _where(note)
        if note.code == "serve_cmd_engine" and note.engine:
            mapped = "; ".join(note.mapped) or msg("input.flags_none")
            key = "input.engine_flags_kept" if note.kept else "input.engine_flags"
            out.append(msg(key, where=where, engine=note.engine, mapped=mapped, kept=", ".join(note.kept)))
            out.extend(msg(f"input.flag_approx.{a}", engine=note.engine) for a in note.approx)
        else:
            detail = msg(f"input.reason.{note.reason}", detail=note.detail, **note.reason_args) if note.reason else note.detail
            out.append(msg(f"input.{note.code}", where=where, detail=detail))
    said = {note.text() for note in skipped}
    # the memory model's own "will not start" verdict, worded in the asker's language (its English
    # note reached Chinese answers), gives way to note.served_but_does_not_fit
    if engine is not None and not served_not_fit:
        mem = engine.memory
        if mem.kv_cache_gib <= 0 and mem.weights_gib > 0:
            out.append(msg("note.memory_no_room", weights=q(round(mem.weights_gib, 1), "GiB"), allowed=q(round(mem.requested_gib, 1), "GiB")))
        elif not mem.fits:
            out.append(msg("note.memory_one_request", tokens=q(mem.kv_cache_tokens, "tokens"), length=q(mem.max_model_len, "tokens")))
    texts = list(inputs.notes) + (list(engine.notes) if engine is not None else [])
    for text in dict.fromkeys(t.strip() for t in texts if t and t.strip()):
        if not text.startswith(covered) and text not in said:
            out.append(msg("note.text", text=text))
    return list({m.model_dump_json(): m for m in out}.values())


def _idle_reading(engine_summary: dict) -> bool:
    """A /metrics reading with nothing running or waiting (a gauge not exported counts as unknown, not idle)."""
    def most(key: str):
        return (engine_summary.get(key) or {}).get("max")

    return most("requests_running") == 0 and most("requests_waiting") == 0


def _facts(inputs: DiagnosisInputs) -> list[Fact]:
    """The deployment as the model resolved it, each value with its unit and basis."""
    dep = inputs.deployment
    facts: list[Fact] = []
    if dep.model:
        facts.append(Fact(label=msg("fact.model"), value=dep.model))
    if dep.gpu:
        facts.append(Fact(label=msg("fact.gpus"), value=f"{dep.num_gpus or '?'} × {dep.gpu}"))
    e = inputs.engine
    if e is not None:
        facts.append(Fact(label=msg("fact.tp"), value=float(e.config.tensor_parallel_size), basis=e.config.source_of("tensor_parallel_size")))
        facts.append(Fact(label=msg("fact.version"), value=e.config.vllm_version, basis="assumed" if e.config.version_assumed else "user"))
        pool = "measured" if e.memory.pool_measured else "model"  # a server log's pool
        facts.append(Fact(label=msg("fact.kv_per_gpu"), value=round(e.memory.kv_cache_gib, 1), unit="GiB", basis=pool))
        if e.memory.has_sliding_layers:
            # the capacity counts every token in the full-attention layers and at most the window in
            # the sliding ones: two figures, or the product of one of them with the tokens misleads
            facts.append(Fact(label=msg("fact.kv_per_token_full"), value=round(e.memory.kv_bytes_per_token_full / 1024), unit="KiB", basis="exact"))
            facts.append(Fact(label=msg("fact.kv_per_token_sliding", window=q(e.memory.sliding_window, "tokens")), value=round(e.memory.kv_bytes_per_token_sliding / 1024), unit="KiB", basis="exact"))
        else:
            facts.append(Fact(label=msg("fact.kv_per_token"), value=round(e.memory.kv_bytes_per_token / 1024), unit="KiB", basis="exact"))
        facts.append(Fact(label=msg("fact.kv_tokens"), value=float(e.memory.kv_cache_tokens), unit="tokens", basis=pool))
        if inputs.input_len:
            length = inputs.input_len + (inputs.output_len or 0)
            facts.append(Fact(label=msg("fact.requests_fit", length=q(length, "tokens")), value=round(e.memory.requests_that_fit(length), 1), unit="requests", basis="model"))
        facts.append(Fact(label=msg("ev.setting", name="max_num_batched_tokens"), value=float(e.config.max_num_batched_tokens), unit="tokens", basis=e.config.source_of("max_num_batched_tokens")))
    if inputs.input_len:
        facts.append(Fact(label=msg("fact.io"), value=f"{inputs.input_len:,} / {inputs.output_len or '?'}", unit="tokens", basis="reported"))
    return facts


def _runnable(missing: list[MissingMeasurement], inputs: DiagnosisInputs) -> list[MissingMeasurement]:
    """Each measurement with the lines of its command that this engine and accelerator can run."""
    from .advice_fit import engine_is_vllm, not_nvidia
    from .deciding import fitted_command
    from .report_facts import catalog_gpu

    vllm, nvidia = engine_is_vllm(inputs), not not_nvidia(inputs, catalog_gpu(inputs))
    return [m.model_copy(update={"command": fitted_command(m.command, vllm=vllm, nvidia=nvidia)}) for m in missing]


def _missing(inputs: DiagnosisInputs, causes: list[str]) -> list[MissingMeasurement]:
    """The measurements that would separate the leading candidates, with the commands that take them."""
    out: list[MissingMeasurement] = []
    has_metrics = bool(inputs.metrics_summaries)
    top = set(causes[:4])
    # vLLM's metrics and version decide nothing for a report about another engine
    from .advice_fit import engine_is_vllm

    on_vllm = engine_is_vllm(inputs)
    if on_vllm and not has_metrics and top & {"kv_capacity", "queueing", "preemption", "max_num_seqs_limit", "benchmark_methodology", "prefix_cache"}:
        out.append(
            MissingMeasurement(
                decides=sorted(top & {"kv_capacity", "queueing", "preemption", "prefix_cache", "benchmark_methodology"}),
                what=msg("missing.server_view"),
                command="vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl\nvllm-advisor ask --metrics run.jsonl ...",
            )
        )
    # the version decides a regression, and the defaults the performance model assumed
    if on_vllm and not inputs.deployment.vllm_version and (inputs.engine is not None or top & {"version_regression", "batched_tokens_limit", "memory_config"}):
        out.append(
            MissingMeasurement(  # the causes it decides among those found, else all three (the model's defaults)
                decides=sorted(top & {"version_regression", "batched_tokens_limit", "memory_config"}) or ["version_regression", "batched_tokens_limit", "memory_config"],
                what=msg("missing.version"),
                command="vllm --version\nvllm-advisor probe log server.log",
            )
        )
    if not any(r.has_per_request_data for r in inputs.measured) and inputs.input_len and inputs.output_len:
        out.append(
            MissingMeasurement(
                decides=["benchmark_methodology", "queueing", "chunked_prefill_interference"],
                what=msg("missing.per_request"),
                command=_bench_at_load(inputs),
            )
        )
    return out

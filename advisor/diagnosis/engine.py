"""``diagnose``: run every detector over the inputs, rank the causes, and shape the findings.

Detectors are independent and additive (see board.py for the weight scale); no detector knows any
particular report. Recommendations carry predicted effects from the what-if model when the
deployment is modelled, and a command that verifies them.
"""

from __future__ import annotations

import math

from ..errors import AdvisorError
from ..schema import Diagnosis, Finding, MissingMeasurement
from ..schema.finding import format_value
from .board import Board, Hypothesis
from .causes import BENCH, GENERIC, title
from .config_facts import detect_config
from .inputs import DiagnosisInputs, diagnosis_prompts
from .measured import detect_measured
from .physics import detect_physics
from .text_cues import detect_cues

DETECTORS = (detect_config, detect_measured, detect_physics, detect_cues)
MAX_FINDINGS = 6


def diagnose(inputs: DiagnosisInputs, *, with_effects: bool = True) -> Diagnosis:
    board = Board()
    for detector in DETECTORS:
        detector(inputs, board)
    ranked, similar, undecided = _learned_order(board, inputs)
    findings = [_finding(h, inputs) for h in ranked]
    if with_effects and inputs.engine is not None:
        _predict_effects(findings[:3], inputs)
    missing = _missing(inputs, [h.cause for h in ranked])
    if undecided:  # the measurements that separate the leading causes go first
        from .deciding import deciding_measurements

        missing = deciding_measurements(undecided, missing) + sorted(missing, key=lambda m: -len(set(m.decides) & set(undecided)))
    return Diagnosis(
        findings=findings,
        missing=missing,
        similar_reports=similar,
        undecided=undecided,
        facts=_facts(inputs),
        notes=list(dict.fromkeys(inputs.notes + (inputs.engine.notes if inputs.engine is not None else []) + ([inputs.engine_error] if inputs.engine_error else []))),
        language=inputs.language,
    )


#: A cause the board has no evidence for enters the findings only with at least this probability.
MIN_PROBABILITY_WITHOUT_EVIDENCE = 0.15
SIMILAR_SHOWN = 3


def _learned_order(board: Board, inputs: DiagnosisInputs):
    """Order the causes by the fitted ranker (ranker.py); the board's own order when no weights ship."""
    from ..schema import Evidence, SimilarReport
    from .ranker import packaged_model, rank, undecided
    from .semantic import embed_text, packaged_index, signals

    model = packaged_model()
    index = packaged_index()
    if model is None or index is None:
        return board.ranked()[:MAX_FINDINGS], [], []
    text = inputs.text
    if text.strip():
        vector, parts = embed_text(text)
        sem = signals(vector, index, parts=parts)
    else:
        sem = None
    order = rank(board, sem, model)
    ranked: list[Hypothesis] = []
    for r in order:
        if len(ranked) >= MAX_FINDINGS:
            break
        has_evidence = r.cause in board.hypotheses and board.hypotheses[r.cause].score > 0
        voters = [n for n in (sem.neighbours if sem else []) if r.cause in n.causes]
        if not has_evidence and (r.probability < MIN_PROBABILITY_WITHOUT_EVIDENCE or not voters):
            continue
        h = board.get(r.cause)
        for n in voters[:2]:
            h.evidence.append(Evidence(kind="source", source="case library", label=n.id, value=round(n.similarity, 2), detail=n.url))
        h.probability = r.probability
        ranked.append(h)
    similar = [SimilarReport(id=n.id, url=n.url, causes=n.causes, fix=n.fix, similarity=round(n.similarity, 2)) for n in (sem.neighbours if sem else [])[:SIMILAR_SHOWN]]
    return ranked, similar, undecided(order)


def _finding(h: Hypothesis, inputs: DiagnosisInputs) -> Finding:
    reasons = h.reasons_zh if inputs.language == "zh" and h.reasons_zh else h.reasons
    recs = h.recommendations + [r.model_copy(deep=True) for r in GENERIC.get(h.cause, [])]
    for r in recs:
        if r.verify is None and inputs.input_len and inputs.output_len:
            conc = max((o.concurrency or 1 for o in inputs.observations), default=1)
            r.verify = BENCH.format(inp=inputs.input_len, out=inputs.output_len, conc=conc, n=max(3 * conc, 10))
    severity = "high" if h.score >= 4 else "medium" if h.score >= 2 else "low"
    return Finding(
        cause=h.cause,
        title=title(h.cause, inputs.language),
        severity=severity,
        confidence=max(0.01, round(h.probability, 2)) if h.probability is not None else h.confidence,
        score=round(h.probability if h.probability is not None else h.score, 3),
        evidence=h.evidence,
        explanation=" ".join(reasons),
        recommendations=recs,
    )


def _predict_effects(findings: list[Finding], inputs: DiagnosisInputs) -> None:
    """Run the what-if model for recommendations that name their changes, at the reported load points."""
    from ..perf.predict import LoadPoint
    from ..perf.whatif import what_if

    points = [LoadPoint(concurrency=r.offered_concurrency) for r in inputs.predicted if r.offered_concurrency]
    if not points or not inputs.input_len or not inputs.output_len:
        return
    points = points[-1:]  # the heaviest load point tells the story; keeps `ask` fast
    seen: dict[tuple[str, ...], str] = {}
    for f in findings:
        for rec in f.recommendations:
            if not rec.whatif:
                continue
            key = tuple(rec.whatif)
            if key not in seen:
                try:
                    result = what_if(
                        inputs.deployment, inputs.engine_args, list(key), points,
                        input_len=inputs.input_len, output_len=inputs.output_len,
                        shared_prefix_len=inputs.shared_prefix_len or 0,
                        num_prompts=diagnosis_prompts(points[0]),
                    )
                    seen[key] = _effect_text(result, inputs.language)
                except AdvisorError as exc:
                    seen[key] = f"not modelled: {exc.one_line()}"
            rec.predicted_effect = seen[key]


def _effect_text(result, language: str) -> str:
    parts = []
    mb, ma = result.base.memory, result.changed.memory
    if ma.kv_cache_tokens != mb.kv_cache_tokens:
        parts.append(
            f"KV cache {mb.kv_cache_tokens:,} -> {ma.kv_cache_tokens:,} tokens" if language != "zh" else f"KV cache {mb.kv_cache_tokens:,} → {ma.kv_cache_tokens:,} token"
        )
    for p in result.points:
        d = {x.figure: x for x in p.deltas}
        bits = []
        for fig, short in (("requests running (mean)", "running"), ("decode speed per request", "decode speed"), ("output throughput", "throughput"), ("TTFT p50", "TTFT p50")):
            x = d.get(fig)
            if x and x.before and x.after and not math.isclose(x.before, x.after, rel_tol=0.02):
                bits.append(f"{short} {_with_unit(x.before, x.unit)} -> {_with_unit(x.after, x.unit)}")
        if bits:
            parts.append(f"{p.point.label}: " + ", ".join(bits))
    return ("model: " if language != "zh" else "模型预测：") + ("; ".join(parts) if parts else "no material change")


def _with_unit(value: float, unit: str) -> str:
    if unit == "ms" and value >= 10_000:
        return f"{value / 1000:,.0f} s"
    return f"{format_value(float(value))} {unit}"


def _facts(inputs: DiagnosisInputs) -> dict[str, str]:
    dep = inputs.deployment
    facts: dict[str, str] = {}
    if dep.model:
        facts["model"] = dep.model
    if dep.gpu:
        facts["gpu"] = f"{dep.num_gpus or '?'} x {dep.gpu}"
    if inputs.engine is not None:
        e = inputs.engine
        facts["tensor parallel"] = str(e.config.tensor_parallel_size)
        facts["vLLM version"] = e.config.vllm_version + (" (assumed)" if e.config.version_assumed else "")
        facts["KV cache per GPU"] = f"{e.memory.kv_cache_gib:.1f} GiB [model]"
        facts["KV bytes per token per GPU"] = f"{e.memory.kv_bytes_per_token / 1024:.0f} KiB [exact]"
        facts["KV cache size"] = f"{e.memory.kv_cache_tokens:,} tokens [model]"
        if inputs.input_len:
            length = inputs.input_len + (inputs.output_len or 0)
            facts["requests that fit"] = f"{e.memory.requests_that_fit(length):.1f} of {length:,} tokens [model]"
        facts["max_num_batched_tokens"] = f"{e.config.max_num_batched_tokens} ({e.config.source_of('max_num_batched_tokens')})"
    if inputs.input_len:
        facts["input / output tokens"] = f"{inputs.input_len:,} / {inputs.output_len or '?'}"
    return facts


def _missing(inputs: DiagnosisInputs, causes: list[str]) -> list[MissingMeasurement]:
    """The measurements that would separate the leading candidates, with the commands that take them."""
    out: list[MissingMeasurement] = []
    has_metrics = bool(inputs.metrics_summaries)
    top = set(causes[:4])
    if not has_metrics and top & {"kv_capacity", "queueing", "preemption", "max_num_seqs_limit", "benchmark_methodology", "prefix_cache"}:
        out.append(
            MissingMeasurement(
                decides=sorted(top & {"kv_capacity", "queueing", "preemption", "prefix_cache", "benchmark_methodology"}),
                what="requests running vs waiting, KV-cache usage, preemptions and prefix-cache hits on the server while the load runs",
                command="vllm-advisor probe watch http://HOST:8000 --duration 120 --interval 2 -o run.jsonl   (then: vllm-advisor ask --metrics run.jsonl ...)",
            )
        )
    if not inputs.deployment.vllm_version:
        out.append(
            MissingMeasurement(
                decides=["version_regression", "batched_tokens_limit", "memory_config"],
                what="the vLLM version (its defaults decide the token budget, block size and memory utilisation)",
                command="vllm --version   (or the first lines of the server log: vllm-advisor probe log server.log)",
            )
        )
    if not any(r.has_per_request_data for r in inputs.measured) and inputs.input_len and inputs.output_len:
        conc = max((o.concurrency or 1 for o in inputs.observations), default=1)
        out.append(
            MissingMeasurement(
                decides=["benchmark_methodology", "queueing", "chunked_prefill_interference"],
                what="per-request TTFT, TPOT and ITL from a standard client at the same concurrency, with fresh prompts",
                command=BENCH.format(inp=inputs.input_len, out=inputs.output_len, conc=conc, n=max(3 * conc, 10)),
            )
        )
    return out

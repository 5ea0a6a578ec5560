"""Do the user's measurements agree with what the performance model predicts for their deployment?

Why: on a server whose settings hold nothing back, every finding is weak and the answer used to open
with "Likeliest cause (8%)" and a change for it. A real vLLM server on an H200 at its default settings
(issue 18's runs) measured what the model predicts within a few per cent; the useful reply is that
this speed is what the GPU does with this model, load and these settings, with the measured and
predicted figures side by side. Only uncalibrated predictions count: a prediction fitted to the same
figures would agree by construction.
"""

from __future__ import annotations

from ..schema import BenchmarkRun
from ..schema.finding import ExpectedFigures, MeasuredTTFT, ModelAgreement, StatedSpeed, StatedThroughput, WeightsExceed
from .inputs import DiagnosisInputs

#: Measured within this share of the prediction counts as agreeing (the model's held-out median error
#: on real vLLM is 3-9% per figure, its worst points 20-90%: benchmarks/RESULTS.md, issue 18).
AGREE_WITHIN = 0.25


def _close(measured: float | None, predicted: float | None) -> bool | None:
    if not measured or not predicted:
        return None
    return abs(measured / predicted - 1.0) <= AGREE_WITHIN


def _tpot(run: BenchmarkRun) -> float | None:
    return run.tpot_ms.mean if run.tpot_ms is not None and run.tpot_ms.mean else None


def measured_with_predictions(inputs: DiagnosisInputs) -> list[tuple[BenchmarkRun, BenchmarkRun]]:
    """Each measured load point (a benchmark file, not words) with the model's uncalibrated prediction
    at the same load, in the order measured; points without a prediction left out."""
    predicted = {r.load_label: r for r in inputs.predicted if not r.calibrated and not r.ceiling}
    pairs = [(m, predicted.get(m.load_label)) for m in inputs.measured if m.format != "observations"]
    return [(m, p) for m, p in pairs if p is not None]


def model_agreement(inputs: DiagnosisInputs) -> ModelAgreement | None:
    """The first measured load point (a benchmark file, not words) whose uncalibrated prediction
    agrees on the server's output throughput and, where both give it, on TPOT; None when no measured
    point has a prediction or one of them disagrees."""
    pairs = [(m, p) for m, p in measured_with_predictions(inputs) if m.output_throughput_tok_s and p.output_throughput_tok_s]
    if not pairs:
        return None
    for m, p in pairs:
        if not _close(m.output_throughput_tok_s, p.output_throughput_tok_s) or _close(_tpot(m), _tpot(p)) is False:
            return None
    m, p = pairs[0]
    return ModelAgreement(
        load=m.load_label,
        measured_tok_s=round(m.output_throughput_tok_s, 1),
        predicted_tok_s=round(p.output_throughput_tok_s, 1),
        measured_tpot_ms=round(_tpot(m), 2) if _tpot(m) else None,
        predicted_tpot_ms=round(_tpot(p), 2) if _tpot(p) else None,
        points=len(pairs),
    )


#: Measured this many times slower than the prediction (output throughput, or TPOT) is far from it: the
#: model's worst held-out points on real vLLM are within 2x (benchmarks/RESULTS.md, issue 18).
FAR_SLOWER = 2.0


def model_disagreement(inputs: DiagnosisInputs) -> ModelAgreement | None:
    """The measured load point (a benchmark file) furthest below the model's uncalibrated prediction,
    when it is at least FAR_SLOWER below it on output throughput or TPOT: the deployment does much
    less than this model, GPU and these settings should, so something the model leaves out holds it
    back (a reviewer's find: 22 tok/s measured beside 101 modelled, answered with a 24% guess)."""
    worst, worst_ratio = None, FAR_SLOWER
    for m, p in measured_with_predictions(inputs):
        ratios = []
        if m.output_throughput_tok_s and p.output_throughput_tok_s:
            ratios.append(p.output_throughput_tok_s / m.output_throughput_tok_s)
        if _tpot(m) and _tpot(p):
            ratios.append(_tpot(m) / _tpot(p))
        if ratios and max(ratios) >= worst_ratio:
            worst, worst_ratio = (m, p), max(ratios)
    if worst is None:
        return None
    m, p = worst
    return ModelAgreement(
        load=m.load_label,
        measured_tok_s=round(m.output_throughput_tok_s or 0.0, 1),
        predicted_tok_s=round(p.output_throughput_tok_s or 0.0, 1),
        measured_tpot_ms=round(_tpot(m), 2) if _tpot(m) else None,
        predicted_tpot_ms=round(_tpot(p), 2) if _tpot(p) else None,
        points=1,
    )


#: The context a stated speed is taken at when the words give no lengths: a chat turn.
DEFAULT_CONTEXT_TOKENS = 1024


def decode_context(inputs: DiagnosisInputs) -> int:
    """The context a decoding request holds on average: its prompt and half its output."""
    return (inputs.input_len or DEFAULT_CONTEXT_TOKENS) + (inputs.output_len or 0) // 2


def _predicted_at(inputs: DiagnosisInputs, clients: int) -> tuple[BenchmarkRun | None, BenchmarkRun | None]:
    """(the model's uncalibrated prediction at ``clients``, the same load with every kernel at its peak);
    None for either the model did not make."""
    run = next((r for r in inputs.predicted if not r.calibrated and not r.ceiling and r.offered_concurrency == clients), None)
    return run, next((r for r in inputs.ceiling if r.offered_concurrency == clients), None)


def _stated_at_load(inputs: DiagnosisInputs) -> StatedSpeed | None:
    """A per-request speed stated at one client count above one ("8 users, each gets 20 tok/s"), beside
    the model's per-request decode speed at that load (weights read once per step for the whole batch,
    each request's KV, prefill chunks of the others): None for several client counts (which speed goes
    with which?) or where that load was not modelled."""
    said = inputs.stated
    if len(said.concurrency) != 1:
        return None
    run, best = _predicted_at(inputs, said.concurrency[0])
    tpot = _tpot(run) if run is not None else None
    output = run.request_output_tok_s.mean if run is not None and run.request_output_tok_s is not None else None
    if not tpot or not output:
        return None
    context = decode_context(inputs)
    best_tpot = _tpot(best) if best is not None else None
    return StatedSpeed(stated_tok_s=said.request_tok_s, modelled_tok_s=round(1000.0 / tpot, 1), context_tokens=context, load=run.load_label,
                       modelled_output_tok_s=round(output, 1), ceiling_tok_s=round(1000.0 / best_tpot, 1) if best_tpot else None)


def _single_request(inputs: DiagnosisInputs) -> tuple[float, int] | None:
    """(tok/s, context tokens) of one request alone decoding on the modelled deployment: its weights and
    KV read once per token at the GPU's bandwidth, the step's fixed costs; None when not modelled or
    the KV cache cannot hold that one request."""
    engine = inputs.engine
    if engine is None:
        return None
    context = decode_context(inputs)
    if engine.memory.kv_cache_tokens < context:  # the weights leave no room for this one request
        return None
    step_ms = engine.decode_step_ms(1, context)
    if not step_ms or step_ms <= 0:
        return None
    return round(1000.0 / step_ms, 1), context


def _files_measured(inputs: DiagnosisInputs) -> bool:
    """A benchmark file was given: its figures say more than words or the model's expectations."""
    return any(m.format != "observations" for m in inputs.measured)


def stated_speed(inputs: DiagnosisInputs) -> StatedSpeed | None:
    """A per-request speed the words state ("生成速度只有 8 token/s"), beside the model's decode speed of
    one request alone on this deployment (its weights and KV read once per token at the GPU's
    bandwidth, the step's fixed costs). None when no speed was stated, a benchmark file was given,
    the deployment is not modelled or cannot hold that one request, or the words give a client
    count above one (then the speed at that load, ``_stated_at_load``); a KV cache short of the default max_model_len does not matter here."""
    said = inputs.stated
    engine = inputs.engine
    alone = said.single_tok_s or said.request_tok_s
    if not alone or engine is None or _files_measured(inputs):
        return None
    if not said.single_tok_s and any(c > 1 for c in said.concurrency):
        return _stated_at_load(inputs)
    single = _single_request(inputs)
    if single is None:
        return None
    from .inputs import ceiling_efficiency

    with engine.efficiency(ceiling_efficiency(engine.step.eff)):
        ceiling = _single_request(inputs)
    release_tok_s, release = _on_measured_release(inputs, single[0])
    return StatedSpeed(stated_tok_s=alone, modelled_tok_s=single[0], context_tokens=single[1], ceiling_tok_s=ceiling[0] if ceiling else None,
                       release_tok_s=release_tok_s, release=release)


def stated_load_speed(inputs: DiagnosisInputs) -> StatedSpeed | None:
    """Each request's speed at one load where the words also give one request alone's ("alone 80 tok/s,
    but at 64 each gets 20"): ``stated_speed`` compares the one alone, this the one at the load."""
    said = inputs.stated
    if not (said.single_tok_s and said.request_tok_s and said.per_request) or said.request_tok_s == said.single_tok_s:
        return None
    if inputs.engine is None or _files_measured(inputs) or not any(c > 1 for c in said.concurrency):
        return None
    return _stated_at_load(inputs)


def stated_throughput(inputs: DiagnosisInputs) -> StatedThroughput | None:
    """The whole server's output rate the words state at one client count ("并发 32 时吞吐 900 token/s"),
    beside the model's at that load, at its sourced efficiency and at the hardware's peak: None where no
    such rate was stated, a benchmark file was given (its figures say more) or that load was not modelled."""
    said = inputs.stated
    if not said.throughput_tok_s or len(said.concurrency) != 1 or _files_measured(inputs):
        return None
    clients = said.concurrency[0]
    run, best = _predicted_at(inputs, clients)
    if run is None or not run.output_throughput_tok_s:
        return None
    # vLLM bench's "Total Token throughput" counts each request's prompt with its output
    scale = (inputs.input_len + inputs.output_len) / inputs.output_len if said.throughput_counts_input else 1.0
    ceiling = best.output_throughput_tok_s * scale if best is not None and best.output_throughput_tok_s else None
    return StatedThroughput(stated_tok_s=said.throughput_tok_s, modelled_tok_s=round(run.output_throughput_tok_s * scale, 1), load=run.load_label,
                            counts_input=said.throughput_counts_input, ceiling_tok_s=round(ceiling, 1) if ceiling else None)


def expected_figures(inputs: DiagnosisInputs) -> ExpectedFigures | None:
    """What the performance model expects of this deployment: one request alone, and the figures at the
    heaviest client count the case or the words give (its uncalibrated prediction). None when a
    benchmark file was given (its figures and the agreement above say more) or nothing is modelled."""
    if _files_measured(inputs):
        return None
    single = _single_request(inputs)
    if single is None:
        return None
    single_ttft = None
    if inputs.input_len:  # one prompt alone, and the time from its sending to the scheduler (fitted on real vLLM)
        ms = inputs.engine.first_token_alone_ms(inputs.input_len)
        single_ttft = round(ms, 1) if ms > 0 else None
    figures = ExpectedFigures(single_tok_s=single[0], single_ttft_ms=single_ttft, input_len=inputs.input_len, output_len=inputs.output_len)
    _capacity(inputs, figures)
    figures.single_tok_s_measured_release, figures.measured_release = _on_measured_release(inputs, single[0])
    runs = [r for r in inputs.predicted if not r.calibrated and not r.ceiling and r.offered_concurrency]
    if runs:
        run = max(runs, key=lambda r: r.offered_concurrency)
        tpot = _tpot(run)
        view = run.server_view
        figures.load = run.load_label
        figures.tpot_ms = round(tpot, 1) if tpot else None
        figures.request_tok_s = round(1000.0 / tpot, 1) if tpot else None
        figures.ttft_ms = round(run.ttft_ms.median, 1) if run.ttft_ms is not None and run.ttft_ms.median else None
        figures.output_tok_s = round(run.output_throughput_tok_s, 1) if run.output_throughput_tok_s else None
        figures.running = round(view.running_mean, 1) if view is not None and view.running_mean else None
    return figures


#: The engine terms a decode step of one request depends on, fitted on the release measured on real GPUs.
DECODE_TERMS = ("step_overhead_ms", "per_seq_overhead_us", "decode_graph_factor")


def _on_measured_release(inputs: DiagnosisInputs, single_tok_s: float) -> tuple[float | None, str | None]:
    """One request alone (``single_tok_s`` with the terms in use) with the engine terms fitted on the vLLM
    release measured on real GPUs, where this deployment's version was not given and the sourced terms
    assumed for older releases are in use (a version given older keeps its own figure): (tok/s, release),
    or (None, None) when they are the ones in use or change it by under 3%. Both are real: vLLM 0.26.0
    decodes an 8B on an H100 at 146 tok/s; the motivating report, version not given, at the sourced figure."""
    from ..perf.efficiency import Efficiency, shipped_engine_fit

    engine = inputs.engine
    fitted, used = Efficiency(), engine.step.eff
    if not engine.config.version_assumed or all(getattr(used, name) == getattr(fitted, name) for name in DECODE_TERMS):
        return None, None
    with engine.efficiency(used.model_copy(update={name: getattr(fitted, name) for name in DECODE_TERMS})):
        single = _single_request(inputs)
    if single is None or abs(single[0] / single_tok_s - 1.0) < 0.03:
        return None, None
    return single[0], shipped_engine_fit().engine.split()[1]


#: Request lengths (prompt plus output, tokens) a capacity is given at when the words give none.
CAPACITY_LENGTHS = (2048, 8192, 32768)


def _capacity(inputs: DiagnosisInputs, figures: ExpectedFigures) -> None:
    """How many requests of the workload's length the KV cache holds at once, and each one's decode
    speed when that many decode together (their weights read once per step, their KV each): the reply
    to "how many users can I serve?" (a reviewer's find: it got the prefill floor instead)."""
    engine = inputs.engine
    mem = engine.memory
    if not inputs.input_len:  # "能支持多少并发？" with no length: the count at a few, the cache's size beside them
        longest = engine.config.max_model_len
        lengths = ([n for n in CAPACITY_LENGTHS if n < longest] + [longest])[:3]
        if len(lengths) < 3:  # a short window (Llama-2's 4,096): a quarter, a half and all of it
            lengths = [longest // 4, longest // 2, longest]
        figures.kv_cache_tokens, figures.kv_kib_per_token = int(mem.kv_cache_tokens), round(mem.kv_bytes_per_token_at(lengths[0]) / 1024, 1)
        figures.fits_by_length = [(n, round(mem.requests_that_fit(n), 1)) for n in lengths]
        return
    length = inputs.input_len + (inputs.output_len or 0)
    fits = mem.requests_that_fit(length)
    figures.request_tokens, figures.kv_cache_tokens, figures.fits = length, int(mem.kv_cache_tokens), round(fits, 1)
    figures.kv_kib_per_token = round(mem.kv_bytes_per_token_at(length) / 1024, 1)
    batch = min(int(fits), engine.config.max_num_seqs or int(fits))
    if batch < 1:
        return
    step_ms = engine.decode_step_ms(batch, decode_context(inputs))
    if step_ms and step_ms > 0:
        figures.full_batch, figures.full_batch_tok_s = batch, round(1000.0 / step_ms, 1)


def measured_ttft(inputs: DiagnosisInputs) -> MeasuredTTFT | None:
    """The measured load point (a benchmark file, not words) with the highest median time to first token,
    and the model's uncalibrated prediction at the same load where it made one."""
    def middle(run: BenchmarkRun | None) -> float | None:
        return (run.ttft_ms.median or run.ttft_ms.mean) if run is not None and run.ttft_ms is not None else None

    runs = [m for m in inputs.measured if m.format != "observations" and middle(m)]
    if not runs:
        return _stated_ttft(inputs)
    slowest = max(runs, key=middle)
    predicted = middle(next((p for m, p in measured_with_predictions(inputs) if m is slowest), None))
    return MeasuredTTFT(
        load=slowest.load_label,
        median_ms=round(middle(slowest), 1),
        p99_ms=round(slowest.ttft_ms.pct(99), 1) if slowest.ttft_ms.pct(99) else None,
        predicted_median_ms=round(predicted, 1) if predicted else None,
    )


def _stated_ttft(inputs: DiagnosisInputs) -> MeasuredTTFT | None:
    """The time to first token the words state ("TTFT 16 s at 48 clients", "首 token 要等 20 多秒"), beside
    the model's uncalibrated median at the client count they give, or, with none given, one prompt alone's
    (its prefill and intake): the figure a "why is TTFT so high?" asks about, answered before any cause.
    None where the words give no figure, the prompt length is unknown or that load was not modelled."""
    said, engine = inputs.stated, inputs.engine
    if not said.ttft_ms or engine is None or not inputs.input_len:
        return None
    clients = said.ttft_clients
    if clients is not None and clients > 1:
        run = _predicted_at(inputs, clients)[0]
        if run is not None and run.ttft_ms is not None and run.ttft_ms.median:
            return MeasuredTTFT(load=run.load_label, median_ms=said.ttft_ms, predicted_median_ms=round(run.ttft_ms.median, 1), stated=True, input_len=inputs.input_len)
    alone = engine.first_token_alone_ms(inputs.input_len)
    if not alone or alone <= 0:
        return None
    # one request alone: the model's figure at that load is this one; a load the model did not simulate (no
    # output length), or none given: the figure beside one prompt alone's, its load said where given
    return MeasuredTTFT(load=f"c={clients}" if clients else None, alone=clients != 1, median_ms=said.ttft_ms, predicted_median_ms=round(alone, 1), stated=True, input_len=inputs.input_len)


def weights_exceed(inputs: DiagnosisInputs) -> WeightsExceed | None:
    """The weights per GPU, as modelled from the parameter count and format, exceed each GPU's memory
    while the words report figures measured on a running server ("一张 4090 跑 Llama-3.1-70B（bf16 没量化），
    单并发每秒 45 token": 141 GB on a 24 GB card; a new user's find: answered with the prefill). What served
    them is not this deployment; and even were it, one request could not decode faster than the GPU reads
    its weights. None otherwise, or where files were attached (their own figures and notes speak)."""
    engine = inputs.engine
    stated = inputs.stated.single_tok_s or inputs.stated.request_tok_s
    if engine is None or not stated or inputs.measured or inputs.server_logs or inputs.metrics_windows:
        return None  # a speed measured on the server, not a plan ("can I get the first token in 2 s?")
    if engine.model.num_experts or inputs.engine_args.cpu_offload_gb:
        return None  # experts read in part each token, or weights offloaded on purpose: the ceiling here is not theirs
    mem, gpu = engine.memory, engine.gpu
    if mem.weights_gib <= gpu.memory_gib:
        return None
    ceiling = gpu.mem_bandwidth_gbs * 1e9 / (mem.weights_gib * 2**30)
    return WeightsExceed(weights_gib=round(mem.weights_gib, 1), gpu_gib=round(gpu.memory_gib, 1), ceiling_tok_s=round(ceiling, 1),
                         stated_tok_s=stated)

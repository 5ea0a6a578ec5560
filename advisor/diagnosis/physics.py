"""Evidence from the performance model: what this hardware and scheduler can and cannot produce."""

from __future__ import annotations

from ..schema import BenchmarkRun, Evidence, Msg, Recommendation, ServerView
from ..schema.message import msg, q
from .board import Board
from .inputs import DiagnosisInputs
from .measured import _file
from .setting_cost import detect_backend_cost, detect_setting_costs

PRE_HOPPER = ("ampere", "ada", "turing", "volta")


def _model(label: Msg, value=None, unit: str | None = None, detail: Msg | None = None, *, load: str | None = None) -> Evidence:
    return Evidence(kind="model", origin="model", label=label, load=load, value=value, unit=unit, detail=detail)


def _view(run: BenchmarkRun) -> ServerView:
    """A predicted run's server view (empty when the model did not simulate one)."""
    return run.server_view or ServerView()


def detect_physics(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    if engine is None:
        return
    mem = engine.memory
    if not mem.fits and not inputs.served:
        # the memory model's own verdict, below the establishing level. A deployment that was
        # measured did fit, so there "does not fit" is the model's estimate of the weights (dtype,
        # MoE layout, offload), not the user's settings: no evidence, a note instead
        # (engine.diagnosis_notes). On the library's fitting part the verdict named an established
        # cause in 1 of 17 measured reports. The server log's "Maximum concurrency" line
        # (measured.py) is what establishes a small KV cache.
        board.add(
            "memory_config",
            1.5,
            _model(msg("ev.kv_cache_per_gpu"), round(mem.kv_cache_gib, 2), "GiB"),
            reason=msg("reason.kv_too_small"),
        )
        board.add("kv_capacity", 1.5, _model(msg("ev.max_concurrency"), round(mem.max_concurrency, 2), "x"))
        _kv_not_one(inputs, board)
    _profiling_pass(inputs, board)
    _kv_fit(inputs, board)
    _open_loop_overload(inputs, board)
    _rate_bound(inputs, board)
    _beyond_ceiling(inputs, board)
    _throughput_formula(inputs, board)
    _chunked_prefill(inputs, board)
    _prefill_compute(inputs, board)
    _ttft_wait(inputs, board)
    _decode_bandwidth(inputs, board)
    _cpu_offload(inputs, board)
    _attention_kernel(inputs, board)
    detect_setting_costs(inputs, board)
    detect_backend_cost(inputs, board)


def _kv_not_one(inputs: DiagnosisInputs, board: Board) -> None:
    """The workload's own request does not fit the KV cache the weights leave (70B in FP8 on one H100:
    4,912 tokens of KV against 32K prompts; a new user's find: the answer opened with a 5 s prefill).
    Not one such request can run on these GPUs at these settings, whatever else is tuned: vLLM refuses
    to start at that max_model_len, or rejects the prompts at a shorter one. Only where nothing was
    measured (a server that ran did fit: there the memory model's inputs are wrong)."""
    mem = inputs.engine.memory
    if not inputs.input_len or mem.kv_cache_tokens <= 0 or not inputs.deployment.is_vllm:
        return
    length = inputs.input_len + (inputs.output_len or 0)
    fit = mem.requests_that_fit(length)
    if fit >= 1:
        return
    ev = _model(msg("ev.kv_capacity"), float(mem.kv_cache_tokens), "tokens",
                msg("detail.kv_capacity", per_token=q(mem.kv_bytes_per_token_at(length) / 1024, "KiB"), fit=q(fit, "requests"), length=q(length, "tokens")))
    board.add("kv_capacity", 3.0, ev, reason=msg(
        "reason.kv_not_one", length=q(length, "tokens"), per_request=q(mem.request_kv_bytes(length) / 2**30, "GiB"),
        weights=q(round(mem.weights_gib, 1), "GiB"), tokens=q(mem.kv_cache_tokens, "tokens"),
    ), lead=True)


def _profiling_pass(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    mem, cfg = engine.memory, engine.config
    if cfg.enable_chunked_prefill or mem.kv_cache_gib <= 0:
        return
    share = mem.activation_peak_gib / (mem.activation_peak_gib + mem.kv_cache_gib)
    if share < 0.15:
        return
    tokens = q(cfg.max_num_batched_tokens, "tokens")
    ev = _model(msg("ev.activation_peak"), round(mem.activation_peak_gib, 2), "GiB", msg("detail.profiling_pass", tokens=tokens))
    board.add("batched_tokens_limit", 2.0, ev, reason=msg("reason.profiling_pass", tokens=tokens, gib=q(mem.activation_peak_gib, "GiB")))
    board.add("memory_config", 1.5, ev)


def _kv_fit(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    mem = engine.memory
    if not inputs.input_len:
        return
    length = inputs.input_len + (inputs.output_len or 0)
    fit = mem.requests_that_fit(length)
    if not any(r.offered_concurrency for r in inputs.predicted):
        _kv_fit_unsimulated(inputs, board, length, fit)
        return
    over = [r for r in inputs.predicted if r.offered_concurrency and r.offered_concurrency > 1.1 * fit]
    if not over:
        return
    top = max(over, key=lambda r: r.offered_concurrency)
    running = _view(top).running_mean or 0.0
    waiting = _view(top).waiting_mean or 0.0
    kv_ev = _model(
        msg("ev.kv_capacity"),
        float(mem.kv_cache_tokens),
        "tokens",
        msg("detail.kv_capacity", per_token=q(mem.kv_bytes_per_token_at(length) / 1024, "KiB"), fit=q(fit, "requests"), length=q(length, "tokens")),
    )
    run_ev = _model(msg("ev.running"), round(running or 0, 1), "requests", msg("detail.waiting_mean", waiting=q(waiting or 0, "requests")), load=top.load_label)
    board.add(
        "kv_capacity",
        3.0,
        kv_ev,
        run_ev,
        reason=msg(
            "reason.kv_fit", length=q(length, "tokens"), per_request=q(mem.request_kv_bytes(length) / 2**30, "GiB"),
            tokens=q(mem.kv_cache_tokens, "tokens"), fit=q(round(fit, 1), "requests"), clients=top.offered_concurrency, running=q(round(running or 0), "requests"),
        ),
    )
    board.add("queueing", 1.5, run_ev, reason=msg("reason.queue_beyond_fit"))
    if len(over) >= 2:
        loads = sorted(over, key=lambda r: r.offered_concurrency)
        lo, hi = loads[0], loads[-1]
        r_lo = _view(lo).running_mean or 0.0
        r_hi = _view(hi).running_mean or 0.0
        board.add(
            "queueing",
            0.5,
            _model(msg("ev.running_two", lo=lo.load_label, hi=hi.load_label, a=q(round(r_lo, 1), "requests"), b=q(round(r_hi, 1), "requests"))),
            reason=msg("reason.same_speed", hi=hi.offered_concurrency, lo=lo.offered_concurrency, running=q(round(r_hi), "requests")),
        )


def _kv_fit_unsimulated(inputs: DiagnosisInputs, board: Board, length: int, fit: float) -> None:
    """More clients than the KV cache holds requests of this length, where no load was simulated (no
    output length, or none measured): the count alone says how many wait ("8K prompts at 48 clients"
    on a cache of 93,216 tokens: 11 run, 37 wait; a new user's find, the answer opened with an 0.2 s
    prefill for a 16 s TTFT). The length is the prompt's alone when no output length is known: at
    least that much, so at most that many fit."""
    from .report_facts import clients_beyond_fit

    mem = inputs.engine.memory
    clients = clients_beyond_fit(inputs, fit)
    if clients is None or not inputs.deployment.is_vllm:  # another engine sizes its cache its own way
        return
    kv_ev = _model(
        msg("ev.kv_capacity"), float(mem.kv_cache_tokens), "tokens",
        msg("detail.kv_capacity", per_token=q(mem.kv_bytes_per_token_at(length) / 1024, "KiB"), fit=q(fit, "requests"), length=q(length, "tokens")),
    )
    waiting = max(0, round(clients - fit))
    board.add(
        "kv_capacity",
        3.0,
        kv_ev,
        reason=msg(
            "reason.kv_fit_clients" if inputs.output_len else "reason.kv_fit_clients_min", length=q(length, "tokens"),
            per_request=q(mem.request_kv_bytes(length) / 2**30, "GiB"), tokens=q(mem.kv_cache_tokens, "tokens"), fit=q(round(fit, 1), "requests"),
            clients=clients, waiting=q(waiting, "requests"),
        ),
    )
    board.add("queueing", 1.5, kv_ev, reason=msg("reason.queue_beyond_fit"))
    _memory_fraction_fit(inputs, board, length, fit, clients)


def _memory_fraction_fit(inputs: DiagnosisInputs, board: Board, length: int, fit: float, clients: int) -> None:
    """A --gpu-memory-utilization the user set below vLLM's default, where the clients outnumber what
    its KV cache holds: the requests that fit at the default, beside those that fit at theirs (a
    planted run at 0.35: 11 of 48 fit, 53 at the default; the setting went unnamed without a
    simulated load). A cause where the default holds ESTABLISHING_GAIN times as many."""
    from ..schema import Recommendation
    from .setting_cost import ESTABLISHING_GAIN, _default_engine  # the same default, and the same bar as a setting's costed gain

    engine = inputs.engine
    if engine.config.source_of("gpu_memory_utilization") != "user" or inputs.modelled_args is None:
        return
    default, value = _default_engine(inputs, "gpu_memory_utilization", calibrated=False)
    yours = engine.config.gpu_memory_utilization
    if default is None or value <= yours:
        return
    default_fit = default.memory.requests_that_fit(length)
    if default_fit < ESTABLISHING_GAIN * fit:
        return
    enough = msg("reason.memory_fraction_enough", clients=clients) if default_fit >= clients else ""
    board.add(
        "memory_config",
        3.0,
        _model(msg("ev.kv_at_default", value=f"{value:g}"), float(default.memory.kv_cache_tokens), "tokens"),
        reason=msg("reason.memory_fraction_fit", yours=f"{yours:g}", tokens=q(engine.memory.kv_cache_tokens, "tokens"), fit=q(round(fit, 1), "requests"),
                   default=f"{value:g}", default_tokens=q(default.memory.kv_cache_tokens, "tokens"), default_fit=q(round(default_fit, 1), "requests"), enough=enough),
        recommendation=Recommendation(change=msg("rec.setting_default", name="gpu_memory_utilization", value=f"{value:g}"),
                                      flag=f"--gpu-memory-utilization {value:g}", whatif=[f"gpu_memory_utilization={value:g}"]),
    )


#: A measured completion rate outside [LOW, HIGH] x the service rate says the model's rate (or the run:
#: failures, a stalled server) is not what the figures show.
COMPLETED_LOW, COMPLETED_HIGH = 0.6, 1.2
#: Requests left over when the last is sent (arrived beyond what the server completed by then) below
#: which a short benchmark's backlog does not matter.
MIN_EXCESS_REQUESTS = 8
#: An overloaded server holds its full batch: requests in flight on average (sum of E2E / duration)
#: at least this share of the clients the service rate was simulated with.
FULL_BATCH_SHARE = 0.8
#: The share of the service rate a latency benchmark offers: close enough to the knee to be
#: realistic, far enough below it that the queue drains between bursts of a Poisson stream.
RATE_SHARE = 0.8


def _open_loop_overload(inputs: DiagnosisInputs, board: Board) -> None:
    """Requests sent on a clock faster than the deployment completes them: the backlog, and with it
    TTFT and end-to-end latency, grows for as long as the benchmark sends. The figures then agree
    with the model at that load (it queues them too), so only the service rate beside the offered
    rate shows it. A run with no latency figure (a throughput comparison) has nothing for it to
    explain. The measured run decides how much that says: a completion rate far from the
    modelled service rate, a TPOT under half the model's, or fewer requests in flight than the full
    batch is no overload the figures show; all three in agreement establish it (3.0); a run that
    measured neither is the model's word (2.0)."""
    from ..perf.service_rate import overloaded

    rate = inputs.service_rate
    if rate is None or rate.req_s <= 0:
        return
    worst = None
    for run in inputs.measured:
        offered = run.offered_request_rate
        if run.offered_concurrency or not overloaded(offered, rate):
            continue
        if run.ttft_ms is None and run.e2e_ms is None and run.tpot_ms is None:
            continue  # no latency measured: nothing the queue would explain (a throughput-only comparison)
        done = run.request_throughput_req_s
        if run.completed == 0 or (done is not None and not COMPLETED_LOW * rate.req_s <= done <= COMPLETED_HIGH * rate.req_s):
            continue
        if _far_better_than_modelled(run, _match(run, inputs.predicted)):
            continue
        in_flight = run.achieved_concurrency
        if in_flight is not None and in_flight < FULL_BATCH_SHARE * rate.clients:
            continue
        sent = run.num_prompts or run.completed
        excess = sent * (1 - rate.req_s / offered) if sent else None
        if excess is not None and excess < MIN_EXCESS_REQUESTS:
            continue
        if worst is None or offered > worst[0].offered_request_rate:
            worst = (run, sent, excess)
    if worst is None:
        return
    run, sent, excess = worst
    service = _model(msg("ev.service_rate"), rate.req_s, "req/s", msg("detail.service_rate", clients=q(rate.clients, "requests")))
    args = dict(rate=q(run.offered_request_rate, "req/s"), service=q(rate.req_s, "req/s"))
    left_over = msg("reason.open_loop_excess", sent=sent, excess=q(round(excess), "requests")) if sent else msg("reason.open_loop_no_count")
    measured = run.request_throughput_req_s is not None and run.achieved_concurrency is not None
    where = run.source.split("/")[-1]
    evidence = [service]
    if run.request_throughput_req_s is not None:
        evidence.append(_file(msg("ev.completed_rate"), run.request_throughput_req_s, "req/s", where=where, load=run.load_label))
    if run.achieved_concurrency is not None:
        evidence.append(_file(msg("ev.in_flight"), round(run.achieved_concurrency, 1), "requests", msg("detail.in_flight", clients=q(rate.clients, "requests")), where=where, load=run.load_label))
    if measured:
        reason = msg("reason.open_loop_overload", **args, excess=left_over, completed=q(run.request_throughput_req_s, "req/s"), in_flight=q(round(run.achieved_concurrency), "requests"))
    else:
        reason = msg("reason.open_loop_overload_model", **args, excess=left_over)
    board.add("queueing", 3.0 if measured else 2.0, *evidence, reason=reason, recommendation=_rate_below(rate.req_s))


def _rate_below(service: float) -> Recommendation:
    below = float(f"{RATE_SHARE * service:.3g}")
    return Recommendation(
        change=msg("rec.rate_below_service", rate=q(below, "req/s"), share=q(round(100 * RATE_SHARE), "%"), service=q(service, "req/s")),
        flag=f"vllm bench serve --request-rate {below:g}",
        verify="sum(vllm:num_requests_waiting)\nhistogram_quantile(0.5, sum by (le) (rate(vllm:request_queue_time_seconds_bucket[5m])))",
    )


def _far_better_than_modelled(run: BenchmarkRun, predicted: BenchmarkRun | None) -> bool:
    """The measured time per output token at this load is under half the model's: the model's
    picture of this load (and so its service rate) is too slow to reason from."""
    measured = run.tpot_ms.median if run.tpot_ms is not None else None
    modelled = predicted.tpot_ms.median if predicted is not None and predicted.tpot_ms is not None else None
    return bool(measured and modelled and measured < 0.5 * modelled)


RATIO_FIGURES = (
    ("output_throughput_tok_s", "tok/s", True),
    ("request_output_tok_s", "tok/s", True),
    ("request_decode_tok_s", "tok/s", True),
    ("ttft_ms", "ms", False),
    ("tpot_ms", "ms", False),
)


def _figure(run: BenchmarkRun, attr: str) -> float | None:
    value = getattr(run, attr)
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return value.mean if value.mean is not None else value.median


def _said_by(run: BenchmarkRun) -> dict:
    """Where a measured run's figure comes from, as Evidence fields: the case's own observations
    (reported) or a benchmark file (measured, by its name)."""
    if run.format == "observations":
        return dict(kind="reported", origin="case", where=None)
    return dict(kind="measured", origin="file", where=run.source.split("/")[-1])


def _ceiling_figure(ceiling: BenchmarkRun, attr: str, higher_better: bool) -> float | None:
    """The ceiling's figure a measured mean cannot pass: a latency's fastest request, not its mean. The
    simulation sends its clients' first requests together, so its mean TTFT carries that first wave in a
    share a longer real run does not (a reviewer's find: 220 ms at 50 clients read as 2.4x "faster than
    the ceiling" of 518 ms mean, where the ceiling's requests took from about 30 ms). No request's
    latency is below the fastest one at the hardware's peak, so no mean is."""
    value = getattr(ceiling, attr)
    if not higher_better and value is not None and not isinstance(value, (int, float)) and value.min:
        return value.min
    return _figure(ceiling, attr)


def _match(run: BenchmarkRun, pool: list[BenchmarkRun]) -> BenchmarkRun | None:
    for p in pool:
        if run.offered_concurrency and p.offered_concurrency == run.offered_concurrency:
            return p
        if run.offered_concurrency is None and run.offered_request_rate is not None and p.offered_request_rate == run.offered_request_rate:
            return p
    return None


#: A measured output throughput within this share of what the offered rate sends (rate x output tokens)...
RATE_BOUND_WITHIN = 0.2
#: ...with the model's running requests at that rate under this share of the clients allowed (or the batch
#: cap): the client's clock, not the server, set the throughput.
RATE_BOUND_RUNNING = 0.5


def _rate_bound(inputs: DiagnosisInputs, board: Board) -> None:
    """Requests sent on a clock slower than the server completes them: the throughput measured is the
    rate times the output length, whatever the server could do (a reviewer's find: `--request-rate 2
    --max-concurrency 100` measured 510 tok/s and was read as 100 clients on a slow H100). The
    opposite of ``_open_loop_overload``."""
    import math

    engine, out = inputs.engine, inputs.output_len
    if engine is None or not out:
        return
    for run in inputs.measured:
        rate, measured = run.offered_request_rate, run.output_throughput_tok_s
        if rate is None or not math.isfinite(rate) or rate <= 0 or not measured:
            continue
        sent = rate * out
        if abs(measured / sent - 1.0) > RATE_BOUND_WITHIN:
            continue
        predicted = _match(run, inputs.predicted)
        view = predicted.server_view if predicted is not None else None
        caps = [x for x in (run.offered_concurrency, engine.config.max_num_seqs) if x]
        allowed = min(caps) if caps else None
        if view is None or view.running_mean is None or allowed is None or view.running_mean > RATE_BOUND_RUNNING * allowed:
            continue
        evidence = [
            Evidence(**_said_by(run), label=msg("figure.output_throughput_tok_s"), load=run.load_label, value=round(measured, 1), unit="tok/s",
                     detail=msg("detail.rate_sends", rate=q(rate, "req/s"), sent=q(round(sent, 1), "tok/s"))),
            _model(msg("ev.running"), round(view.running_mean, 1), "requests", load=run.load_label),
        ]
        reason = msg("reason.rate_bound", rate=q(rate, "req/s"), output=q(out, "tokens"), sent=q(round(sent, 1), "tok/s"), measured=q(round(measured, 1), "tok/s"),
                     running=q(round(view.running_mean, 1), "requests"), allowed=allowed)
        board.add("benchmark_methodology", 2.0, *evidence, reason=reason)
        return


def _beyond_ceiling(inputs: DiagnosisInputs, board: Board) -> None:
    """A measured figure better than the hardware ceiling is evidence about the measurement.

    A per-request speed the user computed with an unstated formula is compared with the most
    favourable definition (decode speed, which leaves out queueing and TTFT); when the figure is
    impossible as tokens / end-to-end time but matches the model's decode speed, the finding says
    which definition it fits."""
    hits = []
    fits: list[Msg] = []
    for run in inputs.measured:
        best = _match(run, inputs.ceiling)
        if best is None:
            continue
        for attr, unit, higher_better in RATIO_FIGURES:
            m, c = _figure(run, attr), _ceiling_figure(best, attr, higher_better)
            if attr == "request_output_tok_s" and run.format == "observations":
                fitted = _definition_fit(run, best, _match(run, inputs.predicted), m)
                if fitted is not None:
                    fits.append(fitted)
                    continue
                c = max(c or 0.0, _figure(best, "request_decode_tok_s") or 0.0) or None
            if not m or not c:
                continue
            ratio = m / c if higher_better else c / m
            if ratio > 1.3:
                hits.append(
                    Evidence(
                        **_said_by(run),
                        label=msg(f"figure.{attr}"),
                        load=run.load_label,
                        value=round(m, 1),
                        unit=unit,
                        detail=msg("detail.beyond_ceiling", ratio=q(ratio, "x"), ceiling=q(c, unit)),
                    )
                )
    if hits:
        board.add("benchmark_methodology", 3.0, *hits[:4], reason=msg("reason.beyond_ceiling"))
    for reason in fits[:2]:
        board.add("benchmark_methodology", 1.0, reason=reason)


def _definition_fit(run: BenchmarkRun, ceiling: BenchmarkRun, predicted: BenchmarkRun | None, value: float | None) -> Msg | None:
    """The user's per-request speed, stated as tokens / elapsed time, may be impossible under that
    definition on this hardware (above the ceiling's output speed, which includes TTFT and queueing)
    while it fits the speed after the first token (decode speed, queue excluded). Say which."""
    if not value or predicted is None or (run.offered_concurrency or 0) < 2:
        return None
    out_ceiling = _figure(ceiling, "request_output_tok_s")
    decode_ceiling = _figure(ceiling, "request_decode_tok_s")
    decode_model = _figure(predicted, "request_decode_tok_s")
    if not out_ceiling or not decode_ceiling or not decode_model:
        return None
    if value <= 1.3 * out_ceiling or value > 1.3 * decode_ceiling or not 0.6 <= value / decode_model <= 1.6:
        return None
    return msg(
        "reason.definition_fit", load=run.load_label, value=q(value, "tok/s"), ceiling=q(out_ceiling, "tok/s"),
        decode=q(decode_model, "tok/s"),
    )


#: A running count measured at this share of the clients or more: every client generates at once, so
#: concurrency x per-request speed is the throughput (a reviewer's find: 50 running of 50 was told only 47 ran).
FORMULA_HOLDS = 0.95


def _throughput_formula(inputs: DiagnosisInputs, board: Board) -> None:
    """Throughput reported as concurrency x per-request speed assumes every client generates at once."""
    for obs in inputs.observations:
        c, per, total = obs.concurrency, obs.output_tok_s_per_request, obs.output_tok_s_total
        if not (c and per and total) or c < 2:
            continue
        if abs(total - c * per) / total > 0.05:
            continue
        if obs.num_requests_running is not None and obs.num_requests_running >= FORMULA_HOLDS * c:
            continue  # the server's own count has them all running: the formula's assumption was measured to hold
        pred = _match_point(inputs.predicted, c)
        running = _view(pred).running_mean if pred else None
        load = f"c={c}"
        ev = [Evidence(kind="reported", origin="case", label=msg("figure.output_throughput_tok_s"), load=load, value=float(total), unit="tok/s",
                       detail=msg("detail.c_times_speed", c=c, per=q(per, "tok/s")))]
        args = dict(total=q(total, "tok/s"), c=c, per=q(per, "tok/s"))
        if running:
            ev.append(_model(msg("ev.generating"), round(running, 1), "requests", msg("detail.model_throughput", tput=q(pred.output_throughput_tok_s or 0, "tok/s")), load=load))
            reason = msg("reason.throughput_formula_running", running=q(round(running), "requests"), tput=q(pred.output_throughput_tok_s or 0, "tok/s"), **args)
        else:
            reason = msg("reason.throughput_formula", **args)
        board.add("benchmark_methodology", 2.0, *ev, reason=reason)
        return


def _match_point(runs: list[BenchmarkRun], concurrency: int) -> BenchmarkRun | None:
    return next((r for r in runs if r.offered_concurrency == concurrency), None)


def _chunked_prefill(inputs: DiagnosisInputs, board: Board) -> None:
    if not any(r.offered_concurrency for r in inputs.predicted):
        _chunked_prefill_unsimulated(inputs, board)
        return
    for run in sorted(inputs.predicted, key=lambda r: -(r.offered_concurrency or 0)):
        sv = _view(run)
        share, mixed, dec = sv.share_of_time_in_mixed_steps, sv.mixed_step_ms_mean, sv.decode_only_step_ms_mean
        if not (share and mixed and dec) or (run.offered_concurrency or 0) < 2:
            continue
        if share < 0.15 or mixed < 3 * dec:
            continue
        budget = inputs.engine.config.max_num_batched_tokens
        whole = inputs.engine.config.enable_chunked_prefill is False  # each prompt in one step; no smaller budget below a prompt
        board.add(
            "chunked_prefill_interference",
            2.0,
            _model(msg("ev.prefill_step"), round(mixed, 1), "ms", msg("detail.vs_decode_step", dec=q(dec, "ms"))),
            _model(msg("ev.mixed_share"), float(round(100 * share)), "%", load=run.load_label),
            reason=msg(
                "reason.unchunked_prefill" if whole else "reason.chunked_prefill", input=q(inputs.input_len, "tokens"), budget=q(budget, "tokens"),
                mixed=q(round(mixed), "ms"), dec=q(round(dec), "ms"), load=run.load_label, share=q(round(100 * share), "%"),
            ),
            recommendation=None if whole else _smaller_budget(budget),
        )
        return


def _chunked_prefill_unsimulated(inputs: DiagnosisInputs, board: Board) -> None:
    """Where no load was simulated (no output length): the stall one chunk of a new long prompt puts on
    every running stream, from the step times alone, at the client count the words give ("6 users each
    sending 20k-token documents ... it freezes for a while mid-answer": a new user's find, answered with
    the API server's CPU). How often such steps come needs the simulation; that each one stalls the
    others by several decode steps does not."""
    from .report_facts import highest_concurrency

    engine, length = inputs.engine, inputs.input_len
    clients = highest_concurrency(inputs)
    cfg = engine.config
    if not length or not clients or clients < 2 or cfg.enable_chunked_prefill is False or not inputs.deployment.is_vllm:
        return
    budget = cfg.max_num_batched_tokens
    if not budget or length < 2 * budget:  # a prompt of one or two chunks stalls others once or twice: the rest of the model's business
        return
    running = clients - 1
    dec = engine.decode_step_ms(running, length)
    mixed = engine.mixed_step_ms(running, length, budget, length // 2)
    if not dec or dec <= 0 or mixed < 3 * dec:
        return
    chunks = -(-length // budget)
    board.add(
        "chunked_prefill_interference",
        2.0,
        _model(msg("ev.prefill_step"), round(mixed, 1), "ms", msg("detail.vs_decode_step", dec=q(dec, "ms"))),
        reason=msg("reason.chunked_prefill_stall", input=q(length, "tokens"), budget=q(budget, "tokens"), chunks=chunks,
                   mixed=q(round(mixed), "ms"), dec=q(round(dec, 1), "ms"), running=q(running, "requests")),
        recommendation=_smaller_budget(budget),
    )


def _smaller_budget(budget: int) -> Recommendation:
    """A quarter of the step budget (512 at least): each chunk's stall shorter, the prompt in more steps."""
    smaller = max(512, budget // 4)
    return Recommendation(
        change=msg("rec.smaller_budget", tokens=smaller), flag=f"--max-num-batched-tokens {smaller}", whatif=[f"max_num_batched_tokens={smaller}"],
        cost=msg("cost.smaller_budget"), verify="histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m])))",
    )


#: A measured TTFT this many times its prompt's prefill alone is mostly time spent before the prefill
#: ran, where the wait is at least QUEUE_WAIT_MS (a 0.23 s TTFT beside a 0.02 s prefill is a busy
#: engine's ordinary interleaving, not a queue).
QUEUE_TTFT_RATIO = 10.0
QUEUE_WAIT_MS = 2000.0


def _ttft_wait(inputs: DiagnosisInputs, board: Board) -> None:
    """A measured TTFT many times what one prompt of that length takes alone (the model's prefill and
    the intake delay fitted on real vLLM) is time the request waited for the engine: in the server's
    queue (batch cap, KV blocks, token budget) or the client's, before its prefill started. A
    reviewer's find: 500 prompts of 2K tokens sent at once to a 7B on an L40S, TTFT 45 s against a
    0.2 s prefill, were answered "the release regressed". A TTFT with no TPOT or ITL beside it may be
    a non-streamed reply's whole time, so it is left to the other rules."""
    if not inputs.input_len:
        return
    alone_ms = inputs.engine.first_token_alone_ms(inputs.input_len)
    if alone_ms <= 0:
        return
    worst = None
    for run in inputs.measured:
        ttft = (run.ttft_ms.median or run.ttft_ms.mean) if run.ttft_ms else None
        if not ttft or not (_figure(run, "tpot_ms") or _figure(run, "itl_ms")):  # streamed: its TTFT is the first token's
            continue
        if ttft >= QUEUE_TTFT_RATIO * alone_ms and ttft - alone_ms >= QUEUE_WAIT_MS and (worst is None or ttft > worst[1]):
            worst = (run, ttft)
    if worst is None:
        return
    run, ttft = worst
    alone = q(round(alone_ms / 1000, 2), "s")
    ev = _model(msg("ev.prefill_one", tokens=q(inputs.input_len, "tokens")), round(alone_ms / 1000, 2), "s",
                msg("detail.ttft_measured", ttft=q(round(ttft / 1000, 2), "s")), load=run.load_label if run.offered_concurrency or run.offered_request_rate else None)
    share = min(99, round(100 * (1 - alone_ms / ttft)))  # "about 100%" would say it never computed
    board.add("queueing", 2.0, ev, reason=msg("reason.ttft_wait", ttft=q(round(ttft / 1000, 2), "s"), alone=alone, share=q(share, "%")))


def _prefill_compute(inputs: DiagnosisInputs, board: Board) -> None:
    if not inputs.input_len or inputs.input_len < 4000:
        return
    t = inputs.engine.prefill_alone_ms(inputs.input_len) / 1000
    measured = [r.ttft_ms.mean or r.ttft_ms.median for r in inputs.measured if r.ttft_ms and (r.ttft_ms.mean or r.ttft_ms.median)]
    label = msg("ev.prefill_one", tokens=q(inputs.input_len, "tokens"))
    ev = _model(label, round(t, 2), "s", msg("detail.idle_server"))
    weight = 1.0
    if measured:
        ratio = min(measured) / 1000 / t
        if 0.4 <= ratio <= 2.5:
            weight = 2.5
            ev = _model(label, round(t, 2), "s", msg("detail.lowest_ttft", ttft=q(min(measured) / 1000, "s")))
    board.add("prefill_compute", weight, ev, reason=msg("reason.prefill_compute", tokens=q(inputs.input_len, "tokens"), time=q(round(t, 1), "s")))


def _decode_bandwidth(inputs: DiagnosisInputs, board: Board) -> None:
    single = [r for r in inputs.measured if r.offered_concurrency == 1]
    pred = _match_point(inputs.predicted, 1)
    if not single or pred is None:
        return
    for run in single:
        for attr in ("request_decode_tok_s", "request_output_tok_s"):
            m, p = _figure(run, attr), _figure(pred, attr)
            if m and p and 0.7 <= m / p <= 1.4:
                board.add(
                    "decode_bandwidth",
                    1.5,
                    _model(msg("ev.single_speed"), round(p, 1), "tok/s", msg("detail.measured_value", value=q(m, "tok/s"))),
                    reason=msg("reason.decode_bandwidth", model=q(round(p), "tok/s"), measured=q(round(m), "tok/s")),
                )
                return


#: Host-to-GPU bandwidth of a PCIe x16 link per direction by generation, GB/s (the PCI-SIG rates: 8, 16
#: and 32 GT/s per lane with 128b/130b coding, x16): an upper bound on what --cpu-offload-gb streams.
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


def _cpu_offload(inputs: DiagnosisInputs, board: Board) -> None:
    """--cpu-offload-gb keeps that many GB of each GPU's weights in host memory, and every forward pass
    copies them over PCIe: at least gb / link bandwidth per step, which bounds every request's decode
    speed (a reviewer's find: 12 tok/s of a 32B on two H100s with --cpu-offload-gb 4 was read as a KV
    cache sized too small; 4 GB over a Gen5 link is at least 63 ms a step, 16 tok/s at most)."""
    gb = inputs.engine_args.cpu_offload_gb
    gen = inputs.engine.gpu.pcie_gen
    if not gb or gb <= 0 or gen not in PCIE_X16_GBS:
        return
    link = PCIE_X16_GBS[gen]
    copy_ms = 1000.0 * gb / link
    from .agreement import decode_context

    step_ms = inputs.engine.decode_step_ms(1, decode_context(inputs))
    bound = 1000.0 / (copy_ms + step_ms)
    ev = _model(msg("ev.offload_copy"), round(copy_ms, 1), "ms", msg("detail.offload_copy", gb=q(gb, "GB"), gen=gen, link=q(link, "GB/s")))
    reason = msg("reason.cpu_offload", gb=q(gb, "GB"), gen=gen, link=q(link, "GB/s"), copy=q(round(copy_ms, 1), "ms"), bound=q(round(bound, 1), "tok/s"))
    board.add("decode_bandwidth", 3.0, ev, reason=reason, recommendation=Recommendation(change=msg("rec.cpu_offload")))


def _attention_kernel(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    if not inputs.input_len or inputs.input_len < 8000:
        return
    arch = (engine.gpu.architecture or "").lower()
    if not any(a in arch for a in PRE_HOPPER):
        return
    model = engine.model
    depth = inputs.input_len / 2
    attn = model.attention_flops_per_token(int(depth), mla_absorbed=False)
    linear = model.linear_flops_per_token()
    share = attn / (attn + linear)
    tokens = q(inputs.input_len, "tokens")
    board.add(
        "attention_backend",
        1.0 + 2.0 * share,
        _model(msg("ev.attention_share"), float(round(100 * share)), "%", msg("detail.no_fa3", tokens=tokens, gpu=engine.gpu.name, arch=engine.gpu.architecture or "")),
        reason=msg("reason.attention", tokens=tokens, share=q(round(100 * share), "%"), arch=engine.gpu.architecture or ""),
    )

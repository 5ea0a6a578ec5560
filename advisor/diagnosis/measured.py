"""Evidence from what was measured: observations, benchmark files, /metrics windows, server logs."""

from __future__ import annotations

import math
import re

from ..schema import BenchmarkRun, Evidence, Msg, Recommendation
from ..schema.bench import HELD_GAP_MS
from ..schema.message import msg, q, q_time
from ..schema.notes import PASTED_SOURCE
from .board import Board
from .inputs import DiagnosisInputs
from .report_facts import KV_FULL_PCT, RANDOM_PROMPT_HITS_PCT, SHARED_PREFIX_WORDS, budget_throttled, kv_ruled_out, max_num_seqs_in_effect, portable_attention_here, prefix_hit_rates, words_say


def detect_measured(inputs: DiagnosisInputs, board: Board) -> None:
    _observations(inputs, board)
    _workload(inputs, board)
    _bench_runs(inputs, board)
    _metrics(inputs, board)
    _server_logs(inputs, board)
    _shared_prefix_missed(inputs, board)
    _spec_decode_drafts(inputs, board)
    _logged_kv_fit(inputs, board)
    _unstreamed_ttft(inputs, board)
    if kv_ruled_out(inputs):  # busy, the cache under KV_ROOMY_PCT, nothing waiting or preempted
        board.exclude("kv_capacity")
        board.exclude("preemption")


def _unstreamed_ttft(inputs: DiagnosisInputs, board: Board) -> None:
    """A benchmark run that was not streamed, where its tool still wrote a "time to first token" equal to
    each request's whole latency (genai-perf, NVIDIA's tools: probe/bench/nvidia_metrics.py leaves it out):
    a TTFT complaint about such a run is about how it was measured (a new user's find: "TTFT at
    concurrency 50 is terrible" on a non-streamed export was answered with queueing)."""
    for run in inputs.measured:
        key = next((k for k in run.metadata if k.endswith("_time_to_first_token_ms_nonstreaming")), None)
        if key is None or not run.metadata.get(key):
            continue
        tool = key.removesuffix("_time_to_first_token_ms_nonstreaming")
        ttft = float(run.metadata[key])
        ev = _file(msg("ev.unstreamed_ttft", tool=tool), round(ttft, 1), "ms", where=run.source.split("/")[-1] if run.source else None, load=run.load_label)
        board.add("benchmark_methodology", 3.0, ev, reason=msg("reason.unstreamed_ttft", tool=tool, ttft=q_time(ttft, "ms")), lead=True)
        return


def _logged_kv_fit(inputs: DiagnosisInputs, board: Board) -> None:
    """Where no model of the deployment was built (no GPU or model the catalogs know: a log naming a local
    path, no card in the words), the KV pool the server log printed holds the workload's requests or not:
    "8k-token prompts at 48 clients" on a pool of 93,216 tokens is 11 running and 37 waiting (a new user's
    find: a planted run at --gpu-memory-utilization 0.35 was told to buy a second GPU). A memory fraction
    set below vLLM's default is named with what the same GPU holds at the default, from the log's own
    figures: the KV memory grows by the difference of the fractions times the card's memory."""
    from ..perf.defaults import default_gpu_memory_utilization
    from .report_facts import clients_beyond_fit
    from .setting_cost import ESTABLISHING_GAIN

    logs = [log for log in inputs.server_logs if log.kv_cache_tokens]
    if inputs.engine is not None or not inputs.input_len or len(logs) != 1 or not inputs.deployment.is_vllm:
        return  # with a model of the deployment, physics counts it (calibrated on the same log)
    log = logs[0]
    length = inputs.input_len + (inputs.output_len or 0)
    fit = log.kv_cache_tokens / length
    clients = clients_beyond_fit(inputs, fit)
    if clients is None:
        return
    src = log.source.split("/")[-1]
    ev = _file(msg("ev.kv_capacity"), float(log.kv_cache_tokens), "tokens", where=src, origin="log")
    board.add("kv_capacity", 3.0, ev, reason=msg(
        "reason.kv_fit_logged" if inputs.output_len else "reason.kv_fit_logged_min", length=q(length, "tokens"), tokens=q(log.kv_cache_tokens, "tokens"),
        fit=q(round(fit, 1), "requests"), clients=clients, waiting=q(max(0, round(clients - fit)), "requests")), lead=True)
    board.add("queueing", 1.5, ev, reason=msg("reason.queue_beyond_fit"))
    yours, total, kv_gib = inputs.engine_args.gpu_memory_utilization, log.gpu_memory_total_gib, log.kv_cache_memory_gib
    default = default_gpu_memory_utilization(inputs.deployment.vllm_version or log.vllm_version)
    if not yours or yours >= default or not total or not kv_gib or kv_gib <= 0:
        return
    default_tokens = int(log.kv_cache_tokens * (kv_gib + (default - yours) * total) / kv_gib)
    default_fit = default_tokens / length
    if default_fit < ESTABLISHING_GAIN * fit:
        return
    value = f"{default:g}"
    enough = msg("reason.memory_fraction_enough", clients=clients) if default_fit >= clients else ""
    board.add(
        "memory_config", 3.0,
        Evidence(kind="model", origin="log", where=src, label=msg("ev.kv_at_default", value=value), value=float(default_tokens), unit="tokens"),
        reason=msg("reason.memory_fraction_fit", yours=f"{yours:g}", tokens=q(log.kv_cache_tokens, "tokens"), fit=q(round(fit, 1), "requests"),
                   default=value, default_tokens=q(default_tokens, "tokens"), default_fit=q(round(default_fit, 1), "requests"), enough=enough),
        recommendation=Recommendation(change=msg("rec.setting_default", name="gpu_memory_utilization", value=value), flag=f"--gpu-memory-utilization {value}"),
    )


#: Tokens a draft adds to its step on average (accepted tokens per draft: vLLM's "mean acceptance length"
#: less one) under which the drafts cost more than they save: each step verifies every draft token, so a
#: step that gains under half a token is slower than one without drafts (28% of five-token drafts gains
#: 1.4 a step and pays at one request alone; a reviewer's find against a bar on the rate alone).
LOW_GAIN = 0.5


def _spec_decode_drafts(inputs: DiagnosisInputs, board: Board) -> None:
    """What speculative decoding's own counters say: the drafter proposed nothing while tokens were
    generated (a real H100 run of ngram on random prompts: 0 drafts, decode 46-71% slower than without
    it), or its drafts were mostly rejected. From /metrics (vllm:spec_decode_*, present only where
    speculative decoding is configured) or, failing that, the server log's "SpecDecoding metrics" lines."""
    drafted = accepted = generated = 0.0
    drafts: float | None = 0.0
    source = None
    for summary in inputs.metrics_summaries:
        for eng in summary.get("engines", []):
            if eng.get("spec_draft_tokens") is None:
                continue
            source = source or (summary.get("source") or "/metrics").split("/")[-1]
            drafted += eng.get("spec_draft_tokens") or 0.0
            accepted += eng.get("spec_accepted_tokens") or 0.0
            generated += eng.get("generation_tokens") or 0.0
            drafts = None if drafts is None or eng.get("spec_drafts") is None else drafts + eng["spec_drafts"]
    if source is None:  # a log's lines say how many were drafted; one with none says nothing (no drafts, or no stats)
        for log in inputs.server_logs:
            if log.spec_metric_lines:
                source = source or log.source.split("/")[-1]
                drafted += log.spec_drafted_tokens or 0
                accepted += log.spec_accepted_tokens or 0
                drafts = None if drafts is None or log.spec_drafts is None else drafts + log.spec_drafts
    if source is None:
        return
    if not drafted:
        if generated <= 0:
            return
        evidence = _file(msg("ev.spec_drafted"), 0.0, "tokens", msg("detail.spec_generated", generated=q(generated, "tokens")), where=source, origin="metrics")
        # what the counters measured goes before "speculative decoding is on" (the setting alone)
        board.add("spec_decode", 3.0, evidence, reason=msg("reason.spec_no_drafts", generated=q(generated, "tokens")), lead=True)
        return
    rate = accepted / drafted
    evidence = _file(msg("ev.spec_acceptance"), round(100 * rate, 1), "%", msg("detail.spec_accepted", accepted=q(accepted, "tokens"), drafted=q(drafted, "tokens")), where=source, origin="metrics")
    gain = accepted / drafts if drafts else None
    if gain is not None and gain < LOW_GAIN:
        reason = msg("reason.spec_low_acceptance", accepted=q(accepted, "tokens"), drafted=q(drafted, "tokens"), pct=q(round(100 * rate, 1), "%"), gain=round(gain, 2))
        board.add("spec_decode", 2.5, evidence, reason=reason, lead=True)


#: A value that changes with every request, named in the words or the pasted prompt code: placed before
#: the shared part of a prompt, it makes every block after it differ.
PER_REQUEST_VALUE = re.compile(r"datetime\.(?:now|utcnow)|time\.time\(\)|\btimestamps?\b|\buuid|request[ _-]?id|current (?:time|date)|当前时间|时间戳|请求\s*id", re.I)


def _shared_prefix_missed(inputs: DiagnosisInputs, board: Board) -> None:
    """Prompts the words (or the case) say share a prefix, and a hit rate under what chance gives
    (RANDOM_PROMPT_HITS_PCT): the cache finds no block to reuse, so the prefix differs from request to
    request before the shared part ends (a reviewer's find: a system prompt that starts with the time and
    a request id, 1.2% hits in the pasted stats lines, was "not shown yet: nothing measured")."""
    server, said = prefix_hit_rates(inputs)
    rates = server or said
    if not rates or max(rates) >= RANDOM_PROMPT_HITS_PCT:
        return
    w = inputs.case.workload if inputs.case else None
    if not ((w and w.shared_prefix_len) or inputs.shared_prefix_len or words_say(SHARED_PREFIX_WORDS, inputs)):
        return
    if not max(rates) and inputs.engine_args.enable_prefix_caching is False:
        return  # caching is off: the setting's own rules say so
    value, label = round(max(rates), 1), msg("ev.prefix_hit_rate")
    hit = q(value, "%")
    if not server:  # the case's own figure
        ev = _rep(label, value, "%")
    else:  # a log's stats lines (pasted ones are "your question") or a /metrics window
        logs = [log for log in inputs.server_logs if log.stats]
        where = logs[0].source if logs else None
        ev = _file(label, value, "%", where=where.split("/")[-1] if where else None, origin="log" if logs else "metrics")
    varies = words_say(PER_REQUEST_VALUE, inputs)
    board.add("prefix_cache", 2.0, ev, reason=msg("reason.shared_prefix_varies" if varies else "reason.shared_prefix_missed", hit=hit),
              recommendation=Recommendation(change=msg("rec.prefix_stable_first"),
                                            verify="rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])"))


def _rep(label: Msg, value=None, unit: str | None = None, detail: Msg | None = None, *, load: str | None = None) -> Evidence:
    return Evidence(kind="reported", origin="case", label=label, load=load, value=value, unit=unit, detail=detail)


def _observations(inputs: DiagnosisInputs, board: Board) -> None:
    obs = inputs.observations
    # one sentence for an idle GPU, from the lowest utilisation reported (two load points gave
    # "busy only 10%" and "busy only 0%" one after the other); every point still counts as evidence
    idlest = min((o for o in obs if o.gpu_util_pct is not None and o.gpu_util_pct < 70), key=lambda o: o.gpu_util_pct, default=None)
    caps = batch_caps(inputs) if any(o.num_requests_waiting for o in obs) else ()
    budget_running = _budget_bound_running(inputs)
    for o in obs:
        at = f"c={o.concurrency}" if o.concurrency else None
        if o.preemptions:
            board.add(
                "preemption",
                3.0,
                _rep(msg("ev.preemptions"), float(o.preemptions), load=at),
                reason=msg("reason.preemptions", n=float(o.preemptions)),
            )
            board.add("kv_capacity", 1.5, _rep(msg("ev.preemptions"), float(o.preemptions), load=at))
        if o.kv_cache_usage_pct is not None and o.kv_cache_usage_pct >= 90:
            board.add("kv_capacity", 2.0, _rep(msg("ev.kv_usage"), o.kv_cache_usage_pct, "%", load=at))
        if o.num_requests_waiting:
            board.add("queueing", 1.5, _rep(msg("ev.waiting"), float(o.num_requests_waiting), load=at))
            long_prompts = budget_running is not None and (o.num_requests_running or 0) >= 0.5 * budget_running
            _admission(board, o.num_requests_running, o.num_requests_waiting, caps, at, long_prompts=long_prompts)
        if o.gpu_util_pct is not None and o.gpu_util_pct < 70:
            board.add(
                "cpu_frontend",
                1.5,
                _rep(msg("ev.gpu_util"), o.gpu_util_pct, "%", load=at),
                reason=msg("reason.gpu_idle", pct=q(o.gpu_util_pct, "%")) if o is idlest else None,
            )
        if o.prefix_cache_hit_rate is not None and o.prefix_cache_hit_rate > 0.3:
            board.add("prefix_cache", 2.0, _rep(msg("ev.prefix_hit_rate"), o.prefix_cache_hit_rate, load=at))
        if o.request_rate is not None and (math.isinf(o.request_rate) or o.request_rate >= 50):
            board.add(
                "queueing",
                2.0,
                _rep(msg("ev.request_rate"), o.request_rate, "req/s"),
                reason=msg("reason.burst_rate", rate=q(o.request_rate, "req/s")),
            )
            board.add("benchmark_methodology", 1.0, _rep(msg("ev.request_rate"), o.request_rate, "req/s", msg("detail.burst")))
    # Speed per request falling as clients are added, while the server's total does not rise with them.
    points = sorted((o for o in obs if o.concurrency and o.output_tok_s_per_request), key=lambda o: o.concurrency)
    if len(points) >= 2 and points[0].concurrency == 1:
        base = points[0].output_tok_s_per_request
        worst = min(points[1:], key=lambda o: o.output_tok_s_per_request)
        if worst.output_tok_s_per_request < 0.75 * base:
            ev = _rep(msg("ev.speed_change", a="c=1", b=f"c={worst.concurrency}", before=q(base, "tok/s"), after=q(worst.output_tok_s_per_request, "tok/s")))
            board.add("chunked_prefill_interference", 0.5, ev)
            board.add("kv_capacity", 0.5, ev)
        last, prev = points[-1], points[-2]
        if prev.concurrency > 1 and last.concurrency >= 2 * prev.concurrency and last.output_tok_s_per_request >= 0.8 * prev.output_tok_s_per_request:
            board.add(
                "queueing",
                1.0,
                _rep(
                    msg("ev.speed_change", a=f"c={prev.concurrency}", b=f"c={last.concurrency}", before=q(prev.output_tok_s_per_request, "tok/s"), after=q(last.output_tok_s_per_request, "tok/s")),
                    detail=msg("detail.more_clients_same_speed"),
                ),
            )


#: Another engine's flag that caps the requests its scheduler runs at once, as a case file's flags
#: name it (SGLang's and TGI's serve commands are rewritten to vLLM's max_num_seqs before this).
BATCH_CAP_FLAGS = ("max_batch_size", "max-batch-size", "max_running_requests", "max-running-requests", "running_max_req_size")
#: The max_num_seqs values vLLM's releases default to on a GPU (perf/defaults.py), for a deployment
#: whose model or GPU is not known, so its own default cannot be told.
VLLM_DEFAULT_SEQS = (256, 1024)


def batch_caps(inputs: DiagnosisInputs) -> tuple[int, ...]:
    """The requests the scheduler may run at once: vLLM's max_num_seqs as set or as its version
    defaults on this GPU, or another engine's batch-cap flag (one value); when vLLM's default cannot
    be told, every value a release defaults to; empty when nothing is known."""
    dep = inputs.deployment
    if (dep.engine or "vllm").lower().startswith("vllm"):  # vLLM and its platform builds share the scheduler
        seqs = max_num_seqs_in_effect(inputs)
        return (seqs,) if seqs else VLLM_DEFAULT_SEQS
    for name in BATCH_CAP_FLAGS:
        value = dep.flags.get(name)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return (value,)
    return ()


#: The smallest per-step token budget vLLM defaults to with chunked prefill (perf/defaults.py).
SMALLEST_DEFAULT_BUDGET = 2048


def _budget_bound_running(inputs: DiagnosisInputs) -> float | None:
    """How many requests run when the step's token budget alone holds admission back: None when the
    prompts are short beside the budget (several start in one step), else by Little's law one new
    prompt per ``input_len / budget`` steps, each running its prefill steps and ``output_len`` decode
    steps: ``1 + output_len * budget / input_len`` (0 when the output length is not known: then the
    budget may explain any count). 8,000-token prompts with 500-token answers under a 2,048-token
    budget keep about 129 running: 4 running with 26 waiting is not the budget but the KV cache."""
    budget = _token_budget(inputs)
    if not inputs.input_len or inputs.input_len < budget / 2:
        return None
    if not inputs.output_len:
        return 0.0
    return 1 + inputs.output_len * budget / inputs.input_len


def _token_budget(inputs: DiagnosisInputs) -> int:
    """The step's token budget: as set, as the version defaults, or the smallest default."""
    if inputs.engine_args.max_num_batched_tokens:
        return inputs.engine_args.max_num_batched_tokens
    return inputs.engine.config.max_num_batched_tokens if inputs.engine is not None else SMALLEST_DEFAULT_BUDGET


def _admission(board: Board, running: float | None, waiting: float, caps: tuple[int, ...], at: str | None, *, long_prompts: bool) -> None:
    """Requests waited while some ran: the scheduler admits a waiting request unless the running ones
    fill the batch cap, the KV cache has no blocks for it, or the step's token budget is spent.
    Running at the cap names the cap. Running below every cap it can be names the KV cache, unless
    the prompts are long beside the budget (``long_prompts``: then each step starts about one prefill
    and the rest wait for the budget, as a real-vLLM run of 6,000-token prompts under a 2,048-token
    budget showed with the cache half empty). Between two possible defaults nothing is said. The
    metrics and log readers below make the same call from the server's own gauges."""
    if not running or not caps:
        return
    if running in caps:
        seqs = int(running)
        cause, weight, reason = "max_num_seqs_limit", 2.0, msg("reason.running_at_cap", seqs=seqs)
    elif running < min(caps) and not long_prompts:
        seqs = min(caps)
        cause, weight, reason = "kv_capacity", 1.5, msg("reason.running_below_cap", running=q(running, "requests"), seqs=seqs)
    else:
        return
    ev = _rep(msg("ev.running"), float(running), "requests", msg("detail.waiting_beside", waiting=q(waiting, "requests"), seqs=seqs), load=at)
    board.add(cause, weight, ev, reason=reason)


def _workload(inputs: DiagnosisInputs, board: Board) -> None:
    w = inputs.case.workload if inputs.case else None
    # identical prompts measure cache hits only where the server caches prefixes (a server run with
    # caching off recomputes them: setting_cost.py weighs that)
    caching = inputs.engine.config.enable_prefix_caching if inputs.engine is not None else inputs.engine_args.enable_prefix_caching is not False
    if caching and w and w.shared_prefix_len and w.input_len and w.shared_prefix_len >= 0.9 * w.input_len:
        ev = _rep(msg("ev.shared_prefix"), float(w.shared_prefix_len), "tokens", msg("detail.of_prompts", tokens=q(w.input_len, "tokens")))
        board.add("prefix_cache", 3.0, ev, reason=msg("reason.identical_prompts"))
        board.add("benchmark_methodology", 2.0, ev)


def _file(label: Msg, value=None, unit: str | None = None, detail: Msg | None = None, *, where: str | None, load: str | None = None, origin: str = "file") -> Evidence:
    if where == PASTED_SOURCE:  # lines pasted into the question: "your question", in the asker's language
        origin, where = "question", None
    return Evidence(kind="measured", origin=origin, where=where, label=label, load=load, value=value, unit=unit, detail=detail)


def _bench_runs(inputs: DiagnosisInputs, board: Board) -> None:
    for run in inputs.measured:
        if run.format == "observations":
            continue
        src = run.source.split("/")[-1]
        if run.failed:
            board.add("benchmark_methodology", 0.5, _file(msg("ev.failed"), float(run.failed), where=src, load=run.load_label))
        held = _stream_held(board, run, src)
        if not held and run.itl_ms and run.itl_ms.pct(99) and run.itl_ms.median and run.itl_ms.pct(99) > 5 * run.itl_ms.median:
            p99, p50 = run.itl_ms.pct(99), run.itl_ms.median
            board.add(
                "chunked_prefill_interference",
                1.5,
                _file(msg("ev.itl_ratio"), round(p99 / p50, 1), "x", msg("detail.itl", p99=q(p99, "ms"), p50=q(p50, "ms")), where=src, load=run.load_label),
            )
        if run.offered_request_rate is not None and math.isinf(run.offered_request_rate) and run.offered_concurrency is None:
            board.add("queueing", 1.0, _file(msg("ev.request_rate"), "inf", detail=msg("detail.all_at_once"), where=src))
        if any("prefix" in note.lower() or "seed" in note.lower() for note in run.notes):
            board.add("prefix_cache", 1.0, _file(msg("ev.loader_prefix_note"), where=src))


#: A run's chunks count as held when at least this share of its gaps is shorter than any engine step
#: (StreamDelivery), over at least MIN_STREAM_GAPS gaps. Half: other people's GPU runs have none, and a
#: stream held only now and then (a busy moment) still times the engine for most of its tokens.
HELD_SHARE = 0.5
MIN_STREAM_GAPS = 20

#: Where chunks are held: the direct measurement that tells proxy from API server, and nginx's fix.
STREAM_HELD_REC = Recommendation(
    change=msg("rec.stream_held"),
    flag="proxy_buffering off; proxy_http_version 1.1;",
    verify="vllm-advisor probe bench http://VLLM_HOST:8000 --concurrency 1 --num-prompts 8",
)


def _stream_held(board: Board, run: BenchmarkRun, src: str) -> bool:
    """Chunks released together (proxy buffering or a starved API server): True when found.

    From the per-request gaps where the file has them (StreamDelivery); else from a streamed run's
    summary: an ITL or TPOT median under the same 0.2 ms says the same of half its gaps or requests
    (genai-perf's and guidellm's per-request inter-token latency is (E2E - TTFT) / (tokens - 1)).
    Its ITL is then no step time: the ITL-spread check (chunked prefill) is skipped for the run."""
    sd = run.stream_delivery
    if sd is not None:
        if sd.gaps < MIN_STREAM_GAPS or sd.held_share < HELD_SHARE:
            return False
        ev = _file(msg("ev.stream_held", below=q(sd.held_below_ms, "ms")), float(round(100 * sd.held_share)), "%",
                   msg("detail.stream_held", held=sd.held_gaps, gaps=sd.gaps), where=src, load=run.load_label)
    elif (figure := _held_summary_figure(run)) is not None:
        name, median_ms = figure
        ev = _file(msg("ev.p50_below_step", figure=name, below=q(HELD_GAP_MS, "ms")), round(median_ms, 3), "ms",
                   where=src, load=run.load_label)
    else:
        return False
    board.add("cpu_frontend", 1.5, ev, reason=msg("reason.stream_held"), recommendation=STREAM_HELD_REC.model_copy(deep=True))
    board.add("benchmark_methodology", 1.0, ev)
    return True


def _held_summary_figure(run: BenchmarkRun) -> tuple[str, float] | None:
    """("ITL" or "TPOT", its median in ms) when a streamed run's median is under any engine step."""
    if run.streaming is not True or (run.output_len is not None and (run.output_len.mean or 0) <= 1):
        return None
    for name, dist in (("ITL", run.itl_ms), ("TPOT", run.tpot_ms)):
        if dist is not None and dist.median is not None and dist.median < HELD_GAP_MS:
            return name, dist.median
    return None


def _metrics(inputs: DiagnosisInputs, board: Board) -> None:
    throttled = budget_throttled(inputs) is not None
    for summary in inputs.metrics_summaries:
        for eng in summary.get("engines", []):
            tag = f"engine {eng.get('engine')}" if eng.get("engine") is not None else None

            def m(label, value=None, unit=None, detail=None):
                return _file(label, value, unit, detail, where=tag, origin="metrics")

            kv = (eng.get("kv_cache_usage_pct") or {}).get("max")
            waiting = (eng.get("requests_waiting") or {}).get("max")
            running = (eng.get("requests_running") or {}).get("max")
            if kv is not None and kv >= 90:
                board.add("kv_capacity", 2.0, m(msg("ev.metric_max", metric="vllm:kv_cache_usage_perc"), round(kv, 1), "%"))
            if waiting:
                board.add("queueing", 1.5, m(msg("ev.metric_max", metric="vllm:num_requests_waiting"), float(waiting)))
                if kv is not None and kv >= 90:
                    board.add("kv_capacity", 1.0, m(msg("ev.waiting_kv_full"), float(waiting)))
            # vLLM counts the requests that wait for scheduling capacity: KV blocks, the step's token
            # budget or max_num_seqs. With preemptions (only a full KV cache preempts) or the KV cache
            # seen full, and max_num_seqs not the limit, they wait for KV blocks. Samples of the KV usage
            # can miss its peaks between steps: a real-vLLM run under KV pressure showed 7 waiting for
            # capacity and 9 preemptions while every sample read 0% usage; a run of long prompts with
            # the cache under half full also had requests waiting for capacity (the token budget).
            capacity = (eng.get("requests_waiting_for_capacity") or {}).get("max")
            seqs = inputs.engine_args.max_num_seqs
            instances = summary.get("instances") or 1  # a fleet window sums running over its instances
            seqs_full = bool(running and seqs and running >= seqs * instances)
            if capacity and not seqs_full and (eng.get("preemptions") or (kv is not None and kv >= 90)):
                board.add("kv_capacity", 3.0, m(msg("ev.metric_max", metric='vllm:num_requests_waiting_by_reason{reason="capacity"}'), float(capacity)))
            if waiting and running and kv and (summary.get("instances") or 1) == 1:
                _kv_admission(board, m, kv, running, waiting)
            # counters that also count other runs (inputs._counters_beyond_benchmark): their averages
            # are the server's history; preemptions still say the KV pool ran out at some time
            history = bool(summary.get("counters_beyond_benchmark"))
            if not history:
                _queue_share(board, m, eng.get("queue_time_s") or {}, eng.get("ttft_s") or {}, "batched_tokens_limit" if throttled else "queueing")
            if eng.get("preemptions"):
                board.add("preemption", 1.0 if history else 3.0, m(msg("ev.metric_increase", metric="vllm:num_preemptions_total"), float(eng["preemptions"])))
            hit = eng.get("prefix_cache_hit_rate_pct")
            if hit is not None and hit > 30:
                board.add("prefix_cache", 2.0, m(msg("ev.prefix_hit_rate"), round(hit, 1), "%"))
            if seqs_full and waiting:
                detail = msg("detail.at_max_num_seqs", seqs=seqs, instances=instances) if instances > 1 else msg("detail.at_max_num_seqs_one", seqs=seqs)
                # one reading holds the three at once (a single dump: the maxima of a window may come
                # from different moments): the cap, not the memory, kept them out, as a stats line says
                at_once = summary.get("num_snapshots") == 1 and instances == 1 and kv is not None and kv < KV_FULL_PCT
                board.add("max_num_seqs_limit", 3.0 if at_once else 2.0, m(msg("ev.metric_max", metric="vllm:num_requests_running"), float(running), detail=detail),
                          reason=msg("reason.max_num_seqs_capped_metrics", seqs=seqs) if at_once else None, recommendation=_raise_cap(seqs, kv) if at_once else None)


def _queue_share(board: Board, m, queue: dict, ttft: dict, cause: str = "queueing") -> None:
    """How much of the server's TTFT was spent waiting in its queue (both from the server's own
    histograms over the same window): TTFT = queue + prefill (+ first decode step), so a large share
    means requests wait for admission rather than compute slowly; ``cause`` is what holds them there
    (the offered load, or a small step budget that admits them a few hundred tokens a step)."""
    if not queue.get("avg") or not ttft.get("avg") or not queue.get("count"):
        return
    share = min(1.0, queue["avg"] / ttft["avg"])
    if share < 0.25:
        return
    detail = msg("detail.queue_share", queue=q(queue["avg"] * 1e3, "ms"), ttft=q(ttft["avg"] * 1e3, "ms"))
    board.add(cause, 2.0 if share >= 0.5 else 1.0, m(msg("ev.queue_share"), float(round(share * 100)), "%", detail=detail))


def _kv_admission(board: Board, m, kv_max_pct: float, running_max: float, waiting_max: float) -> None:
    """Requests wait because the KV cache cannot hold one more of them.

    At the KV peak at most ``running_max`` requests ran, so each held at least
    ``kv_max / running_max`` of the cache; the cache then fits at most ``100 / that`` requests. When
    even that generous figure is below ``running_max + 1``, the next waiting request has no room:
    the queue is KV-bound, whatever the token budget or max_num_seqs allow.
    """
    share_pct = kv_max_pct / running_max
    fits = 100.0 / share_pct
    if fits >= running_max + 1:
        return
    whole = float(math.floor(fits + 1e-9))  # requests are whole: each holding 50.5% leaves room for one, not 1.98 (a new user's find)
    detail = msg("detail.kv_peak", kv=q(kv_max_pct, "%"), running=float(running_max), share=q(share_pct, "%"), fits=whole, waiting=float(waiting_max))
    board.add("kv_capacity", 3.0, m(msg("ev.kv_fits_length"), whole, "requests", detail=detail))
    board.add("queueing", 1.0, m(msg("ev.waiting_no_room"), float(waiting_max)))


#: The share of the KV cache a raised max_num_seqs is sized to fill, in percent: running requests
#: grow their KV with every token, and a pool sized to the brim preempts.
KV_FILL_PCT = 80.0


def _raise_cap(seqs: int, usage: float | None) -> Recommendation | None:
    """How far max_num_seqs can rise, from the server's own readings: ``seqs`` requests held the KV
    cache at ``usage`` percent (its highest reading while they ran), so about ``seqs * KV_FILL_PCT /
    usage`` fit at these lengths (a multiple of 16). None when no reading gave the usage or it leaves no room."""
    if not usage:
        return None
    room = int(seqs * KV_FILL_PCT / usage) // 16 * 16
    if room <= seqs:
        return None
    return Recommendation(
        change=msg("rec.raise_max_num_seqs", seqs=seqs, usage=q(round(usage, 1), "%"), room=q(room, "requests")),
        flag=f"--max-num-seqs {room}",
        whatif=[f"max_num_seqs={room}"],
        verify="vllm:num_requests_running\nvllm:num_requests_waiting\nvllm:kv_cache_usage_perc",
    )


#: Stats lines generating tokens, each with one request running and none waiting, from which a server
#: was given one request at a time (not one idle moment between two bursts).
ONE_AT_A_TIME_LINES = 3


def _one_at_a_time(inputs: DiagnosisInputs, board: Board, log, lg) -> None:
    """Every stats line of the log that generated tokens ran one request and had none waiting: the
    server was sent one request at a time, so its throughput is one request's speed (a new user's
    find: a gpt-oss log at "Running: 1 reqs" in all 93 lines was told to turn CUDA graphs on). Left
    out where the words themselves ask about one request alone."""
    from .report_facts import highest_concurrency

    busy = [s for s in log.stats if (s.generation_tok_s or 0) > 0 and s.running is not None]
    if len(busy) < ONE_AT_A_TIME_LINES or any(s.running > 1 or s.waiting for s in busy):
        return
    if highest_concurrency(inputs) == 1 or inputs.stated.single_tok_s:  # the words ask about one request alone
        return
    speed = max(s.generation_tok_s for s in busy)
    board.add(
        "benchmark_methodology",
        2.0,
        lg(msg("ev.one_running_lines"), float(len(busy)), "lines"),
        reason=msg("reason.one_at_a_time", lines=q(len(busy), "lines"), speed=q(round(speed, 1), "tok/s")),
    )


def _server_logs(inputs: DiagnosisInputs, board: Board) -> None:
    throttled = budget_throttled(inputs) is not None
    for log in inputs.server_logs:
        src = log.source.split("/")[-1]

        def lg(label, value=None, unit=None):
            return _file(label, value, unit, where=src, origin="log")

        if log.max_concurrency is not None and log.max_concurrency < 1:
            board.add("memory_config", 3.0, lg(msg("ev.max_concurrency_line"), log.max_concurrency, "x"))
        if log.preemption_warnings or log.preemptions_total:
            board.add("preemption", 3.0, lg(msg("ev.log_preemptions"), float(log.preemptions_total or log.preemption_warnings)))
        if log.enforce_eager:
            board.add("cuda_graph", 1.0, lg(msg("ev.setting", name="enforce_eager"), "True"))
        if portable_attention_here(log.attention_backend, inputs):
            # vLLM runs a portable kernel where it would pick FlashAttention (set by hand, or forced by the model or dtype)
            board.add("attention_backend", 1.0, lg(msg("ev.attention_backend_logged"), log.attention_backend))
        _one_at_a_time(inputs, board, log, lg)
        waits = [s for s in log.stats if s.waiting]
        if waits:
            full = [s for s in waits if s.kv_cache_usage_pct is not None and s.kv_cache_usage_pct >= 90]
            # with slots and blocks free and a small step budget, the queue is the budget's (report_facts.budget_throttled)
            board.add("batched_tokens_limit" if throttled else "queueing", 1.0, lg(msg("ev.stats_waiting"), float(len(waits)), "lines"))
            if full:
                board.add("kv_capacity", 2.0, lg(msg("ev.stats_waiting_kv_full"), float(len(full)), "lines"))
            # requests wait while the running ones fill max_num_seqs and the KV cache has room: the
            # cap, not the memory, admits no more (a real server at max_num_seqs 4 and 32 clients); one
            # line holds both at once, so it establishes the cause (the /metrics maxima may come apart).
            # The cap as set, or as the release defaults it (batch_caps: 256 running with requests
            # pending and the cache half empty is the default cap, where the flag was never set)
            caps = batch_caps(inputs)
            capped = [s for s in waits if s.running is not None and (s.running in caps or len(caps) == 1 and s.running >= caps[0])
                      and (s.kv_cache_usage_pct is None or s.kv_cache_usage_pct < KV_FULL_PCT)]
            if capped:
                seqs = caps[0] if len(caps) == 1 else capped[0].running
                # the line itself is the figure the answer quotes: running at the cap, waiting, the cache's usage
                worst = max(capped, key=lambda s: s.waiting or 0)
                reading = _file(msg("ev.running"), float(worst.running), "requests",
                                msg("detail.line_reading", waiting=q(worst.waiting or 0, "requests"), usage=q(worst.kv_cache_usage_pct, "%") if worst.kv_cache_usage_pct is not None else "?", lines=q(len(capped), "lines")),
                                where=src, origin="log")
                board.add("max_num_seqs_limit", 3.0, reading,
                          reason=msg("reason.max_num_seqs_capped", seqs=seqs),
                          recommendation=_raise_cap(seqs, max((s.kv_cache_usage_pct for s in capped if s.kv_cache_usage_pct), default=None)))

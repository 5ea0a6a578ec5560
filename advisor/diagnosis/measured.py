"""Evidence from what was measured: observations, benchmark files, /metrics windows, server logs."""

from __future__ import annotations

import math

from ..schema import Evidence
from .board import Board
from .inputs import DiagnosisInputs


def detect_measured(inputs: DiagnosisInputs, board: Board) -> None:
    _observations(inputs, board)
    _workload(inputs, board)
    _bench_runs(inputs, board)
    _metrics(inputs, board)
    _server_logs(inputs, board)


def _rep(label: str, value, unit: str | None = None, detail: str | None = None, source: str = "case file") -> Evidence:
    return Evidence(kind="reported", source=source, label=label, value=value, unit=unit, detail=detail)


def _observations(inputs: DiagnosisInputs, board: Board) -> None:
    obs = inputs.observations
    for o in obs:
        at = f" at c={o.concurrency}" if o.concurrency else ""
        if o.preemptions:
            board.add(
                "preemption",
                3.0,
                _rep(f"preemptions{at}", o.preemptions),
                reason=f"{o.preemptions:g} preemptions were counted: running requests lost their KV blocks and were recomputed from scratch.",
                reason_zh=f"记录到 {o.preemptions:g} 次抢占：运行中的请求失去 KV 块，只能从头重算。",
            )
            board.add("kv_capacity", 1.5, _rep(f"preemptions{at}", o.preemptions))
        if o.kv_cache_usage_pct is not None and o.kv_cache_usage_pct >= 90:
            board.add("kv_capacity", 2.0, _rep(f"KV cache usage{at}", o.kv_cache_usage_pct, "%"))
        if o.num_requests_waiting:
            board.add("queueing", 1.5, _rep(f"requests waiting{at}", o.num_requests_waiting))
        if o.gpu_util_pct is not None and o.gpu_util_pct < 70:
            board.add(
                "cpu_frontend",
                1.5,
                _rep(f"GPU utilisation{at}", o.gpu_util_pct, "%"),
                reason=f"The GPU is busy only {o.gpu_util_pct:g}% of the time: it waits for the CPU side (HTTP, tokenization, scheduling) between steps.",
                reason_zh=f"GPU 只有 {o.gpu_util_pct:g}% 的时间在忙：它在步与步之间等 CPU（HTTP、分词、调度）。",
            )
        if o.prefix_cache_hit_rate is not None and o.prefix_cache_hit_rate > 0.3:
            board.add("prefix_cache", 2.0, _rep(f"prefix-cache hit rate{at}", o.prefix_cache_hit_rate))
        if o.request_rate is not None and (math.isinf(o.request_rate) or o.request_rate >= 50):
            board.add(
                "queueing",
                2.0,
                _rep("offered request rate", o.request_rate, "req/s"),
                reason=f"An offered rate of {o.request_rate:g} req/s sends the requests almost at once: beyond the server's service rate they queue, and TTFT becomes the wait.",
                reason_zh=f"{o.request_rate:g} req/s 的发送速率几乎是同时发出所有请求：超过服务能力的部分只能排队，首 token 延迟就成了排队时间。",
            )
            board.add("benchmark_methodology", 1.0, _rep("offered request rate", o.request_rate, "req/s", "a burst measures queue wait, not serving speed"))
    # Speed per request falling as clients are added, while the server's total does not rise with them.
    points = sorted((o for o in obs if o.concurrency and o.output_tok_s_per_request), key=lambda o: o.concurrency)
    if len(points) >= 2 and points[0].concurrency == 1:
        base = points[0].output_tok_s_per_request
        worst = min(points[1:], key=lambda o: o.output_tok_s_per_request)
        if worst.output_tok_s_per_request < 0.75 * base:
            ev = _rep(
                "per-request speed",
                f"{base:g} -> {worst.output_tok_s_per_request:g}",
                "tok/s",
                f"from c=1 to c={worst.concurrency}",
            )
            board.add("chunked_prefill_interference", 0.5, ev)
            board.add("kv_capacity", 0.5, ev)
        last, prev = points[-1], points[-2]
        if prev.concurrency > 1 and last.concurrency >= 2 * prev.concurrency and last.output_tok_s_per_request >= 0.8 * prev.output_tok_s_per_request:
            board.add(
                "queueing",
                1.0,
                _rep("per-request speed", f"{prev.output_tok_s_per_request:g} -> {last.output_tok_s_per_request:g}", "tok/s", f"c={prev.concurrency} -> c={last.concurrency}: more clients, same speed"),
            )


def _workload(inputs: DiagnosisInputs, board: Board) -> None:
    w = inputs.case.workload if inputs.case else None
    if w and w.shared_prefix_len and w.input_len and w.shared_prefix_len >= 0.9 * w.input_len:
        ev = _rep("shared prefix", w.shared_prefix_len, "tokens", f"of {w.input_len:,}-token prompts")
        board.add(
            "prefix_cache",
            3.0,
            ev,
            reason="The prompts are (almost) identical, so after the first request the prefix cache serves nearly the whole prompt from GPU memory: the test measures cache hits, not prefill.",
            reason_zh="提示词几乎完全相同，第一个请求之后前缀缓存直接从显存提供几乎整个提示词：测到的是缓存命中，而不是预填充。",
        )
        board.add("benchmark_methodology", 2.0, ev)


def _bench_runs(inputs: DiagnosisInputs, board: Board) -> None:
    for run in inputs.measured:
        if run.format == "observations":
            continue
        src = run.source.split("/")[-1]
        if run.failed:
            board.add("benchmark_methodology", 0.5, Evidence(kind="measured", source=src, label="failed requests", value=run.failed))
        if run.itl_ms and run.itl_ms.pct(99) and run.itl_ms.median and run.itl_ms.pct(99) > 5 * run.itl_ms.median:
            board.add(
                "chunked_prefill_interference",
                1.5,
                Evidence(kind="measured", source=src, label=f"ITL p99 / p50 at {run.load_label}", value=round(run.itl_ms.pct(99) / run.itl_ms.median, 1), unit="x", detail=f"p99 {run.itl_ms.pct(99):.0f} ms vs p50 {run.itl_ms.median:.0f} ms"),
            )
        if run.offered_request_rate is not None and math.isinf(run.offered_request_rate) and run.offered_concurrency is None:
            board.add("queueing", 1.0, Evidence(kind="measured", source=src, label="request rate", value="inf", detail="all requests sent at once: TTFT includes queueing"))
        for note in run.notes:
            if "prefix" in note.lower() or "seed" in note.lower():
                board.add("prefix_cache", 1.0, Evidence(kind="measured", source=src, label="loader note", value=note))


def _metrics(inputs: DiagnosisInputs, board: Board) -> None:
    for summary in inputs.metrics_summaries:
        for eng in summary.get("engines", []):
            tag = f"engine {eng.get('engine')}" if eng.get("engine") is not None else "server"

            def m(label, value, unit=None, detail=None):
                return Evidence(kind="measured", source=f"metrics ({tag})", label=label, value=value, unit=unit, detail=detail)

            kv = (eng.get("kv_cache_usage_pct") or {}).get("max")
            waiting = (eng.get("requests_waiting") or {}).get("max")
            running = (eng.get("requests_running") or {}).get("max")
            if kv is not None and kv >= 90:
                board.add("kv_capacity", 2.0, m("vllm:kv_cache_usage_perc max", round(kv, 1), "%"))
            if waiting:
                board.add("queueing", 1.5, m("vllm:num_requests_waiting max", waiting))
                if kv is not None and kv >= 90:
                    board.add("kv_capacity", 1.0, m("requests waiting while KV is full", waiting))
            if waiting and running and kv and (summary.get("instances") or 1) == 1:
                _kv_admission(board, m, kv, running, waiting)
            _queue_share(board, m, eng.get("queue_time_s") or {}, eng.get("ttft_s") or {})
            if eng.get("preemptions"):
                board.add("preemption", 3.0, m("vllm:num_preemptions_total increase", eng["preemptions"]))
            hit = eng.get("prefix_cache_hit_rate_pct")
            if hit is not None and hit > 30:
                board.add("prefix_cache", 2.0, m("prefix-cache hit rate", round(hit, 1), "%"))
            seqs = inputs.engine_args.max_num_seqs
            instances = summary.get("instances") or 1  # a fleet window sums running over its instances
            if running and seqs and running >= seqs * instances and waiting:
                limit = f"max_num_seqs {seqs}" + (f" x {instances} instances" if instances > 1 else "")
                board.add("max_num_seqs_limit", 2.0, m("vllm:num_requests_running max", running, detail=f"= {limit} with requests waiting"))


def _queue_share(board: Board, m, queue: dict, ttft: dict) -> None:
    """How much of the server's TTFT was spent waiting in its queue (both from the server's own
    histograms over the same window): TTFT = queue + prefill (+ first decode step), so a large share
    means requests wait for admission rather than compute slowly."""
    if not queue.get("avg") or not ttft.get("avg") or not queue.get("count"):
        return
    share = min(1.0, queue["avg"] / ttft["avg"])
    if share < 0.25:
        return
    detail = f"queue {queue['avg'] * 1e3:,.0f} ms of TTFT {ttft['avg'] * 1e3:,.0f} ms (averages of vllm:request_queue_time_seconds and vllm:time_to_first_token_seconds)"
    board.add("queueing", 2.0 if share >= 0.5 else 1.0, m("share of TTFT spent queued on the server", round(share * 100), "%", detail=detail))


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
    detail = (f"KV peak {kv_max_pct:.1f}% with at most {running_max:g} running: >= {share_pct:.1f}% of the cache per request, "
              f"room for at most {fits:.1f} requests while {waiting_max:g} waited")
    board.add("kv_capacity", 3.0, m("requests the KV cache holds at this length", round(fits, 1), detail=detail))
    board.add("queueing", 1.0, m("requests waiting while the KV cache has no room for one more", waiting_max))


def _server_logs(inputs: DiagnosisInputs, board: Board) -> None:
    for log in inputs.server_logs:
        src = log.source.split("/")[-1]
        if log.max_concurrency is not None and log.max_concurrency < 1:
            board.add("memory_config", 3.0, Evidence(kind="measured", source=src, label="Maximum concurrency", value=log.max_concurrency, unit="x"))
        if log.preemption_warnings or log.preemptions_total:
            board.add("preemption", 3.0, Evidence(kind="measured", source=src, label="preemptions in the log", value=log.preemptions_total or log.preemption_warnings))
        if log.enforce_eager:
            board.add("cuda_graph", 1.0, Evidence(kind="measured", source=src, label="enforce_eager", value="True"))
        waits = [s for s in log.stats if s.waiting]
        if waits:
            full = [s for s in waits if s.kv_cache_usage_pct is not None and s.kv_cache_usage_pct >= 90]
            board.add("queueing", 1.0, Evidence(kind="measured", source=src, label="stats lines with waiting requests", value=len(waits)))
            if full:
                board.add("kv_capacity", 2.0, Evidence(kind="measured", source=src, label="waiting while KV cache >= 90%", value=len(full), unit="stats lines"))

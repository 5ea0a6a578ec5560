"""Evidence from the performance model: what this hardware and scheduler can and cannot produce."""

from __future__ import annotations

from ..schema import BenchmarkRun, Evidence, Recommendation
from .board import Board
from .inputs import DiagnosisInputs

PRE_HOPPER = ("ampere", "ada", "turing", "volta")


def _model(label: str, value, unit: str | None = None, detail: str | None = None) -> Evidence:
    return Evidence(kind="model", source="model", label=label, value=value, unit=unit, detail=detail)


def detect_physics(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    if engine is None:
        return
    mem = engine.memory
    if not mem.fits:
        board.add(
            "memory_config",
            3.0,
            _model("KV cache per GPU", round(mem.kv_cache_gib, 2), "GiB", "; ".join(mem.notes)),
            reason="After weights, activations and overheads, too little memory is left for the KV cache at these settings.",
            reason_zh="扣除权重、激活和其他开销后，在当前配置下留给 KV cache 的显存太少。",
        )
        board.add("kv_capacity", 1.5, _model("Maximum concurrency", round(mem.max_concurrency, 2), "x"))
    _profiling_pass(inputs, board)
    _kv_fit(inputs, board)
    _beyond_ceiling(inputs, board)
    _throughput_formula(inputs, board)
    _chunked_prefill(inputs, board)
    _prefill_compute(inputs, board)
    _decode_bandwidth(inputs, board)
    _attention_kernel(inputs, board)


def _profiling_pass(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    mem, cfg = engine.memory, engine.config
    if cfg.enable_chunked_prefill or mem.kv_cache_gib <= 0:
        return
    share = mem.activation_peak_gib / (mem.activation_peak_gib + mem.kv_cache_gib)
    if share < 0.15:
        return
    ev = _model("activation peak at start-up", round(mem.activation_peak_gib, 2), "GiB", f"profiling pass at max_num_batched_tokens = {cfg.max_num_batched_tokens:,} (chunked prefill off)")
    board.add(
        "batched_tokens_limit",
        2.0,
        ev,
        reason=f"With chunked prefill off, max_num_batched_tokens equals max_model_len ({cfg.max_num_batched_tokens:,}), and the start-up profiling pass at that many tokens reserves {mem.activation_peak_gib:.1f} GiB of activations that the KV cache then lacks.",
        reason_zh=f"分块预填充关闭时 max_num_batched_tokens 等于 max_model_len（{cfg.max_num_batched_tokens:,}），启动时按这么多 token 做的显存预估会占去 {mem.activation_peak_gib:.1f} GiB 激活显存，KV cache 就少了这么多。",
    )
    board.add("memory_config", 1.5, ev)


def _kv_fit(inputs: DiagnosisInputs, board: Board) -> None:
    engine = inputs.engine
    mem = engine.memory
    if not inputs.input_len:
        return
    length = inputs.input_len + (inputs.output_len or 0)
    fit = mem.requests_that_fit(length)
    over = [r for r in inputs.predicted if r.offered_concurrency and r.offered_concurrency > 1.1 * fit]
    if not over:
        return
    top = max(over, key=lambda r: r.offered_concurrency)
    md = top.metadata
    kv_ev = _model(
        "KV cache capacity",
        mem.kv_cache_tokens,
        "tokens",
        f"{mem.kv_bytes_per_token / 1024:.0f} KiB per token per GPU; = {fit:.1f} requests of {length:,} tokens",
    )
    run_ev = _model(
        f"requests running at {top.load_label}",
        round(md.get("server_running_mean") or 0, 1),
        "requests",
        f"{md.get('server_waiting_mean', 0):.0f} waiting on average",
    )
    board.add(
        "kv_capacity",
        3.0,
        kv_ev,
        run_ev,
        reason=(
            f"Each request of {length:,} tokens needs {length * mem.kv_bytes_per_token / 2**30:.1f} GiB of KV cache per GPU; the cache holds "
            f"{mem.kv_cache_tokens:,} tokens, so only about {fit:.1f} requests run at once. With {top.offered_concurrency} clients, "
            f"about {md.get('server_running_mean', 0):.0f} run and the rest wait in the queue."
        ),
        reason_zh=(
            f"每个 {length:,} token 的请求在每张卡上需要 {length * mem.kv_bytes_per_token / 2**30:.1f} GiB KV cache；KV cache 共能放 {mem.kv_cache_tokens:,} 个 token，"
            f"所以同时只能跑约 {fit:.1f} 个请求。{top.offered_concurrency} 个并发客户端中，约 {md.get('server_running_mean', 0):.0f} 个在运行，其余都在排队。"
        ),
    )
    board.add(
        "queueing",
        1.5,
        run_ev,
        reason="The clients beyond what fits are not being served slowly: they wait for a request to finish and free its KV blocks.",
        reason_zh="超出容量的客户端并不是在“慢慢生成”，而是在排队等前面的请求结束、释放 KV 块。",
    )
    if len(over) >= 2:
        loads = sorted(over, key=lambda r: r.offered_concurrency)
        lo, hi = loads[0], loads[-1]
        r_lo, r_hi = lo.metadata.get("server_running_mean") or 0, hi.metadata.get("server_running_mean") or 0
        board.add(
            "queueing",
            0.5,
            _model(f"requests running at {lo.load_label} and {hi.load_label}", f"{r_lo:.1f} and {r_hi:.1f}", "requests"),
            reason=(
                f"That is why {hi.offered_concurrency} clients look like {lo.offered_concurrency}: in both cases about {r_hi:.0f} requests generate "
                "while the others wait, so each running request sees the same engine steps and the same speed; more clients only lengthen the queue."
            ),
            reason_zh=(
                f"这也是 {hi.offered_concurrency} 并发和 {lo.offered_concurrency} 并发看起来差不多的原因：两种情况下同时在生成的都只有约 {r_hi:.0f} 个请求，"
                "其余都在排队，正在运行的请求经历的是同样的引擎步骤、同样的速度；客户端再多，也只是把队伍排得更长。"
            ),
        )


RATIO_FIGURES = (
    ("output throughput", "output_throughput_tok_s", "tok/s", True),
    ("per-request output speed", "request_output_tok_s", "tok/s", True),
    ("per-request decode speed", "request_decode_tok_s", "tok/s", True),
    ("TTFT", "ttft_ms", "ms", False),
    ("TPOT", "tpot_ms", "ms", False),
)


def _figure(run: BenchmarkRun, attr: str) -> float | None:
    value = getattr(run, attr)
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return value.mean if value.mean is not None else value.median


def _match(run: BenchmarkRun, pool: list[BenchmarkRun]) -> BenchmarkRun | None:
    for p in pool:
        if run.offered_concurrency and p.offered_concurrency == run.offered_concurrency:
            return p
        if run.offered_concurrency is None and run.offered_request_rate is not None and p.offered_request_rate == run.offered_request_rate:
            return p
    return None


def _beyond_ceiling(inputs: DiagnosisInputs, board: Board) -> None:
    """A measured figure better than the hardware ceiling is evidence about the measurement.

    A per-request speed the user computed with an unstated formula is compared with the most
    favourable definition (decode speed, which leaves out queueing and TTFT)."""
    hits = []
    for run in inputs.measured:
        best = _match(run, inputs.ceiling)
        if best is None:
            continue
        for label, attr, unit, higher_better in RATIO_FIGURES:
            m, c = _figure(run, attr), _figure(best, attr)
            if attr == "request_output_tok_s" and run.format == "observations":
                c = max(c or 0.0, _figure(best, "request_decode_tok_s") or 0.0) or None
            if not m or not c:
                continue
            ratio = m / c if higher_better else c / m
            if ratio > 1.3:
                hits.append(
                    Evidence(
                        kind="reported" if run.format == "observations" else "measured",
                        source=run.source.split("/")[-1],
                        label=f"{label} at {run.load_label}",
                        value=round(m, 1),
                        unit=unit,
                        detail=f"{ratio:.1f}x beyond the model's hardware ceiling of {c:.1f} {unit}",
                    )
                )
    if hits:
        board.add(
            "benchmark_methodology",
            3.0,
            *hits[:4],
            reason="Some reported figures are faster than this hardware can produce for this workload even with every kernel at its peak: they measure something else (a different definition, cached prompts, or a formula).",
            reason_zh="有些报告的数字比这套硬件在所有内核都跑满时能达到的上限还快：它们测的是别的东西（定义不同、提示词被缓存，或是公式推算）。",
        )


def _throughput_formula(inputs: DiagnosisInputs, board: Board) -> None:
    """Throughput reported as concurrency x per-request speed assumes every client generates at once."""
    for obs in inputs.observations:
        c, per, total = obs.concurrency, obs.output_tok_s_per_request, obs.output_tok_s_total
        if not (c and per and total) or c < 2:
            continue
        if abs(total - c * per) / total > 0.05:
            continue
        pred = _match_point(inputs.predicted, c)
        running = pred.metadata.get("server_running_mean") if pred else None
        ev = [Evidence(kind="reported", source="case file", label=f"throughput at c={c}", value=total, unit="tok/s", detail=f"= {c} x {per:g} tok/s")]
        if running:
            ev.append(_model(f"requests generating at c={c}", round(running, 1), "requests", f"model throughput {pred.output_throughput_tok_s:.0f} tok/s"))
        board.add(
            "benchmark_methodology",
            2.0,
            *ev,
            reason=f"The throughput figure {total:g} tok/s is {c} x {per:g}: it assumes all {c} clients generate at the same time"
            + (f", but only about {running:.0f} can run at once; the others are waiting, not generating." if running else "."),
            reason_zh=f"吞吐 {total:g} tok/s 是按 {c} × {per:g} 算出来的：它假设 {c} 个客户端同时在生成"
            + (f"，但实际同时运行的只有约 {running:.0f} 个，其余在排队，并没有在生成。" if running else "。"),
        )
        return


def _match_point(runs: list[BenchmarkRun], concurrency: int) -> BenchmarkRun | None:
    return next((r for r in runs if r.offered_concurrency == concurrency), None)


def _chunked_prefill(inputs: DiagnosisInputs, board: Board) -> None:
    for run in sorted(inputs.predicted, key=lambda r: -(r.offered_concurrency or 0)):
        md = run.metadata
        share, mixed, dec = md.get("share_of_time_in_mixed_steps"), md.get("mixed_step_ms_mean"), md.get("decode_only_step_ms_mean")
        if not (share and mixed and dec) or (run.offered_concurrency or 0) < 2:
            continue
        if share < 0.15 or mixed < 3 * dec:
            continue
        budget = inputs.engine.config.max_num_batched_tokens
        smaller = max(512, budget // 4)
        board.add(
            "chunked_prefill_interference",
            2.0,
            _model("step with a prefill chunk", round(mixed, 1), "ms", f"vs {dec:.1f} ms for a decode-only step"),
            _model(f"share of time in such steps at {run.load_label}", round(100 * share), "%"),
            reason=(
                f"While a new {inputs.input_len:,}-token prompt is prefilled in chunks of up to {budget:,} tokens, every running request waits for "
                f"each chunk: such steps take about {mixed:.0f} ms instead of {dec:.0f} ms, and at {run.load_label} they fill {100 * share:.0f}% of the time, "
                "so each running request's decode speed falls well below its single-request speed."
            ),
            recommendation=Recommendation(
                change=f"A smaller per-step token budget ({smaller}) makes each chunk's stall shorter; the prompt then takes more, cheaper steps",
                flag=f"--max-num-batched-tokens {smaller}",
                whatif=[f"max_num_batched_tokens={smaller}"],
                cost="longer TTFT for the long prompts; lower peak throughput",
                verify="histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m])))",
            ),
            reason_zh=(
                f"新的 {inputs.input_len:,} token 输入按每块最多 {budget:,} token 分块预填充时，所有正在解码的请求都要等每一块算完："
                f"带预填充块的一步约 {mixed:.0f} 毫秒，而纯解码一步只要 {dec:.0f} 毫秒；在 {run.load_label} 时这类步骤占了 {100 * share:.0f}% 的时间，"
                "所以每个请求的解码速度远低于单独请求时。"
            ),
        )
        return


def _prefill_compute(inputs: DiagnosisInputs, board: Board) -> None:
    if not inputs.input_len or inputs.input_len < 4000:
        return
    engine = inputs.engine
    from ..perf.simulator import StepBatch

    budget = engine.config.max_num_batched_tokens if engine.config.enable_chunked_prefill else inputs.input_len
    t = 0.0
    done = 0
    while done < inputs.input_len:
        chunk = min(budget, inputs.input_len - done)
        t += engine.step(StepBatch(0, 0, ((chunk, done),)))
        done += chunk
    measured = [r.ttft_ms.mean or r.ttft_ms.median for r in inputs.measured if r.ttft_ms and (r.ttft_ms.mean or r.ttft_ms.median)]
    ev = _model(f"prefill of one {inputs.input_len:,}-token prompt", round(t, 2), "s", "alone on an idle server")
    weight = 1.0
    if measured:
        ratio = min(measured) / 1000 / t
        if 0.4 <= ratio <= 2.5:
            weight = 2.5
            ev = _model(f"prefill of one {inputs.input_len:,}-token prompt", round(t, 2), "s", f"the lowest measured TTFT is {min(measured) / 1000:.1f} s")
    board.add(
        "prefill_compute",
        weight,
        ev,
        reason=f"Prefilling {inputs.input_len:,} tokens is compute-bound: about {t:.1f} s on this hardware even with nothing else running; that is the floor of TTFT.",
        reason_zh=f"预填充 {inputs.input_len:,} 个 token 受算力限制：即使没有其他请求，在这套硬件上也要约 {t:.1f} 秒，这就是首 token 延迟的下限。",
    )


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
                    _model("single-request speed", round(p, 1), "tok/s", f"measured {m:.1f} tok/s"),
                    reason=f"A single request runs at about {p:.0f} tok/s because each token reads all weights and the KV cache from memory; the measured {m:.0f} tok/s is that limit, not a fault.",
                    reason_zh=f"单个请求约 {p:.0f} tok/s，因为每生成一个 token 都要从显存读一遍全部权重和 KV cache；实测 {m:.0f} tok/s 就是这个上限，不是故障。",
                )
                return


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
    board.add(
        "attention_backend",
        1.0 + 2.0 * share,
        _model("attention share of prefill FLOPs", round(100 * share), "%", f"at {inputs.input_len:,} tokens; {engine.gpu.name} ({engine.gpu.architecture}) has no FlashAttention-3"),
        reason=f"At {inputs.input_len:,} tokens attention is {100 * share:.0f}% of the prefill work, and on {engine.gpu.architecture} GPUs it runs FlashAttention-2-class kernels; the backend choice moves TTFT.",
        reason_zh=f"在 {inputs.input_len:,} token 时注意力占预填充计算量的 {100 * share:.0f}%，而 {engine.gpu.architecture} 架构只能用 FlashAttention-2 一类内核；注意力后端的选择会影响首 token 延迟。",
    )

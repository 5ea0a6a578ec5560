"""`/estimate` and `/whatif` as Markdown the chat pane renders: the performance model's tables.

WHY Markdown and not Rich tables: the chat pane renders every message as Markdown (so it can be
logged, resumed and copied as text), and Markdown tables keep the figures in columns. The numbers
come from the same calls `vllm-advisor estimate` makes, on the inputs the conversation gathered
(so a calibration to the user's measurements applies here too).
"""

from __future__ import annotations

import math

from vllm_advisor.errors import UsageError

DEFAULT_CONCURRENCY = (1, 8, 32)


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}g}"


def _need_model(inputs) -> None:
    if inputs.engine is None:
        why = inputs.engine_error or "no performance model"
        raise UsageError(f"{why}; give the deployment: /profile CASE.yaml, or /serve-cmd \"vllm serve MODEL ...\" with /set gpu=H800")
    if not inputs.input_len or not inputs.output_len:
        raise UsageError("the workload's prompt and output lengths are unknown: attach a benchmark result or a case file with workload input_len/output_len")


def parse_points(text: str | None):
    """'1,40,100' -> closed-loop load points; 'rate=4' or '4/s' -> an open-loop one."""
    from vllm_advisor.perf.predict import LoadPoint

    if not text:
        return []
    points = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if part.startswith("rate=") or part.endswith("/s"):
                value = part.removeprefix("rate=").removesuffix("/s")
                points.append(LoadPoint(request_rate=math.inf if value == "inf" else float(value)))
            else:
                points.append(LoadPoint(concurrency=int(part.removeprefix("c="))))
        except ValueError:
            raise UsageError(f"/estimate: '{part}' is not a client count (e.g. 1,40,100) or a rate (e.g. rate=4)") from None
    return points


def measured_points(inputs):
    from vllm_advisor.perf.predict import LoadPoint

    out = []
    for run in inputs.measured:
        p = LoadPoint(concurrency=run.offered_concurrency) if run.offered_concurrency else (
            LoadPoint(request_rate=run.offered_request_rate) if run.offered_request_rate is not None else None)
        if p is not None and p not in out:
            out.append(p)
    return out


def _efficiency(inputs):
    cal = inputs.calibration
    return cal.efficiency if cal is not None and cal.calibrated else None


def estimate_markdown(inputs, points=None) -> str:
    """Memory budget and predicted load points (with the measured ones beside them)."""
    from vllm_advisor.perf.predict import LoadPoint, predict_load_point

    _need_model(inputs)
    em = inputs.engine
    m, c = em.memory, em.config
    calibrated = _efficiency(inputs) is not None
    label = "calibrated to your measurements" if calibrated else "uncalibrated"
    length = inputs.input_len + inputs.output_len
    lines = [
        f"**Performance model: {em.model.name} on {em.num_gpus} x {em.gpu.name}, TP {c.tensor_parallel_size}** ({label})",
        "",
        "| per GPU | value |",
        "|---|---|",
        f"| weights | {m.weights_gib:.2f} GiB |",
        f"| KV cache | {m.kv_cache_gib:.2f} GiB ({m.kv_cache_tokens:,} tokens, {m.num_gpu_blocks:,} blocks of {m.block_size}) |",
        f"| KV bytes per token | {m.kv_bytes_per_token / 1024:.1f} KiB |",
        f"| requests that fit | {m.requests_that_fit(length):.1f} of {length:,} tokens |",
        f"| max_num_seqs / max_num_batched_tokens | {c.max_num_seqs} ({c.source_of('max_num_seqs')}) / {c.max_num_batched_tokens:,} ({c.source_of('max_num_batched_tokens')}) |",
        f"| vLLM version | {c.vllm_version}{' (assumed)' if c.version_assumed else ''} |",
        "",
    ]
    if not m.fits:
        lines.append("The model does not fit: " + "; ".join(m.notes))
        return "\n".join(lines) + "\n"
    points = list(points or []) or measured_points(inputs) or [LoadPoint(concurrency=n) for n in DEFAULT_CONCURRENCY]
    known = {r.label.removeprefix("predicted "): r for r in inputs.predicted}
    eff = _efficiency(inputs)
    sourced = em.step.eff
    rows = []
    try:
        for p in points:
            run = known.get(p.label)
            if run is None:
                em.step.eff = eff or sourced
                run, _ = predict_load_point(em, p, input_len=inputs.input_len, output_len=inputs.output_len, shared_prefix_len=inputs.shared_prefix_len or 0)
            rows.append(("model", p.label, run))
    finally:
        em.step.eff = sourced
    for run in inputs.measured:
        rows.append(("measured" if run.format != "observations" else "reported", run.load_label, run))
    lines += [
        f"Workload: {inputs.input_len:,} prompt tokens, {inputs.output_len:,} output tokens per request.",
        "",
        "| load | source | TTFT p50 s | TPOT ms | decode tok/s per request | tok/s per request, end to end | output tok/s | running | waiting | KV % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {p.label: i for i, p in enumerate(points)}
    rows.sort(key=lambda r: (order.get(r[1], len(order)), r[0] != "model"))
    for kind, load, run in rows:
        sv = run.server_view
        ttft = run.ttft_ms.pct(50) if run.ttft_ms else None
        lines.append(
            "| " + " | ".join([
                load, kind,
                _fmt(None if ttft is None else ttft / 1000),
                _fmt(run.tpot_ms.mean if run.tpot_ms else None),
                _fmt(run.request_decode_tok_s.mean if run.request_decode_tok_s else None),
                _fmt(run.request_output_tok_s.mean if run.request_output_tok_s else None),
                _fmt(run.output_throughput_tok_s),
                _fmt(sv.running_mean if sv else None),
                _fmt(sv.waiting_mean if sv else None),
                _fmt(sv.kv_usage_pct_mean if sv else None),
            ]) + " |"
        )
    notes = list(dict.fromkeys(em.notes + m.notes))
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def whatif_markdown(inputs, changes: list[str]) -> str:
    """Each load point before and after the changes, as the model predicts them."""
    from vllm_advisor.perf.predict import LoadPoint
    from vllm_advisor.perf.whatif import what_if

    _need_model(inputs)
    points = measured_points(inputs) or [LoadPoint(concurrency=1)]
    result = what_if(
        inputs.deployment, inputs.engine_args, list(changes), points,
        input_len=inputs.input_len, output_len=inputs.output_len,
        shared_prefix_len=inputs.shared_prefix_len or 0, efficiency=_efficiency(inputs),
    )
    mb, ma = result.base.memory, result.changed.memory
    lines = [
        f"**What if {', '.join(f'`{c}`' for c in changes)}** (model{', calibrated' if _efficiency(inputs) is not None else ''})",
        "",
        f"KV cache {mb.kv_cache_tokens:,} → {ma.kv_cache_tokens:,} tokens; maximum concurrency {mb.max_concurrency:.2f}x → {ma.max_concurrency:.2f}x.",
        "",
        "| load | figure | before | after | change |",
        "|---|---|---|---|---|",
    ]
    for p in result.points:
        for d in p.deltas:
            change = "—" if d.ratio is None else f"x{d.ratio:.2f}" + (" better" if d.better else " worse" if d.better is False else "")
            lines.append(f"| {p.point.label} | {d.figure} ({d.unit}) | {_fmt(d.before)} | {_fmt(d.after)} | {change} |")
    if result.notes:
        lines += [""] + [f"- {n}" for n in result.notes]
    return "\n".join(lines) + "\n"

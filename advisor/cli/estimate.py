"""``vllm-advisor estimate ...`` and ``catalog ...``: the performance model from the command line."""

from __future__ import annotations

import math
from pathlib import Path

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..errors import UsageError
from ..schema import CaseFile, Deployment, EngineArgs, ServerView
from ..perf.efficiency import real_vllm_error
from . import render
from .output import console, emit, emit_json, json_option


def deployment_options(f):
    """Where the deployment comes from: a case file, a serve command, and/or single flags."""
    opts = [
        click.option("--profile", type=click.Path(dir_okay=False, path_type=Path), help="Case file (YAML) with deployment and workload."),
        click.option("--serve-cmd", help='The `vllm serve ...` command line.'),
        click.option("--model", help="Model: catalog name, Hugging Face id, or path to a config.json."),
        click.option("--gpu", help="GPU: catalog name (H100, H800, H200, A100-80G, L40S, RTX4090, ...)."),
        click.option("--num-gpus", type=click.IntRange(min=1), help="GPUs serving the model (default: TP x PP x DP)."),
        click.option("--tp", type=click.IntRange(min=1), help="Tensor-parallel size."),
        click.option("--vllm-version", help="vLLM version (decides the defaults of unset flags)."),
        click.option("--interconnect", type=click.Choice(["nvlink", "pcie"]), help="GPU interconnect, when it differs from the GPU's usual one."),
        click.option("--set", "set_args", multiple=True, metavar="KEY=VALUE", help="An engine argument, e.g. --set max_num_seqs=64 (repeatable)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def workload_options(f):
    opts = [
        click.option("--input-len", type=click.IntRange(min=1), help="Prompt tokens per request (default: the profile's workload)."),
        click.option("--output-len", type=click.IntRange(min=1), help="Output tokens per request (default: the profile's workload)."),
        click.option("--concurrency", help="Closed-loop client counts: 1,40,100, or a range 1..256 (1, 2, 4, ... 256), or 1..256:5 (5 points on a log scale)."),
        click.option("--request-rate", help="Open-loop request rates (req/s), comma-separated; 'inf' = all at once."),
        click.option("--num-prompts", type=int, help="Requests per load point (default: 3 x concurrency, at least 8)."),
        click.option("--shared-prefix-len", type=int, default=None, help="Tokens common to all prompts (prefix-cache hits)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def resolve_deployment(profile, serve_cmd, model, gpu, num_gpus, tp, vllm_version, interconnect, set_args) -> tuple[Deployment, EngineArgs, CaseFile | None]:
    from ..perf.whatif import apply_changes
    from ..probe.casefile import load_case
    from ..probe.serve_cmd import engine_args_for, parse_serve_command

    case = load_case(profile) if profile else None
    dep = case.deployment.model_copy(deep=True) if case else Deployment(engine="vllm")
    if serve_cmd:
        parsed = parse_serve_command(serve_cmd)
        dep.serve_command = serve_cmd
        dep.model = dep.model or parsed.model
        dep.num_gpus = dep.num_gpus or parsed.num_gpus
    for key, value in (("model", model), ("gpu", gpu), ("num_gpus", num_gpus), ("vllm_version", vllm_version), ("interconnect", interconnect)):
        if value is not None:
            setattr(dep, key, value)
    args = engine_args_for(dep)
    changes = list(set_args) + ([f"tensor_parallel_size={tp}"] if tp else [])
    if changes:
        dep, args, special = apply_changes(dep, args, changes)
        if special:
            raise UsageError("--set takes engine arguments; use `estimate whatif disagg=PxD` for disaggregation")
    if args.tensor_parallel_size and not dep.num_gpus:
        dep.num_gpus = args.tensor_parallel_size * (args.pipeline_parallel_size or 1) * (args.data_parallel_size or 1)
    return dep, args, case


def _numbers(text: str | None, kind: type) -> list:
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            out.append(math.inf if kind is float and part.lower() == "inf" else kind(part))
        except ValueError:
            raise UsageError(f"'{part}' is not a {'number' if kind is float else 'whole number'}") from None
    return out


#: An explicit estimate may simulate more than one answer does (inputs.SIM_BUDGET), still bounded.
ESTIMATE_BUDGET_FACTOR = 4


def check_simulation_bounds(points, input_len: int, output_len: int, num_prompts: int | None) -> None:
    """One line naming the flag when the asked-for simulation is past what it runs in seconds."""
    from ..diagnosis.inputs import MAX_SIM_CONCURRENCY, MAX_SIM_LEN, SIM_BUDGET, simulation_cost
    from ..perf.predict import default_num_prompts

    for flag, value in (("--input-len", input_len), ("--output-len", output_len)):
        if value > MAX_SIM_LEN:
            raise UsageError(f"{flag} {value:,} is over the {MAX_SIM_LEN:,} tokens the scheduler simulation takes")
    if num_prompts is not None and not 0 < num_prompts <= 100_000:
        raise UsageError(f"--num-prompts must be between 1 and 100,000, got {num_prompts:,}")
    cost = 0.0
    for p in points:
        if p.concurrency and p.concurrency > MAX_SIM_CONCURRENCY:
            raise UsageError(f"--concurrency {p.concurrency:,} is over the {MAX_SIM_CONCURRENCY:,} clients the scheduler simulation takes")
        cost += simulation_cost(num_prompts or default_num_prompts(p), input_len, output_len)
    if cost > ESTIMATE_BUDGET_FACTOR * SIM_BUDGET:
        raise UsageError("the load points asked for are past the simulation budget (clients x requests x tokens); "
                         "ask for fewer or smaller points, or a smaller --num-prompts")


def resolve_workload(case: CaseFile | None, input_len, output_len, concurrency, request_rate, shared_prefix_len):
    from ..perf.predict import LoadPoint

    w = case.workload if case else None
    input_len = input_len or (w.input_len if w else None)
    output_len = output_len or (w.output_len if w else None)
    if not input_len or not output_len:
        raise UsageError("give --input-len and --output-len (or a --profile whose workload has them)")
    from ..perf.curve import parse_concurrency

    points = [LoadPoint(concurrency=c) for c in (parse_concurrency(concurrency) if concurrency else [])]
    points += [LoadPoint(request_rate=r) for r in _numbers(request_rate, float)]
    if not points and case:
        points = [LoadPoint(concurrency=o.concurrency) for o in case.observations if o.concurrency]
        points += [LoadPoint(request_rate=o.request_rate) for o in case.observations if o.request_rate and not o.concurrency]
        if not points and w and (w.concurrency or w.request_rate):
            points = [LoadPoint(concurrency=w.concurrency, request_rate=None if w.concurrency else w.request_rate)]
    if not points:
        points = [LoadPoint(concurrency=1)]
    seen, unique = set(), []
    for p in points:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    prefix = shared_prefix_len if shared_prefix_len is not None else ((w.shared_prefix_len or 0) if w else 0)
    return input_len, output_len, unique, prefix


@click.group(invoke_without_command=True)
@deployment_options
@workload_options
@click.option("--what-if", "what_ifs", multiple=True, metavar="KEY=VALUE", help="A change to predict, e.g. --what-if kv_cache_dtype=fp8 (repeatable; all applied together).")
@click.option("--attach", "attachments", multiple=True, type=click.Path(dir_okay=False, path_type=Path), help="Benchmark result files measured on this deployment (repeatable).")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True, help="Fit the efficiency factors to the measured load points, within physical bounds.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the load curve (running and waiting requests, throughput, the knee) as a PNG.")
@json_option
@click.pass_context
def estimate(ctx, what_ifs, attachments, calibrate, plot_path, as_json, input_len, output_len, concurrency, request_rate, num_prompts, shared_prefix_len, **kw) -> None:
    """Predict KV capacity and every load point of a deployment, measured and predicted side by side.

    \b
    vllm-advisor estimate --profile case.yaml --concurrency 1,40,100
    vllm-advisor estimate --profile case.yaml --concurrency 1..256 --plot curve.png   # the load curve and its knee
    vllm-advisor estimate --model Qwen2.5-32B --gpu H800 --tp 2 --input-len 63000 --output-len 1000 --concurrency 1,40
    vllm-advisor estimate --profile case.yaml --what-if kv_cache_dtype=fp8 --what-if max_num_batched_tokens=16384

    Sub-commands: `estimate memory` (the memory budget only), `estimate step` (one engine step).
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..perf.calibrate import calibrate as fit
    from ..perf.predict import build_engine_model, predict_load_point
    from ..perf.whatif import what_if
    from ..probe.bench import load_runs, observations_to_runs

    dep, args, case = resolve_deployment(**kw)
    input_len, output_len, points, prefix = resolve_workload(case, input_len, output_len, concurrency, request_rate, shared_prefix_len)
    check_simulation_bounds(points, input_len, output_len, num_prompts)
    measured = observations_to_runs(case.observations, case.source or "profile") if case else []
    for path in attachments:
        measured.extend(load_runs(path))
    em = build_engine_model(dep, args, needed_model_len=input_len + output_len)
    calibration = None
    if calibrate and measured:
        calibration = fit(em, measured, input_len=input_len, output_len=output_len)
        if calibration.calibrated:
            em.step.eff = calibration.efficiency
    label = "calibrated" if calibration and calibration.calibrated else "uncalibrated"
    runs = []
    for p in points:
        run = predict_load_point(em, p, input_len=input_len, output_len=output_len, num_prompts=num_prompts, shared_prefix_len=prefix)[0]
        run.calibrated = label == "calibrated"
        runs.append(run)
    from ..perf.curve import curve_points, find_knee

    curve = curve_points(runs)
    knee = find_knee(curve, em.config.max_num_seqs) if len(curve) >= 2 else None
    plot_written = None
    if plot_path is not None:
        if len(curve) < 2:
            raise UsageError("--plot draws the load curve: give at least two client counts, e.g. --concurrency 1..256")
        from .curve_plot import draw_curve

        subject = f"{em.model.name}, {em.num_gpus} x {em.gpu.name}, TP {em.config.tensor_parallel_size}, {input_len:,} in / {output_len:,} out"
        plot_written = draw_curve(curve, knee, plot_path, subject=subject, calibrated=label == "calibrated")
    whatif = None
    if what_ifs:
        whatif = what_if(dep, args, list(what_ifs), points, input_len=input_len, output_len=output_len, num_prompts=num_prompts, shared_prefix_len=prefix, efficiency=em.step.eff)
    data = {
        "config": em.config,
        "memory": em.memory,
        "calibration": calibration.to_dict() if calibration else {"calibrated": False, "notes": ["no measured load points: the shipped kernel parameters (measured on H200, scaled by datasheet specs to other GPUs)"]},
        "step_basis": em.step.basis(),
        "vs_real_vllm": real_vllm_error(em.config.vllm_version, em.config.version_assumed),
        "predicted": runs,
        "measured": measured,
        "what_if": whatif.to_dict() if whatif else None,
        "curve": {"points": [vars(p) | {"queued": p.queued} for p in curve], "knee": knee.to_dict() if knee else None, "plot": str(plot_written) if plot_written else None}
        if knee
        else None,
        "notes": em.notes,
    }

    def show(_):
        parts = [render_memory(em), render_predicted(runs, label), render_vs_real_vllm(data["vs_real_vllm"])]
        if measured:
            parts.append(render.bench_table(measured, "Measured load points (from the profile and attachments)"))
        if knee:
            parts.append(render_curve(curve, knee, em.replicas, label, plot_written))
        if calibration:
            parts.append(render_calibration(calibration))
        if whatif:
            parts.append(render_whatif(whatif))
        return Group(*parts)

    emit(data, as_json, show)


@estimate.command("memory")
@deployment_options
@json_option
def memory_cmd(as_json: bool, **kw) -> None:
    """KV-cache capacity and the memory budget per GPU, as vLLM computes them at start-up."""
    from ..perf.predict import build_engine_model

    dep, args, case = resolve_deployment(**kw)
    needed = (case.workload.input_len or 0) + (case.workload.output_len or 0) if case and case.workload.input_len else None
    em = build_engine_model(dep, args, needed_model_len=needed)
    emit({"config": em.config, "memory": em.memory, "notes": em.notes}, as_json, lambda _: render_memory(em))


def render_memory(em) -> Group:
    m, c = em.memory, em.config
    facts = render.kv_table(
        f"Memory per GPU: {em.model.name} on {em.num_gpus} x {em.gpu.name}, TP {c.tensor_parallel_size}",
        [
            ("GPU memory", f"{m.gpu_total_gib:.1f} GiB x gpu_memory_utilization {c.gpu_memory_utilization:g} ({c.source_of('gpu_memory_utilization')}) = {m.requested_gib:.1f} GiB"),
            ("weights", f"{m.weights_gib:.2f} GiB  [{m.basis['weights_gib']}]"),
            ("activation peak", f"{m.activation_peak_gib:.2f} GiB  [{m.basis['activation_peak_gib']}]"),
            ("non-torch memory", f"{m.non_torch_gib:.2f} GiB  [estimate]"),
            ("CUDA graphs", f"{m.cuda_graph_gib:.2f} GiB  [{m.basis['cuda_graph_gib']}]"),
            ("KV cache", f"{m.kv_cache_gib:.2f} GiB"),
            ("KV bytes per token per GPU", f"{m.kv_bytes_per_token / 1024:.1f} KiB  [exact]"),
            ("block size", f"{m.block_size} tokens ({c.source_of('block_size')})"),
            ("KV cache size", f"{m.kv_cache_tokens:,} tokens ({m.num_gpu_blocks:,} blocks)  [model]"),
            ("maximum concurrency", f"{m.max_concurrency:.2f}x for {m.max_model_len:,} tokens per request ({c.source_of('max_model_len')})  [model]"),
            ("max_num_seqs / max_num_batched_tokens", f"{c.max_num_seqs} ({c.source_of('max_num_seqs')}) / {c.max_num_batched_tokens} ({c.source_of('max_num_batched_tokens')})"),
            ("vLLM version", f"{c.vllm_version}{' (assumed)' if c.version_assumed else ''}"),
        ],
    )
    return Group(facts, *[Text(n, style="yellow") for n in m.notes + em.notes])


_REAL_VLLM_FIGURES = {"ttft_p50": "TTFT p50", "ttft_p90": "TTFT p90", "tpot_p50": "TPOT p50", "itl_p50": "ITL p50", "e2e_p50": "E2E p50",
                      "output_throughput": "output tok/s", "running_mean": "running", "waiting_mean": "waiting", "kv_cache_tokens": "KV cache size"}


def render_vs_real_vllm(err: dict) -> Text:
    """One line: the model's median error against real vLLM on held-out runs (catalog/vllm-h200.yaml)."""
    figs = ", ".join(f"{_REAL_VLLM_FIGURES.get(k, k)} {v * 100:.1f}%" for k, v in err["median_abs_error_holdout"].items())
    engine = err["engine"].split(" (")[0]
    line = f"Held to real {engine} on one {' or '.join(err['gpu'].split(', '))} ({len(err['holdout_runs'])} held-out server runs, {err['runs']}): median |predicted/measured - 1| {figs}."
    if not err["applies"]:
        line += f" This deployment's vLLM version is older or unknown: the fitted {engine} costs are not used, so these errors do not carry over."
    return Text(line, style="dim")


def render_calibration(cal) -> Group:
    if not cal.calibrated:
        return Group(*[Text(n, style="dim") for n in cal.notes])
    table = Table(title=f"Calibration: decode x{cal.decode_scale:.2f}, prefill x{cal.prefill_scale:.2f} (measured vs predicted)", title_justify="left")
    for col in ("load", "figure", "measured", "predicted", "predicted / measured"):
        table.add_column(col, justify="left" if col in ("load", "figure") else "right")
    for r in cal.residuals:
        off = abs(math.log(r.ratio)) > math.log(1.5)
        table.add_row(r.load, r.figure, render.fmt(r.measured), render.fmt(r.predicted), Text(f"{r.ratio:.2f}", style="red" if off else "green"))
    for r in cal.unreachable:
        table.add_row(r.load, r.figure + " *", render.fmt(r.measured), render.fmt(r.predicted), Text(f"{r.ratio:.2f}", style="bold red"))
    legend = [Text("* not reachable within physical bounds: left out of the fit", style="red")] if cal.unreachable else []
    return Group(table, *legend, *[Text(n, style="yellow" if "bound" in n else "dim") for n in cal.notes])


def render_predicted(runs, label: str = "uncalibrated") -> Group:
    table = render.bench_table(runs, f"Predicted load points (model, {label}; same definitions as `probe load`)")
    server = Table(title="Server view in the simulation (time-weighted)", title_justify="left")
    for col in ("load", "running\nmean/max", "waiting\nmean", "KV\nusage %", "pre-\nempted", "decode\nstep ms", "step with\nchunk ms", "share\nof time"):
        server.add_column(col, justify="right" if col != "load" else "left")
    for r in runs:
        sv = r.server_view or ServerView()
        server.add_row(
            r.load_label,
            f"{render.fmt(sv.running_mean)} / {sv.running_max}",
            render.fmt(sv.waiting_mean),
            render.fmt(sv.kv_usage_pct_mean),
            render.fmt(sv.preemptions),
            render.fmt(sv.decode_only_step_ms_mean),
            render.fmt(sv.mixed_step_ms_mean),
            f"{100 * (sv.share_of_time_in_mixed_steps or 0):.0f}%",
        )
    notes = [Text(f"{r.load_label}: {n}", style="dim") for r in runs for n in r.notes]
    return Group(table, server, *notes)


KNEE_LIMITS = {
    "kv_cache": "the KV cache is full ({kv:.0f}% of its blocks in use): no more requests of this length fit",
    "max_num_seqs": "max_num_seqs caps the running batch (the KV cache is {kv:.0f}% used)",
    "token_budget": "prompts are admitted no faster than the token budget per step (max_num_batched_tokens) prefills them "
    "(the KV cache is {kv:.0f}% used)",
}


def render_curve(points, knee, replicas: int, label: str, plot_path) -> Group:
    table = Table(title=f"Load curve (model, {label}; server view time-weighted)", title_justify="left")
    for col in ("clients", "running\nmean/max", "waiting\nmean", "KV\nusage %", "out\ntok/s", "decode tok/s\nper request", "TTFT p50\nms"):
        table.add_column(col, justify="right")
    for p in points:
        mark = " *" if p.concurrency == knee.first_queued else ""
        table.add_row(
            f"{p.concurrency}{mark}",
            f"{render.fmt(p.running_mean)} / {p.running_max}",
            render.fmt(p.waiting_mean),
            render.fmt(p.kv_usage_pct),
            render.fmt(p.output_tok_s),
            render.fmt(p.request_decode_tok_s),
            render.fmt(p.ttft_p50_ms),
        )
    if knee.first_queued is None:
        line = f"No knee up to {knee.last_unqueued} clients: every request runs as it arrives (model)."
    else:
        between = f"between {knee.last_unqueued} and {knee.first_queued} clients" if knee.last_unqueued else f"at or below {knee.first_queued} clients"
        line = (
            f"Knee {between} (model): running stops growing at ~{knee.running_plateau:.1f} requests and the rest wait; "
            + KNEE_LIMITS[knee.limit].format(kv=knee.kv_usage_pct or 0.0)
            + "."
        )
    lines = [Text(line, style="bold")]
    if replicas > 1:
        lines.append(Text(f"{replicas} replicas: running and waiting are one replica's (clients split evenly)", style="dim"))
    if plot_path:
        lines.append(Text(f"plot: {plot_path}", style="dim"))
    return Group(table, *lines)


def render_whatif(result) -> Group:
    parts = []
    mb, ma = result.base.memory, result.changed.memory
    parts.append(
        Text(
            f"KV cache: {mb.kv_cache_tokens:,} -> {ma.kv_cache_tokens:,} tokens; "
            f"maximum concurrency {mb.max_concurrency:.2f}x -> {ma.max_concurrency:.2f}x (model)",
            style="bold",
        )
    )
    for p in result.points:
        table = Table(title=f"{p.point.label}: {' '.join(result.changes)} (model)", title_justify="left")
        for col in ("figure", "before", "after", "change"):
            table.add_column(col, justify="right" if col != "figure" else "left")
        for d in p.deltas:
            ratio = d.ratio
            style = "green" if d.better else ("red" if d.better is False else "")
            change = "—" if ratio is None else f"x{ratio:.2f}"
            table.add_row(f"{d.figure} ({d.unit})", render.fmt(d.before), render.fmt(d.after), Text(change, style=style))
        parts.append(table)
    parts.extend(Text(n, style="dim") for n in result.notes)
    return Group(*parts)


@estimate.command("step")
@deployment_options
@click.option("--decode", "decodes", multiple=True, metavar="B@L", help="B decoding requests at context length L (repeatable).")
@click.option("--prefill", "prefills", multiple=True, metavar="C@D", help="A prefill chunk of C tokens at depth D (repeatable).")
@json_option
def step_cmd(decodes, prefills, as_json: bool, **kw) -> None:
    """One engine step's predicted time, by part (GEMM, attention, communication, overhead), in ms."""
    from ..perf.predict import build_engine_model
    from ..perf.simulator import StepBatch

    def pairs(items, what):
        out = []
        for item in items:
            try:
                a, b = item.lower().replace("k", "000").split("@")
                out.append((int(a), int(b)))
            except ValueError:
                raise UsageError(f"{what} '{item}': expected N@M, e.g. 8@32000") from None
        return out

    dec, pre = pairs(decodes, "--decode"), pairs(prefills, "--prefill")
    if not dec and not pre:
        raise UsageError("give at least one --decode B@L or --prefill C@D")
    dep, args, _ = resolve_deployment(**kw)
    em = build_engine_model(dep, args)
    batch = StepBatch(sum(b for b, _ in dec), sum(b * length for b, length in dec), tuple(pre))
    from ..perf.efficiency import shipped_calibration

    bd = em.step.breakdown(batch)
    basis = em.step.basis()
    cal = shipped_calibration()
    data = {
        **bd.model_dump(),
        "total_ms": bd.total_ms,
        "tokens": batch.total_tokens,
        "gpu": em.gpu.name,
        "tp": em.config.tensor_parallel_size,
        "basis": basis,
        "calibration": {"gpu": cal.gpu, "measured_utc": cal.measured_utc, "fitted": cal.fitted, "sources": cal.sources,
                        "holdout": {name: c.holdout.model_dump() for name, c in cal.components.items()}},
        "efficiency": em.step.eff.model_dump(),
    }

    def show(d):
        rows = [(k, f"{v:.3f}") for k, v in d.items() if k.endswith("_ms")]
        table = render.kv_table(f"One step on {em.gpu.name}, TP {em.config.tensor_parallel_size}: {batch.num_decodes} decodes, prefill chunks {list(batch.prefill_chunks)} (model, ms)", rows)
        kernels = ("gemm", "attn_decode", "attn_prefill", "lm_head")
        lines = [Text(f"gemm, attn_decode, lm_head: {basis['gemm']}", style="dim"), Text(f"attn_prefill: {basis['attn_prefill']}", style="dim")]
        lines += [Text(f"{part}: {text}", style="dim") for part, text in basis.items() if part not in kernels]
        return Group(table, *lines)

    emit(data, as_json, show)


@click.group()
def catalog() -> None:
    """List the models and GPUs the performance model knows."""


@catalog.command("models")
@json_option
def catalog_models(as_json: bool) -> None:
    """Model architectures (dense, GQA, MLA, MoE, sliding window) with their sources."""
    from ..perf.catalog import list_models

    models = list_models()
    if as_json:
        emit_json([m.model_dump() for m in models])
        return
    table = Table(title="Models")
    for col in ("name", "attention", "layers", "params (B)", "active (B)", "KV KiB/token bf16", "max len"):
        table.add_column(col, justify="left" if col in ("name", "attention") else "right")
    for m in models:
        table.add_row(m.name, m.attention + (" +SW" if m.sliding_window else "") + (" MoE" if m.is_moe else ""), str(m.num_layers), f"{m.total_params / 1e9:.1f}", f"{m.active_params / 1e9:.1f}", f"{m.kv_bytes_per_token(2) / 1024:.0f}", f"{m.max_position_embeddings:,}")
    console().print(table)


@catalog.command("gpus")
@json_option
def catalog_gpus(as_json: bool) -> None:
    """GPUs with memory, bandwidth, dense TFLOP/s and interconnect, with their sources."""
    from ..perf.catalog import list_gpus

    gpus = list_gpus()
    if as_json:
        emit_json([g.model_dump() for g in gpus])
        return
    table = Table(title="GPUs")
    for col in ("name", "memory GiB", "HBM GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "interconnect GB/s"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for g in gpus:
        table.add_row(g.name, f"{g.memory_gib:.1f}", f"{g.mem_bandwidth_gbs:,.0f}", render.fmt(g.bf16_tflops), render.fmt(g.fp8_tflops), f"{g.interconnect} {g.interconnect_bw_gbs:g}")
    console().print(table)

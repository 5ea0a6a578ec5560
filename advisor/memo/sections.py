"""The memo's sections, each a function from what was gathered and diagnosed to Markdown.

Every figure carries its unit and a tag saying where it comes from ([model], [measured], ...), so a
reader can tell a measurement from a prediction without reading the prose.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from ..answer.embedded import evidence_label, explanation, render_evidence
from ..messages import cause_title, normalize_language, render, tag, text
from ..schema import Citation, Diagnosis, Finding, Recommendation, ServerView
from .format import code_block, md_table, num, ratio, with_unit
from .loadpoints import LoadPointRow, figure_value
from .verification import bench_commands, promql_rows


def t(language: str, key: str, **values) -> str:
    """A fixed phrase of the memo (``memo.<key>`` in the message catalog)."""
    return text(language, f"memo.{key}", **values)


def lang_of(language: str | None) -> str:
    return normalize_language(language)


#: Figures compared per load point: attribute (its name is the catalog's figure.<attr>), unit,
#: higher is better, always shown.
FIGURES: list[tuple[str, str, bool, bool]] = [
    ("request_output_tok_s", "tok/s", True, True),
    ("request_decode_tok_s", "tok/s", True, True),
    ("ttft_ms", "ms", False, True),
    ("tpot_ms", "ms", False, False),
    ("e2e_ms", "ms", False, False),
    ("output_throughput_tok_s", "tok/s", True, True),
    ("request_throughput_req_s", "req/s", True, False),
]


@dataclass
class MemoContext:
    inputs: Any  # diagnosis.inputs.DiagnosisInputs
    diagnosis: Diagnosis
    sources: list[Citation]
    rows: list[LoadPointRow]
    seed: int
    language: str = "en"
    findings: list[Finding] = field(default_factory=list)  # ranked

    @property
    def engine(self):
        return self.inputs.engine

    @property
    def model_name(self) -> str | None:
        if self.engine is not None:
            return self.engine.model.name
        return self.inputs.deployment.model

    @property
    def served_model(self) -> str | None:
        """The name the server answers to: the deployment's model id as the user wrote it."""
        return self.inputs.deployment.model

    @property
    def tokens_per_request(self) -> int | None:
        i = self.inputs
        return (i.input_len or 0) + (i.output_len or 0) or None

    @property
    def requests_that_fit(self) -> float | None:
        if self.engine is None or not self.tokens_per_request:
            return None
        return self.engine.memory.requests_that_fit(self.tokens_per_request)

    @property
    def calibrated(self) -> bool:
        return any(r.calibrated for r in self.inputs.predicted)

    def source_refs(self, finding: Finding) -> list[int]:
        numbers = []
        for c in finding.sources:
            n = _find_number(self.sources, c)
            if n and n not in numbers:
                numbers.append(n)
        return numbers


def _key(c: Citation) -> tuple:
    return (c.doc_id, c.chunk_id) if c.doc_id else (c.url, c.heading)


def _find_number(sources: list[Citation], c: Citation) -> int | None:
    for s in sources:
        if _key(s) == _key(c):
            return s.number
    for s in sources:  # another chunk of the same document
        if s.doc_id == c.doc_id or s.url == c.url:
            return s.number
    return None


def number_sources(sources: list[Citation], findings: list[Finding]) -> list[Citation]:
    """One numbered list: the given sources in order, then any a finding cites that the list lacks.
    Numbers given by the answer writer are kept when they are 1..n without gaps, so the memo and the
    answer cite the same [n]."""
    merged: list[Citation] = []
    seen: set[tuple] = set()
    for c in [*sources, *(c for f in findings for c in f.sources)]:
        if _key(c) in seen:
            continue
        seen.add(_key(c))
        merged.append(c)
    given = [c.number for c in merged]
    if sorted(given) == list(range(1, len(merged) + 1)):
        return sorted((c.model_copy() for c in merged), key=lambda c: c.number)
    return [c.model_copy(update={"number": i}) for i, c in enumerate(merged, 1)]


def rank(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.score, -f.confidence))


# --------------------------------------------------------------------------- summary


def summary(ctx: MemoContext) -> str:
    lang, i = ctx.language, ctx.inputs
    sentences: list[str] = []
    dep = i.deployment
    if ctx.engine is not None and i.input_len and i.output_len:
        sentences.append(
            t(lang, "s_deployment", model=ctx.model_name, num_gpus=ctx.engine.num_gpus, gpu=ctx.engine.gpu.name,
              tp=ctx.engine.config.tensor_parallel_size, input_len=f"{i.input_len:,}", output_len=f"{i.output_len:,}")
        )
    else:
        missing = [name for name, value in (("model", dep.model), ("GPU", dep.gpu), ("input_len", i.input_len), ("output_len", i.output_len)) if not value]
        if missing:
            sentences.append(t(lang, "s_deployment_partial", missing=", ".join(missing)))
    findings = ctx.findings
    if findings:
        top = findings[0]
        ev = next((e for e in top.evidence if e.value is not None), top.evidence[0] if top.evidence else None)
        evidence = text(lang, "sep.colon") + render_evidence(ev, lang, bullet=False) if ev else ""
        sentences.append(t(lang, "s_top", title=cause_title(lang, top.cause).rstrip("."), cause=top.cause, pct=round(100 * top.confidence), evidence=evidence))
        others = findings[1:3]
        if others:
            items = t(lang, "s_also_sep").join(t(lang, "s_also_item", title=cause_title(lang, f.cause).rstrip("."), cause=f.cause, pct=round(100 * f.confidence)) for f in others)
            sentences.append(t(lang, "s_also", items=items))
    else:
        sentences.append(t(lang, "s_none"))
    fit = ctx.requests_that_fit
    if fit is not None:
        clients = max((int(r.key[1]) for r in ctx.rows if r.key and r.key[0] == "c"), default=None)
        if clients:
            sentences.append(t(lang, "s_kv", fit=num(fit), tokens=f"{ctx.tokens_per_request:,}", clients=clients))
        else:
            sentences.append(t(lang, "s_kv_plain", fit=num(fit), tokens=f"{ctx.tokens_per_request:,}"))
    rec = next((r for f in findings for r in f.recommendations), None)
    if rec is not None:
        flag = f"{text(lang, 'sep.open')}`{rec.flag}`{text(lang, 'sep.close')}" if rec.flag else ""
        effect = t(lang, "s_effect", effect=render(rec.predicted_effect, lang).rstrip(".")) if rec.predicted_effect else ""
        sentences.append(t(lang, "s_first_change", change=render(rec.change, lang).rstrip("."), flag=flag, effect=effect))
    elif not findings and ctx.diagnosis.missing:
        sentences.append(t(lang, "s_missing", what=render(ctx.diagnosis.missing[0].what, lang).rstrip(".")))
    return ("" if lang_of(lang) == "zh" else " ").join(sentences[:5])


# --------------------------------------------------------------------------- deployment facts


def _provenance(lang: str, prov: str, version: str) -> str:
    if prov == "user":
        return t(lang, "prov_user")
    if prov == "assumed":
        return t(lang, "prov_assumed", version=version)
    if prov == "derived":
        return t(lang, "prov_derived")
    return t(lang, "prov_default", version=version)


def deployment_facts(ctx: MemoContext) -> str:
    lang, i, em = ctx.language, ctx.inputs, ctx.engine
    dep = i.deployment
    unknown = t(lang, "unknown")
    rows: list[list[str]] = []
    if em is not None:
        c, m = em.config, em.memory
        cfg_tag, model_tag = tag(lang, "config"), tag(lang, "model")
        rows.append([t(lang, "f_model"), em.model.name + (f" ({dep.model})" if dep.model and dep.model != em.model.name else ""), cfg_tag])
        rows.append([t(lang, "f_gpus"), f"{em.num_gpus} × {em.gpu.name} ({em.gpu.memory_gib:.1f} GiB)", cfg_tag])
        if dep.interconnect:
            rows.append([t(lang, "f_interconnect"), dep.interconnect, cfg_tag])
        rows.append([t(lang, "f_tp"), str(c.tensor_parallel_size), f"[{_provenance(lang, c.source_of('tensor_parallel_size'), c.vllm_version)}]"])
        version = t(lang, "f_version_assumed", version=c.vllm_version) if c.version_assumed else c.vllm_version
        rows.append([t(lang, "f_version"), version, cfg_tag])
    else:
        cfg_tag, model_tag = tag(lang, "config"), tag(lang, "model")
        rows.append([t(lang, "f_model"), dep.model or unknown, cfg_tag])
        rows.append([t(lang, "f_gpus"), f"{dep.num_gpus or '?'} × {dep.gpu or unknown}", cfg_tag])
        rows.append([t(lang, "f_version"), dep.vllm_version or unknown, cfg_tag])
    if dep.serve_command:
        rows.append([t(lang, "f_serve"), f"`{dep.serve_command}`", cfg_tag])
    if i.input_len or i.output_len:
        prefix = t(lang, "f_prefix", prefix=f"{i.shared_prefix_len:,}") if i.shared_prefix_len else ""
        rows.append([t(lang, "f_workload"), t(lang, "f_workload_value", input_len=_n(i.input_len), output_len=_n(i.output_len), prefix=prefix), cfg_tag])
    if em is not None:
        m = em.memory
        exact = "[" + text(lang, "tag.model") + text(lang, "sep.comma") + text(lang, "answer.exact") + "]"
        estimate = "[" + text(lang, "tag.model") + text(lang, "sep.comma") + text(lang, "answer.estimate") + "]"
        rows.append([t(lang, "f_weights"), f"{m.weights_gib:.2f} GiB", exact if m.basis.get("weights_gib", "exact").startswith("exact") else estimate])
        if m.has_sliding_layers:  # the window caps one part per request
            rows.append([t(lang, "f_kv_per_token_full"), f"{m.kv_bytes_per_token_full / 1024:.1f} KiB", exact])
            rows.append([t(lang, "f_kv_per_token_sliding", window=f"{m.sliding_window:,}"), f"{m.kv_bytes_per_token_sliding / 1024:.1f} KiB", exact])
        else:
            rows.append([t(lang, "f_kv_per_token"), f"{m.kv_bytes_per_token / 1024:.1f} KiB", exact])
        rows.append([t(lang, "f_kv_cache"), t(lang, "f_kv_cache_value", gib=f"{m.kv_cache_gib:.1f}", tokens=f"{m.kv_cache_tokens:,}", blocks=f"{m.num_gpu_blocks:,}", block=m.block_size), model_tag])
        rows.append([t(lang, "f_max_concurrency"), t(lang, "f_max_concurrency_value", value=f"{m.max_concurrency:.2f}", tokens=f"{m.max_model_len:,}"), model_tag])
        if ctx.requests_that_fit is not None:
            rows.append([t(lang, "f_fit"), t(lang, "f_fit_value", value=num(ctx.requests_that_fit, 2), tokens=f"{ctx.tokens_per_request:,}"), model_tag])
    parts = [md_table([t(lang, "f_item"), t(lang, "f_value"), t(lang, "f_basis")], rows)]
    if em is not None:
        parts.append(f"### {t(lang, 'settings')}\n\n" + engine_settings(ctx))
    else:
        parts.append(f"### {t(lang, 'missing_info')}\n\n" + t(lang, "no_model", reason=_no_model_reason(ctx)))
    return "\n\n".join(parts)


def _no_model_reason(ctx: MemoContext) -> str:
    dep = ctx.inputs.deployment
    missing = [what for what, value in (("model", dep.model), ("GPU", dep.gpu)) if not value]
    if missing:
        return t(ctx.language, "no_model_missing", what=" / ".join(missing))
    return (ctx.inputs.engine_error or "").rstrip(".")


def _n(value: int | None) -> str:
    return f"{value:,}" if value else "?"


SETTINGS = [
    ("max_model_len", "tokens"),
    ("max_num_seqs", "requests"),
    ("max_num_batched_tokens", "tokens per step"),
    ("gpu_memory_utilization", ""),
    ("block_size", "tokens"),
    ("kv_cache_dtype", ""),
    ("enable_chunked_prefill", ""),
    ("enable_prefix_caching", ""),
    ("enforce_eager", ""),
    ("pipeline_parallel_size", ""),
    ("data_parallel_size", ""),
]


def engine_settings(ctx: MemoContext) -> str:
    lang, c = ctx.language, ctx.engine.config
    rows = []
    for key, unit in SETTINGS:
        value = getattr(c, key)
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        unit_shown = text(lang, f"memo.unit_{unit.replace(' ', '_')}") if unit else ""
        rows.append([f"`{key}`", f"{shown} {unit_shown}".strip(), _provenance(lang, c.source_of(key), c.vllm_version)])
    return md_table([t(lang, "f_setting"), t(lang, "f_value"), t(lang, "f_where")], rows)


# --------------------------------------------------------------------------- measured vs predicted


def measured_vs_predicted(ctx: MemoContext) -> str:
    lang, i = ctx.language, ctx.inputs
    if not ctx.rows:
        return t(lang, "mvp_none")
    parts: list[str] = []
    if i.predicted:
        cal = i.calibration
        if ctx.calibrated and cal is not None:
            parts.append(
                t(lang, "mvp_intro_cal", decode=cal.decode_scale, prefill=cal.prefill_scale,
                  before=_err(cal.rms_log_error_before), after=_err(cal.rms_log_error_after))
            )
        else:
            why = t(lang, "mvp_cal_failed") if cal is not None and cal.notes else t(lang, "mvp_no_cal_reason")
            parts.append(t(lang, "mvp_intro_uncal", why=why.rstrip(".")))
        if ctx.engine is not None:
            parts.append(_real_vllm_line(lang, ctx.engine.config))
        if i.ceiling:
            parts.append(t(lang, "mvp_ceiling"))
    headers = [t(lang, "mvp_load"), t(lang, "mvp_figure"), t(lang, "mvp_measured"), t(lang, "mvp_predicted"), t(lang, "mvp_ceiling_col"), t(lang, "mvp_ratio")]
    rows: list[list[str]] = []
    for row in ctx.rows:
        measured_runs = row.measured or [None]
        for k, run in enumerate(measured_runs):
            label = row.label + (f" #{k + 1}" if len(row.measured) > 1 else "")
            for attr, unit, higher, always in FIGURES:
                m = figure_value(run, attr)
                p = figure_value(row.predicted, attr)
                c = figure_value(row.ceiling, attr)
                if m is None and not (always and p is not None):
                    continue
                r = ratio(m, p)
                note = f"{r:.2f}x" if r is not None else "—"
                if m is not None and c is not None and ((higher and m > c) or (not higher and m < c)):
                    note += f" **{t(lang, 'mvp_beyond')}**"
                rows.append([label, text(lang, f"figure.{attr}"), with_unit(m, unit), with_unit(p, unit), with_unit(c, unit), note])
    if rows:
        parts.append(md_table(headers, rows, ["l", "l", "r", "r", "r", "r"]))
    else:
        parts.append(t(lang, "mvp_no_figures"))
    by_source: dict[str, list[str]] = {}
    for row in ctx.rows:
        for run in row.measured:
            by_source.setdefault(f"`{run.source}` (`{run.format}`)", []).append(run.load_label)
    if by_source:
        items = "; ".join(f"{src}: {', '.join(dict.fromkeys(loads))}" for src, loads in by_source.items())
        parts.append(t(lang, "mvp_sources", items=items))
    cal = i.calibration
    if cal is not None and cal.unreachable:
        items = text(lang, "sep.list").join(t(lang, "mvp_unreachable_item", load=r.load, figure=_figure_name(lang, r.figure), measured=num(r.measured), model=num(r.predicted)) for r in cal.unreachable)
        parts.append(t(lang, "mvp_unreachable", items=items))
    if any(r.predicted for r in ctx.rows):
        parts.append(f"### {t(lang, 'server_view')}\n\n" + server_view(ctx))
    return "\n\n".join(parts)


def _figure_name(lang: str, figure: str) -> str:
    """A calibration figure ("request_output_tok_s.mean") as the catalog words it in ``lang``; the
    field name only where the catalog has no words for it."""
    from ..messages import has

    key = f"figure.{figure.split('.')[0]}"
    return text(lang, key) if has(lang, key) else figure


def _real_vllm_line(lang: str, config) -> str:
    """How far the model was from a real vLLM server on held-out runs (catalog/vllm-h200.yaml)."""
    from ..perf.efficiency import real_vllm_error

    err = real_vllm_error(config.vllm_version, config.version_assumed)
    e = err["median_abs_error_holdout"]
    labels = [("ttft_p50", "TTFT p50"), ("tpot_p50", "TPOT p50"), ("e2e_p50", "E2E p50"),
              ("output_throughput", text(lang, "figure.output_throughput_tok_s")), ("kv_cache_tokens", t(lang, "mvp_kv_size"))]
    figures = text(lang, "sep.comma").join(f"{label} {e[key] * 100:.1f}%" for key, label in labels if key in e)
    engine = err["engine"].split(" (")[0]
    gpus = text(lang, "sep.or").join(err["gpu"].split(", "))  # the cards the fit's runs used, any of them
    line = t(lang, "mvp_real_vllm", engine=engine, gpu=gpus, figures=figures)
    gap = "" if lang.startswith("zh") else " "
    return line if err["applies"] else line + gap + t(lang, "mvp_real_vllm_off", engine=engine)


def _err(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def server_view(ctx: MemoContext) -> str:
    lang = ctx.language
    has_measured = any(m.metadata.get("server_num_requests_running") is not None for r in ctx.rows for m in r.measured)
    headers = [t(lang, "mvp_load"), t(lang, "sv_running"), t(lang, "sv_waiting"), t(lang, "sv_kv"), t(lang, "sv_preempt"), t(lang, "sv_decode_step"), t(lang, "sv_mixed_step"), t(lang, "sv_share")]
    if has_measured:
        headers.append(t(lang, "sv_measured_running"))
    rows = []
    for row in ctx.rows:
        if row.predicted is None:
            continue
        sv = row.predicted.server_view or ServerView()
        share = sv.share_of_time_in_mixed_steps
        cells = [
            row.label,
            f"{num(sv.running_mean)} / {num(sv.running_max)}",
            num(sv.waiting_mean),
            with_unit(sv.kv_usage_pct_mean, "%"),
            num(sv.preemptions),
            with_unit(sv.decode_only_step_ms_mean, "ms"),
            with_unit(sv.mixed_step_ms_mean, "ms"),
            "—" if share is None else f"{100 * share:.0f}%",
        ]
        if has_measured:
            cells.append(num(next((m.metadata.get("server_num_requests_running") for m in row.measured if m.metadata.get("server_num_requests_running") is not None), None)))
        rows.append(cells)
    return md_table(headers, rows, ["l"] + ["r"] * (len(headers) - 1))


# --------------------------------------------------------------------------- findings


def findings_section(ctx: MemoContext) -> str:
    lang = ctx.language
    if not ctx.findings:
        return t(lang, "fi_none")
    blocks = []
    for n, f in enumerate(ctx.findings, 1):
        severity = text(lang, f"answer.sev_{f.severity}")
        lines = [f"### {n}. {cause_title(lang, f.cause)}", "", t(lang, "fi_line", cause=f.cause, severity=severity, pct=round(100 * f.confidence))]
        if f.evidence:
            lines += ["", t(lang, "fi_evidence")]
            lines += [render_evidence(e, lang) for e in f.evidence]
        why = explanation(f, lang)
        if why:
            lines += ["", why]
        refs = ctx.source_refs(f)
        if refs:
            lines += ["", t(lang, "fi_sources", refs=" ".join(f"[{r}]" for r in refs))]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------- recommendations


def _flag_tokens(flag: str) -> list[str] | None:
    """The tokens of a flag recommendation when it is nothing but `vllm serve` flags and their values
    (``--kv-cache-dtype fp8``, ``--max-num-batched-tokens=512``); None for prose, placeholders or
    client-side changes, which are shown as written instead of being pasted into a command."""
    try:
        tokens = shlex.split(flag)
    except ValueError:
        return None
    if not tokens or not tokens[0].startswith("--"):
        return None
    previous_was_value = False
    for tok in tokens:
        if any(mark in tok for mark in ("(", ")", ";", "...", "…", "<", ">")):
            return None
        if tok.startswith("-"):
            previous_was_value = False
        elif previous_was_value:
            return None  # two words in a row: prose, not a flag's value
        else:
            previous_was_value = True
    return tokens


def serve_command_with(serve_command: str | None, flag: str | None) -> str | None:
    """The user's serve command with a recommended flag set (replacing the same flag if present)."""
    if not serve_command or not flag:
        return None
    new = _flag_tokens(flag)
    if new is None:
        return None
    try:
        base = shlex.split(serve_command)
    except ValueError:
        return None
    names = {tok.split("=", 1)[0] for tok in new if tok.startswith("--")}
    out: list[str] = []
    skip_value = False
    for tok in base:
        if skip_value:
            skip_value = False
            if not tok.startswith("-"):
                continue
        name = tok.split("=", 1)[0]
        if name in names:
            skip_value = "=" not in tok
            continue
        out.append(tok)
    return shlex.join(out + new)


def recommendations_section(ctx: MemoContext) -> str:
    lang = ctx.language
    seen: set[tuple] = set()
    blocks = []
    profile = ctx.inputs.case.source if ctx.inputs.case and ctx.inputs.case.source else None
    n = 0
    for fi, f in enumerate(ctx.findings, 1):
        for rec in f.recommendations:
            key = (rec.change.model_dump_json(), rec.flag)
            if key in seen:
                continue
            seen.add(key)
            n += 1
            blocks.append(_recommendation(ctx, n, fi, f, rec, profile))
    if not blocks:
        return t(lang, "re_none")
    return "\n\n".join(blocks)


def _recommendation(ctx: MemoContext, n: int, finding_no: int, f: Finding, rec: Recommendation, profile: str | None) -> str:
    lang = ctx.language
    colon = text(lang, "sep.colon")
    lines = [f"### {n}. {render(rec.change, lang)}", "", f"_{t(lang, 're_for', n=finding_no, cause=f.cause)}_", ""]
    if rec.flag:
        lines.append(f"- {t(lang, 're_flag')}{colon}`{rec.flag}`")
    lines.append(f"- {t(lang, 're_effect')}{colon}{render(rec.predicted_effect, lang) if rec.predicted_effect else t(lang, 're_effect_none')}")
    if rec.cost:
        lines.append(f"- {t(lang, 're_cost')}{colon}{render(rec.cost, lang)}")
    command = serve_command_with(ctx.inputs.deployment.serve_command, rec.flag)
    if command:
        lines += [f"- {t(lang, 're_command')}{colon.rstrip()}", "", code_block(command)]
    if rec.whatif and profile and ctx.engine is not None:
        whatif = " ".join(f"--what-if {shlex.quote(w)}" for w in rec.whatif)
        lines += ["", f"- {t(lang, 're_whatif')}{colon.rstrip()}", "", code_block(f"vllm-advisor estimate --profile {shlex.quote(profile)} {whatif}")]
    if rec.verify:
        lines += ["", f"- {t(lang, 're_verify')}{colon.rstrip()}", "", code_block(rec.verify)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- verification plan


def verification_plan(ctx: MemoContext) -> str:
    lang, i = ctx.language, ctx.inputs
    parts = []
    commands = bench_commands(ctx.rows, model=ctx.served_model, input_len=i.input_len, output_len=i.output_len, seed=ctx.seed)
    if commands:
        parts.append(t(lang, "ve_bench"))
        if not i.input_len or not i.output_len:
            parts.append(t(lang, "ve_placeholder"))
        parts.append(code_block("\n".join(commands)))
        if any(f.recommendations for f in ctx.findings):
            parts.append(t(lang, "ve_rec"))
    if ctx.diagnosis.missing:
        lines = [t(lang, "ve_missing"), ""]
        for m in ctx.diagnosis.missing:
            lines.append(f"- {render(m.what, lang)}{text(lang, 'sep.open')}{t(lang, 've_decides', causes=', '.join(f'`{c}`' for c in m.decides))}{text(lang, 'sep.close')}")
            lines += ["", "  " + code_block(m.command).replace("\n", "\n  "), ""] if m.command.strip() else [""]
        parts.append("\n".join(lines).rstrip())
    busiest = max((r for r in ctx.rows if r.predicted is not None), key=lambda r: (r.key[0] == "c", r.key[1]) if r.key else (False, 0), default=None)
    parts.append(t(lang, "ve_promql"))
    parts.append(
        md_table(
            [t(lang, "pq_query"), t(lang, "pq_what"), t(lang, "pq_expect", load=busiest.label if busiest else "—")],
            promql_rows(lang, ctx.served_model, busiest),
        )
    )
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- sources and notes


def sources_section(ctx: MemoContext) -> str:
    if not ctx.sources:
        return t(ctx.language, "sources_none")
    from ..answer.embedded import source_line

    return "\n".join(f"{c.number}. {source_line(c, ctx.language)}" for c in ctx.sources)


def notes_section(ctx: MemoContext) -> str:
    notes = [render(n, ctx.language) for n in ctx.diagnosis.notes]
    notes = list(dict.fromkeys(n for n in notes if n))
    return "\n".join(f"- {n}" for n in notes)


"""The embedded writer: a diagnosis as a Markdown answer, with no LLM.

Deterministic: the same findings give the same text. Every figure it prints is taken from a
finding's evidence or recommendation, the memory estimate or a benchmark run, printed with its unit
and a tag saying whether it was measured, reported by the user or modelled. Every word comes from
the message catalog (``advisor/messages``), so the answer is in the question's language.

Layout: a direct answer (the top finding with its key figures), the figures behind it, why (each
finding with its evidence), what to change (each recommendation with its flag, predicted effect,
cost and a command that verifies it), what would decide it (missing measurements), caveats and the
numbered sources that the inline ``[n]`` markers point to.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..messages import cause_mechanism, cause_name, cause_title, fmt_number, fmt_quantity, load_text, normalize_language, render, render_all, tag, text
from ..schema import Citation, Diagnosis, Evidence, Finding, Msg, Recommendation
from .figures import Figure, Figures, LoadRow, collect_figures
from .model import Answer
from .question import LIKELY
from .sources import attach_sources, card_upstream, query_tokens

KEY_FIGURES_IN_ANSWER = 3


def phrase(language: str, key: str, **values) -> str:
    """A fixed phrase of the answer (``answer.<key>`` in the catalog)."""
    return text(language, f"answer.{key}", **values)


def fmt_value(language: str, value, unit: str | None) -> str:
    return fmt_quantity(language, value, unit)


_SHELL = re.compile(r"^\s*(vllm|vllm-advisor|curl|python3?|nvidia-smi|pip|docker|kubectl|bash|sh|export|guidellm|genai-perf|nsys|ncu)(?=\s|$)")


def fence_language(command: str) -> str:
    """bash for a command line, promql for a metrics query, text for anything else."""
    if _SHELL.match(command):
        return "bash"
    return "promql" if "vllm:" in command else "text"


class Punct:
    """Punctuation that differs between Chinese and English prose."""

    def __init__(self, language: str) -> None:
        zh = normalize_language(language) == "zh"
        self.colon = "：" if zh else ": "
        self.semi = "；" if zh else "; "
        self.comma = "，" if zh else ", "
        self.open = "（" if zh else " ("
        self.close = "）" if zh else ")"
        self.stop = "。" if zh else "."
        self.dash = " — "

    def paren(self, text: str | None) -> str:
        return f"{self.open}{text}{self.close}" if text else ""


# -- sources ---------------------------------------------------------------------------------------


def collect_sources(diagnosis: Diagnosis) -> list[Citation]:
    """The answer's source list from the findings' citations, numbered 1..N in order of first use.

    Numbers already given by :func:`attach_sources` are kept when they are exactly 1..N; otherwise
    (citations added by hand, gaps) every finding's citations are renumbered consistently."""
    by_doc: dict[str, Citation] = {}
    for finding in diagnosis.findings:
        for c in finding.sources:
            by_doc.setdefault(c.doc_id, c)
    numbers = sorted(c.number for c in by_doc.values())
    if numbers == list(range(1, len(numbers) + 1)):
        return sorted(by_doc.values(), key=lambda c: c.number)
    order: dict[str, int] = {}
    for finding in diagnosis.findings:
        for c in finding.sources:
            order.setdefault(c.doc_id, len(order) + 1)
        finding.sources = [c.model_copy(update={"number": order[c.doc_id]}) for c in finding.sources]
    return sorted((by_doc[d].model_copy(update={"number": n}) for d, n in order.items()), key=lambda c: c.number)


def markers(citations: list[Citation]) -> str:
    """' [1][3]' for the citations given (deduplicated, ascending); '' for none."""
    nums = sorted({c.number for c in citations if c.number > 0})
    return (" " + "".join(f"[{n}]" for n in nums)) if nums else ""


def best_citation(text: str, citations: list[Citation]) -> list[Citation]:
    """The one citation of a finding whose section best matches a recommendation's words."""
    if not citations:
        return []
    words = set(query_tokens(text))
    # a tie goes to the finding's own first citation (its list order, not its number: the short
    # answer renumbers its sources after choosing them, and the choice must not move with that)
    scored = [(len(words & set(query_tokens(f"{c.title} {c.heading or ''} {c.snippet or ''}"))), -k, c) for k, c in enumerate(citations)]
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [scored[0][2]]


def cited_first(diagnosis: Diagnosis, text: str) -> bool:
    """Renumber the findings' citations so that those ``text`` cites come first, 1..k in the order
    it cites them, the others after in their old order; True when a number changed.

    Why: the short answer cites a few of the full analysis' sources ([1], [3], [5] read as missing
    ones); numbering those first gives it 1..k while the full analysis, ``Answer.sources`` and the
    chat's ``/sources N`` keep one numbering between them."""
    by_number = {c.number: c.doc_id for f in diagnosis.findings for c in f.sources}
    order: dict[str, int] = {}
    for n in re.findall(r"\[(\d+)\]", text):
        doc = by_number.get(int(n))
        if doc is not None:
            order.setdefault(doc, len(order) + 1)
    for number in sorted(by_number):
        order.setdefault(by_number[number], len(order) + 1)
    if all(order[doc] == number for number, doc in by_number.items()):
        return False
    for finding in diagnosis.findings:
        finding.sources = [c.model_copy(update={"number": order[c.doc_id]}) for c in finding.sources]
    return True


# -- figures ---------------------------------------------------------------------------------------


def render_tag(language: str, kind: str, detail_key: str | None = None) -> str:
    base = tag(language, kind)
    if not detail_key:
        return base
    sep = "，" if normalize_language(language) == "zh" else ", "
    return base[:-1] + sep + phrase(language, detail_key) + "]"


def evidence_label(ev: Evidence, language: str) -> str:
    """The evidence's label with its load point: 'requests running (c=100)'."""
    label = render(ev.label, language)
    return f"{label}{Punct(language).paren(load_text(language, ev.load))}" if ev.load else label


def render_evidence(ev: Evidence, language: str, *, bullet: bool = True) -> str:
    p = Punct(language)
    value = fmt_value(language, ev.value, ev.unit)
    if ev.kind == "text" and isinstance(ev.value, str):
        value = f"“{ev.value}”"  # the user's own words, quoted as written
    label = evidence_label(ev, language)
    body = f"{label}{p.colon}**{value}**" if value else label
    body += p.paren(render(ev.detail, language) if ev.detail else None)
    origin = text(language, f"origin.{ev.origin}", where=ev.where or "") if ev.origin else ""
    where = f"{p.dash}{origin}" if origin else ""
    line = f"{tag(language, ev.kind)} {body}{where}"
    return f"- {line}" if bullet else f"{body} {tag(language, ev.kind)}"


def _figure_label(fig: Figure, language: str) -> str:
    return f"`{fig.label}`" if fig.literal else phrase(language, fig.label, **fig.label_values)


def render_figure(fig: Figure, language: str) -> str:
    p = Punct(language)
    value = fig.value if not isinstance(fig.value, bool) else str(fig.value).lower()
    return f"{_figure_label(fig, language)}{p.colon}**{fmt_value(language, value, fig.unit)}** {render_tag(language, fig.kind, fig.detail)}"


def _cell(value: float | None) -> str:
    return "—" if value is None else fmt_number(value)


def render_load_table(rows: list[LoadRow], language: str) -> list[str]:
    cols = ["col_load", "col_source", "col_req_speed", "col_decode", "col_ttft", "col_throughput", "col_running", "col_waiting", "col_preempt"]
    present = [
        c
        for c in cols
        if c in ("col_load", "col_source")
        or any(
            getattr(r, attr) is not None
            for r in rows
            for attr in [
                {
                    "col_req_speed": "per_request_tok_s",
                    "col_decode": "decode_tok_s",
                    "col_ttft": "ttft_s",
                    "col_throughput": "output_tok_s",
                    "col_running": "running",
                    "col_waiting": "waiting",
                    "col_preempt": "preemptions",
                }[c]
            ]
        )
    ]
    if len(present) <= 2:
        return []  # labels without a single figure: no table
    lines = ["| " + " | ".join(phrase(language, c) for c in present) + " |", "|" + "---|" * len(present)]
    labels = [phrase(language, "run_n", n=r.run_index + 1) if r.run_index is not None else load_text(language, r.load) for r in rows]
    # two rows of one load ("c=1" for fp16 and for AWQ) are told apart by their order
    given = [label for r, label in zip(rows, labels) if r.kind != "model"]  # a prediction shares its run's label
    repeated = {label for label in given if given.count(label) > 1}
    seen: dict[str, int] = {}
    for r, label in zip(rows, labels):
        if label in repeated and r.kind != "model":
            seen[label] = seen.get(label, 0) + 1
            label = f"{label} ({seen[label]})"
        r = replace(r, load=label)
        if all(getattr(r, a) is None for a in ("per_request_tok_s", "decode_tok_s", "ttft_s", "output_tok_s", "running", "waiting", "preemptions")):
            continue
        source = tag(language, r.kind)
        if r.kind == "model" and r.calibrated:
            source = render_tag(language, "model", "calibrated")
        cells = {
            "col_load": r.load,
            "col_source": source,
            "col_req_speed": _cell(r.per_request_tok_s),
            "col_decode": _cell(r.decode_tok_s),
            "col_ttft": _cell(r.ttft_s),
            "col_throughput": _cell(r.output_tok_s),
            "col_running": _cell(r.running),
            "col_waiting": _cell(r.waiting),
            "col_preempt": _cell(r.preemptions),
        }
        lines.append("| " + " | ".join(cells[c] for c in present) + " |")
    return lines


def render_figures(figs: Figures, language: str) -> list[str]:
    p = Punct(language)
    out: list[str] = []
    if figs.workload:
        out.append(f"**{phrase(language, 'workload')}**{p.colon}" + p.semi.join(render_figure(f, language) for f in figs.workload))
        out.append("")
    if figs.memory:
        out.append(f"**{phrase(language, 'memory')}**")
        out += [f"- {render_figure(f, language)}" for f in figs.memory]
        out.append("")
    if figs.config:
        line = f"**{phrase(language, 'config')}**{p.colon}" + p.semi.join(render_figure(f, language) for f in figs.config)
        out.append(line)
        if figs.version_assumed and figs.version:
            out.append(f"_{phrase(language, 'version_assumed', version=figs.version)}_")
        out.append("")
    table = render_load_table(figs.loads, language) if figs.loads else []
    if table:  # "beside the model's prediction" only where the table has one
        title = "load_points" if any(r.kind == "model" for r in figs.loads) else "load_points_measured"
        out += [f"**{phrase(language, title)}**", "", *table, ""]
    return out


# -- sections --------------------------------------------------------------------------------------


def finding_heading(f: Finding, language: str) -> str:
    p = Punct(language)
    name = cause_name(language, f.cause)
    title = cause_title(language, f.cause)
    if name.lower() in title.lower():
        return title  # the title already names the cause: no "测量方法：测量方法本身…"
    return f"{name}{p.colon}{title}"


def explanation(f: Finding, language: str) -> str:
    return render_all(f.reasons, language)


def render_direct(diagnosis: Diagnosis, language: str) -> list[str]:
    p = Punct(language)
    if not diagnosis.findings:
        key = "no_findings" if diagnosis.missing else "no_findings_no_missing"
        return [phrase(language, key), ""]
    top = diagnosis.findings[0]
    why = explanation(top, language)
    para = f"{likeliest(top, language)}**{finding_heading(top, language)}**"
    para += f"{p.colon}{why}" if why else f"{p.colon}{cause_mechanism(language, top.cause)}{p.stop}"
    para += markers(top.sources)
    out = [para, ""]
    numeric: list[Evidence] = []
    for e in top.evidence:  # figures of this deployment: a similar report's similarity is not one
        if e.value is None or e.kind in ("text", "source") or any((e.value, e.unit) == (x.value, x.unit) for x in numeric):
            continue
        numeric.append(e)
    numeric = numeric[:KEY_FIGURES_IN_ANSWER]
    if numeric:
        out.append(f"{phrase(language, 'key_figures')}{p.colon}" + p.semi.join(render_evidence(e, language, bullet=False) for e in numeric))
        out.append("")
    out += others_lines(diagnosis.findings[1:], language, lambda f: f"{finding_heading(f, language)}{markers(f.sources)}")
    return out


def at_work(f: Finding) -> bool:
    """The finding is said to be at work: likely (LIKELY), or computed for this deployment by the
    performance model or a measurement (the motivating case's queue: 95 of 100 clients waiting),
    whatever the ranker's probability. A 3% finding that rests on words is not."""
    from .question import computed

    return f.confidence >= LIKELY or computed(f)


def likeliest(f: Finding, language: str, *, hedged: bool = False, first: bool = True) -> str:
    """The words that open a finding under one half (or ``hedged``: only the question points to it):
    the likeliest cause at its confidence, not an established one ("" otherwise); a finding after
    the first is "also possible", not the likeliest."""
    key = "likeliest" if first else "also_possible"
    return phrase(language, key, pct=f"{round(100 * f.confidence)}%") if f.confidence < LIKELY or hedged else ""


def others_lines(others: list[Finding], language: str, label, weighed: list[Finding] = ()) -> list[str]:
    """The findings after the answer's own: "also contributing" for those at work (``at_work``),
    "also weighed, less likely" for the rest and for ``weighed`` (those the reply does not state)."""
    p = Punct(language)
    out: list[str] = []
    working = [f for f in others if at_work(f) and f not in weighed]
    for key, group in (("also_found", working), ("also_weighed", [f for f in others if f not in working])):
        if group:
            out += [f"{phrase(language, key)}{p.colon}" + p.semi.join(label(f) for f in group), ""]
    return out


def render_why(diagnosis: Diagnosis, language: str) -> list[str]:
    p = Punct(language)
    out = [phrase(language, "h_why"), ""]
    for i, f in enumerate(diagnosis.findings, start=1):
        sev = phrase(language, f"sev_{f.severity}")
        out.append(f"### {i}. {finding_heading(f, language)}{p.paren(phrase(language, 'severity') + p.colon + sev)}")
        out.append("")
        why = explanation(f, language)
        if why:
            out.append(why + markers(f.sources))
            out.append("")
        if f.evidence:
            if not why and f.sources:
                out += [f"{phrase(language, 'sources_inline')}{p.colon}{markers(f.sources).strip()}", ""]
            out += [render_evidence(e, language) for e in f.evidence]
        else:
            out.append(phrase(language, "no_evidence") + ("" if why else markers(f.sources)))
        out.append("")
    return out


def change_key(r: Recommendation) -> str:
    """What makes two changes one: the flags they set, whatever their values ("--max-num-seqs 1024", the
    default back, and "--max-num-seqs 160", sized from the server's lines, were offered side by side with
    the same predicted effect in a real H100 run's answer); a change without a flag, its words."""
    names = sorted(t for t in (r.flag or "").split() if t.startswith("--"))
    return " ".join(names) if names else (r.flag or r.change.id).strip().lower()


def _recommendations(diagnosis: Diagnosis) -> list[tuple[Finding, Recommendation]]:
    return _worse_last(_own_settings_first(unique_changes([(f, r) for f in diagnosis.findings for r in f.recommendations])))


def unique_changes(recs: list[tuple[Finding, Recommendation]]) -> list[tuple[Finding, Recommendation]]:
    """One change per ``change_key``, in order; of two, the one that puts the user's own setting back to
    vLLM's default (what was done, undone) takes the place of the first."""
    kept: dict[str, int] = {}
    out: list[tuple[Finding, Recommendation]] = []
    for f, r in recs:
        key = change_key(r)
        if key not in kept:
            kept[key] = len(out)
            out.append((f, r))
        elif r.change.id == "rec.setting_default" and out[kept[key]][1].change.id != "rec.setting_default":
            out[kept[key]] = (f, r)
    return out


def _worse_last(recs: list[tuple[Finding, Recommendation]]) -> list[tuple[Finding, Recommendation]]:
    """Changes the model predicts to make this load worse go after the others (engine.predicted_worse)."""
    return [x for x in recs if not x[1].predicted_worse] + [x for x in recs if x[1].predicted_worse]


def change_text(r: Recommendation, language: str) -> str:
    """The change in words; one the model predicts to make this load worse says so before it."""
    change = render(r.change, language).strip()
    if not r.predicted_worse:
        return change
    lead = phrase(language, "not_here")
    return f"{lead}{change}" if lead.endswith(("：", "，")) else f"{lead} {change}"  # no space after a full-width colon


def _own_settings_first(recs: list[tuple[Finding, Recommendation]]) -> list[tuple[Finding, Recommendation]]:
    """A change that puts one of the user's own settings back to vLLM's default (the model costed it:
    setting_cost) comes before the others: it undoes what was done, where fp8 KV or more replicas
    add something new (a real run with --gpu-memory-utilization 0.3 was told those first). An attention
    backend the user set counts as theirs when a measurement priced it (ev.backend_gap), as the model
    prices the other settings; set but measured at the model's speed, it keeps its finding's place."""
    own = [x for x in recs if x[1].change.id == "rec.setting_default" or (x[1].change.id == "rec.attention_backend_default" and _priced(x[0]))]
    return own + [x for x in recs if x not in own]


def _priced(finding: Finding) -> bool:
    return any(e.label.id == "ev.backend_gap" for e in finding.evidence)


def render_change(diagnosis: Diagnosis, language: str, recs: list[tuple[Finding, Recommendation]], above: list[Msg]) -> list[str]:
    """The full answer's changes (``recs``: _recommendations), with the notes they need above them
    (``above``: notes_above_changes, as in the short answer: before the flags)."""
    p = Punct(language)
    if not recs:
        return [phrase(language, "h_change"), "", phrase(language, "no_recommendations"), ""] if diagnosis.missing else []
    out = [phrase(language, "h_change"), ""]
    for n in above:
        out += [f"_{render(n, language)}_", ""]
    for i, (f, r) in enumerate(recs, start=1):
        change = change_text(r, language)
        cite = markers(best_citation(f"{render(r.change, 'en')} {r.flag or ''}", f.sources))
        out.append(f"{i}. **{change}**{cite}")
        if r.flag:
            out.append(f"   - {phrase(language, 'flag')}{p.colon}`{r.flag}`")
        if r.whatif and r.predicted_effect:  # the what-if it was modelled with, when it was modelled
            out.append(f"   - {phrase(language, 'modelled_by')}{p.colon}" + " ".join(f"`{w}`" for w in r.whatif))
        if r.predicted_effect:
            effect = render(r.predicted_effect, language).strip()
            out.append(f"   - {phrase(language, 'predicted')} {tag(language, 'model')}{p.colon}{effect}")
        if r.cost:
            out.append(f"   - {phrase(language, 'cost')}{p.colon}{render(r.cost, language)}")
        if r.verify:
            out.append(f"   - {phrase(language, 'verify')}{p.colon.rstrip()}")
            out.append("")
            out.append(f"     ```{fence_language(r.verify)}")
            out += [f"     {line}" for line in r.verify.strip().splitlines()]
            out.append("     ```")
        out.append("")
    return out


def render_undecided(diagnosis: Diagnosis, language: str) -> list[str]:
    """Said plainly when the leading causes are too close to rank: a guess is not put first."""
    if not diagnosis.undecided:
        return []
    sep = "、" if normalize_language(language) == "zh" else " / "
    return [phrase(language, "undecided", causes=sep.join(cause_name(language, c) for c in diagnosis.undecided)), ""]  # noqa: E501


def render_similar(diagnosis: Diagnosis, language: str) -> list[str]:
    """The nearest case-library reports: their established causes, fix and thread."""
    if not diagnosis.similar_reports:
        return []
    sep = "、" if normalize_language(language) == "zh" else ", "
    out = [phrase(language, "h_similar"), ""]
    for r in diagnosis.similar_reports:
        # the library's fix notes are English: a Chinese answer names the causes and links the thread
        fix = phrase(language, "similar_fix", fix=_clip(r.fix, 140)) if r.fix and normalize_language(language) != "zh" else ""
        causes = sep.join(cause_name(language, c) for c in r.causes)
        out.append("- " + phrase(language, "similar_line", case=r.id, causes=causes, similarity=f"{r.similarity:.2f}", fix=fix, url=r.url))
    return out + [""]


def _clip(text: str, limit: int) -> str:
    """Shorten at a word boundary (never mid-word), marking the cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(",;:") + "…"


def render_missing(diagnosis: Diagnosis, language: str) -> list[str]:
    if not diagnosis.missing:
        return []
    p = Punct(language)
    out = [phrase(language, "h_missing"), ""]
    for m in diagnosis.missing:
        decides = " / ".join(cause_name(language, c) for c in m.decides)
        verb = phrase(language, "decides" if len(m.decides) > 1 else "decides_one")  # "between" needs two
        out.append(f"- {render(m.what, language).strip()}{p.paren(verb + p.colon + decides) if decides else ''}")
        out.append("")
        if m.command.strip():  # empty where no line of it runs on this engine or accelerator
            out.append(f"  ```{fence_language(m.command)}")
            out += [f"  {line}" for line in m.command.strip().splitlines()]
            out.append("  ```")
            out.append("")
    return out


def source_url(c: Citation) -> str | None:
    """One URL a reader can open: a packaged card's first upstream source (its file path inside the
    package means nothing to a reader), else the citation's own URL."""
    if c.url.startswith(("http://", "https://")):
        return c.url
    upstream = card_upstream(c)
    return upstream[0] if upstream else None


def source_title(c: Citation, language: str) -> str:
    """The title a reader of ``language`` sees: our own cards have a Chinese title; other documents
    keep theirs (names, not the advisor's prose)."""
    if c.kind == "card" and language == "zh":
        from vllm_advisor_knowledge.cards import card_titles_zh

        return card_titles_zh().get(c.doc_id, c.title)
    return c.title


def source_line(c: Citation, language: str) -> str:
    """A source as a reader wants it: its kind, its title and one URL."""
    p = Punct(language)
    kind = phrase(language, f"kind_{c.kind}") if c.kind in ("card", "doc", "issue") else c.kind
    url = source_url(c)
    return f"{kind}{p.colon}{source_title(c, language)}" + (f" <{url}>" if url else "")


def render_sources(sources: list[Citation], language: str) -> list[str]:
    out = [phrase(language, "h_sources"), ""]
    if not sources:
        return out + [phrase(language, "no_sources"), ""]
    for c in sources:
        out.append(f"- [{c.number}] {source_line(c, language)}")
    out.append("")
    return out


def answer_notes(inputs, diagnosis: Diagnosis, language: str = "en") -> list[str]:
    """Caveats (the diagnosis gathered them as messages from gathering, the model and itself), each once."""
    from ..diagnosis.engine import diagnosis_notes

    messages = list(diagnosis.notes)
    if inputs is not None and hasattr(inputs, "engine"):
        messages += [m for m in diagnosis_notes(inputs) if m not in messages]  # a diagnosis built by hand
    notes = [render(n, language) for n in messages]
    return list(dict.fromkeys(n.strip() for n in notes if n and n.strip()))


def compose_tail(sources: list[Citation], language: str, notes: list[str]) -> str:
    """Caveats and the numbered sources: what follows the prose in every answer."""
    lines: list[str] = []
    if notes:
        lines += [phrase(language, "h_notes"), ""] + [f"- {n}" for n in notes] + [""]
    lines += render_sources(sources, language)
    return "\n".join(lines).rstrip() + "\n"


def compose(inputs, diagnosis: Diagnosis, sources: list[Citation], language: str, notes: list[str], *, body: list[str] | None = None) -> str:
    """The whole answer; ``body`` replaces the part between the direct answer and the sources."""
    lines: list[str] = []
    if body is None:
        from .question import question_verdict

        lines += [phrase(language, "h_answer"), ""]
        _, said = question_verdict(_asked(inputs), diagnosis)
        if said is not None:  # "is X the cause?" gets its yes or no before the reasons
            lines += [render(said, language).strip(), ""]
        lines += render_direct(diagnosis, language)
        figures = render_figures(collect_figures(inputs), language) if inputs is not None else []
        if figures:
            lines += [phrase(language, "h_figures"), ""] + figures
        if diagnosis.findings:
            lines += render_why(diagnosis, language)
        recs = _recommendations(diagnosis)
        above = notes_above_changes(diagnosis, [r for _, r in recs])
        lines += render_change(diagnosis, language, recs, above)
        shown = {render(n, language).strip() for n in above}
        notes = [n for n in notes if n not in shown]  # said once, where it applies
        lines += render_undecided(diagnosis, language)
        lines += render_missing(diagnosis, language)
        lines += render_similar(diagnosis, language)
    else:
        lines += body + [""]
    return "\n".join(lines).rstrip() + "\n\n" + compose_tail(sources, language, notes)


SHORT_CHANGES = 3
SHORT_OTHERS = 4
#: Flags that name an NVIDIA-only mechanism (attention kernels, CUDA graphs, FP8 tensor cores): the
#: note that the deployment runs on another accelerator is about these, and says nothing before a
#: list of changes without one (a reviewer's find, session 14: an Ascend note above a benchmark command).
NVIDIA_ONLY_FLAG = re.compile(r"--attention-backend|--enforce-eager|cudagraph|cuda[-_]graph|--compilation-config|fp8", re.IGNORECASE)
NVIDIA_ONLY_CHANGE = ("rec.cuda_graph", "rec.attention_backend", "rec.kv_quant", "rec.kv_capacity_1")


def nvidia_only(rec: Recommendation) -> bool:
    """The change is about an NVIDIA-only mechanism, by its flag or by what it says."""
    return bool(NVIDIA_ONLY_FLAG.search(rec.flag or "")) or rec.change.id.startswith(NVIDIA_ONLY_CHANGE)


ENGINE_NOTES = ("note.other_engine", "note.engine_named", "note.platform_named")


def notes_above_changes(diagnosis: Diagnosis, recs: list[Recommendation]) -> list[Msg]:
    """The notes a list of changes needs above it: whose flags these are (only above flags: with no
    flag below, a line about "the flags below" points at nothing, a reviewer's find of session 12), and
    that the accelerator is not NVIDIA's (only above an NVIDIA-only change, flag or not)."""
    shown = {"note.platform_named": any(nvidia_only(r) for r in recs)}
    flags = any(r.flag for r in recs)
    return [n for n in diagnosis.notes if n.id.startswith(ENGINE_NOTES) and shown.get(n.id, flags)]


def compose_short(inputs, diagnosis: Diagnosis, sources: list[Citation], language: str) -> str:
    """The answer that fits a screen: the direct reply to what was asked (the reasons that bear on
    it, with their figures), the other findings in a line, the top changes with their predicted
    effect, where the full analysis is, and the sources cited above (a title and one URL each)."""
    from .question import computed, direct_reply, says_healthy

    p = Punct(language)
    question = _asked(inputs)
    reply = direct_reply(question, diagnosis)
    out = [phrase(language, "h_answer"), ""]
    if reply.verdict is not None:  # "is X the cause?" gets its yes or no before the reasons
        out += [render(reply.verdict, language).strip(), ""]
    # the user's speed is what this hardware does (the verdict says so): a cause resting on words
    # alone is not then stated beside it as the reason, nor its change made (a reviewer's find: "Yes,
    # this is healthy" followed by "**the release in use is the cause**"); it stays among the others weighed
    healthy = says_healthy(reply.verdict)
    # ... nor where the question plans a deployment ("how fast will it be?") and reports nothing it saw:
    # the model's figures answer it, and a cause has nothing to explain (an audit's find: "how fast will
    # DeepSeek-R1 run on eight H20s?" got "likeliest cause: max_num_batched_tokens" on similar reports alone)
    stated = getattr(inputs, "stated", None)
    planning = reply.verdict is not None and reply.verdict.id.startswith(("verdict.expect_", "verdict.capacity")) and stated is not None and not stated.reports_figures
    words_only = [f for f in reply.findings if (healthy or planning) and not computed(f)]
    if not diagnosis.findings:
        out += render_direct(diagnosis, language)
    else:
        cited = [f.sources[0] for f in reply.findings if f.sources]  # one source per finding: the short answer stays short
        explained = {f.cause for f in reply.findings if any(r in f.reasons for r in reply.reasons)}
        # in the reply's order (the diagnosis' order when a question asks two things): a finding its
        # figures alone establish shows its headline (figures below), the others their reasons
        pending = list(reply.reasons)

        def reason_line(r) -> list[str]:  # the last reason written carries the source markers
            pending.remove(r)
            return [render(r, language).strip() + ("" if pending else markers(cited)), ""]

        for f in reply.findings:
            if f in words_only:
                continue
            asked = f.cause == reply.asked
            # only the question points to it: never stated as established; already weighed in the verdict: not twice
            unshown = asked and reply.verdict.id.startswith("verdict.unshown")
            if f.cause not in explained or unshown:
                first = f is reply.findings[0]
                opener = "" if asked and reply.verdict.id == "verdict.possibly" else likeliest(f, language, hedged=unshown, first=first)
                out += [f"{opener}**{cause_title(language, f.cause)}**{p.colon}{cause_mechanism(language, f.cause)}{p.stop}" + ("" if reply.reasons else markers(cited)), ""]
                continue
            for r in [r for r in pending if r in f.reasons]:
                out += reason_line(r)
        for r in list(pending):
            out += reason_line(r)
        if reply.figures and len(reply.reasons) < 2:  # two reasons or more already carry their figures
            out.append(f"{phrase(language, 'key_figures')}{p.colon}" + p.semi.join(render_evidence(e, language, bullet=False) for e in reply.figures))
            out.append("")
        others = [f for f in diagnosis.findings if f not in reply.findings or f in words_only][:SHORT_OTHERS]
        out += others_lines(others, language, lambda f: cause_name(language, f.cause), weighed=words_only)  # names: one line on a screen
    changes = _top_changes(diagnosis, [f for f in reply.findings if f not in words_only], left_out=words_only)
    if changes:
        out += [phrase(language, "h_change"), ""]
        for n in notes_above_changes(diagnosis, [r for _, r in changes]):  # whose flags these are, before them
            out += [f"_{render(n, language)}_", ""]
        for i, (f, r) in enumerate(changes, start=1):
            line = f"{i}. **{change_text(r, language)}**"
            if r.flag:
                line += f" `{r.flag}`"
            if r.predicted_effect:
                line += f"{p.dash}{phrase(language, 'predicted')} {tag(language, 'model')}{p.colon}{render(_short_effect(r.predicted_effect), language).strip()}"
            line += markers(best_citation(f"{render(r.change, 'en')} {r.flag or ''}", f.sources))
            out.append(line)
        out.append("")
    # (that the leading causes are undecided is said in the full analysis, beside the measurements that decide them)
    # what was set aside from the input, read from the words, or left the answer without a model or
    # sources, is said here
    caveats = [render(n, language) for n in diagnosis.notes if n.id.startswith(("input.", "note.no_model", "note.engine_error", "note.tp_", "note.model_not_in_catalog", "note.gpu_not_in_catalog", "note.words_other_engine", "note.kb_", "note.stated", "note.gauges_missed_load", "note.metrics_idle", "note.served_", "note.max_model_len_needed", "note.max_model_len_assumed", "note.max_model_len_beyond", "note.memory_")) or (n.id.startswith(ENGINE_NOTES) and not changes)]
    if caveats:  # under their own heading: below the numbered changes they read as one more change (a reviewer's find)
        out += [phrase(language, "h_notes"), ""] + [f"- {c}" for c in caveats] + [""]
    out += [f"_{phrase(language, 'more')}_", ""]
    body = "\n".join(out)
    # numbered as the full analysis (number_sources_for_short numbers the sources cited here first),
    # so Answer.sources, `/sources N` in the chat and `/details` read the same numbers as the markers
    shown = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = [c for c in sources if c.number in shown]
    return body.rstrip() + "\n\n" + "\n".join(render_sources(listed, language)).rstrip() + "\n"


def _short_effect(effect: Msg) -> Msg:
    """A what-if effect cut to what a screen holds: its first two figures (the KV cache counts as one)."""
    if effect.id != "effect.model":
        return effect
    parts, room = [], 2
    for part in effect.args.get("parts", []):
        if room <= 0:
            break
        if isinstance(part, Msg) and part.id == "effect.point":
            part = part.model_copy(update={"args": {**part.args, "changes": list(part.args.get("changes", []))[:room]}})
            room -= len(part.args["changes"])
        else:
            room -= 1
        parts.append(part)
    return effect.model_copy(update={"args": {**effect.args, "parts": parts}})


def _asked(inputs) -> str | None:
    """The question now asked (a chat passes earlier questions as context before it)."""
    question = getattr(inputs, "question", None) if inputs is not None else None
    if question and "\n\nQuestion now: " in question:
        return question.rsplit("\n\nQuestion now: ", 1)[1]
    return question


def _top_changes(diagnosis: Diagnosis, first: list[Finding], left_out: list[Finding] = ()) -> list[tuple[Finding, Recommendation]]:
    """The changes for the findings that answer the question first, those with a modelled effect
    ahead of the rest; at most SHORT_CHANGES. Other findings bring their changes only when they are
    at work (``at_work``): a change for a 5% finding is padding (the review found one in 23 of 30
    short answers). ``left_out``: findings the reply does not state (bring no change)."""
    order = first + [f for f in diagnosis.findings if f not in first and f not in left_out and at_work(f)]
    recs = unique_changes([(f, r) for f in order for r in f.recommendations])
    recs.sort(key=lambda fr: (order.index(fr[0]) > 0 and fr[1].predicted_effect is None, 0))
    modelled = [x for x in recs if x[1].predicted_effect is not None and x[1].predicted_effect.id != "effect.not_modelled"]
    rest = [x for x in recs if x not in modelled]
    first_own = [x for x in recs if x[0] in first][:1]
    picked = first_own + [x for x in modelled + rest if x not in first_own]
    return _worse_last(_own_settings_first(picked))[:SHORT_CHANGES]


def resolve_language(inputs, diagnosis: Diagnosis, language: str | None) -> str:
    return normalize_language(language or (getattr(inputs, "language", None) if inputs is not None else None) or diagnosis.language)


def number_sources_for_short(inputs, diagnosis: Diagnosis, language: str | None = None) -> list[Citation]:
    """The sources numbered so that the short answer's come first (:func:`cited_first`); for
    whoever writes next, the embedded writer or an LLM, so both cite one numbering."""
    lang = resolve_language(inputs, diagnosis, language)
    sources = collect_sources(diagnosis)
    if diagnosis.findings and cited_first(diagnosis, compose_short(inputs, diagnosis, sources, lang)):
        sources = collect_sources(diagnosis)
    return sources


def write_answer(inputs, diagnosis: Diagnosis, *, language: str | None = None, extra_notes: list[str] | tuple[str, ...] = (), short: bool = False) -> Answer:
    """The embedded answer. Uses the sources :func:`attach_sources` put on the findings; when no
    finding has any, the packaged cards are attached here (no knowledge-base search).
    ``extra_notes`` lead the caveats (the LLM path says here why its answer was not used)."""
    lang = resolve_language(inputs, diagnosis, language)
    if diagnosis.findings and not any(f.sources for f in diagnosis.findings):
        attach_sources(diagnosis, inputs, kb=False)
    sources = number_sources_for_short(inputs, diagnosis, lang) if short else collect_sources(diagnosis)
    notes = list(dict.fromkeys([*extra_notes, *answer_notes(inputs, diagnosis, lang)]))
    full = compose(inputs, diagnosis, sources, lang, notes)
    markdown = compose_short(inputs, diagnosis, sources, lang) if short else full
    return Answer(
        markdown=markdown,
        full_markdown=full,
        tail=compose_tail(sources, lang, notes),
        language=lang,
        sources=sources,
        findings=[f.model_copy(deep=True) for f in diagnosis.findings],
        missing=[m.model_copy(deep=True) for m in diagnosis.missing],
        llm_used=False,
        notes=notes,
    )

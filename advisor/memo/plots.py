"""The memo's plots (three, plus the server's timeline when a probe bench run sampled /metrics), drawn with matplotlib's object API on the Agg canvas (no display, no
pyplot global state, safe to call from any thread).

Every label is a message of the catalog (``plot.*``), in the question's language. A Chinese plot
uses Noto Sans CJK SC from the ``mplfonts`` wheel (installed with the advisor; no system font is
assumed), with DejaVu Sans first so Latin letters and digits keep matplotlib's usual look.
Each PNG is written to a temporary file first and moved into place, like the memo itself.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

from .loadpoints import LoadPointRow, figure_value

MEASURED_STYLE = dict(color="black", marker="o", linestyle="-", linewidth=1.5)
PREDICTED_STYLE = dict(color="tab:blue", marker="s", linestyle="--", linewidth=1.5)
CEILING_STYLE = dict(color="tab:gray", marker="^", linestyle=":", linewidth=1.2)


CJK_FONT = "NotoSansCJKsc-Regular.otf"


def font_properties(language: str):
    """Text properties for a plot in ``language``: None (matplotlib's default) for English; for
    Chinese a family list that falls back from DejaVu Sans to Noto Sans CJK SC glyph by glyph."""
    if language != "zh":
        return None
    from importlib import resources

    from matplotlib import font_manager

    path = resources.files("mplfonts").joinpath(f"fonts/{CJK_FONT}")
    font_manager.fontManager.addfont(str(path))
    family = font_manager.FontProperties(fname=str(path)).get_name()
    return font_manager.FontProperties(family=["DejaVu Sans", family])


class Labels:
    """Plot labels from the catalog, kept so a test can read every label a plot carries."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.seen: list[str] = []

    def __call__(self, key: str, **values) -> str:
        from ..messages import text

        shown = text(self.language, f"plot.{key}", **values)
        self.seen.append(shown)
        return shown


def _use_font(fig, props) -> None:
    """Apply the language's font to every text of the figure (titles, labels, ticks, legends)."""
    if props is None:
        return
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        t.set_fontfamily(props.get_family())


@dataclass
class Plot:
    name: str  # file stem: per_request_speed, throughput, kv_capacity
    path: Path
    title_key: str


def _axis(rows: list[LoadPointRow]) -> tuple[str | None, list[LoadPointRow]]:
    """Closed-loop points when there are any (x = clients), else finite request rates above zero
    (x = req/s; a rate of 0 or below sends nothing and is set aside by the gatherer)."""
    closed = [r for r in rows if r.key and r.key[0] == "c"]
    if closed:
        return "c", closed
    rates = [r for r in rows if r.key and r.key[0] == "rate" and math.isfinite(r.key[1]) and r.key[1] > 0]
    return ("rate", rates) if rates else (None, [])


def _series(rows: list[LoadPointRow], pick) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        y = pick(row)
        if y is not None and row.x is not None and not math.isinf(y):
            xs.append(row.x)
            ys.append(y)
    return xs, ys


def _measured(rows: list[LoadPointRow], attr: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        for run in row.measured:
            y = figure_value(run, attr)
            if y is not None and row.x is not None:
                xs.append(row.x)
                ys.append(y)
    return xs, ys


def _figure(title: str, xlabel: str, ylabel: str, xs_all: list[float]):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    positive = [x for x in xs_all if x > 0]
    if positive and max(positive) / min(positive) >= 10:
        ax.set_xscale("log")
    if positive:
        ax.set_xticks(sorted(set(positive)))
        ax.set_xticklabels([f"{x:g}" for x in sorted(set(positive))])
    return fig, ax


def _save(fig, path: Path, props=None) -> None:
    from .writer import write_bytes_atomic

    _use_font(fig, props)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": "vllm-advisor"})
    write_bytes_atomic(path, buffer.getvalue())


def draw_plots(
    rows: list[LoadPointRow],
    folder: Path,
    *,
    subject: str,
    calibrated: bool,
    kv_requests_that_fit: float | None,
    kv_tokens_per_request: int | None,
    kv_missing_text: str = "the KV-capacity plot needs the performance model",
    language: str = "en",
    labels: Labels | None = None,
) -> tuple[list[Plot], list[str]]:
    """Draw what the data allow, labelled in ``language``; return the plots written and, for each
    one not drawn, why. ``labels`` (optional) collects every label drawn."""
    L = labels if labels is not None else Labels(language)
    props = font_properties(language)
    kind, points = _axis(rows)
    skipped: list[str] = []
    if kind is None:
        return [], [L("skip_no_axis")]
    xlabel = L("x_clients") if kind == "c" else L("x_rate")
    model_tag = L("model_calibrated") if calibrated else L("model_uncalibrated")
    xs_all = [r.x for r in points if r.x is not None]
    plots: list[Plot] = []
    runs = [m for r in points for m in r.measured]
    measured = L("reported") if runs and all(m.format == "observations" for m in runs) else L("measured")

    # (a) per-request speed
    fig, ax = _figure(L("speed_title", subject=subject), xlabel, L("speed_y"), xs_all)
    drawn = _plot_pairs(
        ax,
        [
            (_measured(points, "request_output_tok_s"), L("speed_output", who=measured), MEASURED_STYLE),
            (_measured(points, "request_decode_tok_s"), L("speed_decode", who=measured), {**MEASURED_STYLE, "linestyle": "-.", "marker": "D"}),
            (_series(points, lambda r: figure_value(r.predicted, "request_output_tok_s")), L("speed_output_predicted", model=model_tag), PREDICTED_STYLE),
            (_series(points, lambda r: figure_value(r.predicted, "request_decode_tok_s")), L("speed_decode_predicted", model=model_tag), {**PREDICTED_STYLE, "linestyle": ":", "marker": "x"}),
            (_series(points, lambda r: figure_value(r.ceiling, "request_output_tok_s")), L("speed_ceiling"), CEILING_STYLE),
        ],
    )
    if drawn:
        plots.append(_finish(fig, ax, folder / "per_request_speed.png", "per_request_speed", "pl_speed", props=props))
    else:
        skipped.append(L("skip_speed"))

    # (b) throughput
    fig, ax = _figure(L("throughput_title", subject=subject), xlabel, L("throughput_y"), xs_all)
    drawn = _plot_pairs(
        ax,
        [
            (_measured(points, "output_throughput_tok_s"), measured, MEASURED_STYLE),
            (_series(points, lambda r: figure_value(r.predicted, "output_throughput_tok_s")), L("predicted", model=model_tag), PREDICTED_STYLE),
            (_series(points, lambda r: figure_value(r.ceiling, "output_throughput_tok_s")), L("ceiling"), CEILING_STYLE),
        ],
    )
    if drawn:
        plots.append(_finish(fig, ax, folder / "throughput.png", "throughput", "pl_throughput", props=props))
    else:
        skipped.append(L("skip_throughput"))

    # (c) where KV capacity binds
    if kv_requests_that_fit is None:
        skipped.append(kv_missing_text)
    else:
        fig, ax = _figure(L("kv_title", subject=subject), xlabel, L("kv_y"), xs_all)
        pairs = [
            (_series(points, lambda r: r.predicted.server_view.running_mean if r.predicted and r.predicted.server_view else None), L("kv_running_mean", model=model_tag), PREDICTED_STYLE),
            (_series(points, lambda r: r.predicted.server_view.running_max if r.predicted and r.predicted.server_view else None), L("kv_running_max"), {**PREDICTED_STYLE, "linestyle": ":", "marker": "x"}),
            (_series(points, lambda r: next((m.metadata.get("server_num_requests_running") for m in r.measured if m.metadata.get("server_num_requests_running") is not None), None)), L("kv_running_measured", who=measured), MEASURED_STYLE),
        ]
        drawn = _plot_pairs(ax, pairs)
        if drawn:
            if kind == "c":
                ax.plot(xs_all, xs_all, label=L("kv_clients"), color="tab:green", linewidth=0.8, alpha=0.6)
            tokens = f"{kv_tokens_per_request:,}" if kv_tokens_per_request else "?"
            ax.axhline(kv_requests_that_fit, color="tab:red", linewidth=1.5, label=L("kv_fit", tokens=tokens, fit=f"{kv_requests_that_fit:.1f}"))
            ax.legend(fontsize=8, loc="best")
            plots.append(_finish(fig, ax, folder / "kv_capacity.png", "kv_capacity", "pl_kv", legend=False, props=props))
        else:
            skipped.append(L("skip_kv"))

    # (d) the server's own view over time, when probe bench sampled /metrics
    timed = [m for r in points for m in r.measured if m.metadata.get("server_timeline")]
    several_files = len({m.source for m in timed}) > 1
    timelines = [(f"{Path(m.source).stem} {m.load_label}" if several_files else m.load_label, m.metadata["server_timeline"]) for m in timed]
    if timelines:
        plots.append(_server_timeline(timelines, folder / "server_timeline.png", subject, L, props))
    return plots, skipped


def _server_timeline(timelines: list[tuple[str, list[dict]]], path: Path, subject: str, L: Labels, props=None) -> Plot:
    """Requests running and waiting (left axis) and KV-cache usage (right axis) against time, the
    load points one after another with a divider: where the queue forms and whether KV is full then."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(L("server_title", subject=subject), fontsize=11)
    ax.set_xlabel(L("server_x"))
    ax.set_ylabel(L("server_y"))
    ax.grid(True, alpha=0.3)
    kv_ax = ax.twinx()
    kv_ax.set_ylabel(L("server_kv"))
    kv_ax.set_ylim(0, 105)
    offset = 0.0
    for i, (label, points) in enumerate(timelines):
        ts = [offset + float(p.get("t_s") or 0.0) for p in points]
        def series(key: str, scale: float = 1.0) -> list[float]:
            return [float("nan") if p.get(key) is None else float(p[key]) * scale for p in points]
        first = i == 0
        ax.plot(ts, series("running"), color="black", linewidth=1.4, label=L("server_running") if first else None)
        ax.plot(ts, series("waiting"), color="tab:orange", linewidth=1.4, linestyle="--", label=L("server_waiting") if first else None)
        kv_ax.plot(ts, series("kv_cache_usage", 100.0), color="tab:red", linewidth=1.0, alpha=0.8, label=L("server_kv") if first else None)
        if ts:
            ax.axvline(offset, color="tab:gray", linewidth=0.8, alpha=0.6)
            ax.text(offset, 1.0, f" {label}", transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="tab:gray")
            offset = ts[-1] + 1.0
    ax.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()
    kv_handles = kv_ax.get_legend_handles_labels()
    ax.legend(handles[0] + kv_handles[0], handles[1] + kv_handles[1], fontsize=8, loc="upper right")
    _save(fig, path, props)
    return Plot(name="server_timeline", path=path, title_key="pl_server")


def _plot_pairs(ax, pairs) -> int:
    drawn = 0
    for (xs, ys), label, style in pairs:
        if xs:
            ax.plot(xs, ys, label=label, **style)
            drawn += 1
    return drawn


def _finish(fig, ax, path: Path, name: str, title_key: str, legend: bool = True, props=None) -> Plot:
    if legend:
        ax.legend(fontsize=8, loc="best")
    ax.set_ylim(bottom=0)
    _save(fig, path, props)
    return Plot(name=name, path=path, title_key=title_key)

"""The load curve as a PNG: running and waiting requests against clients, throughput beside them,
the knee marked. matplotlib is imported here only, when ``--plot`` asks for it (it costs ~0.3 s to
import), through its object API on the Agg canvas, like the memo's plots."""

from __future__ import annotations

import io
from pathlib import Path

from ..perf.curve import CurvePoint, Knee


def draw_curve(points: list[CurvePoint], knee: Knee | None, path: Path, *, subject: str, calibrated: bool) -> Path:
    from matplotlib.figure import Figure

    from ..memo.writer import write_bytes_atomic

    xs = [p.concurrency for p in points]
    fig = Figure(figsize=(8, 4.8), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    tag = "model, calibrated" if calibrated else "model, uncalibrated"
    ax.set_title(f"Load curve — {subject}", fontsize=10)
    ax.set_xlabel("concurrent clients (closed loop)")
    ax.set_ylabel("requests (time-weighted mean)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_yscale("symlog", linthresh=1.0)  # a plateau of 5 running and 200 waiting on one axis
    ax.grid(True, alpha=0.3)
    ax.plot(xs, xs, color="tab:gray", linestyle=":", linewidth=1, label="clients")
    ax.plot(xs, [p.running_mean for p in points], color="tab:blue", marker="s", label=f"running ({tag})")
    ax.plot(xs, [p.waiting_mean for p in points], color="tab:red", marker="o", label=f"waiting ({tag})")
    tput = [(p.concurrency, p.output_tok_s) for p in points if p.output_tok_s is not None]
    handles, labels = ax.get_legend_handles_labels()
    if tput:
        ax2 = ax.twinx()
        ax2.set_ylabel("output tokens/s (whole server)")
        (line,) = ax2.plot([x for x, _ in tput], [y for _, y in tput], color="tab:green", marker="^", linestyle="--", label=f"output throughput ({tag})")
        ax2.set_ylim(bottom=0)
        handles.append(line)
        labels.append(line.get_label())
    if knee is not None and knee.first_queued is not None:
        ax.axvline(knee.first_queued, color="black", linestyle="--", linewidth=1)
        from matplotlib.transforms import blended_transform_factory

        ax.text(  # at the foot of the knee's line, clear of the curves
            knee.first_queued * 1.06,
            0.04,
            f"knee: ~{knee.running_plateau:.1f} running ({knee.limit.replace('_', ' ')})",
            transform=blended_transform_factory(ax.transData, ax.transAxes),
            fontsize=9,
        )
    ax.legend(handles, labels, fontsize=8, loc="upper left", framealpha=0.9)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": "vllm-advisor"})
    write_bytes_atomic(path, buffer.getvalue())
    return path

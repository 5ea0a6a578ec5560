"""Assemble the memo and write it atomically, plots first, so a reader never opens half a memo or a
memo whose plot links point at nothing."""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputFileError
from ..schema import Citation, Diagnosis
from . import sections
from .sections import lang_of, t
from .loadpoints import line_up
from .plots import Labels, draw_plots


@dataclass
class MemoResult:
    path: Path
    plots: list[Path]
    markdown: str
    language: str
    seed: int  # the first --seed of the verification plan's benchmark lines
    skipped_plots: list[str] = field(default_factory=list)
    plot_labels: list[str] = field(default_factory=list)  # every title, axis label and legend entry drawn

    def to_dict(self) -> dict[str, Any]:
        return {
            "memo": str(self.path),
            "plots": [str(p) for p in self.plots],
            "language": self.language,
            "seed": self.seed,
            "skipped_plots": self.skipped_plots,
        }


def plots_folder(out_path: Path) -> Path:
    return out_path.with_name(f"{out_path.stem}_plots")


def _subject(inputs) -> str:
    if inputs.engine is not None:
        em = inputs.engine
        return f"{em.model.name}, {em.num_gpus} x {em.gpu.name}, TP {em.config.tensor_parallel_size}"
    dep = inputs.deployment
    return ", ".join(x for x in (dep.model, f"{dep.num_gpus} x {dep.gpu}" if dep.gpu else None) if x) or "vLLM deployment"


def new_seed(inputs) -> int:
    """A seed no measured run used (their prompts may still sit in the prefix cache)."""
    used = {r.metadata.get("seed") for r in inputs.measured}
    while True:
        seed = 1000 + secrets.randbelow(9_000_000)
        if not any(seed + k in used for k in range(16)):
            return seed


def render_memo(inputs, diagnosis: Diagnosis, sources: list[Citation], plots_dir: Path, link_base: Path, seed: int | None = None, labels: Labels | None = None) -> tuple[str, list[Path], list[str], int]:
    """The memo's Markdown with its plots drawn into ``plots_dir`` (linked relative to ``link_base``)."""
    language = lang_of(inputs.language or diagnosis.language)
    findings = sections.rank(diagnosis.findings)
    seed = seed if seed is not None else new_seed(inputs)
    ctx = sections.MemoContext(
        inputs=inputs,
        diagnosis=diagnosis,
        sources=sections.number_sources(sources, findings),
        rows=line_up(inputs.measured, inputs.predicted, inputs.ceiling),
        seed=seed,
        language=language,
        findings=findings,
    )
    subject = _subject(inputs)
    plots, skipped = draw_plots(
        ctx.rows,
        plots_dir,
        subject=subject,
        calibrated=ctx.calibrated,
        kv_requests_that_fit=ctx.requests_that_fit,
        kv_tokens_per_request=ctx.tokens_per_request,
        kv_missing_text=t(language, "pl_kv_needs_model"),
        language=language,
        labels=labels,
    )
    written = {p.path.name for p in plots}
    for stale in ("per_request_speed.png", "throughput.png", "kv_capacity.png"):  # left by an earlier memo
        if stale not in written:
            (plots_dir / stale).unlink(missing_ok=True)
    date = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    out = [f"# {t(language, 'title', subject=subject)}", "", f"_{t(language, 'generated', version=__version__, date=date)}_"]
    if inputs.question:
        out += ["", f"**{t(language, 'question')}:** " + " ".join(inputs.question.split())]

    def section(key: str, body: str) -> None:
        if body.strip():
            out.extend(["", f"## {t(language, key)}", "", body.strip()])

    section("summary", sections.summary(ctx))
    section("facts", sections.deployment_facts(ctx))
    section("measured_vs_predicted", sections.measured_vs_predicted(ctx))
    section("plots", _plots_markdown(language, plots, skipped, link_base))
    section("findings", sections.findings_section(ctx))
    section("recommendations", sections.recommendations_section(ctx))
    section("verification", sections.verification_plan(ctx))
    section("notes", sections.notes_section(ctx))
    section("sources", sections.sources_section(ctx))
    return "\n".join(out) + "\n", [p.path for p in plots], skipped, seed


def _plots_markdown(language: str, plots, skipped: list[str], link_base: Path) -> str:
    if not plots:
        return t(language, "pl_none")
    lines = []
    for p in plots:
        rel = os.path.relpath(p.path, link_base).replace(os.sep, "/")
        lines += [f"### {t(language, p.title_key)}", "", f"![{t(language, p.title_key)}]({rel})", ""]
    if skipped:
        lines.append(t(language, "pl_skipped", what="; ".join(skipped)))
    return "\n".join(lines)


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename over the target (atomic on POSIX):
    the old memo stays whole until the new one is complete. Credentials are scrubbed on the way (the
    log's redaction: a serve command or a note can carry an --api-key)."""
    from ..logs import redact_text

    write_bytes_atomic(path, (redact_text(text) or "").encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; a memo is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode(path: Path) -> int:
    """The mode the file already has, else what a plain open() would give (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_memo(inputs, diagnosis: Diagnosis, sources: list[Citation], out_path: Path, *, seed: int | None = None) -> MemoResult:
    """Write the memo to ``out_path`` and its plots to ``<stem>_plots/`` beside it."""
    out_path = Path(out_path)
    if out_path.exists() and out_path.is_dir():
        raise InputFileError("is a folder; give a file name for the memo, e.g. memo.md", source=str(out_path))
    try:
        labels = Labels(lang_of(inputs.language or diagnosis.language))
        markdown, plots, skipped, seed = render_memo(inputs, diagnosis, sources, plots_folder(out_path), out_path.parent, seed, labels)
        write_text_atomic(out_path, markdown)
    except OSError as exc:
        raise InputFileError(f"cannot write the memo: {exc.strerror or exc}", source=str(exc.filename or out_path)) from None
    return MemoResult(path=out_path, plots=plots, markdown=markdown, language=lang_of(inputs.language or diagnosis.language), seed=seed, skipped_plots=skipped, plot_labels=labels.seen)

"""``vllm-advisor memo``: the whole analysis of one case as a Markdown memo with plots."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..errors import AdvisorError
from .ask import chroma_url_option, common_inputs, elapsed_ms, no_log_option, record_run
from .output import emit_json, json_option


@click.command()
@common_inputs
@click.option("-q", "--question", help="The question the memo answers (default: the case file's, else why the deployment is slow).")
@click.option("-o", "--output", "out_path", type=click.Path(path_type=Path), help="Memo file (default: <case name>-memo.md in the current folder); plots go to <name>_plots/ beside it.")
@chroma_url_option
@no_log_option
@json_option
def memo(profile, attachments, question, out_path, chroma_url, no_log, as_json) -> None:
    """Write a tuning memo for a case: summary, deployment facts, measured vs predicted per load
    point, ranked findings with evidence, changes with predicted effects and commands, a
    verification plan, plots and sources.

    \b
    vllm-advisor memo --profile examples/seed-qwen32b-h800-long-input.yaml -o out/memo.md
    vllm-advisor memo --profile case.yaml --attach bench_c40.json --attach server.log
    vllm-advisor memo --attach bench-20261202.jsonl -o memo.md     (a probe bench result, no case file)
    """
    from ..errors import UsageError

    if profile is None and not attachments:
        raise UsageError("memo needs --profile CASE.yaml or at least one --attach FILE (e.g. a probe bench result)")
    out_path = out_path or Path(f"{(profile or attachments[0]).stem}-memo.md")
    start = time.perf_counter()
    log_inputs = {"profile": str(profile) if profile else None, "attachments": [str(a) for a in attachments], "question": question, "output": str(out_path), "chroma_url": chroma_url, "json": as_json}
    try:
        inputs, diagnosis, sources, result = _write(profile, attachments, out_path, question, chroma_url)
    except AdvisorError as exc:
        record_run("memo", enabled=not no_log, inputs=log_inputs, duration_ms=elapsed_ms(start), error=exc.one_line())
        raise
    run_id = record_run(
        "memo",
        enabled=not no_log,
        question=inputs.question,
        inputs=log_inputs,
        output=result.markdown,
        findings=diagnosis.findings,
        sources=sources,
        duration_ms=elapsed_ms(start),
    )
    if as_json:
        emit_json({**result.to_dict(), "findings": diagnosis.findings, "sources": sources, "missing": diagnosis.missing, "log_id": run_id})
        return
    plots = f" ({len(result.plots)} plot{'s' if len(result.plots) != 1 else ''} in {result.plots[0].parent}/)" if result.plots else ""
    click.echo(f"memo written to {result.path}{plots}")


def _write(profile: Path | None, attachments, out_path: Path, question: str | None = None, chroma_url: str | None = None):
    from ..session import Session

    done, result = Session(profile=profile, attachments=list(attachments), calibrate=True, chroma_url=chroma_url).memo(out_path, question)
    return done.inputs, done.diagnosis, done.sources, result

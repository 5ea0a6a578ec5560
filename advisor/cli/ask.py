"""``vllm-advisor ask``: a question answered from what the user gave, with findings and sources."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..errors import AdvisorError, UsageError
from .output import console, emit_json, json_option


def common_inputs(f):
    """Where the facts come from: a case file, attached files, /metrics, a serve command."""
    opts = [
        click.option("--profile", type=click.Path(dir_okay=False, path_type=Path), help="Case file (YAML): deployment, workload, observations, question."),
        click.option("--attach", "attachments", multiple=True, type=click.Path(path_type=Path), help="Benchmark result, /metrics dump or watch file, server log, or a run folder of them (repeatable; format detected; what cannot be read is skipped with a note)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def chroma_url_option(f):
    """The team's knowledge base, as `kb` takes it: the answer's sources come from that server."""
    return click.option(
        "--chroma-url",
        envvar="VLLM_ADVISOR_CHROMA_URL",
        help="A Chroma server shared by a team (http://HOST:PORT) instead of the local index. [env: VLLM_ADVISOR_CHROMA_URL]",
    )(f)


def no_log_option(f):
    return click.option("--no-log", is_flag=True, help="Do not record this run in the local log (see `vllm-advisor logs`).")(f)


def record_run(command: str, *, enabled: bool, **fields: Any) -> int | None:
    """Log the run; a log that cannot be written is a warning, never a lost answer."""
    if not enabled:
        return None
    from ..logs import LogStore

    try:
        return LogStore().record(command, **fields)
    except AdvisorError as exc:
        click.echo(click.style("warning: ", fg="yellow") + f"not logged: {exc.one_line()}", err=True)
        return None


def scrub_user_text(inputs) -> None:
    """Kept for callers of the old name: the session scrubs (vllm_advisor.session.scrub_user_text)."""
    from ..session import scrub_user_text as scrub

    scrub(inputs)


def elapsed_ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


@click.command()
@click.argument("question", required=False)
@common_inputs
@click.option("--metrics", "metrics", multiple=True, metavar="URL|FILE", help="A /metrics URL to scrape or a saved dump / watch file (repeatable).")
@click.option("--prometheus", "prometheus_url", metavar="URL", help="A Prometheus server scraping the vLLM fleet: every instance's vllm:* series, per instance and summed.")
@click.option("--since", default="1h", show_default=True, metavar="DURATION", help="With --prometheus: how far back (90s, 30m, 1h, 2d).")
@click.option("--prom-selector", metavar="MATCHERS", help="With --prometheus: label matchers for the vLLM targets, e.g. '{job=\"vllm\"}'.")
@click.option("--serve-cmd", help='The `vllm serve ...` command line.')
@click.option("--model", help="Model: catalog name, Hugging Face id, or path to a config.json.")
@click.option("--gpu", help="GPU: catalog name (H100, H800, H200, A100-80G, L40S, RTX4090, ...).")
@click.option("--num-gpus", type=click.IntRange(min=1), help="GPUs serving the model.")
@click.option("--vllm-version", help="vLLM version (decides the defaults of unset flags).")
@click.option("--llm-base-url", metavar="URL", help="An OpenAI-compatible endpoint (e.g. a vLLM server) that writes the prose; the findings stay the advisor's.")
@click.option("--llm-model", metavar="NAME", help="Model name at --llm-base-url.")
@click.option("--llm-key-env", metavar="NAME", default="OPENAI_API_KEY", show_default=True, help="Environment variable holding the endpoint's API key (its value is never logged).")
@click.option("--llm-timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True, metavar="SECONDS", help="Time the endpoint gets for the whole answer; past it the embedded answer is shown with a note.")
@click.option(
    "--calibrate/--no-calibrate",
    default=False,
    show_default=True,
    help="Fit the model's efficiencies to the measured load points first (slower; `memo` always does).",
)
@click.option("--full", is_flag=True, help="Print the full analysis (every finding with its evidence, the figures per load point, what would decide it) instead of the short answer.")
@chroma_url_option
@no_log_option
@json_option
def ask(question, profile, attachments, metrics, prometheus_url, since, prom_selector, serve_cmd, model, gpu, num_gpus, vllm_version, llm_base_url, llm_model, llm_key_env, llm_timeout, calibrate, full, chroma_url, no_log, as_json) -> None:
    """Answer QUESTION about a slow vLLM deployment: causes ranked with evidence, changes with
    predicted effects, and numbered sources.

    \b
    vllm-advisor ask --profile case.yaml
    vllm-advisor ask "why is TTFT 30 s at 40 clients?" --attach bench.json --metrics http://host:8000/metrics
    vllm-advisor ask "..." --serve-cmd "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2" --gpu H800
    vllm-advisor ask --profile case.yaml --llm-base-url http://localhost:8000 --llm-model Qwen/Qwen2.5-7B-Instruct
    """
    if llm_model and not llm_base_url:
        raise UsageError("--llm-model needs --llm-base-url")
    if not question and not profile:
        raise UsageError("give a QUESTION, or a --profile whose case file has a question")
    prometheus = _prometheus_query(prometheus_url, since, prom_selector)
    start = time.perf_counter()
    log_inputs = {
        "profile": str(profile) if profile else None,
        "attachments": [str(a) for a in attachments],
        "metrics": list(metrics),
        "prometheus": {"url": prometheus_url, "since": since, "selector": prom_selector} if prometheus_url else None,
        "serve_cmd": serve_cmd,
        "model": model,
        "gpu": gpu,
        "num_gpus": num_gpus,
        "vllm_version": vllm_version,
        "llm_base_url": llm_base_url,
        "llm_model": llm_model,
        "llm_key_env": llm_key_env if llm_base_url else None,
        "llm_timeout": llm_timeout if llm_base_url else None,
        "chroma_url": chroma_url,
        "json": as_json,
    }
    try:
        answer, diagnosis, inputs, streamed = _answer(
            question, profile, attachments, metrics, serve_cmd,
            {"model": model, "gpu": gpu, "num_gpus": num_gpus, "vllm_version": vllm_version},
            llm_base_url, llm_model, llm_key_env, stream_to_stdout=not as_json, calibrate=calibrate, llm_timeout=llm_timeout,
            prometheus=prometheus, chroma_url=chroma_url, short=not full,
        )
    except AdvisorError as exc:
        record_run("ask", enabled=not no_log, question=question, inputs=log_inputs, duration_ms=elapsed_ms(start), error=exc.one_line())
        raise
    run_id = record_run(
        "ask",
        enabled=not no_log,
        question=inputs.question,
        inputs=log_inputs,
        output=answer.markdown,
        findings=answer.findings,
        sources=answer.sources,
        duration_ms=elapsed_ms(start),
        llm_used=answer.llm_used,
    )
    if as_json:
        emit_json(
            {
                "findings": answer.findings,
                "answer": answer.markdown,
                "full_answer": answer.full_markdown or answer.markdown,
                "sources": answer.sources,
                "missing": answer.missing or diagnosis.missing,
                "similar_reports": diagnosis.similar_reports,
                "undecided": diagnosis.undecided,
                "notes": answer.notes,
                "skipped": inputs.skipped,  # what was set aside: code, file, field, reason
                "engine": inputs.deployment.engine or "vllm",  # the engine the advice is for
                "language": answer.language,
                "llm_used": answer.llm_used,
                "log_id": run_id,
            }
        )
        return
    _print_answer(answer, streamed)


def _answer(question, profile, attachments, metrics, serve_cmd, overrides, llm_base_url, llm_model, llm_key_env, *, stream_to_stdout: bool, calibrate: bool = False, llm_timeout: float = 60.0, prometheus: dict | None = None, chroma_url: str | None = None, short: bool = True):
    """The session answers; this only wires the flags in and the streamed prose out."""
    from ..session import LLMSettings, Session

    llm = LLMSettings(base_url=llm_base_url, model=llm_model, key_env=llm_key_env, timeout=llm_timeout) if llm_base_url else None
    session = Session(profile=profile, attachments=list(attachments), metrics=list(metrics), serve_cmd=serve_cmd, overrides=overrides,
                      calibrate=calibrate, prometheus=prometheus, chroma_url=chroma_url, llm=llm)

    def on_token(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    result = session.answer(question, on_token=on_token if stream_to_stdout else None, short=short)
    return result.answer, result.diagnosis, result.inputs, result.streamed


#: environment variable holding a bearer token for --prometheus (the same one `probe prom` reads)
PROMETHEUS_TOKEN_ENV = "VLLM_ADVISOR_PROMETHEUS_TOKEN"


def _prometheus_query(url: str | None, since: str, selector: str | None) -> dict | None:
    """fetch_prometheus's arguments from the flags; a selector without --prometheus is a usage error."""
    if not url:
        if selector:
            raise UsageError("--prom-selector needs --prometheus URL")
        return None
    from ..probe.metrics.prometheus import parse_duration

    return {"url": url, "since_s": parse_duration(since), "selector": selector,
            "bearer_token": os.environ.get(PROMETHEUS_TOKEN_ENV) or None}


def _print_answer(answer, streamed: bool) -> None:
    """The answer as Markdown: rendered on a terminal, as written when piped. When the LLM's prose already streamed and was accepted, only
    what followed it (sources, caveats) is printed; when it streamed and was rejected, the embedded
    answer follows under a line that says so."""
    from rich.markdown import Markdown
    from rich.rule import Rule

    if streamed and answer.llm_used:
        click.echo("")
        tail = []
        if answer.sources:
            tail.append("**Sources**\n\n" + "\n".join(f"{s.number}. {s.title}: <{s.url}>" for s in answer.sources))
        if answer.notes:
            tail.append("\n".join(f"- {n}" for n in answer.notes))
        if tail:
            console().print(Rule())
            console().print(Markdown("\n\n".join(tail)))
        return
    if streamed:
        click.echo("")
        console().print(Rule(answer.notes[0] if answer.notes else "the LLM's answer was not used", style="yellow"))
    from ..logs import redact_text

    text = redact_text(answer.markdown) or ""
    if not console().is_terminal:
        # piped or redirected: the Markdown itself (as simonw/llm prints), so URLs, flags and Chinese
        # lines are not cut at 80 columns by the renderer, and a file or a chat window renders it
        click.echo(text.rstrip("\n"))
        return
    console().print(Markdown(text))

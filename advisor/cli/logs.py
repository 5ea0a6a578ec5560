"""``vllm-advisor logs``: earlier runs of ask, memo and chat, from the local log."""

from __future__ import annotations

import click
from rich.table import Table

from ..errors import AdvisorError
from ..logs import COMMANDS
from .output import console, emit_json, json_option


def _list_options(f):
    opts = [
        click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many runs, newest first."),
        click.option("--command", "command", type=click.Choice(COMMANDS), help="Only runs of this command."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.group(invoke_without_command=True)
@_list_options
@json_option
@click.pass_context
def logs(ctx, limit, command, as_json) -> None:
    """Earlier runs (question, answer, findings, sources), kept in a local SQLite file:
    $VLLM_ADVISOR_HOME/advisor.db, else $XDG_DATA_HOME/vllm-advisor/advisor.db
    (~/.local/share/vllm-advisor/advisor.db). Secrets are never stored.

    \b
    vllm-advisor logs                 # the 20 newest runs
    vllm-advisor logs list --limit 5 --json
    vllm-advisor logs show 12
    """
    if ctx.invoked_subcommand is None:
        _list(limit, command, as_json)


@logs.command("list")
@_list_options
@json_option
def list_cmd(limit, command, as_json) -> None:
    """The newest runs, one line each."""
    _list(limit, command, as_json)


def _list(limit: int, command: str | None, as_json: bool) -> None:
    from ..logs import LogStore

    store = LogStore()
    entries = store.list(limit, command=command)
    if as_json:
        emit_json([{k: v for k, v in e.to_dict().items() if k not in ("output", "findings", "sources")} | {"causes": e.causes} for e in entries])
        return
    if not entries:
        console().print(f"no runs logged yet in {store.path}")
        return
    table = Table(title=f"Runs in {store.path}", title_justify="left")
    for col in ("id", "time", "command", "question", "causes", "LLM", "ms", "error"):
        table.add_column(col, justify="right" if col in ("id", "ms") else "left", overflow="fold", no_wrap=col in ("id", "time", "command"), ratio=3 if col == "question" else None)
    for e in entries:
        question = " ".join((e.question or "").split())
        table.add_row(
            str(e.id),
            e.time[:16].replace("T", " "),
            e.command,
            question[:70] + ("…" if len(question) > 70 else ""),
            ", ".join(e.causes[:3]),
            "yes" if e.llm_used else "",
            f"{e.duration_ms:,}" if e.duration_ms is not None else "",
            e.error or "",
        )
    console().print(table)


@logs.command("show")
@click.argument("run_id", type=int, metavar="ID")
@json_option
def show_cmd(run_id: int, as_json: bool) -> None:
    """One run in full: its inputs, the answer or memo it produced, findings and sources."""
    from rich.markdown import Markdown

    from ..logs import LogStore
    from . import render

    store = LogStore()
    entry = store.get(run_id)
    if entry is None:
        raise AdvisorError(f"no run {run_id} in the log", source=str(store.path))
    if as_json:
        emit_json(entry.to_dict())
        return
    inputs = {k: v for k, v in entry.inputs.items() if v not in (None, [], {}, False)}
    console().print(
        render.kv_table(
            f"Run {entry.id}: {entry.command} at {entry.time}",
            [
                ("question", entry.question),
                *((f"input: {k}", ", ".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in inputs.items()),
                ("causes", ", ".join(entry.causes)),
                ("sources", len(entry.sources) or None),
                ("LLM wrote the prose", "yes" if entry.llm_used else "no"),
                ("duration", f"{entry.duration_ms:,} ms" if entry.duration_ms is not None else None),
                ("error", entry.error),
            ],
        )
    )
    if entry.output:
        console().print(Markdown(entry.output))

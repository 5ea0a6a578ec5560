"""Output for people (rich) or machines (``--json``), chosen per command."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Callable

import click

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None


def console() -> Console:
    """The stdout console; created (and rich imported: 20-40 ms) lazily so ``--json`` runs never
    touch rich."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console()
    return _console


def _jsonable(obj: Any) -> Any:
    from pydantic import BaseModel  # here, not at the top: `chat` and `--help` never need pydantic

    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, (list, tuple)):
        return [_jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and (math.isinf(obj) or math.isnan(obj)):
        return str(obj)
    return obj


def _scrubbed(obj: Any) -> Any:
    """Every string through the log's redaction (one function for log, memo, stdout and stderr)."""
    from ..logs import redact_text

    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list):
        return [_scrubbed(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _scrubbed(v) for k, v in obj.items()}
    return obj


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(_scrubbed(_jsonable(obj)), indent=2, ensure_ascii=False))


def emit(obj: Any, as_json: bool, render: Callable[[Any], Any]) -> None:
    """Print ``obj`` as JSON, or as whatever rich renderables ``render(obj)`` yields."""
    if as_json:
        emit_json(obj)
        return
    out = render(obj)
    for item in out if isinstance(out, (list, tuple)) else [out]:
        console().print(item)


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of tables.")(f)

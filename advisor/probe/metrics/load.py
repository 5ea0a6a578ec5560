"""Saved metrics: a text dump (``curl .../metrics > dump.txt``) or the JSONL file ``watch`` writes.

WHY one loader for both: everywhere the advisor accepts an endpoint it also accepts a file, so a
user without network access to the server (or a colleague's paste) gets the same analysis.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from ...errors import InputFileError, UnknownFormatError
from ...schema.metrics import MetricsSnapshot
from ..files import read_text
from .parse import parse_metrics_text
from .scrape import require_vllm_metrics, scrape

_URL = re.compile(r"^https?://", re.IGNORECASE)
_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d+(/.*)?$")


def load_metrics_file(path: str | Path, timestamp: float | None = None) -> list[MetricsSnapshot]:
    """A text dump -> one snapshot (``timestamp`` as given, else None); a JSONL file -> one per line."""
    text = read_text(path)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.startswith("{"):
        return _load_jsonl(text, str(path))
    snapshot = parse_metrics_text(text, source=str(path), timestamp=timestamp)
    if not snapshot.families:
        raise UnknownFormatError(
            "neither Prometheus text (a /metrics dump) nor a JSONL snapshot file from 'watch'", source=str(path)
        )
    require_vllm_metrics(snapshot, str(path), InputFileError)
    return [snapshot]


def is_url(url_or_path: str) -> bool:
    """An http(s) URL, which is scraped; anything else is a file."""
    return bool(_URL.match(url_or_path.strip()))


def load_metrics_source(url_or_path: str, **kwargs) -> list[MetricsSnapshot]:
    """An http(s) URL is scraped once (``kwargs`` go to :func:`scrape`); anything else is a file
    (only ``timestamp`` is used), so a saved dump works wherever an endpoint does."""
    if is_url(url_or_path):
        kwargs.pop("timestamp", None)
        return [scrape(url_or_path, **kwargs)]
    if not Path(url_or_path).exists() and _HOST_PORT.match(url_or_path.strip()):
        raise InputFileError(f"no such file (for an endpoint write http://{url_or_path.strip()})", source=url_or_path)
    return load_metrics_file(url_or_path, timestamp=kwargs.get("timestamp"))


def _load_jsonl(text: str, source: str) -> list[MetricsSnapshot]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    snapshots: list[MetricsSnapshot] = []
    for pos, (n, line) in enumerate(lines):
        try:
            snapshots.append(MetricsSnapshot.model_validate_json(line))
        except ValidationError as exc:
            is_last = pos == len(lines) - 1
            if is_last and snapshots and _looks_truncated(exc):
                # watch was killed mid-write: keep what was complete, say so
                snapshots[-1].notes.append(f"{source}: line {n} is cut off (interrupted write?) and was skipped")
                break
            raise InputFileError(f"line {n}: not a metrics snapshot ({_first_error(exc)})", source=source) from None
    if not snapshots:
        raise InputFileError("no snapshots in the JSONL file", source=source)
    return snapshots


def _looks_truncated(exc: ValidationError) -> bool:
    return any(e.get("type") == "json_invalid" for e in exc.errors())


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    msg = err.get("msg", "invalid")
    return f"{where}: {msg}" if where else msg

"""Sample ``/metrics`` every few seconds for a while, keeping every sample on disk as it arrives.

WHY write as we go: a watch runs for minutes while someone reproduces a slowdown; when they press
Ctrl-C, or the server dies halfway, the samples taken so far must survive (one JSON line each,
flushed) so that :func:`~.window.compute_window` can still be run on them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ...errors import EndpointError, InputFileError, UsageError
from ...schema.metrics import MetricsSnapshot
from .scrape import display_url, make_client, metrics_url, scrape

SampleCallback = Callable[[MetricsSnapshot, int], None]


def watch(
    url: str,
    *,
    duration: float,
    interval: float,
    out_path: Path | None = None,
    on_sample: SampleCallback | None = None,
    **scrape_kwargs,
) -> list[MetricsSnapshot]:
    """Scrape at 0, interval, 2*interval, ... up to ``duration`` seconds; return the snapshots.

    A scrape that still fails after its retries is recorded as a note on the next snapshot and the
    watch goes on; if every scrape fails, :class:`EndpointError`. Ctrl-C stops early and returns what
    was collected. ``out_path`` (JSONL, one snapshot per line) is replaced when the watch ends (see :func:`_open_output`).
    ``on_sample(snapshot, index)`` is called after each successful sample (index from 0).
    """
    if not (interval > 0 and math.isfinite(interval)):
        raise UsageError(f"watch interval must be a positive number of seconds, got {interval}")
    if not (duration >= 0 and math.isfinite(duration)):
        raise UsageError(f"watch duration must be zero or more seconds, got {duration}")
    shown = display_url(metrics_url(url))

    client = scrape_kwargs.pop("client", None)
    own_client = client is None
    if own_client:
        client = make_client(timeout=scrape_kwargs.get("timeout", 10), verify=scrape_kwargs.get("verify", True))

    out, partial = _open_output(out_path)
    snapshots: list[MetricsSnapshot] = []
    pending_notes: list[str] = []
    failures = 0
    last_failure = ""
    interrupted = False
    start = time.monotonic()
    slot = 0
    try:
        while True:
            due = start + slot * interval
            if due - start > duration + 1e-9:
                break
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                snap = scrape(url, client=client, **scrape_kwargs)
            except EndpointError as exc:
                failures += 1
                last_failure = exc.message
                pending_notes.append(f"sample at +{due - start:.1f} s failed: {exc.message}")
            else:
                if pending_notes:
                    snap.notes.extend(pending_notes)
                    pending_notes = []
                snapshots.append(snap)
                if out is not None:
                    _write(out, snap, out_path)
                if on_sample is not None:
                    on_sample(snap, len(snapshots) - 1)
            # next slot still ahead of us (a slow scrape skips the slots it overran)
            elapsed = time.monotonic() - start
            slot = max(slot + 1, math.ceil(elapsed / interval - 1e-9))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if out is not None:
            out.close()
            _finish_output(partial, out_path, bool(snapshots))
        if own_client:
            client.close()

    if not snapshots:
        if failures:
            raise EndpointError(f"all {failures} scrapes failed; last: {last_failure}", source=shown)
        return []
    if pending_notes:
        snapshots[-1].notes.extend(pending_notes)
    if interrupted:
        snapshots[-1].notes.append(f"watch interrupted after {len(snapshots)} sample(s)")
    return snapshots


def _open_output(out_path: Path | None) -> tuple[IO[str] | None, Path | None]:
    """Samples go to ``.NAME.partial`` beside the target as they arrive and replace ``out_path``
    only when the watch ends (Ctrl-C included): an existing file is never truncated by a watch that
    then fails, and a watch killed outright leaves its samples in the ``.partial`` file."""
    if out_path is None:
        return None, None
    target = Path(out_path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return open(partial, "w", encoding="utf-8"), partial
    except OSError as exc:
        raise InputFileError(f"cannot write snapshots: {exc.strerror or exc}", source=str(out_path)) from None


def _finish_output(partial: Path | None, out_path: Path | None, any_sample: bool) -> None:
    if partial is None or out_path is None:
        return
    try:
        if any_sample:
            os.replace(partial, out_path)
        else:
            partial.unlink(missing_ok=True)
    except OSError as exc:
        raise InputFileError(f"cannot write snapshots: {exc.strerror or exc}", source=str(out_path)) from None


def _write(out: IO[str], snap: MetricsSnapshot, out_path: Path | None) -> None:
    try:
        out.write(snap.model_dump_json() + "\n")
        out.flush()
    except OSError as exc:
        raise InputFileError(f"cannot write snapshots: {exc.strerror or exc}", source=str(out_path)) from None

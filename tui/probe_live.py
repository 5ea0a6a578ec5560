"""A background watch of a server's ``/metrics`` for the chat's live panel.

WHY not ``probe.metrics.watch``: that one runs for a fixed duration in the foreground and reports
failed scrapes at the end. The chat's watch runs until the user stops it, must stop at once when
asked (an Event, not a sleep), and shows each failed scrape as it happens. It reuses the probe's
scraper, parser and window arithmetic, and writes the same JSONL file `probe watch` writes, so the
samples are evidence for the diagnosis (``gather(metrics=[file])``) and survive a crash.

Each sample becomes one :class:`LivePoint`: the gauges as scraped (running, waiting, KV-cache
usage, summed over engines) and the ITL and TTFT quantiles of the requests that finished since the
previous sample (histogram bucket increases, PromQL's interpolation).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vllm_advisor.errors import AdvisorError, EndpointError, InputFileError

MIN_INTERVAL_S = 0.1


@dataclass
class LivePoint:
    index: int
    time: float  # unix seconds of the scrape
    running: float | None = None  # requests
    waiting: float | None = None  # requests
    kv_usage_pct: float | None = None  # percent
    itl_p50_ms: float | None = None  # over the last interval
    itl_p99_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    finished: float | None = None  # requests finished in the last interval


def _gauge_sum(snapshot, family: str) -> float | None:
    fam = snapshot.family(family)
    if fam is None or not fam.samples:
        return None
    return sum(s.value for s in fam.samples if s.name == family or s.name == fam.original_name)


def _gauge_mean(snapshot, family: str) -> float | None:
    fam = snapshot.family(family)
    if fam is None or not fam.samples:
        return None
    values = [s.value for s in fam.samples if s.name in (family, fam.original_name)]
    return sum(values) / len(values) if values else None


def live_point(previous, current, index: int) -> LivePoint:
    """The live panel's figures from two consecutive snapshots (``previous`` None for the first)."""
    from vllm_advisor.probe.metrics import compute_window, summarize_window

    kv = _gauge_mean(current, "vllm:kv_cache_usage_perc")
    point = LivePoint(
        index=index,
        time=current.timestamp or time.time(),
        running=_gauge_sum(current, "vllm:num_requests_running"),
        waiting=_gauge_sum(current, "vllm:num_requests_waiting"),
        kv_usage_pct=None if kv is None else 100.0 * kv,
    )
    if previous is None:
        return point
    summary = summarize_window(compute_window([previous, current]))
    engines = summary.get("engines") or []
    if not engines:
        return point
    first = engines[0]  # one engine is the usual case; the panel shows the first

    def ms(key: str, q: str) -> float | None:
        value = (first.get(key) or {}).get(q)
        return None if value is None else 1000.0 * value

    point.itl_p50_ms, point.itl_p99_ms = ms("itl_s", "p50"), ms("itl_s", "p99")
    point.ttft_p50_ms, point.ttft_p99_ms = ms("ttft_s", "p50"), ms("ttft_s", "p99")
    point.finished = (first.get("ttft_s") or {}).get("count")
    return point


class LiveProbe:
    """Scrape ``url`` every ``interval`` seconds until :meth:`stop`; call back per sample."""

    def __init__(
        self,
        url: str,
        out_path: Path,
        *,
        interval: float = 2.0,
        on_point: Callable[[LivePoint], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        timeout: float = 5.0,
        retries: int = 0,
    ) -> None:
        from vllm_advisor.probe.metrics.scrape import display_url, metrics_url

        self.url = url
        self.shown = display_url(metrics_url(url))  # validates the URL: one-line EndpointError
        self.out_path = Path(out_path)
        self.interval = max(MIN_INTERVAL_S, float(interval))
        self.on_point = on_point
        self.on_error = on_error
        self.timeout = timeout
        self.retries = retries
        self.samples = 0
        self.failures = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Blocking (run it in a thread). Returns the number of samples written."""
        from vllm_advisor.probe.metrics.scrape import make_client, scrape

        try:
            self.out_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.out_path, "a", encoding="utf-8")
        except OSError as exc:
            raise InputFileError(f"cannot write samples: {exc.strerror or exc}", source=str(self.out_path)) from None
        client = make_client(timeout=self.timeout)
        previous = None
        start = time.monotonic()
        slot = 0
        try:
            while not self._stop.is_set():
                try:
                    snap = scrape(self.url, client=client, timeout=self.timeout, retries=self.retries)
                except EndpointError as exc:
                    self.failures += 1
                    if self.on_error is not None:
                        self.on_error(exc.one_line())
                except AdvisorError as exc:  # a parse problem: the same one-line treatment
                    self.failures += 1
                    if self.on_error is not None:
                        self.on_error(exc.one_line())
                else:
                    out.write(snap.model_dump_json() + "\n")
                    out.flush()
                    point = live_point(previous, snap, self.samples)
                    previous = snap
                    self.samples += 1
                    if self.on_point is not None:
                        self.on_point(point)
                slot += 1
                wait = start + slot * self.interval - time.monotonic()
                if wait < 0:  # a slow scrape: skip the slots it overran
                    slot = int((time.monotonic() - start) / self.interval) + 1
                    wait = start + slot * self.interval - time.monotonic()
                self._stop.wait(max(0.0, wait))
        finally:
            out.close()
            client.close()
        return self.samples

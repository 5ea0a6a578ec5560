"""Samples the server's ``/metrics`` while a load point runs, so the client's figures come with the
server's view of the same seconds: requests running and waiting, KV-cache usage, preemptions,
prefix-cache hits and queue time. Scrapes run in a worker thread (the scraper is synchronous and
retries), so a slow ``/metrics`` never delays the requests being timed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from ...errors import EndpointError
from ...schema.metrics import MetricsSnapshot
from ..metrics.scrape import make_client, scrape


def gauge_total(snapshot: MetricsSnapshot, family: str, **labels: str) -> float | None:
    """Sum of a family's samples (matching ``labels``) in one snapshot, None if absent."""
    fam = snapshot.family(family)
    if not fam:
        return None
    values = [s.value for s in fam.samples if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(values) if values else None


def timeline_point(snapshot: MetricsSnapshot, t0: float) -> dict[str, float | None]:
    """The few gauges and counters worth plotting against time, from one snapshot."""
    kv = snapshot.family("vllm:kv_cache_usage_perc")
    return {
        "t_s": round((snapshot.timestamp or t0) - t0, 3),
        "running": gauge_total(snapshot, "vllm:num_requests_running"),
        "waiting": gauge_total(snapshot, "vllm:num_requests_waiting"),
        "waiting_for_capacity": gauge_total(snapshot, "vllm:num_requests_waiting_by_reason", reason="capacity"),
        "kv_cache_usage": max((s.value for s in kv.samples), default=None) if kv else None,
        "preemptions_total": gauge_total(snapshot, "vllm:num_preemptions"),
    }


class MetricsSampler:
    """Scrape ``url`` every ``interval_s`` until stopped; the first failure is kept as a note."""

    def __init__(self, url: str, interval_s: float, *, timeout: float = 5.0, bearer_token: str | None = None,
                 on_sample: Callable[[MetricsSnapshot], None] | None = None) -> None:
        self.url = url
        self.interval_s = interval_s
        self.snapshots: list[MetricsSnapshot] = []
        self.notes: list[str] = []
        self._timeout = timeout
        self._token = bearer_token
        self._on_sample = on_sample
        self._client = make_client(timeout=timeout)
        self._task: asyncio.Task | None = None
        self._failures = 0

    def _scrape_once(self) -> MetricsSnapshot:
        return scrape(self.url, timeout=self._timeout, retries=0, bearer_token=self._token or "", client=self._client)

    async def sample_now(self) -> MetricsSnapshot | None:
        try:
            snapshot = await asyncio.to_thread(self._scrape_once)
        except EndpointError as exc:
            self._failures += 1
            if self._failures == 1:
                self.notes.append(f"/metrics sampling failed at least once: {exc}")
            return None
        self.snapshots.append(snapshot)
        if self._on_sample:
            self._on_sample(snapshot)
        return snapshot

    async def _loop(self) -> None:
        next_at = time.monotonic()
        while True:
            next_at += self.interval_s
            await self.sample_now()
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Stop the loop and take one last sample, so the window ends after the last request."""
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.sample_now()

    def reset(self) -> None:
        """Forget the samples of the previous load point (the client stays open)."""
        self.snapshots = []
        self.notes = []
        self._failures = 0

    def close(self) -> None:
        self._client.close()

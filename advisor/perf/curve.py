"""The load curve: a deployment from one client to many, and the knee where it saturates.

Why a knee: in a closed loop of N clients every request is either running on the engine or waiting
in its queue. Below saturation running follows N and nobody waits; past it, running stops growing
(capped by the KV cache, ``max_num_seqs`` or the token budget that admits prompts) and every extra
client only waits, so TTFT grows with N while throughput stays flat. The knee is where that
happens, read off the simulated server view (time-weighted running and waiting requests) of each
load point; what caps running there says which knob moves it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import UsageError
from ..schema import BenchmarkRun

#: A load point queues when at least this share of its clients wait on average (and at least
#: ``MIN_WAITING`` requests): a few requests waiting for one step at admission is not saturation.
WAITING_SHARE = 0.10
MIN_WAITING = 0.5
#: KV usage (time-weighted, % of blocks) from which the cache, not another limit, caps running.
KV_FULL_PCT = 80.0


def parse_concurrency(text: str) -> list[int]:
    """``"1,40,100"``, ``"1..256"`` (1, 2, 4, ... 256: the powers of two between the ends, the ends
    included) or ``"1..256:5"`` (5 points spaced evenly on a log scale), mixed freely by commas."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if ".." not in part:
            try:
                out.append(int(part))
            except ValueError:
                raise UsageError(f"--concurrency: '{part}' is not a whole number (or a range A..B)") from None
            continue
        spec, _, count = part.partition(":")
        lo_text, _, hi_text = spec.partition("..")
        try:
            lo, hi = int(lo_text), int(hi_text)
            n = int(count) if count else None
        except ValueError:
            raise UsageError(f"--concurrency: '{part}' is not a range A..B or A..B:N of whole numbers") from None
        if lo < 1 or hi < lo or (n is not None and not 2 <= n <= 64):
            raise UsageError(f"--concurrency: '{part}' needs 1 <= A <= B (and 2 <= N <= 64 points)")
        if n is None:
            points = [lo] + [2**e for e in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1) if lo < 2**e < hi] + [hi]
        else:
            points = [round(lo * (hi / lo) ** (i / (n - 1))) for i in range(n)]
        out.extend(points)
    if any(c < 1 for c in out):
        raise UsageError("--concurrency: client counts start at 1")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class CurvePoint:
    """One closed-loop load point of the curve (all figures from the model)."""

    concurrency: int
    running_mean: float
    running_max: int
    waiting_mean: float
    kv_usage_pct: float
    preemptions: int
    output_tok_s: float | None
    request_decode_tok_s: float | None
    ttft_p50_ms: float | None

    @property
    def queued(self) -> bool:
        return self.waiting_mean >= max(MIN_WAITING, WAITING_SHARE * self.concurrency)


@dataclass(frozen=True)
class Knee:
    """Where running stops growing and waiting starts (between two simulated load points)."""

    last_unqueued: int | None  # the most clients served with no real queue
    first_queued: int | None  # the fewest clients that queue
    running_plateau: float | None  # requests running on average once queued (the engine's capacity here)
    limit: str | None  # what caps running: 'kv_cache', 'max_num_seqs' or 'token_budget'
    kv_usage_pct: float | None  # at the first queued point

    def to_dict(self) -> dict:
        return asdict(self)


def curve_points(runs: list[BenchmarkRun]) -> list[CurvePoint]:
    """The closed-loop predicted runs, by client count (needs ``predict_load_point``'s server view)."""
    points = []
    for run in runs:
        sv = run.server_view
        if not run.offered_concurrency or sv is None or sv.running_mean is None:
            continue
        points.append(
            CurvePoint(
                concurrency=run.offered_concurrency,
                running_mean=sv.running_mean,
                running_max=sv.running_max,
                waiting_mean=sv.waiting_mean,
                kv_usage_pct=sv.kv_usage_pct_mean,
                preemptions=sv.preemptions,
                output_tok_s=run.output_throughput_tok_s,
                request_decode_tok_s=run.request_decode_tok_s.mean if run.request_decode_tok_s else None,
                ttft_p50_ms=run.ttft_ms.pct(50) if run.ttft_ms else None,
            )
        )
    return sorted(points, key=lambda p: p.concurrency)


def find_knee(points: list[CurvePoint], max_num_seqs: int) -> Knee:
    """The first load point that queues, the last one before it, and what caps running there.

    Replicas (data parallel) each run ``ceil(c / replicas)`` clients in the simulation; the
    running/waiting figures are one replica's, so with replicas the knee in clients is per replica.
    """
    queued = [p for p in points if p.queued]
    if not queued:
        return Knee(points[-1].concurrency if points else None, None, None, None, None)
    first = queued[0]
    before = [p for p in points if p.concurrency < first.concurrency and not p.queued]
    beyond = [p for p in points if p.concurrency >= first.concurrency]
    plateau = max(p.running_mean for p in beyond)
    if max(p.running_max for p in beyond) >= max_num_seqs:
        limit = "max_num_seqs"
    elif first.kv_usage_pct >= KV_FULL_PCT:
        limit = "kv_cache"
    else:
        limit = "token_budget"
    return Knee(before[-1].concurrency if before else None, first.concurrency, plateau, limit, first.kv_usage_pct)

"""Re-time a closed-loop simulation under other efficiency factors, without simulating it again.

Why this is exact: in a closed loop (N clients, each sending its next request when the previous one
finishes) the scheduler's decisions depend on the queue, the running requests and the KV blocks,
never on the clock: arrivals happen at completions, which are steps, not times. So the sequence of
batches a simulation produced is the same under any step cost, and only the times move. The
simulator records, per stretch of steps, its first and last batch (costs are affine in between,
see ``Simulator._stretch_costs``) and, per request, the steps at which it arrived, sampled its first
token and finished; a new efficiency then needs the cost of those batches (``StepTimeModel.
cost_plan``: numpy, no Python per step) and one cumulative sum. Calibration evaluates its objective
dozens of times this way instead of simulating each load point dozens of times.

Open loops (a Poisson stream) do depend on the clock and are simulated again; so are step costs
that are not affine along a stretch (a sliding window), where the stretches' pieces were chosen
for one cost.
"""

from __future__ import annotations

import numpy as np

from .simulator import SimResult
from .step_time import StepTimeModel


def can_retime(result: SimResult, model: object) -> bool:
    # An intake delay makes a closed loop's admissions depend on the clock (a replacement sent at a
    # step's end is seen after a fixed time, not after a fixed number of steps): simulate again.
    return (result.workload.concurrency is not None and not result.limits.intake_delay_s and isinstance(model, StepTimeModel)
            and model.affine_in_context and bool(result.steps))


class Retimer:
    """One simulated closed-loop load point whose timings follow ``model.eff``."""

    def __init__(self, result: SimResult, model: StepTimeModel, replicas: int = 1) -> None:
        if not can_retime(result, model):
            raise ValueError("only a closed-loop simulation with an affine step cost can be re-timed")
        recs = result.steps
        self.counts = np.array([s.count for s in recs], dtype=np.int64)
        multi = np.flatnonzero(self.counts > 1)
        self.multi = multi
        batches = [s.batch for s in recs] + [recs[i].last_batch for i in multi]
        self.plan = model.cost_plan(batches)
        self.num_records = len(recs)
        starts = np.concatenate(([0], np.cumsum(self.counts)[:-1]))
        total = int(self.counts.sum())
        self.within = np.arange(total, dtype=float) - np.repeat(starts, self.counts)  # step index inside its stretch
        done = result.finished()
        # Step indices shifted by one so that -1 (before the first step: time 0) reads T[0] = 0.
        self.arrival_at = np.array([r.arrival_step + 1 for r in done], dtype=np.int64)
        self.first_at = np.array([r.first_token_step + 1 for r in done], dtype=np.int64)
        self.finish_at = np.array([r.finish_step + 1 for r in done], dtype=np.int64)
        self.all_arrivals_at = np.array([r.arrival_step + 1 for r in result.requests], dtype=np.int64)
        self.out_len = np.array([r.num_generated for r in done], dtype=float)
        self.replicas = replicas

    def step_end_times(self) -> np.ndarray:
        """End time of every step (seconds), under the model's current efficiency."""
        costs = self.plan()
        first = costs[: self.num_records]
        last = first.copy()
        last[self.multi] = costs[self.num_records :]
        k = self.counts
        slope = np.where(k > 1, (last - first) / np.maximum(k - 1, 1), 0.0)
        durations = np.repeat(first, k) + np.repeat(slope, k) * self.within
        return np.cumsum(durations)

    def figures(self) -> dict[str, float | None]:
        """The calibration figures (``calibrate.FIGURES``), computed as ``summary.sim_to_run`` does."""
        t = np.concatenate(([0.0], self.step_end_times()))
        arrival, first, finish = t[self.arrival_at], t[self.first_at], t[self.finish_at]
        out: dict[str, float | None] = dict.fromkeys(
            ("ttft_ms.mean", "ttft_ms.p50", "tpot_ms.mean", "tpot_ms.p50", "itl_ms.mean", "e2e_ms.mean",
             "request_decode_tok_s.mean", "request_output_tok_s.mean", "output_throughput_tok_s")
        )
        if not arrival.size:
            return out
        ttft = first - arrival
        e2e = finish - arrival
        multi = self.out_len > 1
        out["ttft_ms.mean"] = float(np.mean(ttft * 1e3))
        out["ttft_ms.p50"] = float(np.percentile(ttft * 1e3, 50))
        out["e2e_ms.mean"] = float(np.mean(e2e * 1e3))
        if multi.any():
            tpot = (e2e[multi] - ttft[multi]) / (self.out_len[multi] - 1)
            out["tpot_ms.mean"] = float(np.mean(tpot * 1e3))
            out["tpot_ms.p50"] = float(np.percentile(tpot * 1e3, 50))
            gaps = float(np.sum(self.out_len[multi] - 1))
            out["itl_ms.mean"] = float(np.sum(finish[multi] - first[multi]) * 1e3 / gaps)
            positive = tpot[tpot > 0]
            if positive.size:
                out["request_decode_tok_s.mean"] = float(np.mean(1.0 / positive))
        out["request_output_tok_s.mean"] = float(np.mean(self.out_len / e2e))
        duration = float(finish.max() - t[self.all_arrivals_at].min())
        if duration > 0:
            out["output_throughput_tok_s"] = float(self.out_len.sum() / duration) * self.replicas
        return out

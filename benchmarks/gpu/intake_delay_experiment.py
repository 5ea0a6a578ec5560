#!/usr/bin/env python3
"""Experiment (not the shipped model): would an intake delay in the simulator fix the closed-loop TTFT miss?

In the real vLLM runs a closed-loop client's next request reaches the engine some milliseconds after
its predecessor finished (HTTP, the API server, the engine-core queue), so a finishing wave of
requests is admitted together; the simulator admits each replacement in the very next step, which
staggers the waves and under-predicts TTFT p50 of short prompts at high concurrency by 30-64%.
The shipped fit stands in for this with GPU step time per starting prefill (17 ms), which
over-loads a Poisson stream at budget 2048 instead.

This script subclasses the simulator (step mode, the reference path; simulator.py untouched):
replacements of a closed loop and open-loop arrivals become schedulable ``delay`` seconds after they
are sent (TTFT still counts from the send). It re-runs ``validate`` with the intake cost moved from
step time to that delay and prints, per delay, the loss on the fit points (the same log-ratio
objective as fit_vllm_costs.py, all its figures) -- the delay is chosen on that alone -- and the
held-out medians and worst points.

    python benchmarks/gpu/intake_delay_experiment.py benchmarks/gpu/runs/2026-12-03-h200-vllm0.26 0 0.015 0.030
"""

from __future__ import annotations

import heapq
import math
import sys
from pathlib import Path

import vllm_advisor.perf.predict as predict
from vllm_advisor.perf import simulator as sim
from vllm_advisor.perf.efficiency import Efficiency
from vllm_advisor.perf.validation import validate_runs


class DelayedIntake(sim.Simulator):
    delay = 0.0

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._pending: list[tuple[float, int, object]] = []

    def _on_finish(self, r):
        if self._arrivals is None and self._sent < self.workload.num_prompts:
            new = self._new_request(self.now)
            heapq.heappush(self._pending, (self.now + self.delay, new.rid, new))

    def _start_closed_loop(self):
        for _ in range(min(self.workload.concurrency or 0, self.workload.num_prompts)):
            new = self._new_request(0.0)
            heapq.heappush(self._pending, (self.delay, new.rid, new))

    def _admit_arrivals(self):
        if self._arrivals is not None:  # open loop: arrival + delay
            while self._next_arrival < len(self._arrivals) and self._arrivals[self._next_arrival] <= self.now + 1e-12:
                t = self._arrivals[self._next_arrival]
                new = self._new_request(t)
                heapq.heappush(self._pending, (t + self.delay, new.rid, new))
                self._next_arrival += 1
        while self._pending and self._pending[0][0] <= self.now + 1e-12:
            self.waiting.append(heapq.heappop(self._pending)[2])

    def run(self):
        if self._arrivals is None:
            self._start_closed_loop()
        while True:
            self._admit_arrivals()
            nxt = [self._pending[0][0]] if self._pending else []
            if self._arrivals is not None and self._next_arrival < len(self._arrivals):
                nxt.append(self._arrivals[self._next_arrival])
            if not self.running and not self.waiting:
                if nxt:
                    self.now = max(self.now, min(nxt))
                    continue
                break
            scheduled = self._schedule()
            if not scheduled:
                if nxt:
                    self.now = max(self.now, min(nxt))
                    continue
                if not self.running:
                    r = self.waiting.popleft()
                    r.rejected = "could not be scheduled"
                    r.finish = self.now
                    self._on_finish(r)
                continue
            self._run_step(scheduled)
        return sim.SimResult(requests=self.requests, steps=self.steps, limits=self.limits, workload=self.workload, duration=self.now,
                             total_preemptions=self.preemptions, itl_joins=self.itl_joins, itl_stretches=self.itl_stretches)


def main() -> None:
    root = Path(sys.argv[1])
    for d in [float(x) for x in sys.argv[2:]] or [0.0, 0.015, 0.030]:
        DelayedIntake.delay = d

        def simulate(limits, step_cost, workload, **_kw):
            return DelayedIntake(limits, step_cost, workload, mode="steps").run()

        predict.simulate = simulate
        eff = Efficiency().model_copy(update={"prefill_request_overhead_ms": 0.0})
        rep = validate_runs(root, efficiency=eff)
        held = {s.figure: s for s in rep.summary if s.split == "holdout"}
        fit_loss = sum(math.log(f.predicted / f.measured) ** 2 for p in rep.points if p.split == "fit" for f in p.figures
                       if f.figure in ("ttft_p50", "ttft_p90", "e2e_p50", "output_throughput", "tpot_p50", "itl_p50") and f.measured and f.predicted)
        print(f"[fit-set loss {fit_loss:.3f}] ", end="")
        print(f"intake delay {d * 1e3:.0f} ms (no step time per starting prefill): " + ", ".join(
            f"{k} {held[k].median_abs_error * 100:.1f}% (worst {held[k].worst_abs_error * 100:.0f}% {held[k].worst_point})" for k in ("ttft_p50", "tpot_p50", "e2e_p50", "output_throughput")))


if __name__ == "__main__":
    main()

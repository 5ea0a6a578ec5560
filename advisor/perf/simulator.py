"""A discrete-event simulation of vLLM V1's scheduler, step by step.

Why simulate instead of using a closed formula: what users measure under long prompts is decided by
the interaction of three limits that a formula cannot hold at once: the KV cache (how many requests
fit), the token budget per engine step (how a 63K-token prefill is cut into chunks that share steps
with the running decodes), and the client (a closed loop of N users, or an open Poisson stream).
The simulation follows the scheduler of vLLM V1 (vllm/v1/core/sched/scheduler.py, ``schedule()``):

1. Running requests first, in admission order. Each asks for the tokens it still lacks: 1 for a
   decode, the rest of its prompt for a partial prefill, capped by ``long_prefill_token_threshold``
   (when > 0) and by the remaining token budget (``max_num_batched_tokens``).
2. KV blocks are allocated for those tokens. When the pool is exhausted the scheduler preempts the
   most recently admitted running request (FCFS policy): it frees all its blocks and goes back to the
   head of the waiting queue, to be recomputed from scratch (V1 preempts by recompute only).
3. If nothing was preempted, waiting requests are admitted in arrival order while the budget lasts,
   ``len(running) < max_num_seqs``, and blocks are free; prefix-cache hits skip computation of the
   cached blocks. Without chunked prefill a prompt that does not fit the remaining budget waits.
4. The step runs for ``step_cost(batch)`` seconds. A request whose prompt is fully computed samples
   one token at the end of the step (its first token at the end of its last prefill chunk).

Simplifications, each a named choice: one engine (data parallel replicas are simulated as separate
engines by the caller); no speculative decoding; no async-scheduling overlap (the step-time model's
fixed overhead stands for the CPU work); cached prefix blocks stay resident (no eviction model).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np


@dataclass(frozen=True)
class StepBatch:
    """What one engine step computes: decodes (one token each) and prefill chunks.

    ``decode_context_sum`` is the sum over decoding requests of their context length (tokens whose
    KV the attention reads); ``prefill_chunks`` holds (chunk_tokens, tokens_already_computed) pairs.
    """

    num_decodes: int
    decode_context_sum: int
    prefill_chunks: tuple[tuple[int, int], ...]
    shared_prefix_len: int = 0  # tokens of a prefix-cached prefix common to ...
    shared_prefix_readers: int = 0  # ... this many of the decodes (cascade attention may read it once)

    @property
    def prefill_tokens(self) -> int:
        return sum(c for c, _ in self.prefill_chunks)

    @property
    def total_tokens(self) -> int:
        return self.num_decodes + self.prefill_tokens


class StepCost(Protocol):
    def __call__(self, batch: StepBatch) -> float:  # seconds
        ...


@dataclass(frozen=True)
class SchedulerLimits:
    """The scheduler's knobs, already resolved to numbers (see perf.defaults)."""

    num_gpu_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    long_prefill_token_threshold: int = 0
    max_num_partial_prefills: int | None = None  # None = no cap beyond the token budget (V1)


@dataclass(frozen=True)
class Workload:
    """Requests to send: fixed lengths, a closed loop of clients or an open Poisson stream."""

    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None = None  # closed loop: this many clients, each sends the next on completion
    request_rate: float | None = None  # open loop: Poisson arrivals (inf = all at t=0)
    shared_prefix_len: int = 0  # tokens common to all prompts (prefix-cache hits after the first)
    seed: int = 0


@dataclass
class SimRequest:
    rid: int
    prompt_len: int
    output_len: int
    arrival: float
    num_computed: int = 0
    num_generated: int = 0
    blocks: int = 0
    shared_blocks: int = 0
    first_scheduled: float | None = None
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    finish: float | None = None
    rejected: str | None = None

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.num_generated


@dataclass
class StepRecord:
    start: float
    duration: float
    num_decodes: int
    prefill_tokens: int
    running: int
    waiting: int
    kv_blocks_used: int
    count: int = 1  # identical decode-only steps folded into one record (see Simulator._fast_forward)


@dataclass
class SimResult:
    requests: list[SimRequest]
    steps: list[StepRecord]
    limits: SchedulerLimits
    workload: Workload
    duration: float
    total_preemptions: int

    def finished(self) -> list[SimRequest]:
        return [r for r in self.requests if r.finish is not None and r.rejected is None]


class Simulator:
    """Runs one load point. Use :func:`simulate` unless you need the object."""

    def __init__(
        self, limits: SchedulerLimits, step_cost: StepCost, workload: Workload, max_steps: int = 2_000_000, fast_forward: bool = True
    ):
        self.fast_forward = fast_forward
        self.limits = limits
        self.step_cost = step_cost
        self.workload = workload
        self.max_steps = max_steps
        self.free_blocks = limits.num_gpu_blocks  # all free blocks, cached content or not
        # Free blocks that still hold a preempted request's KV, oldest first (evicted first).
        self.cached_segments: OrderedDict[int, int] = OrderedDict()
        self.cached_free = 0
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.requests: list[SimRequest] = []
        self.steps: list[StepRecord] = []
        self.now = 0.0
        self.preemptions = 0
        self._preempted_in_step = False
        # Shared-prefix cache: blocks of the common prefix, computed once and then shared.
        self.prefix_blocks_cached = 0
        self.prefix_holders = 0
        self._arrivals = self._arrival_times()
        self._next_arrival = 0
        self._sent = 0

    # -- workload -----------------------------------------------------------------------------

    def _arrival_times(self) -> list[float] | None:
        w = self.workload
        if w.concurrency is not None:
            return None  # closed loop: arrivals are generated by completions
        rate = w.request_rate if w.request_rate is not None else math.inf
        if math.isinf(rate):
            return [0.0] * w.num_prompts
        rng = np.random.default_rng(w.seed)
        return list(np.cumsum(rng.exponential(1.0 / rate, size=w.num_prompts)))

    def _new_request(self, arrival: float) -> SimRequest:
        r = SimRequest(rid=self._sent, prompt_len=self.workload.input_len, output_len=self.workload.output_len, arrival=arrival)
        self._sent += 1
        self.requests.append(r)
        return r

    def _admit_arrivals(self) -> None:
        if self._arrivals is None:
            return
        while self._next_arrival < len(self._arrivals) and self._arrivals[self._next_arrival] <= self.now + 1e-12:
            self.waiting.append(self._new_request(self._arrivals[self._next_arrival]))
            self._next_arrival += 1

    def _start_closed_loop(self) -> None:
        w = self.workload
        for _ in range(min(w.concurrency or 0, w.num_prompts)):
            self.waiting.append(self._new_request(0.0))

    def _on_finish(self, r: SimRequest) -> None:
        if self._arrivals is None and self._sent < self.workload.num_prompts:
            self.waiting.append(self._new_request(self.now))

    # -- KV blocks ----------------------------------------------------------------------------

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.limits.block_size)

    def _try_allocate(self, r: SimRequest, new_tokens: int) -> bool:
        need = self._blocks_for(r.num_computed + new_tokens) - r.shared_blocks - r.blocks
        if need <= 0:
            return True
        if need > self.free_blocks:
            return False
        self.free_blocks -= need
        self._evict(need)
        r.blocks += need
        return True

    def _evict(self, taken: int) -> None:
        """Blocks taken from the free pool come from never-cached blocks first, then from the
        oldest cached segments (vLLM's free queue is LRU; a request's tail blocks go first, so
        what survives of a segment is still a prefix)."""
        clean = self.free_blocks + taken - self.cached_free
        from_cached = max(0, taken - clean)
        while from_cached > 0 and self.cached_segments:
            rid, n = next(iter(self.cached_segments.items()))
            k = min(n, from_cached)
            from_cached -= k
            self.cached_free -= k
            if k == n:
                del self.cached_segments[rid]
            else:
                self.cached_segments[rid] = n - k

    def _release(self, r: SimRequest, keep_cached: bool = False) -> None:
        self.free_blocks += r.blocks
        if keep_cached and r.blocks and self.limits.enable_prefix_caching:
            self.cached_segments[r.rid] = r.blocks
            self.cached_free += r.blocks
        r.blocks = 0
        if r.shared_blocks:
            r.shared_blocks = 0
            self.prefix_holders -= 1

    def _prefix_hit(self, r: SimRequest) -> int:
        """Tokens served from the prefix cache when ``r`` is admitted (whole blocks only)."""
        if not self.limits.enable_prefix_caching or self.prefix_blocks_cached == 0:
            return 0
        usable = min(self.prefix_blocks_cached * self.limits.block_size, r.num_tokens - 1)
        return (usable // self.limits.block_size) * self.limits.block_size

    def _maybe_cache_prefix(self, r: SimRequest) -> None:
        """The first request to compute the shared prefix leaves its blocks in the cache."""
        p = self.workload.shared_prefix_len
        if not self.limits.enable_prefix_caching or p < self.limits.block_size or self.prefix_blocks_cached:
            return
        if r.num_computed >= p and r.blocks:
            cached = min(p // self.limits.block_size, r.blocks)
            # Those blocks now belong to the cache; the request keeps using them as shared blocks.
            r.blocks -= cached
            r.shared_blocks = cached
            self.prefix_blocks_cached = cached
            self.prefix_holders += 1

    # -- one step -----------------------------------------------------------------------------

    def _preempt_last(self) -> SimRequest:
        self._preempted_in_step = True
        victim = self.running.pop()
        self._release(victim, keep_cached=True)
        victim.num_computed = 0
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def _schedule(self) -> list[tuple[SimRequest, int]]:
        self._preempted_in_step = False
        lim = self.limits
        budget = lim.max_num_batched_tokens
        scheduled: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            n = r.num_tokens - r.num_computed
            if lim.long_prefill_token_threshold > 0:
                n = min(n, lim.long_prefill_token_threshold)
            n = min(n, budget)
            if n <= 0:
                i += 1
                continue
            while not self._try_allocate(r, n):
                victim = self._preempt_last()
                preempted = True
                if victim is r:
                    break
            else:
                scheduled.append((r, n))
                budget -= n
                i += 1
                continue
            break  # r itself was preempted
        if preempted:
            return scheduled
        partial_cap = lim.max_num_partial_prefills
        partial = sum(1 for r, n in scheduled if r.num_computed + n < r.num_tokens)
        while self.waiting and budget > 0 and len(self.running) < lim.max_num_seqs:
            r = self.waiting[0]
            if r.num_tokens > lim.max_model_len:
                self.waiting.popleft()
                r.rejected = f"prompt of {r.num_tokens} tokens exceeds max_model_len {lim.max_model_len}"
                r.finish = self.now
                self._on_finish(r)
                continue
            saved_segments = list(self.cached_segments.items()) if r.rid in self.cached_segments else None
            own = self.cached_segments.pop(r.rid, 0)
            if own:
                # A preempted request finds what is left of its own blocks in the prefix cache.
                self.cached_free -= own
                self.free_blocks -= own
                r.blocks = own
                r.num_computed = min(own * lim.block_size, r.num_tokens - 1)
            hit = self._prefix_hit(r) if r.num_computed == 0 else 0
            if hit:
                r.shared_blocks = hit // lim.block_size
                self.prefix_holders += 1
                r.num_computed = hit
            n = r.num_tokens - r.num_computed
            if lim.long_prefill_token_threshold > 0:
                n = min(n, lim.long_prefill_token_threshold)
            if not lim.enable_chunked_prefill and n > budget:
                self._undo_hit(r, hit, own, saved_segments)
                break
            n = min(n, budget)
            will_be_partial = r.num_computed + n < r.num_tokens
            if will_be_partial and partial_cap is not None and partial >= partial_cap:
                self._undo_hit(r, hit, own, saved_segments)
                break
            if not self._try_allocate(r, n):
                self._undo_hit(r, hit, own, saved_segments)
                if not self.running and self._blocks_for(r.num_tokens) > lim.num_gpu_blocks:
                    self.waiting.popleft()
                    r.rejected = "needs more KV blocks than the whole cache holds"
                    r.finish = self.now
                    self._on_finish(r)
                    continue
                break
            self.waiting.popleft()
            self.running.append(r)
            if r.first_scheduled is None:
                r.first_scheduled = self.now
            scheduled.append((r, n))
            budget -= n
            partial += int(will_be_partial)
        return scheduled

    def _undo_hit(self, r: SimRequest, hit: int, own: int = 0, saved_segments: list | None = None) -> None:
        """Admission failed: give back the prefix-cache hits taken for ``r``, in their old LRU place."""
        if hit:
            r.num_computed = 0
            r.shared_blocks = 0
            self.prefix_holders -= 1
        if own:
            r.blocks = 0
            r.num_computed = 0
            self.free_blocks += own
            self.cached_free += own
            self.cached_segments = OrderedDict(saved_segments or [])

    def _run_step(self, scheduled: list[tuple[SimRequest, int]]) -> bool:
        """Run one step; True when it was decode-only and nothing finished (fast-forward may follow)."""
        num_decodes = 0
        ctx_sum = 0
        readers = 0
        chunks: list[tuple[int, int]] = []
        for r, n in scheduled:
            if n == 1 and r.num_computed == r.num_tokens - 1 and r.num_generated > 0:
                num_decodes += 1
                ctx_sum += r.num_computed + 1
                readers += 1 if r.shared_blocks else 0
            else:
                chunks.append((n, r.num_computed))
        batch = StepBatch(num_decodes, ctx_sum, tuple(chunks), *self._shared_prefix(readers))
        duration = float(self.step_cost(batch))
        self.steps.append(
            StepRecord(
                start=self.now,
                duration=duration,
                num_decodes=num_decodes,
                prefill_tokens=batch.prefill_tokens,
                running=len(self.running),
                waiting=len(self.waiting),
                kv_blocks_used=self.limits.num_gpu_blocks - self.free_blocks,
            )
        )
        self.now += duration
        finished: list[SimRequest] = []
        for r, n in scheduled:
            r.num_computed += n
            self._maybe_cache_prefix(r)
            if r.num_computed >= r.num_tokens:  # caught up: this step samples a token
                r.num_generated += 1
                r.token_times.append(self.now)
                if r.num_generated >= r.output_len:
                    finished.append(r)
        for r in finished:
            r.finish = self.now
            self.running.remove(r)
            self._release(r)
            self._on_finish(r)
        return not chunks and not finished and num_decodes == len(self.running)

    def _shared_prefix(self, readers: int) -> tuple[int, int]:
        return (self.prefix_blocks_cached * self.limits.block_size, readers) if readers else (0, 0)

    def _fast_forward(self) -> None:
        """Run many identical decode-only steps at once.

        After a decode-only step in which nothing was admitted, preempted or finished, the next steps
        are the same batch with every context one token longer, until a request finishes, the free
        blocks run out (the step that would preempt runs normally), or a request arrives: the waiting
        queue stays blocked (free blocks only shrink; the token budget and running count are fixed). Step time is linear in the summed context
        length (decode attention reads it; nothing else depends on it), so the k steps' end times
        follow in closed form from two evaluations of the cost. This folds ~1,000 steps per request
        into a few records without changing any result.
        """
        running = self.running
        n = len(running)
        if n == 0:
            return
        bs = self.limits.block_size
        k = min(r.output_len - r.num_generated - 1 for r in running)
        if k < 2:
            return

        def blocks_needed(steps: int) -> int:
            return sum(max(0, -(-(r.num_computed + steps) // bs) - r.blocks - r.shared_blocks) for r in running)

        if blocks_needed(k) > self.free_blocks:  # stop before the step whose allocation would fail
            lo, hi = 0, k
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if blocks_needed(mid) <= self.free_blocks:
                    lo = mid
                else:
                    hi = mid - 1
            k = lo
            if k < 2:
                return
        ctx0 = sum(r.num_computed + 1 for r in running)
        shared = self._shared_prefix(sum(1 for r in running if r.shared_blocks))
        c_first = float(self.step_cost(StepBatch(n, ctx0, (), *shared)))
        c_last = float(self.step_cost(StepBatch(n, ctx0 + n * (k - 1), (), *shared)))
        slope = (c_last - c_first) / (k - 1)
        j = np.arange(1, k + 1, dtype=float)
        ends = self.now + j * c_first + slope * j * (j - 1) / 2.0  # end time of each of the k steps
        if self._arrivals is not None and self._next_arrival < len(self._arrivals):
            limit = int(np.searchsorted(ends, self._arrivals[self._next_arrival], side="left"))
            if limit < 2:
                return
            k = limit
            ends = ends[:k]
        self.steps.append(
            StepRecord(
                start=self.now,
                duration=float(ends[-1] - self.now),
                num_decodes=n,
                prefill_tokens=0,
                running=n,
                waiting=len(self.waiting),
                kv_blocks_used=self.limits.num_gpu_blocks - self.free_blocks,
                count=k,
            )
        )
        times = ends.tolist()
        for r in running:
            grow = max(0, -(-(r.num_computed + k) // bs) - r.blocks - r.shared_blocks)
            if grow:
                self.free_blocks -= grow
                self._evict(grow)
                r.blocks += grow
            r.num_computed += k
            r.num_generated += k
            r.token_times.extend(times)
        self.now = float(ends[-1])

    def run(self) -> SimResult:
        if self._arrivals is None:
            self._start_closed_loop()
        for _ in range(self.max_steps):
            self._admit_arrivals()
            if not self.running and not self.waiting:
                if self._arrivals is not None and self._next_arrival < len(self._arrivals):
                    self.now = max(self.now, self._arrivals[self._next_arrival])
                    continue
                break
            scheduled = self._schedule()
            if not scheduled:
                if self._arrivals is not None and self._next_arrival < len(self._arrivals):
                    self.now = max(self.now, self._arrivals[self._next_arrival])
                    continue
                if not self.running and not self.waiting:
                    break
                if not self.running:
                    # Nothing can run and nothing will change: reject the head of the queue.
                    r = self.waiting.popleft()
                    r.rejected = "could not be scheduled (KV cache or token budget too small)"
                    r.finish = self.now
                    self._on_finish(r)
                continue
            if self._run_step(scheduled) and self.fast_forward and not self._preempted_in_step:
                self._fast_forward()
        else:
            raise RuntimeError(f"simulation did not finish within {self.max_steps} steps")
        return SimResult(
            requests=self.requests,
            steps=self.steps,
            limits=self.limits,
            workload=self.workload,
            duration=self.now,
            total_preemptions=self.preemptions,
        )


def simulate(
    limits: SchedulerLimits, step_cost: StepCost | Callable[[StepBatch], float], workload: Workload, *, fast_forward: bool = True
) -> SimResult:
    """Simulate one load point and return every request's timeline and every step."""
    return Simulator(limits, step_cost, workload, fast_forward=fast_forward).run()

"""A discrete-event simulation of vLLM V1's scheduler: event to event, checked against step by step.

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
5. A request reaches the scheduler ``intake_delay_s`` after it is sent (HTTP, the API server, the
   queue into the engine core; its TTFT still counts from the send). In a closed loop this matters
   beyond the few ms it adds: requests that finish in the same step are replaced by requests that
   arrive together, so a real server's waves stay together, where an immediate replacement would be
   admitted in the very next step and stagger them (real vLLM 0.26: TTFT p50 under-predicted by
   30-80% at 32-256 clients without it; RESULTS.md, session 19).

Events, not steps: between two scheduler events (an arrival, a request admitted or finishing, a
prompt's last chunk, a KV block that runs out and forces a preemption) consecutive steps schedule the
same requests with the same token counts, and only the context lengths grow, by one token per
decode and one chunk per prefill. ``mode="events"`` (the default) runs such a stretch of k steps in
one jump (``Simulator._run_stretch``): the step costs from a few evaluations (the step-time model is
affine in the context lengths), the k end times at once, the KV blocks the stretch allocates, the
tokens every request samples (stored once per stretch). ``mode="steps"`` runs every step through the
scheduler and is the reference: ``tests/test_simulator_events.py`` holds the two equal on every
figure over a matrix of models, prompt lengths, loads and KV pools. A 63K-prompt load point is
~200,000 steps but ~3,400 events.

Simplifications, each a named choice: one engine (data parallel replicas are simulated as separate
engines by the caller); no speculative decoding; no async-scheduling overlap (the step-time model's
fixed overhead stands for the CPU work); cached prefix blocks stay resident (no eviction model).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol

import numpy as np


class StepBatch(NamedTuple):
    """What one engine step computes: decodes (one token each) and prefill chunks.

    ``decode_context_sum`` is the sum over decoding requests of their context length (tokens whose
    KV the attention reads); ``prefill_chunks`` holds (chunk_tokens, tokens_already_computed) pairs.
    A named tuple, not a frozen dataclass: the simulator builds one per event and a frozen
    dataclass costs ~5 µs to construct.
    """

    num_decodes: int
    decode_context_sum: int
    prefill_chunks: tuple[tuple[int, int], ...]
    shared_prefix_len: int = 0  # tokens of a prefix-cached prefix common to ...
    shared_prefix_readers: int = 0  # ... this many of the decodes (cascade attention may read it once)

    @property
    def prefill_tokens(self) -> int:
        return sum([c for c, _ in self.prefill_chunks])

    @property
    def total_tokens(self) -> int:
        return self.num_decodes + sum([c for c, _ in self.prefill_chunks])


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
    #: Seconds from a request's send to the moment the engine's scheduler can see it (HTTP, the API
    #: server, the queue into the engine core). A closed loop's replacement reaches the engine this
    #: long after its predecessor finished, so requests that finish together are admitted together.
    intake_delay_s: float = 0.0


@dataclass(frozen=True)
class Workload:
    """Requests to send: fixed lengths, a closed loop of clients or an open Poisson stream."""

    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None = None  # closed loop: this many clients, each sends the next on completion
    request_rate: float | None = None  # open loop: Poisson arrivals (inf = all at t=0)
    # both, the rate finite: an open loop held to at most ``concurrency`` requests in flight
    # (`vllm bench serve --request-rate R --max-concurrency C`): an arrival that finds C in flight is
    # sent when one completes, and its times count from then (the client's semaphore)
    shared_prefix_len: int = 0  # tokens common to all prompts (prefix-cache hits after the first)
    seed: int = 0
    #: open loop: the send times a client recorded (s), replayed instead of a Poisson draw, so a
    #: measured run is compared with the arrivals it really had, not with another draw of its rate
    arrivals: tuple[float, ...] | None = None


@dataclass(slots=True)
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
    # When each token was sampled: a float per token sampled in a single step, or one shared array for
    # the k tokens of a stretch of identical steps (see ``Simulator._run_stretch``). Read through
    # ``token_times`` (flat) or ``first_token_time``; :mod:`.summary` reads the segments directly.
    token_segments: list = field(default_factory=list)
    preemptions: int = 0
    finish: float | None = None
    rejected: str | None = None
    # Where the request's moments fall in the sequence of engine steps (0-based; -1 = none yet or,
    # for the arrival, before the first step): a closed loop's schedule does not depend on step
    # times, so these let ``retime`` recompute every timing under another step cost.
    arrival_step: int = -1
    first_token_step: int = -1
    finish_step: int = -1
    last_token_time: float | None = None

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.num_generated

    @property
    def first_token_time(self) -> float | None:
        if not self.token_segments:
            return None
        seg = self.token_segments[0]
        return float(seg[0]) if isinstance(seg, np.ndarray) else seg

    @property
    def token_times(self) -> list[float]:
        """Every token's sampling time, in order (built on demand: the segments are the storage)."""
        out: list[float] = []
        for seg in self.token_segments:
            if isinstance(seg, np.ndarray):
                out.extend(seg.tolist())
            else:
                out.append(seg)
        return out


@dataclass(slots=True)
class StepRecord:
    start: float
    duration: float
    num_decodes: int
    prefill_tokens: int
    running: int
    waiting: int
    kv_blocks_used: float
    # A stretch of ``count`` steps with the same batch shape folded into one record (see
    # Simulator._run_stretch): ``duration`` is their total, ``kv_blocks_used`` their time-weighted mean.
    count: int = 1
    batch: StepBatch | None = None  # the first step's batch
    last_batch: StepBatch | None = None  # the last step's, when count > 1 (the costs in between are affine)


@dataclass
class SimResult:
    requests: list[SimRequest]
    steps: list[StepRecord]
    limits: SchedulerLimits
    workload: Workload
    duration: float
    total_preemptions: int
    # The ITL gaps, pooled as the simulation went: one gap per token sampled after a request's
    # previous segment (``itl_joins``), and per stretch the durations of its steps after the first
    # (the gaps between its tokens) with the number of requests that sampled at every step
    # (``itl_stretches``). See ``summary.itl_gaps``.
    itl_joins: list[float] | None = None
    itl_stretches: list[tuple[np.ndarray, int]] | None = None

    def finished(self) -> list[SimRequest]:
        return [r for r in self.requests if r.finish is not None and r.rejected is None]


class Simulator:
    """Runs one load point. Use :func:`simulate` unless you need the object."""

    def __init__(
        self, limits: SchedulerLimits, step_cost: StepCost, workload: Workload, max_steps: int = 2_000_000, mode: str = "events"
    ):
        if mode not in ("events", "steps"):
            raise ValueError(f"mode must be 'events' or 'steps', not {mode!r}")
        self.mode = mode
        self._affine_cost = bool(getattr(step_cost, "affine_in_context", False))
        self._prefix_possible = limits.enable_prefix_caching and workload.shared_prefix_len >= limits.block_size
        # For an affine cost: per batch shape, a base cost and its slopes (see ``_shape_cost``).
        self._shapes: dict[tuple, tuple[float, int, tuple[int, ...], float, tuple[float, ...]]] = {}
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
        self.step_count = 0  # engine steps run so far (a stretch counts all of its steps)
        self.itl_joins: list[float] = []
        self.itl_stretches: list[tuple[np.ndarray, int]] = []
        self.preemptions = 0
        self._preempted_in_step = False
        # Shared-prefix cache: blocks of the common prefix, computed once and then shared.
        self.prefix_blocks_cached = 0
        self.prefix_holders = 0
        self._arrivals = self._arrival_times()
        self._next_arrival = 0
        self._sent = 0
        self._done = 0  # requests completed (an open loop held to a concurrency counts those in flight)
        self._delay = max(0.0, limits.intake_delay_s)
        # Closed loop with an intake delay: (schedulable at, request) sent but not yet seen by the
        # scheduler, in send order (a constant delay keeps them in time order).
        self._pending: deque[tuple[float, SimRequest]] = deque()

    # -- workload -----------------------------------------------------------------------------

    @property
    def _cap(self) -> int | None:
        """Requests an open loop may have in flight (Workload: both a concurrency and a finite rate)."""
        w = self.workload
        return w.concurrency if w.concurrency is not None and self._arrivals is not None else None

    def _arrival_times(self) -> list[float] | None:
        w = self.workload
        if w.concurrency is not None and (w.request_rate is None or math.isinf(w.request_rate) or w.arrivals is not None):
            return None  # closed loop: arrivals are generated by completions
        if w.arrivals is not None:
            start = min(w.arrivals, default=0.0)
            return sorted(t - start for t in w.arrivals)[: w.num_prompts]
        rate = w.request_rate if w.request_rate is not None else math.inf
        if math.isinf(rate):
            return [0.0] * w.num_prompts
        rng = np.random.default_rng(w.seed)
        return list(np.cumsum(rng.exponential(1.0 / rate, size=w.num_prompts)))

    def _new_request(self, arrival: float) -> SimRequest:
        r = SimRequest(rid=self._sent, prompt_len=self.workload.input_len, output_len=self.workload.output_len, arrival=arrival, arrival_step=self.step_count - 1)
        self._sent += 1
        self.requests.append(r)
        return r

    def _admit_arrivals(self) -> None:
        pending = self._pending
        while pending and pending[0][0] <= self.now + 1e-12:
            self.waiting.append(pending.popleft()[1])
        if self._arrivals is None:
            return
        delay, cap = self._delay, self._cap
        while self._next_arrival < len(self._arrivals) and self._arrivals[self._next_arrival] + delay <= self.now + 1e-12:
            if cap is not None and self._sent - self._done >= cap:
                break  # held by the client until a request completes (_on_finish sends it)
            self.waiting.append(self._new_request(self._arrivals[self._next_arrival]))
            self._next_arrival += 1

    def _next_intake(self) -> float | None:
        """When the next request not yet seen by the scheduler becomes schedulable (None: none left)."""
        if self._pending:
            return self._pending[0][0]
        if self._arrivals is not None and self._next_arrival < len(self._arrivals):
            if self._cap is not None and self._sent - self._done >= self._cap:
                return None  # nothing can be sent before a request completes
            return self._arrivals[self._next_arrival] + self._delay
        return None

    def _send(self, at: float) -> None:
        """A closed-loop client sends a request at ``at``; the scheduler sees it after the intake delay."""
        r = self._new_request(at)
        if self._delay > 0.0:
            self._pending.append((at + self._delay, r))
        else:
            self.waiting.append(r)

    def _start_closed_loop(self) -> None:
        w = self.workload
        for _ in range(min(w.concurrency or 0, w.num_prompts)):
            self._send(0.0)

    def _on_finish(self, r: SimRequest) -> None:
        self._done += 1
        if self._arrivals is None and self._sent < self.workload.num_prompts:
            self._send(self.now)
        elif self._cap is not None and self._next_arrival < len(self._arrivals) and self._arrivals[self._next_arrival] <= self.now + 1e-12:
            # an arrival the cap held back is sent now, its times counted from now
            self._next_arrival += 1
            self._send(self.now)

    # -- KV blocks ----------------------------------------------------------------------------

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.limits.block_size)

    def _try_allocate(self, r: SimRequest, new_tokens: int) -> bool:
        need = -(-(r.num_computed + new_tokens) // self.limits.block_size) - r.shared_blocks - r.blocks
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
        threshold = lim.long_prefill_token_threshold
        bs = lim.block_size
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            n = r.prompt_len + r.num_generated - r.num_computed  # num_tokens - num_computed
            if 0 < threshold < n:
                n = threshold
            if n > budget:
                n = budget
            if n <= 0:
                i += 1
                continue
            if -(-(r.num_computed + n) // bs) <= r.shared_blocks + r.blocks:  # fits the blocks it holds
                scheduled.append((r, n))
                budget -= n
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
        partial = sum(1 for r, n in scheduled if r.num_computed + n < r.num_tokens) if partial_cap is not None else 0
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

    @staticmethod
    def _is_decode(r: SimRequest, n: int) -> bool:
        return n == 1 and r.num_computed == r.num_tokens - 1 and r.num_generated > 0

    def _run_step(self, scheduled: list[tuple[SimRequest, int]]) -> None:
        """Run one step (the reference path, and every step that starts or ends something)."""
        num_decodes = 0
        ctx_sum = 0
        readers = 0
        chunks: list[tuple[int, int]] = []
        prefill_tokens = 0
        for r, n in scheduled:
            if self._is_decode(r, n):
                num_decodes += 1
                ctx_sum += r.num_computed + 1
                readers += 1 if r.shared_blocks else 0
            else:
                chunks.append((n, r.num_computed))
                prefill_tokens += n
        batch = StepBatch(num_decodes, ctx_sum, tuple(chunks), *self._shared_prefix(readers))
        duration = self._shape_cost(batch, create=False) if self._shapes else None  # a shape a stretch has seen
        if duration is None:
            duration = float(self.step_cost(batch))
        self.steps.append(
            StepRecord(
                start=self.now,
                duration=duration,
                num_decodes=num_decodes,
                prefill_tokens=prefill_tokens,
                running=len(self.running),
                waiting=len(self.waiting),
                kv_blocks_used=self.limits.num_gpu_blocks - self.free_blocks,
                batch=batch,
            )
        )
        self.now += duration
        g = self.step_count
        self.step_count += 1
        finished: list[SimRequest] = []
        cache_prefix = self._prefix_possible and not self.prefix_blocks_cached
        for r, n in scheduled:
            r.num_computed += n
            if cache_prefix:
                self._maybe_cache_prefix(r)
            if r.num_computed >= r.num_tokens:  # caught up: this step samples a token
                r.num_generated += 1
                r.token_segments.append(self.now)
                if r.last_token_time is not None:
                    self.itl_joins.append(self.now - r.last_token_time)
                r.last_token_time = self.now
                if r.first_token_step < 0:
                    r.first_token_step = g
                if r.num_generated >= r.output_len:
                    finished.append(r)
        self._finish(finished)

    def _finish(self, finished: list[SimRequest]) -> None:
        for r in finished:
            r.finish = self.now
            r.finish_step = self.step_count - 1
            self.running.remove(r)
            self._release(r)
            self._on_finish(r)

    def _shared_prefix(self, readers: int) -> tuple[int, int]:
        return (self.prefix_blocks_cached * self.limits.block_size, readers) if readers else (0, 0)

    # -- stretches of identical steps (the event-driven path) ----------------------------------

    def _repeat_limit(self, scheduled: list[tuple[SimRequest, int]]) -> tuple[int, list[SimRequest], list[tuple[SimRequest, int]]]:
        """How many consecutive steps, this one first, schedule the same requests with the same token
        counts, counting only what the batch itself decides (the KV pool and arrivals are checked in
        ``_run_stretch``); with the batch's decodes and prefill chunks.

        The schedule of step j+1 equals that of step j when nobody finishes, no prompt completes and
        no chunk shrinks before the last step of the stretch: the running requests then ask for the
        same tokens in the same order, so the token budget left for the waiting queue is the same,
        and the admission that stopped in the first step stops again (the queue's head is the same,
        free blocks only shrink, the running count is fixed). A preemption in the first step leaves
        the next step's admission undecided, so it ends the stretch at once. A change to
        ``_schedule`` that makes a step's schedule depend on anything else (the clock, a step
        counter, the tokens computed so far beyond what is checked here) must be mirrored here:
        ``tests/test_simulator_events.py`` compares both paths and will say so.
        """
        if self.mode == "steps" or self._preempted_in_step or not scheduled:
            return 1, [], []
        lim = self.limits
        p = self.workload.shared_prefix_len
        prefix_pending = lim.enable_prefix_caching and p >= lim.block_size and not self.prefix_blocks_cached
        cap_matters = lim.max_num_partial_prefills is not None and bool(self.waiting)
        k = self.max_steps
        decodes: list[SimRequest] = []
        chunks: list[tuple[SimRequest, int]] = []
        for r, n in scheduled:
            c = r.num_computed
            if n == 1 and c == r.prompt_len + r.num_generated - 1 and r.num_generated > 0:  # _is_decode
                decodes.append(r)
                left = r.output_len - r.num_generated  # the finishing step may be the last
                if left < k:
                    k = left
            else:
                if n == 1:
                    return 1, [], []
                chunks.append((r, n))
                rem = r.prompt_len + r.num_generated - c
                # Chunks of n while at least n remain; the chunk that completes the prompt may be the
                # last step (with a partial-prefill cap it frees a slot for the queue: not even that).
                k = min(k, (rem - 1) // n if cap_matters else rem // n)
            if prefix_pending:
                # The step that first computes the shared prefix puts it in the cache: last step at most.
                k = min(k, max(1, -(-(p - c) // n)))
            if k <= 1:
                return 1, [], []
        return k, decodes, chunks

    def _stretch_costs(self, batch_at: Callable[[int], StepBatch], k: int, first: StepBatch, last: StepBatch) -> tuple[np.ndarray, float, float, bool]:
        """The k steps' durations from a few cost evaluations: (durations, first, last, affine).

        Along a stretch only context lengths grow, one token per decode and one chunk per prefill per
        step; the step-time model is affine in them (decode attention reads the context, prefill
        attention is linear in the chunk's depth), except where a sliding window caps the context
        (a minimum: concave). A cost model that says it is affine (``affine_in_context``) is
        evaluated at both ends; any other is checked: a cost that is concave or convex on an
        interval and meets its chord at the midpoint is affine there, so a piece is accepted when
        its midpoint matches the chord and split in two otherwise.
        """
        cost = self.step_cost
        if self._affine_cost:
            f0 = self._shape_cost(first)
            f1 = self._shape_cost(last)
            return f0 + (f1 - f0) * (np.arange(k) / (k - 1)), f0, f1, True
        f0 = float(cost(first))
        f1 = float(cost(last))
        out = np.empty(k)
        stack = [(0, k - 1, f0, f1)]
        affine = True
        while stack:
            lo, hi, flo, fhi = stack.pop()
            if hi - lo <= 2:
                out[lo] = flo
                out[hi] = fhi
                if hi - lo == 2:
                    out[lo + 1] = float(cost(batch_at(lo + 1)))
                    affine = affine and abs(out[lo + 1] - (flo + fhi) / 2) <= 1e-9 * max(abs(flo), abs(fhi))
                continue
            mid = (lo + hi) // 2
            fm = float(cost(batch_at(mid)))
            chord = flo + (fhi - flo) * (mid - lo) / (hi - lo)
            if abs(fm - chord) <= 1e-9 * max(abs(fm), abs(flo), abs(fhi)):
                out[lo : hi + 1] = flo + (fhi - flo) * (np.arange(hi - lo + 1) / (hi - lo))
            else:
                affine = False
                stack.append((lo, mid, flo, fm))
                stack.append((mid, hi, fm, fhi))
        return out, f0, f1, affine

    def _shape_cost(self, b: StepBatch, create: bool = True) -> float | None:
        """The cost of a batch through its shape's affine form, for costs that say they are affine
        in the context lengths at a fixed shape (decodes, chunk sizes, shared prefix): the first
        stretch of a shape evaluates the cost at its base and one step along the decode context
        and each chunk's depth; every later batch of that shape (the prefill of each new request
        beside the same running decodes, say) is then a few multiplications."""
        chunks = b.prefill_chunks
        if len(chunks) == 1:  # the common shapes: one chunk or none
            (n0, d0), = chunks
            key = (b.num_decodes, n0, b.shared_prefix_len, b.shared_prefix_readers)
            entry = self._shapes.get(key)
            if entry is not None:
                return entry[0] + entry[3] * (b.decode_context_sum - entry[1]) + entry[4][0] * (d0 - entry[2][0])
        elif not chunks:
            key = (b.num_decodes, None, b.shared_prefix_len, b.shared_prefix_readers)
            entry = self._shapes.get(key)
            if entry is not None:
                return entry[0] + entry[3] * (b.decode_context_sum - entry[1])
        else:
            key = (b.num_decodes, tuple([n for n, _ in chunks]), b.shared_prefix_len, b.shared_prefix_readers)
            entry = self._shapes.get(key)
        depths = tuple([d for _, d in chunks])
        if entry is None and not create:
            return None
        if entry is None:
            cost = self.step_cost
            base = float(cost(b))
            g_ctx = 0.0
            if b.num_decodes:
                g_ctx = (float(cost(StepBatch(b.num_decodes, b.decode_context_sum + 1024, chunks, b.shared_prefix_len, b.shared_prefix_readers))) - base) / 1024
            g_depths = []
            for i in range(len(chunks)):
                moved = tuple([(n, d + 1024 if j == i else d) for j, (n, d) in enumerate(chunks)])
                g_depths.append((float(cost(StepBatch(b.num_decodes, b.decode_context_sum, moved, b.shared_prefix_len, b.shared_prefix_readers))) - base) / 1024)
            self._shapes[key] = (base, b.decode_context_sum, depths, g_ctx, tuple(g_depths))
            return base
        base, ctx0, depths0, g_ctx, g_depths = entry
        value = base + g_ctx * (b.decode_context_sum - ctx0)
        for g, d, d0 in zip(g_depths, depths, depths0):
            value += g * (d - d0)
        return value

    def _blocks_after(self, decodes: list[SimRequest], chunks: list[tuple[SimRequest, int]], k: int) -> int:
        """Blocks the stretch allocates beyond what its first step (already scheduled) took, if it
        runs k steps: each request ends holding the blocks for its context after k steps."""
        bs = self.limits.block_size
        total = 0
        for r in decodes:
            grow = -(-(r.num_computed + k) // bs) - r.blocks - r.shared_blocks
            if grow > 0:
                total += grow
        for r, n in chunks:
            grow = -(-(r.num_computed + k * n) // bs) - r.blocks - r.shared_blocks
            if grow > 0:
                total += grow
        return total

    def _stretch_block_seconds(self, decodes: list[SimRequest], chunks: list[tuple[SimRequest, int]], durations: np.ndarray, slope: float | None) -> float:
        """Sum over the stretch's steps of (blocks allocated since its first step) x (step duration):
        what the time-weighted KV usage needs, as the reference records it after each step's
        allocation. A block allocated at step t counts for the steps t..k-1 (their summed duration,
        ``tail(t)``). A decode allocates at ``held x block_size - computed`` and every ``block_size``
        steps after: with affine durations (``slope`` given) the sum over that progression is closed
        form; otherwise it is read off the tail sums."""
        bs = self.limits.block_size
        k = durations.size
        firsts: dict[int, int] = {}
        for r in decodes:
            t = bs * (r.blocks + r.shared_blocks) - r.num_computed
            if 1 <= t < k:
                firsts[t] = firsts.get(t, 0) + 1
        total = 0.0
        if slope is not None:
            f0 = float(durations[0])
            half_kk = k * (k - 1) / 2.0
            for t1, count in firsts.items():
                m = (k - 1 - t1) // bs + 1  # allocations at t1, t1 + bs, ... < k
                st = m * t1 + bs * m * (m - 1) / 2.0
                st2 = m * t1 * t1 + t1 * bs * m * (m - 1) + bs * bs * (m - 1) * m * (2 * m - 1) / 6.0
                # tail(t) = (k - t) f0 + slope (k(k-1)/2 - t(t-1)/2), summed over the m values of t
                total += count * ((m * k - st) * f0 + slope * (m * half_kk - (st2 - st) / 2.0))
        elif firsts:
            tail = np.cumsum(durations[::-1])[::-1]  # tail[t] = sum of durations[t:]
            for t, count in firsts.items():
                total += count * float(tail[t::bs].sum())
        j1 = None
        for r, n in chunks:
            held = r.blocks + r.shared_blocks
            a = r.num_computed + n  # tokens after the stretch's first step, which ``held`` covers exactly
            if slope is not None and held == -(-a // bs):
                # need_j = ceil((a + j n) / bs) - held = (a + j n + rem_j) / bs - held, where
                # rem_j = -(a + j n) mod bs repeats with period bs / gcd(n, bs): sum in closed form.
                f0 = float(durations[0])
                s1, s2 = k * (k - 1) / 2.0, (k - 1) * k * (2 * k - 1) / 6.0
                part = (a * f0 * k + (a * slope + n * f0) * s1 + n * slope * s2) / bs - held * (f0 * k + slope * s1)
                period = bs // math.gcd(n, bs)
                for q in range(min(period, k)):
                    rem = -(a + q * n) % bs
                    if rem:
                        m = (k - 1 - q) // period + 1
                        part += rem / bs * (m * f0 + slope * (m * q + period * m * (m - 1) / 2.0))
                total += part
                continue
            if j1 is None:
                j1 = np.arange(1, k + 1, dtype=np.int64)
            need = np.maximum(0, -(-(r.num_computed + j1 * n) // bs) - held)
            total += float((need * durations).sum())  # not np.dot: BLAS threads stall on a busy machine
        return total

    def _run_stretch(self, scheduled: list[tuple[SimRequest, int]], k: int, decodes: list[SimRequest], chunks: list[tuple[SimRequest, int]]) -> None:
        """Run k >= 2 steps whose batches differ only in context lengths, in one jump: the same
        per-request token times, step count, block allocations and server view as k calls of
        ``_run_step`` (the reference; ``mode="steps"`` runs it alone)."""
        free = self.free_blocks
        taken = self._blocks_after(decodes, chunks, k)
        if taken > free:
            # Stop before the step whose allocation would preempt: the longest run that still fits.
            lo, hi = 1, k - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._blocks_after(decodes, chunks, mid) <= free:
                    lo = mid
                else:
                    hi = mid - 1
            k = lo
            if k < 2:
                self._run_step(scheduled)
                return
            taken = self._blocks_after(decodes, chunks, k)
        nd = len(decodes)
        ctx0 = 0
        readers = 0
        for r in decodes:
            ctx0 += r.num_computed + 1
            if r.shared_blocks:
                readers += 1
        shared = self._shared_prefix(readers)
        chunk_spec = [(n, r.num_computed) for r, n in chunks]

        def batch_at(j: int) -> StepBatch:
            return StepBatch(nd, ctx0 + j * nd, tuple([(n, d + j * n) for n, d in chunk_spec]), *shared)

        first_batch, last_batch = batch_at(0), batch_at(k - 1)
        durations, f0, f1, affine = self._stretch_costs(batch_at, k, first_batch, last_batch)
        k_costed = k
        ends = durations.cumsum()
        ends += self.now
        intake = self._next_intake()
        if intake is not None:
            # A request that arrives before a step starts joins the queue that step sees: stop there.
            fits = 1 + int(np.searchsorted(ends[:-1], intake - 1e-12, side="left"))
            if fits < k:
                if fits < 2:
                    self._run_step(scheduled)
                    return
                k = fits
                ends, durations = ends[:k], durations[:k]
                taken = self._blocks_after(decodes, chunks, k)
                last_batch = batch_at(k - 1)
        now = self.now
        last = float(ends[-1])
        total = last - now
        used0 = self.limits.num_gpu_blocks - free
        if taken:
            block_seconds = self._stretch_block_seconds(decodes, chunks, durations, (f1 - f0) / (k_costed - 1) if affine else None)
            kv_used = used0 + block_seconds / total if total > 0 else used0
        else:
            kv_used = used0
        prefill_tokens = 0
        for n, _ in chunk_spec:
            prefill_tokens += n
        self.steps.append(
            StepRecord(now, total, nd, prefill_tokens, len(self.running), len(self.waiting), kv_used, k, first_batch, last_batch)
        )
        g_last = self.step_count + k - 1
        self.step_count += k
        if taken:
            self.free_blocks = free - taken
            self._evict(taken)
        bs = self.limits.block_size
        self.now = last
        finished: list[SimRequest] = []
        if decodes:
            first = float(ends[0])
            joins = self.itl_joins
            if k > 1:
                self.itl_stretches.append((durations[1:], nd))  # the gaps between the stretch's tokens
            for r in decodes:
                c = r.num_computed + k
                r.num_computed = c
                grow = -(-c // bs) - r.blocks - r.shared_blocks
                if grow > 0:
                    r.blocks += grow
                g = r.num_generated + k
                r.num_generated = g
                r.token_segments.append(ends)
                joins.append(first - r.last_token_time)  # a decode has sampled before
                r.last_token_time = last
                if g >= r.output_len:
                    finished.append(r)
        for r, n in chunks:
            c = r.num_computed + k * n
            r.num_computed = c
            grow = -(-c // bs) - r.blocks - r.shared_blocks
            if grow > 0:
                r.blocks += grow
        if self._prefix_possible and not self.prefix_blocks_cached:
            for r, _ in scheduled:
                self._maybe_cache_prefix(r)
        for r, _ in chunks:
            if r.num_computed >= r.num_tokens:  # the prompt's last chunk: first token
                r.num_generated += 1
                r.token_segments.append(last)
                if r.last_token_time is not None:
                    self.itl_joins.append(last - r.last_token_time)
                r.last_token_time = last
                if r.first_token_step < 0:
                    r.first_token_step = g_last
                if r.num_generated >= r.output_len:
                    finished.append(r)
        if finished:
            if len(finished) > 1:
                order = {id(r): i for i, (r, _) in enumerate(scheduled)}
                finished.sort(key=lambda r: order[id(r)])
            self._finish(finished)

    def run(self) -> SimResult:
        if self._arrivals is None:
            self._start_closed_loop()
        while True:
            self._admit_arrivals()
            if not self.running and not self.waiting:
                intake = self._next_intake()
                if intake is not None:
                    self.now = max(self.now, intake)
                    continue
                break
            scheduled = self._schedule()
            if not scheduled:
                intake = self._next_intake()
                if intake is not None:
                    self.now = max(self.now, intake)
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
            k, decodes, chunks = self._repeat_limit(scheduled)
            if k >= 2:
                self._run_stretch(scheduled, min(k, self.max_steps - self.step_count), decodes, chunks)
            else:
                self._run_step(scheduled)
            if self.step_count >= self.max_steps:
                raise RuntimeError(f"simulation did not finish within {self.max_steps} steps")
        return SimResult(
            requests=self.requests,
            steps=self.steps,
            limits=self.limits,
            workload=self.workload,
            duration=self.now,
            total_preemptions=self.preemptions,
            itl_joins=self.itl_joins,
            itl_stretches=self.itl_stretches,
        )


def simulate(
    limits: SchedulerLimits,
    step_cost: StepCost | Callable[[StepBatch], float],
    workload: Workload,
    *,
    mode: str = "events",
    fast_forward: bool | None = None,
) -> SimResult:
    """Simulate one load point and return every request's timeline and every step.

    ``mode="events"`` (default) jumps over stretches of identical steps; ``mode="steps"`` runs the
    scheduler step by step, the reference the event path is tested against (``fast_forward=False``
    is the older spelling of it)."""
    if fast_forward is not None:
        mode = "events" if fast_forward else "steps"
    return Simulator(limits, step_cost, workload, mode=mode).run()

"""vLLM's engine steps read back from the client's per-token arrival times of a harness run.

Why: the end-to-end figures (TTFT, TPOT, throughput) mix the step model with the scheduler and the
front end, so terms fitted to them trade one error against another (session 23: the mixed-step
terms fitted on closed loops put a step carrying one new 1K-token prompt at 32 ms where the server
took about 26). The harness keeps every request's send time, TTFT and inter-token gaps, so every
output token's arrival time is known. vLLM streams a step's tokens together: tokens that reach the
client within ``GAP_S`` of each other came out of one step. A step's composition follows: the
requests that got a later token were decoding (their context: prompt plus tokens so far) and the
requests that got their first token had their prefill in it (the whole prompt, where the prompt
fits the step's token budget). The gap between two steps' outputs is the later step's time.

Two cautions, both handled here:
- vLLM's asynchronous scheduling moves part of a step's time into the gap before it (on the H200
  8B run at 20 req/s a step with one new 1K prompt showed as 14.4 + 19.0 ms across two gaps), so
  times are compared over windows of ``WINDOW`` consecutive steps, never one by one;
- when the API server falls behind, it delivers several steps' tokens at once (or one step's in
  several bursts): such a window shows fewer (or more) decodes per step than requests were decoding
  then, and is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vllm_advisor.perf.simulator import StepBatch

#: Tokens closer than this (s) at the client came out of one engine step.
GAP_S = 0.0008
#: Steps per compared window (several async-scheduled steps; short against a point's thousands).
WINDOW = 16
#: A window's steps must show at least this share of the requests decoding at its middle.
MIN_VISIBLE = 0.9
#: A window longer than this (s) spans a pause between points or a stalled client.
MAX_WINDOW_S = 2.0


@dataclass(frozen=True)
class Step:
    seconds: float  # from the previous step's output to this step's
    decodes: int
    decode_context: int  # sum over the decoding requests of prompt + tokens so far
    prefills: tuple[int, ...]  # prompt lengths of the requests whose first token this step produced
    at: float  # client time of the step's output


@dataclass(frozen=True)
class Window:
    point: str
    seconds: float
    batches: list[StepBatch]


def steps_of(point: dict) -> list[Step]:
    """The engine steps of one load point, in order (the first output has no gap before it)."""
    events = []
    for r in point.get("requests") or []:
        if not r.get("ok") or r.get("ttft") is None:
            continue
        t = r["sent"] + r["ttft"]
        events.append((t, r["prompt_tokens"], True))
        for j, gap in enumerate(r.get("itl") or [], 1):
            t += gap
            events.append((t, r["prompt_tokens"] + j, False))
    if not events:
        return []
    events.sort()
    groups, current = [], [events[0]]
    for e in events[1:]:
        if e[0] - current[-1][0] <= GAP_S:
            current.append(e)
        else:
            groups.append(current)
            current = [e]
    groups.append(current)
    at = [float(np.median([e[0] for e in g])) for g in groups]
    out = []
    for k in range(1, len(groups)):
        later = [e[1] for e in groups[k] if not e[2]]
        out.append(Step(at[k] - at[k - 1], len(later), sum(later), tuple(e[1] for e in groups[k] if e[2]), at[k]))
    return out


def windows_of(point: dict, token_budget: int) -> list[Window]:
    """Windows of WINDOW consecutive steps whose composition is known: prompts of at most half the
    step's token budget (each prefilled whole in one step), no shared prefix (a cache hit prefills
    less than the prompt), every decoding request seen in the window's steps."""
    spec = point["spec"]
    if spec.get("prefix_len") or spec["input_len"] > token_budget // 2:
        return []
    steps = steps_of(point)
    spans = [(r["sent"] + r["ttft"], r["sent"] + r["e2e"]) for r in point["requests"] if r.get("ok") and r.get("ttft") is not None]
    first = np.array([a for a, _ in spans])
    last = np.array([b for _, b in spans])
    out = []
    for k in range(0, len(steps) - WINDOW, WINDOW):
        chunk = steps[k : k + WINDOW]
        seconds = sum(s.seconds for s in chunk)
        if seconds > MAX_WINDOW_S:
            continue
        middle = chunk[WINDOW // 2].at
        decoding = int(np.sum((first < middle) & (last > middle)))
        seen = float(np.mean([s.decodes + len(s.prefills) for s in chunk]))
        if decoding and seen < MIN_VISIBLE * decoding:
            continue
        out.append(Window(spec["id"], seconds, [StepBatch(s.decodes, s.decode_context, tuple((p, 0) for p in s.prefills)) for s in chunk]))
    return out

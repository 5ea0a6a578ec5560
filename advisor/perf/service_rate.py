"""The service rate: how many requests a second a deployment completes when it is never idle.

Why: an open-loop benchmark (``vllm bench serve --request-rate R``) sends requests on a clock,
whatever the server does. When R is above the rate the server can finish them, the excess waits and
the backlog grows for as long as the benchmark sends: TTFT and end-to-end latency then measure the
benchmark's length, not the server, and the figures agree with the model at that load (the model
queues them too). What tells the user is the service rate beside the offered one: the scheduler
simulated at its full batch (closed loop, as many clients as it admits at these lengths), so every
step runs as many requests as ``max_num_seqs`` and the KV cache let it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .predict import EngineModel, LoadPoint, predict_load_point

#: Clients simulated per replica at most: past a few hundred running requests a step's time grows
#: with the batch about as fast as the batch does, so the rate hardly moves, and the cost would.
MAX_CLIENTS_PER_REPLICA = 256
#: Rounds of the clients simulated: two reach the steady state (diagnosis_prompts does the same);
#: one when two are over the caller's budget (long outputs): with one length for every request the
#: two give about the same rate.
ROUNDS = 2
#: An offered rate this far above the service rate is overload, not the model's error margin.
OVERLOAD_RATIO = 1.25


@dataclass(frozen=True)
class ServiceRate:
    """Requests a second at the full batch, with the closed-loop clients simulated for it."""

    req_s: float
    clients: int


def replica_clients(engine: EngineModel, input_len: int, output_len: int) -> int:
    """Requests one replica runs at once at these lengths: the smaller of ``max_num_seqs`` and what
    fits in its KV cache, capped at MAX_CLIENTS_PER_REPLICA. One replica is what the simulation runs
    (predict_load_point splits the clients), so this is also what its cost grows with."""
    fit = math.floor(engine.memory.requests_that_fit(input_len + output_len))
    return max(0, min(engine.config.max_num_seqs, fit, MAX_CLIENTS_PER_REPLICA))


def full_batch_clients(engine: EngineModel, input_len: int, output_len: int) -> int:
    """Requests the engine runs at once at these lengths, over all replicas."""
    return replica_clients(engine, input_len, output_len) * engine.replicas


def service_rate(engine: EngineModel, *, input_len: int, output_len: int, shared_prefix_len: int = 0, rounds: int = ROUNDS) -> ServiceRate | None:
    """The simulated service rate (None when nothing fits). The caller sets the efficiencies."""
    clients = full_batch_clients(engine, input_len, output_len)
    if clients < 1 or not engine.memory.fits:
        return None
    run, _ = predict_load_point(
        engine, LoadPoint(concurrency=clients), input_len=input_len, output_len=output_len, num_prompts=rounds * clients, shared_prefix_len=shared_prefix_len
    )
    if not run.request_throughput_req_s:
        return None
    return ServiceRate(req_s=run.request_throughput_req_s, clients=clients)


def overloaded(offered: float | None, rate: ServiceRate | None) -> bool:
    """A finite offered rate at least OVERLOAD_RATIO x the service rate."""
    return rate is not None and offered is not None and not math.isinf(offered) and offered >= OVERLOAD_RATIO * rate.req_s

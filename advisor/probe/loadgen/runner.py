"""Drive a sweep: for each concurrency, build prompts, send them under the concurrency cap (and the
optional Poisson request rate), time every request and sample ``/metrics`` alongside.

The loop mirrors ``vllm bench serve``: requests are released in order, at most ``concurrency`` in
flight; with a finite rate, release times follow exponential gaps (``random.expovariate``) drawn
from the run's seed. The load point's duration runs from the first release to the last response.

Interrupts (Ctrl-C) cancel what is in flight; finished requests are kept and the load point is
returned marked ``interrupted`` so the caller can still save it.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import httpx

from ...errors import EndpointError
from ..http import AnswerTooLarge, bounded_async_client, bounded_client, in_daemon_thread
from ...schema.metrics import MetricsSnapshot
from .prompts import Prompt, PromptBuilder
from .sampler import MetricsSampler
from .spec import BenchSpec
from .stream import RequestRecord, endpoint_path, request_body, send_request


class Reporter(Protocol):
    """What the runner tells whoever shows progress (the CLI's progress bar, a test)."""

    def preparing(self, concurrency: int, num_prompts: int, request_rate: float = math.inf) -> None: ...
    def started(self, concurrency: int, num_prompts: int) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def sampled(self, snapshot: MetricsSnapshot) -> None: ...


class SilentReporter:
    def preparing(self, concurrency: int, num_prompts: int, request_rate: float = math.inf) -> None: ...
    def started(self, concurrency: int, num_prompts: int) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def sampled(self, snapshot: MetricsSnapshot) -> None: ...


@dataclass
class LoadPoint:
    """One concurrency level as the client and the server saw it."""

    concurrency: int
    num_prompts: int
    records: list[RequestRecord]
    prompts: list[Prompt]
    started_at: float  # unix seconds
    duration_s: float
    snapshots: list[MetricsSnapshot] = field(default_factory=list)
    request_rate: float = math.inf
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


#: The whole of one /v1/models, /tokenize or /detokenize answer, in seconds (or --timeout, if shorter).
SERVER_CALL_S = 60.0


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def server_root(base_url: str) -> str:
    """``http://host:8000/v1/`` -> ``http://host:8000``: the API paths are added per call."""
    root = base_url.strip().rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def discover_model(client: httpx.Client, root: str) -> str:
    """The first served model name from ``/v1/models`` (what ``vllm bench`` does without --model)."""
    try:
        response = client.get(f"{root}/v1/models")
    except httpx.TimeoutException:
        raise EndpointError("/v1/models gave no complete answer in time; pass --model", source=root) from None
    except AnswerTooLarge as exc:
        raise EndpointError(f"/v1/models: {exc}; pass --model", source=root) from None
    except httpx.HTTPError as exc:
        raise EndpointError(f"cannot reach the server: {type(exc).__name__}: {exc}", source=root) from None
    if response.status_code != 200:
        raise EndpointError(f"/v1/models answered HTTP {response.status_code}; pass --model", source=root)
    try:
        models = [m["id"] for m in response.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EndpointError("/v1/models did not answer an OpenAI model list; pass --model", source=root) from None
    if not models:
        raise EndpointError("/v1/models lists no model", source=root)
    return models[0]


def build_prompts(builder: PromptBuilder, spec: BenchSpec, count: int, rng: random.Random) -> list[Prompt]:
    prefix = builder.exact_prefix(spec.shared_prefix_len, rng) if spec.shared_prefix_len else ""
    return [builder.build(spec.input_len, rng, prefix) for _ in range(count)]


async def run_load_point(
    spec: BenchSpec,
    concurrency: int,
    prompts: list[Prompt],
    model: str,
    rng: random.Random,
    *,
    request_rate: float = math.inf,
    sampler: MetricsSampler | None = None,
    reporter: Reporter | None = None,
) -> LoadPoint:
    reporter = reporter or SilentReporter()
    root = server_root(spec.base_url)
    url = f"{root}{endpoint_path(spec.endpoint)}"
    headers = auth_headers(spec.api_key)
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    timeout = httpx.Timeout(spec.request_timeout_s, connect=10.0)  # per read; the transport bounds each whole request
    records: list[RequestRecord] = []
    gaps = [0.0 if math.isinf(request_rate) else rng.expovariate(request_rate) for _ in prompts]
    semaphore = asyncio.Semaphore(concurrency)
    started_at = time.time()
    interrupted = False

    async with bounded_async_client(per_request_s=spec.request_timeout_s, timeout=timeout, limits=limits) as client:

        async def one(index: int, prompt: Prompt) -> None:
            async with semaphore:
                body = request_body(spec.endpoint, model, prompt.text, spec.output_len, spec.ignore_eos)
                record = await send_request(client, url, body, spec.endpoint, index, headers=headers)
            if record.prompt_tokens is None:
                record.prompt_tokens = prompt.tokens
            records.append(record)
            reporter.request_done(record)

        if sampler:
            sampler.reset()
            await sampler.sample_now()  # the "before" snapshot
            sampler.start()
        reporter.started(concurrency, len(prompts))
        start = time.perf_counter()
        tasks: list[asyncio.Task] = []
        try:
            for index, (prompt, gap) in enumerate(zip(prompts, gaps)):
                if gap:
                    await asyncio.sleep(gap)
                tasks.append(asyncio.create_task(one(index, prompt)))
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            interrupted = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        duration = time.perf_counter() - start
        if sampler:
            try:
                await sampler.stop()
            except asyncio.CancelledError:  # Ctrl-C during the last scrape: keep the requests anyway
                interrupted = True

    point = LoadPoint(
        concurrency=concurrency,
        num_prompts=len(prompts),
        records=sorted(records, key=lambda r: r.index),
        prompts=prompts,
        started_at=started_at,
        duration_s=duration,
        snapshots=list(sampler.snapshots) if sampler else [],
        request_rate=request_rate,
        interrupted=interrupted,
    )
    if sampler:
        point.notes.extend(sampler.notes)
    if interrupted:
        point.notes.append(f"interrupted: {len(records)} of {len(prompts)} requests finished and are kept")
    return point


async def run_sweep(
    spec: BenchSpec,
    *,
    reporter: Reporter | None = None,
    on_point: Callable[[LoadPoint, str, list[str]], None] | None = None,
) -> tuple[list[LoadPoint], str, list[str]]:
    """Every load point of ``spec``; ``on_point`` is called after each one (to save it at once).

    Returns the load points, the model name used, and notes about the prompts.
    """
    reporter = reporter or SilentReporter()
    spec.check()
    root = server_root(spec.base_url)
    rng = random.Random(spec.seed)
    points: list[LoadPoint] = []
    sampler = None
    # /v1/models, /tokenize and /detokenize: each answer within 60 s and 32 MiB, and called from a
    # worker thread so that Ctrl-C (a cancelled task) never waits for a stuck server
    call_s = min(SERVER_CALL_S, spec.request_timeout_s)
    with bounded_client(per_request_s=call_s, timeout=httpx.Timeout(call_s, connect=min(10.0, call_s)), headers=auth_headers(spec.api_key)) as client:
        model = spec.model or await in_daemon_thread(discover_model, client, root)
        builder = PromptBuilder(client, root, model, chat=spec.endpoint == "chat")
        if spec.metrics_url:
            sampler = MetricsSampler(spec.metrics_url, spec.metrics_interval_s, bearer_token=spec.api_key,
                                     on_sample=reporter.sampled)
        try:
            for concurrency, rate in spec.load_points():
                count = spec.prompts_for(concurrency)
                reporter.preparing(concurrency, count, rate)
                prompts = await in_daemon_thread(build_prompts, builder, spec, count, rng)
                point = await run_load_point(spec, concurrency, prompts, model, rng, request_rate=rate,
                                             sampler=sampler, reporter=reporter)
                points.append(point)
                if on_point:
                    on_point(point, model, builder.notes)
                if point.interrupted:
                    break
        except asyncio.CancelledError:
            pass  # interrupted while preparing prompts: what finished is already in `points`
        finally:
            if sampler:
                sampler.close()
    return points, model, builder.notes

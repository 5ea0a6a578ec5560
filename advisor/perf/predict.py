"""From a deployment and a workload to predicted load points: the performance model's front door.

``build_engine_model`` resolves the model, the GPU, the engine defaults for the vLLM version, the
memory budget and the step-time model once; ``predict_load_points`` simulates each load point and
returns :class:`BenchmarkRun` objects with ``format='model'``, directly comparable to what the
probe loaded from the user's files.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..errors import UsageError
from ..schema import BenchmarkRun, Deployment, EngineArgs, ServerView
from .catalog import GpuSpec, ModelSpec, get_gpu, get_model
from .defaults import ResolvedConfig, resolve_engine_config
from .memory import MemoryEstimate, MemoryParams, estimate_memory, kv_dtype_bytes, weight_bytes_per_param
from .simulator import SchedulerLimits, SimResult, StepBatch, Workload, simulate
from .efficiency import default_efficiency
from .step_time import Efficiency, StepTimeModel, model_costs
from .summary import sim_to_run


@dataclass
class EngineModel:
    """Everything the model knows about one deployment, resolved once."""

    model: ModelSpec
    gpu: GpuSpec
    config: ResolvedConfig
    memory: MemoryEstimate
    step: StepTimeModel
    num_gpus: int
    replicas: int
    notes: list[str] = field(default_factory=list)

    def limits_for(self, tokens_per_request: int | None) -> SchedulerLimits:
        """The scheduler's limits for requests of this many tokens (prompt + output).

        The simulator counts every token of a request in every layer's blocks; a model with
        sliding-window layers (gpt-oss, Gemma 2/3) keeps at most the window there, so for it the
        pool is given as the blocks that hold as many such requests as the memory model computes
        (``MemoryEstimate.requests_that_fit``): gpt-oss-120b on one H100 holds 5.6 requests of
        65,000 tokens, not the 2.8 that 72 KiB per token in every layer would allow."""
        limits = self.limits
        m = self.memory
        if not m.has_sliding_layers or (tokens_per_request or 0) <= 0:
            return limits
        per_request = math.ceil(tokens_per_request / m.block_size)
        blocks = int(m.requests_that_fit(tokens_per_request) * per_request)
        return replace(limits, num_gpu_blocks=max(limits.num_gpu_blocks, blocks))

    @property
    def limits(self) -> SchedulerLimits:
        c = self.config
        return SchedulerLimits(
            num_gpu_blocks=self.memory.num_gpu_blocks,
            block_size=self.memory.block_size,
            max_num_seqs=c.max_num_seqs,
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_model_len=c.max_model_len,
            enable_chunked_prefill=c.enable_chunked_prefill,
            enable_prefix_caching=c.enable_prefix_caching,
            long_prefill_token_threshold=c.long_prefill_token_threshold,
            max_num_partial_prefills=c.max_num_partial_prefills if c.source_of("max_num_partial_prefills") == "user" else None,
            intake_delay_s=self.step.eff.intake_delay_ms * 1e-3,
        )

    def decode_step_ms(self, batch_size: int, context_len: int) -> float:
        return self.step(StepBatch(batch_size, batch_size * context_len, ())) * 1e3

    def mixed_step_ms(self, batch_size: int, context_len: int, chunk: int, depth: int) -> float:
        return self.step(StepBatch(batch_size, batch_size * context_len, ((chunk, depth),))) * 1e3

    def prefill_alone_ms(self, input_len: int) -> float:
        """One prompt prefilled on an idle server: its chunks of the step's token budget in turn (the whole
        prompt in one step with chunked prefill off), no decodes beside them."""
        c = self.config
        budget = c.max_num_batched_tokens if c.enable_chunked_prefill else input_len
        total, done = 0.0, 0
        while done < input_len:
            chunk = min(budget, input_len - done)
            total += self.step(StepBatch(0, 0, ((chunk, done),)))
            done += chunk
        return total * 1e3

    def first_token_alone_ms(self, input_len: int) -> float:
        """One request's TTFT on an idle server: its prefill alone and the time from its sending to the
        scheduler (``intake_delay_ms``, fitted on real vLLM)."""
        return self.prefill_alone_ms(input_len) + self.step.eff.intake_delay_ms

    @contextmanager
    def efficiency(self, eff: Efficiency) -> Iterator[EngineModel]:
        """The step model under ``eff`` for the block (a ceiling, a calibration, another release's terms),
        and back to the efficiency it had after it, whatever the block raises."""
        held = self.step.eff
        self.step.eff = eff
        try:
            yield self
        finally:
            self.step.eff = held


def _heads_divide(model, tp: int) -> None:
    """vLLM shards the attention heads over the tensor-parallel ranks and refuses to start when they do
    not divide (its check: num_attention_heads % tensor_parallel_size == 0; KV heads are split, or
    replicated when fewer than the ranks): a deployment it would refuse is not modelled (a reviewer's
    find: TP 3 on a 64-head 70B was modelled, its KV cache divided by 4)."""
    if tp <= 1 or model.kv_lora_rank is not None:  # MLA: one latent KV, heads split by the attention backend
        return
    from ..errors import ShardingRefused
    from ..schema.message import msg

    heads, kv = model.num_attention_heads, model.num_kv_heads
    sizes = ", ".join(str(t) for t in (1, 2, 4, 8, 16) if heads % t == 0 and (kv % t == 0 or t % kv == 0) and t != tp)
    if heads % tp:
        raise ShardingRefused(f"tensor_parallel_size {tp} does not divide {model.name}'s {heads} attention heads: vLLM refuses to start (it would start with {sizes})",
                              note=msg("note.tp_heads", tp=tp, model=model.name, heads=heads, sizes=sizes))
    if kv % tp and tp % kv:
        raise ShardingRefused(f"tensor_parallel_size {tp} neither divides nor is a multiple of {model.name}'s {kv} KV heads: vLLM refuses to start (it would start with {sizes})",
                              note=msg("note.tp_kv_heads", tp=tp, model=model.name, heads=kv, sizes=sizes))


def build_engine_model(
    deployment: Deployment,
    engine_args: EngineArgs,
    *,
    efficiency: Efficiency | None = None,
    memory_params: MemoryParams | None = None,
    needed_model_len: int | None = None,
    derived: tuple[str, ...] = (),
) -> EngineModel:
    """Resolve catalogs, defaults, memory and step time for one deployment.

    ``needed_model_len`` is the longest request of the workload (prompt + output). When the user did
    not set ``max_model_len`` and the model's default is shorter, the served requests prove the real
    server ran with a longer one: it is raised to that length, and a note says so.

    ``derived`` names engine arguments in ``engine_args`` that the advisor filled in itself (a
    tensor-parallel size the weights need, a max_model_len the served requests prove): their
    provenance is "derived", so no reader is told they are the user's own settings.
    """
    model_name = engine_args.model or deployment.model
    if not model_name:
        raise UsageError("the deployment names no model (give one in the case file, the serve command or --model)")
    if not deployment.gpu:
        raise UsageError("the deployment names no GPU (give one in the case file or with --gpu)")
    model = get_model(model_name)
    gpu = get_gpu(deployment.gpu)
    dtype = engine_args.dtype if engine_args.dtype not in (None, "auto") else model.dtype
    def resolve(args: EngineArgs):
        return resolve_engine_config(
            args,
            vllm_version=deployment.vllm_version,
            gpu_memory_gib=gpu.memory_bytes / 1024**3,
            gpu_name=gpu.name,
            model_max_len=model.max_position_embeddings,
            model_dtype=dtype or "bfloat16",
        )

    cfg = resolve(engine_args)
    _heads_divide(model, cfg.tensor_parallel_size)
    raised = None
    if needed_model_len and cfg.max_model_len < needed_model_len and cfg.source_of("max_model_len") != "user":
        raised = (
            f"max_model_len not given and the model's default ({cfg.max_model_len:,}) is shorter than the workload's "
            f"{needed_model_len:,}-token requests: assumed --max-model-len {needed_model_len:,}"
        )
        # resolved again as if the server had been given it: the defaults that follow max_model_len
        # (V0's chunked prefill above 32K, the token budget without chunking) follow it here too
        cfg = resolve(engine_args.model_copy(update={"max_model_len": needed_model_len}))
        cfg.provenance["max_model_len"] = "derived"
    cfg.provenance.update(dict.fromkeys(derived, "derived"))
    notes = list(cfg.notes) + ([raised] if raised else [])
    if getattr(model, "note", None):
        notes.append(model.note)
    # the checkpoint's own format (an "-AWQ" copy, gpt-oss's MXFP4 experts, DeepSeek-V3's FP8) when no
    # setting names one: vLLM reads it from the checkpoint, the user need not pass --quantization
    quant = engine_args.quantization or deployment.quantization or model.checkpoint_quantization
    mem = estimate_memory(model, gpu, cfg, quantization=quant, dtype=dtype, params=memory_params)
    tp = cfg.tensor_parallel_size
    per_engine = tp * cfg.pipeline_parallel_size
    num_gpus = deployment.num_gpus or per_engine * cfg.data_parallel_size
    replicas = max(cfg.data_parallel_size, num_gpus // per_engine if per_engine else 1)
    if num_gpus < per_engine:
        raise UsageError(f"{num_gpus} GPU(s) cannot host TP {tp} x PP {cfg.pipeline_parallel_size}")
    costs = model_costs(model, tp, weight_bytes_per_param(model, quant, dtype), kv_dtype_bytes(cfg.kv_cache_dtype))
    interconnect = None
    if deployment.interconnect == "pcie" and gpu.interconnect != "pcie":
        interconnect = gpu.pcie_bw_gbs if hasattr(gpu, "pcie_bw_gbs") else 25.0
        notes.append("interconnect given as PCIe: the all-reduce uses PCIe bandwidth")
    compute = "fp8" if (quant or "").startswith("fp8") else "bf16"
    if efficiency is None:  # vLLM's own costs as fitted to the measured release, or sourced for others
        efficiency = default_efficiency(cfg.vllm_version, cfg.version_assumed)
    step = StepTimeModel(costs, gpu, tp=tp, compute_dtype=compute, enforce_eager=cfg.enforce_eager, efficiency=efficiency, interconnect_gbs=interconnect)
    return EngineModel(model=model, gpu=gpu, config=cfg, memory=mem, step=step, num_gpus=num_gpus, replicas=replicas, notes=notes)


@dataclass(frozen=True)
class LoadPoint:
    concurrency: int | None = None
    request_rate: float | None = None
    #: requests the measured run sent, where one was measured: an open stream's figures depend on
    #: it (64 requests sent at once wait far less than 200)
    num_prompts: int | None = None

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return "rate=inf" if self.request_rate is None or math.isinf(self.request_rate) else f"rate={self.request_rate:g}/s"


def load_point_of(run: BenchmarkRun) -> LoadPoint | None:
    """The load a run (measured or predicted) was offered: its clients, with the rate they were held to
    when finite (`vllm bench serve --request-rate 2 --max-concurrency 100` sends 2 requests a second, at
    most 100 at a time; a reviewer's find: it was modelled as 100 clients sending back to back, and the
    measured figures called beyond the hardware); a rate alone; None when neither is known."""
    rate = run.offered_request_rate
    if run.offered_concurrency:
        finite = rate if rate is not None and math.isfinite(rate) and rate > 0 else None
        return LoadPoint(concurrency=run.offered_concurrency, request_rate=finite, num_prompts=(run.num_prompts or run.completed) if finite else None)
    if rate is not None:
        return LoadPoint(request_rate=rate, num_prompts=run.num_prompts or run.completed)
    return None


def default_num_prompts(point: LoadPoint) -> int:
    """Enough requests for a steady state: several rounds of the clients, at least 8."""
    if point.concurrency:
        return max(8, 3 * point.concurrency)
    return 200


def predict_load_point(
    engine: EngineModel,
    point: LoadPoint,
    *,
    input_len: int,
    output_len: int,
    num_prompts: int | None = None,
    shared_prefix_len: int = 0,
    seed: int = 0,
    arrivals: tuple[float, ...] | None = None,
) -> tuple[BenchmarkRun, SimResult]:
    """Simulate one load point on one replica (clients or rate split evenly across replicas).
    ``arrivals``: an open loop's recorded send times (s), replayed on a single replica instead of a
    Poisson draw at ``point.request_rate``."""
    if not engine.memory.fits:
        raise UsageError("; ".join(engine.memory.notes) or "the model does not fit on this GPU configuration")
    if point.request_rate is not None and not point.request_rate > 0:  # 0, negative or NaN: no arrival clock to simulate
        raise UsageError(f"a request rate of {point.request_rate:g} req/s sends nothing: a rate must be above 0 (inf: all at once)")
    n = num_prompts or default_num_prompts(point)
    reps = engine.replicas
    conc = None if point.concurrency is None else max(1, math.ceil(point.concurrency / reps))
    rate = None if point.request_rate is None else point.request_rate / reps
    workload = Workload(
        input_len=input_len,
        output_len=output_len,
        num_prompts=max(1, math.ceil(n / reps)),
        concurrency=conc,
        request_rate=rate,
        shared_prefix_len=shared_prefix_len,
        seed=seed,
        arrivals=arrivals if arrivals and reps == 1 and point.concurrency is None else None,
    )
    result = simulate(engine.limits_for(workload.input_len + workload.output_len), engine.step, workload)
    run = sim_to_run(result, label=f"predicted {point.label}", model=engine.model.name)
    run.offered_concurrency = point.concurrency
    held = point.request_rate is not None and math.isfinite(point.request_rate)  # clients held to a finite rate
    run.offered_request_rate = point.request_rate if point.concurrency is None or held else None
    if reps > 1:
        _scale_replicas(run, reps)
    _attach_server_view(run, result, engine)
    return run, result


def _scale_replicas(run: BenchmarkRun, reps: int) -> None:
    for attr in ("output_throughput_tok_s", "total_throughput_tok_s", "request_throughput_req_s", "achieved_concurrency"):
        value = getattr(run, attr)
        if value is not None:
            setattr(run, attr, value * reps)
    for attr in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        value = getattr(run, attr)
        if value is not None:
            setattr(run, attr, value * reps)
    run.notes.append(f"{reps} replicas: one simulated, throughput multiplied by {reps}")


def _attach_server_view(run: BenchmarkRun, result: SimResult, engine: EngineModel) -> None:
    """Time-weighted running/waiting/KV usage, and step-time figures, as the server would show them."""
    steps = result.steps
    total = sum(s.duration for s in steps) or 1.0
    blocks = engine.memory.num_gpu_blocks or 1
    mixed = [s for s in steps if s.prefill_tokens and s.num_decodes]
    pure = [s for s in steps if not s.prefill_tokens and s.num_decodes]
    run.server_view = (run.server_view or ServerView()).model_copy(update=dict(
        running_mean=sum(s.running * s.duration for s in steps) / total,
        running_max=max((s.running for s in steps), default=0),
        waiting_mean=sum(s.waiting * s.duration for s in steps) / total,
        kv_usage_pct_mean=100.0 * sum(s.kv_blocks_used * s.duration for s in steps) / total / blocks,
        preemptions=result.total_preemptions,
        steps=sum(s.count for s in steps),
        mixed_step_ms_mean=1e3 * sum(s.duration for s in mixed) / sum(s.count for s in mixed) if mixed else None,
        decode_only_step_ms_mean=1e3 * sum(s.duration for s in pure) / sum(s.count for s in pure) if pure else None,
        share_of_time_in_mixed_steps=sum(s.duration for s in mixed) / total,
    ))

"""What-if: change one or more settings, re-run the same load points, and report the deltas.

A change is ``KEY=VALUE`` with vLLM's own flag names (underscores or dashes) or a few deployment
keys: ``kv_cache_dtype=fp8``, ``tp=4``, ``pp=2``, ``dp=2``, ``num_gpus=4``, ``gpu=H200``,
``max_num_batched_tokens=16384``, ``max_num_seqs=16``, ``gpu_memory_utilization=0.95``,
``max_model_len=65536``, ``enable_prefix_caching=false``, ``long_prefill_token_threshold=2048``,
``disagg=1x1`` (prefill engines x decode engines, each with the current TP size).

Prefill/decode disaggregation is a first-order estimate, and says so: the decode engine is
simulated with the prompt's KV arriving over the interconnect instead of being computed, the
prefill engines are simulated as an open stream at the decode side's request rate, and TTFT adds
the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..errors import UsageError
from ..scalars import parse_scalar
from ..schema import BenchmarkRun, Deployment, Distribution, EngineArgs, ServerView
from .predict import EngineModel, LoadPoint, build_engine_model, predict_load_point
from .simulator import StepBatch, Workload, simulate
from .memory import MemoryParams
from .step_time import Efficiency
from .summary import sim_to_run

#: what-if keys that are deployment facts rather than engine arguments
DEPLOYMENT_KEYS = {"gpu", "num_gpus", "interconnect", "vllm_version", "model", "quantization"}
ALIASES = {"tp": "tensor_parallel_size", "pp": "pipeline_parallel_size", "dp": "data_parallel_size", "kv_dtype": "kv_cache_dtype"}
#: figures compared per load point: (label, getter, unit, higher_is_better)
COMPARED = [
    ("TTFT p50", lambda r: r.ttft_ms.pct(50) if r.ttft_ms else None, "ms", False),
    ("TPOT mean", lambda r: r.tpot_ms.mean if r.tpot_ms else None, "ms", False),
    ("decode speed per request", lambda r: r.request_decode_tok_s.mean if r.request_decode_tok_s else None, "tok/s", True),
    ("output speed per request", lambda r: r.request_output_tok_s.mean if r.request_output_tok_s else None, "tok/s", True),
    ("output throughput", lambda r: r.output_throughput_tok_s, "tok/s", True),
    ("requests running (mean)", lambda r: r.server_view.running_mean if r.server_view else None, "requests", True),
]


def parse_change(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise UsageError(f"what-if '{text}': expected KEY=VALUE, e.g. kv_cache_dtype=fp8")
    key, value = text.split("=", 1)
    key = key.strip().lstrip("-").replace("-", "_")
    return ALIASES.get(key, key), value.strip()


def apply_changes(deployment: Deployment, args: EngineArgs, changes: list[str]) -> tuple[Deployment, EngineArgs, dict[str, str]]:
    """New (deployment, engine args) with the changes applied; ``disagg`` is returned separately."""
    dep = deployment.model_copy(deep=True)
    new_args = args.model_copy(deep=True)
    special: dict[str, str] = {}
    for text in changes:
        key, value = parse_change(text)
        if key == "disagg":
            special[key] = value
        elif key in DEPLOYMENT_KEYS:
            setattr(dep, key, int(value) if key == "num_gpus" else value)
        elif key in EngineArgs.model_fields and key not in ("extra", "env"):
            try:
                merged = new_args.model_dump()
                merged[key] = parse_scalar(value, booleans=True)
                new_args = EngineArgs.model_validate(merged)
            except ValidationError as exc:
                raise UsageError(f"what-if {key}={value}: {exc.errors()[0]['msg']}") from None
        else:
            raise UsageError(f"what-if key '{key}' is not known; use an engine argument (e.g. max_num_seqs) or one of {sorted(DEPLOYMENT_KEYS | {'disagg', 'tp', 'pp', 'dp'})}")
    changed_parallel = {"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"} & {parse_change(c)[0] for c in changes}
    if changed_parallel and not any(parse_change(c)[0] == "num_gpus" for c in changes):
        per_engine = (new_args.tensor_parallel_size or 1) * (new_args.pipeline_parallel_size or 1)
        dep.num_gpus = max(dep.num_gpus or per_engine, per_engine * (new_args.data_parallel_size or 1))
    return dep, new_args, special


@dataclass
class Delta:
    figure: str
    unit: str
    before: float | None
    after: float | None
    better: bool | None

    @property
    def ratio(self) -> float | None:
        if self.before in (None, 0) or self.after is None:
            return None
        return self.after / self.before


@dataclass
class WhatIfPoint:
    point: LoadPoint
    before: BenchmarkRun
    after: BenchmarkRun
    deltas: list[Delta] = field(default_factory=list)


@dataclass
class WhatIfResult:
    changes: list[str]
    base: EngineModel
    changed: EngineModel
    points: list[WhatIfPoint]
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": self.changes,
            "notes": self.notes,
            "memory_before": self.base.memory.model_dump(),
            "memory_after": self.changed.memory.model_dump(),
            "points": [
                {
                    "load": p.point.label,
                    "deltas": [
                        {"figure": d.figure, "unit": d.unit, "before": d.before, "after": d.after, "ratio": d.ratio, "better": d.better}
                        for d in p.deltas
                    ],
                }
                for p in self.points
            ],
        }


def _deltas(before: BenchmarkRun, after: BenchmarkRun) -> list[Delta]:
    out = []
    for label, get, unit, higher_better in COMPARED:
        b, a = get(before), get(after)
        better = None
        if b is not None and a is not None and not math.isclose(a, b, rel_tol=0.01):
            better = (a > b) == higher_better
        out.append(Delta(label, unit, b, a, better))
    return out


def what_if(
    deployment: Deployment,
    args: EngineArgs,
    changes: list[str],
    points: list[LoadPoint],
    *,
    input_len: int,
    output_len: int,
    num_prompts: int | None = None,
    shared_prefix_len: int = 0,
    efficiency: Efficiency | None = None,
    baseline_runs: dict | None = None,
    memory_params: MemoryParams | None = None,
) -> WhatIfResult:
    """Predict every load point before and after the changes (with ``efficiency`` if calibrated).

    ``baseline_runs``: the "before" runs of earlier calls with the same deployment, engine args and
    efficiency, by load point and workload (filled in here), so a caller asking several what-ifs of
    one deployment simulates each point's "before" once (the simulation is deterministic: same
    inputs, same run). Each call gets its own copy. ``memory_params``: the deployment's (a KV pool a
    server log measured), for both sides."""
    needed = input_len + output_len
    base = build_engine_model(deployment, args, needed_model_len=needed, efficiency=efficiency, memory_params=memory_params)
    dep2, args2, special = apply_changes(deployment, args, changes)
    changed = build_engine_model(dep2, args2, needed_model_len=needed, efficiency=efficiency, memory_params=memory_params)
    notes = list(dict.fromkeys(base.notes + changed.notes))
    result_points = []
    for point in points:
        key = (point, input_len, output_len, num_prompts, shared_prefix_len)
        if baseline_runs is not None and key in baseline_runs:
            before = baseline_runs[key].model_copy(deep=True)
        else:
            before, _ = predict_load_point(base, point, input_len=input_len, output_len=output_len, num_prompts=num_prompts, shared_prefix_len=shared_prefix_len)
            if baseline_runs is not None:
                baseline_runs[key] = before.model_copy(deep=True)
        if "disagg" in special:
            after = predict_disaggregated(changed, special["disagg"], point, input_len=input_len, output_len=output_len, num_prompts=num_prompts)
        elif not changed.memory.fits:
            raise UsageError(f"after {', '.join(changes)}: " + ("; ".join(changed.memory.notes) or "the model does not fit"))
        else:
            after, _ = predict_load_point(changed, point, input_len=input_len, output_len=output_len, num_prompts=num_prompts, shared_prefix_len=shared_prefix_len)
        result_points.append(WhatIfPoint(point, before, after, _deltas(before, after)))
    if "disagg" in special:
        notes.append("disaggregation is a first-order estimate: KV transfer at interconnect bandwidth, prefill engines as an open stream")
    return WhatIfResult(changes, base, changed, result_points, notes)


def predict_disaggregated(
    engine: EngineModel, spec: str, point: LoadPoint, *, input_len: int, output_len: int, num_prompts: int | None = None
) -> BenchmarkRun:
    """1P1D-style split of the deployment's GPUs: ``spec`` = 'PxD' engines of the current TP size."""
    try:
        n_prefill, n_decode = (int(x) for x in spec.lower().split("x"))
    except ValueError:
        raise UsageError(f"disagg={spec}: expected PxD, e.g. disagg=1x1") from None
    per_engine = engine.config.tensor_parallel_size * engine.config.pipeline_parallel_size
    if (n_prefill + n_decode) * per_engine > engine.num_gpus:
        raise UsageError(
            f"disagg={spec} needs {(n_prefill + n_decode) * per_engine} GPUs at TP {engine.config.tensor_parallel_size}; "
            f"the deployment has {engine.num_gpus} (add num_gpus=... or tp=...)"
        )
    kv_total = engine.memory.kv_bytes_per_token_at(input_len) * per_engine  # a sliding window sends only its last tokens
    link = engine.step.link_bw * engine.step.eff.eff_comm

    def decode_cost(b: StepBatch) -> float:
        transfer = b.prefill_tokens * kv_total / link  # KV arriving instead of being computed
        return engine.step(StepBatch(b.num_decodes, b.decode_context_sum, ())) + transfer

    n = num_prompts or (max(8, 3 * point.concurrency) if point.concurrency else 200)
    conc = None if point.concurrency is None else max(1, math.ceil(point.concurrency / n_decode))
    rate = None if point.request_rate is None else point.request_rate / n_decode
    dec = simulate(engine.limits_for(input_len + output_len), decode_cost, Workload(input_len, output_len, max(1, math.ceil(n / n_decode)), conc, rate))
    dec_run = sim_to_run(dec)
    system_rate = (dec_run.request_throughput_req_s or 0.0) * n_decode
    pre = simulate(
        engine.limits_for(input_len + 1), engine.step, Workload(input_len, 1, max(8, math.ceil(n / max(n_prefill, 1))), None, max(system_rate / n_prefill, 1e-6), seed=1)
    )
    pre_ttft = np.array([r.first_token_time - r.arrival for r in pre.finished()])
    prefill_capacity = len(pre.finished()) / pre.duration if pre.duration else math.inf
    done = dec.finished()
    extra = np.resize(pre_ttft, len(done)) if pre_ttft.size else np.zeros(len(done))
    ttft = np.array([r.first_token_time - r.arrival for r in done]) + extra
    e2e = np.array([r.finish - r.arrival for r in done]) + extra
    out = np.array([r.num_generated for r in done])
    run = dec_run
    run.label = f"predicted {point.label} disagg {spec}"
    run.ttft_ms = Distribution.from_samples(ttft * 1e3, "ms")
    run.e2e_ms = Distribution.from_samples(e2e * 1e3, "ms")
    run.request_output_tok_s = Distribution.from_samples(out / e2e, "tok/s")
    scale = n_decode
    throughput_cap = prefill_capacity * n_prefill * output_len
    for attr in ("output_throughput_tok_s", "request_throughput_req_s", "total_throughput_tok_s"):
        value = getattr(run, attr)
        if value is not None:
            setattr(run, attr, value * scale)
    if run.output_throughput_tok_s and run.output_throughput_tok_s > throughput_cap:
        run.notes.append(f"prefill engines cap the rate at {prefill_capacity * n_prefill:.3f} req/s")
        run.output_throughput_tok_s = throughput_cap
    steps = dec.steps
    total = sum(s.duration for s in steps) or 1.0
    run.server_view = ServerView(running_mean=sum(s.running * s.duration for s in steps) / total)
    run.offered_concurrency = point.concurrency
    return run

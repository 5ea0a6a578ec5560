"""The load points on which the event-driven simulator is compared with the step-by-step reference.

Used by ``test_simulator_events.py`` (the whole matrix, ~3 s: the reference runs every step). Each case is a real catalog model on a real catalog GPU with
engine arguments as a user would give them; together they cover dense, MoE and MLA models, short
and 128K-token prompts, 1 to 512 clients, closed loops and Poisson streams, a shared prefix, an fp8
KV cache, KV pools so tight that requests are preempted, a sliding-window model (its step cost is
not affine in the context), a partial-prefill cap and V0-style unchunked prefill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vllm_advisor.perf.predict import build_engine_model
from vllm_advisor.perf.simulator import SimResult, Workload, simulate
from vllm_advisor.perf.summary import sim_to_run
from vllm_advisor.schema import Deployment, EngineArgs


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    gpu: str
    num_gpus: int
    args: dict
    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None = None
    rate: float | None = None
    shared_prefix_len: int = 0
    version: str = "0.8.5"
    tags: tuple[str, ...] = field(default_factory=tuple)
    intake_delay_ms: float | None = None  # None: the release's own (0 before the fit's release)

    def engine(self):
        dep = Deployment(engine="vllm", model=self.model, gpu=self.gpu, num_gpus=self.num_gpus, vllm_version=self.version)
        em = build_engine_model(dep, EngineArgs(**self.args), needed_model_len=self.input_len + self.output_len)
        if self.intake_delay_ms is not None:
            em.step.eff = em.step.eff.model_copy(update={"intake_delay_ms": self.intake_delay_ms})
        return em

    def workload(self) -> Workload:
        return Workload(self.input_len, self.output_len, self.num_prompts, self.concurrency, self.rate, self.shared_prefix_len, seed=3)


QWEN32 = ("Qwen/Qwen2.5-32B-Instruct", "H800", 2, {"tensor_parallel_size": 2})
LLAMA8 = ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, {})

CASES = [
    Case("dense-63k-c40-kv-bound", *QWEN32, 63000, 300, 60, concurrency=40, tags=("dense", "long", "closed", "preempt")),
    Case("dense-63k-c1", *QWEN32, 63000, 1000, 3, concurrency=1, tags=("dense", "long", "closed")),
    Case("dense-63k-poisson", *QWEN32, 63000, 400, 30, rate=0.05, tags=("dense", "long", "poisson")),
    Case("dense-63k-fp8-kv", QWEN32[0], "H800", 2, {"tensor_parallel_size": 2, "kv_cache_dtype": "fp8"}, 63000, 300, 40, concurrency=20, tags=("dense", "long", "fp8kv")),
    Case("dense-128k-c1", "meta-llama/Llama-3.1-8B-Instruct", "H200", 1, {"max_model_len": 131072}, 128000, 300, 2, concurrency=1, tags=("dense", "128k")),
    Case("dense-128k-c8-tight", "meta-llama/Llama-3.1-8B-Instruct", "H100", 1, {"max_model_len": 131072}, 128000, 200, 12, concurrency=8, tags=("dense", "128k", "tight", "preempt")),
    Case("short-c1", *LLAMA8, 1000, 200, 8, concurrency=1, tags=("dense", "short")),
    Case("short-c64", *LLAMA8, 1000, 200, 192, concurrency=64, tags=("dense", "short")),
    Case("short-c256", *LLAMA8, 1000, 200, 512, concurrency=256, tags=("dense", "short")),
    Case("short-c512", *LLAMA8, 500, 100, 1024, concurrency=512, tags=("dense", "short")),
    Case("short-poisson", *LLAMA8, 1000, 300, 200, rate=20.0, tags=("dense", "short", "poisson")),
    Case("short-burst", *LLAMA8, 2000, 150, 300, rate=math.inf, tags=("dense", "short", "poisson")),
    Case("prefix-shared-c64", *LLAMA8, 2000, 200, 160, concurrency=64, shared_prefix_len=1536, tags=("dense", "prefix")),
    Case("prefix-shared-poisson", *LLAMA8, 4000, 200, 150, rate=15.0, shared_prefix_len=3000, tags=("dense", "prefix", "poisson")),
    Case("tight-l4-preempting", "meta-llama/Llama-3.1-8B-Instruct", "L4", 1, {"max_model_len": 16384}, 8000, 2000, 32, concurrency=32, tags=("dense", "tight", "preempt")),
    Case("moe-qwen3-30b-c64", "Qwen/Qwen3-30B-A3B", "H100", 1, {}, 2000, 300, 192, concurrency=64, tags=("moe", "closed")),
    Case("moe-mixtral-poisson", "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100", 2, {"tensor_parallel_size": 2}, 3000, 300, 150, rate=8.0, tags=("moe", "poisson")),
    Case("mla-deepseek-v3-c32", "deepseek-ai/DeepSeek-V3", "H200", 8, {"tensor_parallel_size": 8, "quantization": "fp8"}, 4000, 300, 96, concurrency=32, tags=("mla", "moe", "closed")),
    Case("mla-deepseek-r1-long", "deepseek-ai/DeepSeek-R1", "H200", 8, {"tensor_parallel_size": 8, "quantization": "fp8"}, 60000, 300, 24, concurrency=16, tags=("mla", "moe", "long")),
    Case("sliding-window-gemma2", "google/gemma-2-27b-it", "H100", 1, {}, 6000, 300, 96, concurrency=32, tags=("sliding",)),
    Case("partial-prefill-cap", *LLAMA8[:3], {"max_num_partial_prefills": 1, "long_prefill_token_threshold": 1024}, 6000, 200, 96, concurrency=32, tags=("cap",)),
    # requests reach the scheduler some ms after they are sent: waves of replacements, arrivals that
    # fall inside a stretch, a queue that empties while requests are still on their way
    Case("intake-short-c64", *LLAMA8, 1000, 200, 192, concurrency=64, intake_delay_ms=30.0, tags=("dense", "short", "intake")),
    Case("intake-prefix-c16", *LLAMA8, 8192, 128, 48, concurrency=16, shared_prefix_len=7168, intake_delay_ms=25.0, tags=("prefix", "intake")),
    Case("intake-poisson", *LLAMA8, 1000, 300, 200, rate=20.0, intake_delay_ms=40.0, tags=("poisson", "intake")),
    Case("intake-c1", *LLAMA8, 4000, 100, 6, concurrency=1, intake_delay_ms=30.0, tags=("closed", "intake")),
    Case("intake-63k-kv-bound", *QWEN32, 63000, 300, 60, concurrency=40, intake_delay_ms=50.0, tags=("long", "preempt", "intake")),
    Case("eager-moe-c16", "Qwen/Qwen3-30B-A3B", "H100", 1, {"enforce_eager": True, "max_model_len": 16384}, 1024, 256, 48, concurrency=16, tags=("moe", "eager")),
    Case("eager-dense-kink-c64", *QWEN32[:3], {"tensor_parallel_size": 2, "enforce_eager": True}, 2000, 6000, 64, concurrency=64, tags=("dense", "eager")),
    Case("intake-release-0.26", "Qwen/Qwen2.5-14B-Instruct", "H200", 1, {"max_model_len": 16384}, 12288, 64, 8, concurrency=4, version="0.26.0", tags=("intake",)),
    Case("v0-unchunked", "meta-llama/Llama-3.1-8B-Instruct", "A100-80G", 1, {"max_model_len": 20000}, 12000, 300, 64, concurrency=24, version="0.6.4", tags=("unchunked",)),
]

#: Figures compared: how to read each from (BenchmarkRun, SimResult).
def figures(result: SimResult) -> dict[str, float]:
    run = sim_to_run(result)
    steps = result.steps
    total = sum(s.duration for s in steps) or 1.0
    out = {
        "completed": float(run.completed),
        "steps": float(sum(s.count for s in steps)),
        "preemptions": float(result.total_preemptions),
        "duration_s": result.duration,
        "output_throughput_tok_s": run.output_throughput_tok_s or 0.0,
        "running_mean": sum(s.running * s.duration for s in steps) / total,
        "waiting_mean": sum(s.waiting * s.duration for s in steps) / total,
        "kv_blocks_mean": sum(s.kv_blocks_used * s.duration for s in steps) / total,
    }
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        d = getattr(run, name)
        if d is None:
            continue
        out[f"{name}.mean"] = d.mean
        out[f"{name}.std"] = d.std
        out[f"{name}.count"] = float(d.count)
        for q in (50, 90, 99):
            out[f"{name}.p{q}"] = d.pct(q)
    return out


def compare(case: Case) -> dict[str, tuple[float, float, float]]:
    """Run the case both ways: {figure: (reference, events, relative difference)}."""
    em = case.engine()
    ref = figures(simulate(em.limits, em.step, case.workload(), mode="steps"))
    fast = figures(simulate(em.limits, em.step, case.workload(), mode="events"))
    out = {}
    for key in ref.keys() | fast.keys():
        a, b = ref.get(key), fast.get(key)
        if a is None or b is None:
            out[key] = (a, b, math.inf)
            continue
        scale = max(abs(a), abs(b))
        # Below a nanosecond-scale floor both sides are rounding noise (the std of identical TTFTs).
        out[key] = (a, b, 0.0 if abs(a - b) < 1e-6 else abs(a - b) / scale)
    return out


def random_cases(seed: int, count: int) -> list[Case]:
    """Random combinations of the scheduler's knobs on real catalog models, beyond the named matrix:
    token budgets, max_num_seqs, long-prefill thresholds, partial-prefill caps, memory shares, fp8
    KV, prefix caching off, shared prefixes, V0 and V1 defaults, closed loops and Poisson streams
    (some leave too little KV cache and reject or preempt everything: both paths must agree there too)."""
    import random

    rng = random.Random(seed)
    models = [
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, {}),
        ("meta-llama/Llama-3.1-8B-Instruct", "L4", 1, {"max_model_len": 16384}),
        ("Qwen/Qwen2.5-32B-Instruct", "H800", 2, {"tensor_parallel_size": 2}),
        ("Qwen/Qwen3-30B-A3B", "H100", 1, {}),
        ("google/gemma-2-9b-it", "L4", 1, {}),
        ("deepseek-ai/DeepSeek-V3", "H200", 8, {"tensor_parallel_size": 8, "quantization": "fp8"}),
    ]
    out = []
    for i in range(count):
        model, gpu, n, base = rng.choice(models)
        args = dict(base)
        for key, values, p in (
            ("max_num_seqs", [4, 16, 64], 0.3),
            ("max_num_batched_tokens", [512, 1024, 4096], 0.3),
            ("long_prefill_token_threshold", [256, 1000], 0.2),
            ("max_num_partial_prefills", [1, 2], 0.15),
            ("gpu_memory_utilization", [0.5, 0.6], 0.2),
            ("kv_cache_dtype", ["fp8"], 0.15),
            ("enable_prefix_caching", [False], 0.1),
        ):
            if rng.random() < p:
                args[key] = rng.choice(values)
        max_len = args.get("max_model_len", 8192 if "gemma" in model else 32768)
        input_len = min(rng.choice([100, 700, 2000, 6000, 15000]), max_len - 600)
        output_len = rng.choice([1, 2, 17, 150, 500])
        concurrency = rng.choice([1, 3, 8, 32, 100, None])
        rate = None if concurrency else rng.choice([2.0, 10.0, math.inf])
        prefix = rng.choice([0, 0, 0, min(input_len - 1, 1024), input_len // 2])
        out.append(
            Case(f"random-{seed}-{i}", model, gpu, n, args, input_len, output_len, rng.choice([20, 60, 150]),
                 concurrency=concurrency, rate=rate, shared_prefix_len=prefix, version=rng.choice(["0.8.5", "0.10.1", "0.6.4", "0.26.0"]),
                 intake_delay_ms=rng.choice([None, None, 5.0, 30.0]))
        )
    return out
